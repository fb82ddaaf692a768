/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `ptbpf report`'s step table (ProfilerStep#N): how each step's time splits
 * into GPU kernels, copies, sets, CUDA calls, DataLoader and host ops, from
 * the intervals of each kind that the report's pass over the trace finds.
 *
 * Memory is bounded, not by the trace: intervals are kept as unions (a
 * nested op adds nothing), and when they pass the budget anyway the table
 * is made in windows of steps, one more pass over the trace each (the
 * caller reads the trace again while steps_next_pass says so). The results
 * are the same either way.
 */
#ifndef PTBPF_STEP_TABLE_H
#define PTBPF_STEP_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Interval kinds, in the order of the TensorBoard plugin's breakdown. */
enum step_list { SL_KERNEL, SL_MEMCPY, SL_MEMSET, SL_RUNTIME, SL_DATALOADER, SL_HOSTOP,
		 SL_COUNT };

#define STEP_BREAKDOWN 7 /* the six kinds, then Other */
#define STEP_CAUSES 12   /* Other's causes a row keeps, the largest */
#define STEP_CAUSE_LISTS 256 /* (thread, cause) pairs the table tells apart */

/* What the step's thread was doing in Other (the kernel view), by class:
 * off CPU for a reason of the scheduler's (preempted, a page fault),
 * then in a blocking system call, then running. A stretch that two
 * causes cover goes to the first class (a call's own CPU time is the
 * call's). */
enum step_cause_class { SC_SCHED, SC_CALL, SC_RUNNING, SC_CLASSES };

struct step_cause {
	uint32_t name; /* the caller's string id */
	uint64_t ns;
};

struct step_row {
	uint32_t name;      /* the caller's string id */
	uint64_t start, dur;
	uint64_t kernel_sum; /* kernel time summed (concurrent streams add up) */
	uint64_t busy, copy, set, api, loader, hostop; /* each kind's union */
	/* Each instant of the step goes to the first kind that covers it, in
	 * enum step_list order, else to Other. */
	uint64_t brk[STEP_BREAKDOWN];
	int64_t tid;         /* the thread the step ran on */
	uint64_t key;        /* the caller's (steps_add_key), else 0 */
	/* Other, split by the causes given for the step's thread: the largest
	 * STEP_CAUSES (steps_causes), the others' time summed in cause_rest.
	 * What they leave of brk[Other] is unexplained. */
	uint32_t cause_at;   /* where they are in the table's pool */
	int ncause;
	uint64_t cause_rest;
};

struct step_table;

/* max_intervals: the budget (16 bytes each). */
struct step_table *steps_new(size_t max_intervals);
/* The table keeps no interval in the first pass: its rows are all made in
 * windows in the passes after (for rows that are rare or come late, whose
 * table should cost nothing in a trace that has none). */
void steps_defer(struct step_table *t);
void steps_free(struct step_table *t);
/* A step of thread tid, found in the first pass. */
void steps_add(struct step_table *t, uint64_t start, uint64_t end, uint32_t name, int64_t tid);
/* The same, with a key of the caller's kept in the row (the gaps' stream
 * track). */
void steps_add_key(struct step_table *t, uint64_t start, uint64_t end, uint32_t name,
		   int64_t tid, uint64_t key);
/* An interval of one kind, in every pass. */
void steps_interval(struct step_table *t, enum step_list kind, uint64_t start, uint64_t end);
/* An interval of thread tid's time with a cause (name: the caller's
 * string id), in every pass. Past STEP_CAUSE_LISTS pairs it is left out
 * and counted (steps_causes_dropped). */
void steps_cause(struct step_table *t, int64_t tid, uint32_t name, enum step_cause_class cls,
		 uint64_t start, uint64_t end);
uint64_t steps_causes_dropped(const struct step_table *t);
/* After each pass: true if the trace must be read once more (the same
 * intervals again); false once every row is made. */
bool steps_next_pass(struct step_table *t);
/* The rows, by start. */
const struct step_row *steps_rows(const struct step_table *t, size_t *n);
/* A row's causes (row->ncause of them). */
const struct step_cause *steps_causes(const struct step_table *t, const struct step_row *row);

#endif /* PTBPF_STEP_TABLE_H */
