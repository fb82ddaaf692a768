/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `ptbpf report`: what a step's thread was doing in the part of the step
 * that no kind of work covers (the breakdown's Other), from the trace's
 * kernel view. Two sources, both of the step's own thread:
 *   - its "blocked in" track (record/offcpu.c): each slice is a cause,
 *     named by what it waited in ("read on a pipe", "waiting for the GIL",
 *     "preempted by stress", "page faults", ...);
 *   - the scheduler bundles (compact sched): the stretches it ran on a
 *     CPU ("running, in no op").
 * They go to the step table as cause intervals (step_table.h), which
 * splits each step's Other among them; what they leave is unexplained.
 * The GPU's idle gaps (a stream's time between two of its activities) are
 * the rows of a second table, split the same way, by the causes of the
 * thread that launched the activity after the gap.
 */
#ifndef PTBPF_REPORT_CAUSES_H
#define PTBPF_REPORT_CAUSES_H

#include <stddef.h>
#include <stdint.h>

#include "report/report_data.h"

#define RC_RUNNING "running, in no op (Python, or native code outside ops)"

/* A thread running since before the kernel view began: counted running
 * from `from` on (report_causes.c). */
struct rc_claim {
	int64_t tid;
	uint64_t from;
};

/* A CPU's last switch in this pass. */
struct rc_cpu {
	uint64_t ts;
	int64_t next; /* the task it put on; -1: not known (the chain broke) */
	bool next_new; /* next had no switch before in this pass */
};

/* GPU idle gaps shorter than this are not counted. */
#define RC_GAP_MIN_NS 10000
/* Gaps analysed at most (each row is about 300 bytes); the rest counted. */
#define RC_MAX_GAPS 50000

/* A blocking call of thread tid that a wakeup ended at ts, by name (the
 * report's string: "python3 (tid 12)", "a timer"). */
struct rc_wake {
	int64_t tid;
	uint64_t ts;
	uint32_t name;
};
#define RC_MAX_WAKES 1000000

/* Sorts the wakeups (once the trace is read): rc_woken_by needs it. */
void rc_wakes_sort(struct report *r);
/* Who woke thread tid last in [from, to]: the name's string id, or RD_NONE. */
uint32_t rc_woken_by(const struct report *r, int64_t tid, uint64_t from, uint64_t to);

/* The hooks that feed both tables (struct report's kview). */
extern const struct rd_kernel_view rc_kernel_view;

/* Other's causes summed over the steps, largest first. */
struct rc_total {
	uint32_t name;
	uint64_t ns;
};

struct rc_totals {
	struct rc_total *v;   /* free() it */
	size_t n;
	uint64_t steps_ns;    /* all steps' time */
	uint64_t other_ns;    /* their Other */
	uint64_t explained_ns; /* the causes' sum (the part of Other they cover) */
	bool kernel_view;     /* the trace has scheduler bundles */
};

bool rc_sum(const struct report *r, const struct step_table *t, const struct step_row *rows,
	    size_t nrows, struct rc_totals *out);
/* What a blocking system call waited on, from its name, its file and
 * lock (either may be NULL): "sleep (clock_nanosleep)", "read on a pipe". */
void rc_call_cause(const char *call, const char *file, const char *lock, char *buf,
		   size_t size);
/* Advice for a cause (the report's recommendations). */
const char *rc_advice(const char *cause);

#endif /* PTBPF_REPORT_CAUSES_H */
