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
 */
#ifndef PTBPF_REPORT_CAUSES_H
#define PTBPF_REPORT_CAUSES_H

#include <stddef.h>
#include <stdint.h>

#include "offline/report_data.h"

#define RC_RUNNING "running, in no op (Python, or native code outside ops)"

/* A CPU's last switch in this pass. */
struct rc_cpu {
	uint64_t ts;
	int64_t next; /* the task it put on; -1: not known (the chain broke) */
};

/* GPU idle gaps shorter than this are not counted. */
#define RC_GAP_MIN_NS 10000
/* Gaps analysed at most (each row is about 300 bytes); the rest counted. */
#define RC_MAX_GAPS 100000

/* An interval of a step table kind: into the steps' and the gaps' tables. */
void rc_interval(struct report *r, enum step_list kind, uint64_t start, uint64_t end);
/* A GPU activity on stream track t, launched as l says (NULL: not known). */
void rc_gpu_activity(struct report *r, struct rd_track *t, uint64_t start, uint64_t end,
		     const struct rd_launch *l);
/* After a pass: true if a table wants the trace read again. */
bool rc_next_pass(struct report *r);
/* A finished slice of thread track t's child track ("blocked in"). */
void rc_blocked(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		uint64_t end);
/* A FtraceEventBundle d[0..n). */
void rc_sched_bundle(struct report *r, const uint8_t *d, size_t n);
/* The trace is read again (the step table's next pass). */
void rc_new_pass(struct report *r);
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

bool rc_sum(const struct report *r, const struct step_row *rows, size_t nrows,
	    struct rc_totals *out);
/* Advice for a cause (the report's recommendations). */
const char *rc_advice(const char *cause);

#endif /* PTBPF_REPORT_CAUSES_H */
