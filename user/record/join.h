/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join: turns ring-buffer records into trace slices. Per thread it keeps the
 * stack of open frames (ops, backward nodes, record_function regions) and
 * pairs each end with its begin by key; frames an exception unwound, or that
 * a thread or process exit cut short, are closed and marked. It also builds
 * step boundaries from Optimizer.step and forward->backward flows.
 */
#ifndef PTBPF_JOIN_H
#define PTBPF_JOIN_H

#include <stdbool.h>
#include <stdint.h>
#include "ptbpf_events.h"
#include "lib/op_table.h"
#include "trace/perfetto.h"

struct join;
struct target;

/* Frame outcomes that are not a plain begin/end pair. */
struct join_counts {
	uint64_t by_kind[EV_KIND_MAX];
	uint64_t frames;        /* slices written */
	uint64_t unwound;       /* closed by an exception (__cxa_begin_catch) */
	uint64_t cut_by_exit;   /* open when their thread/process exited */
	uint64_t cut_at_stop;   /* open when tracing stopped */
	uint64_t cut_by_loss;   /* open where the agent's ring lost records */
	uint64_t cut_by_exec;   /* open when their process exec'd */
	uint64_t end_missed;    /* closed because an outer frame ended first */
	uint64_t end_unmatched; /* an end with no begin (begun before attach) */
	uint64_t too_deep;      /* beyond the trace's nesting limit, not drawn */
	uint64_t bad_shapes;    /* input-shape bytes that did not parse */
	uint64_t py_stacks;     /* Python stacks attached to a slice */
	uint64_t py_stacks_empty; /* ... that had no Python frame (a thread with
				   * no Python, or between its frames) */
	uint64_t steps;         /* ProfilerStep#N slices */
	uint64_t bwd_flows;     /* forward->backward arrows */
	uint64_t launch_flows;  /* op->launch arrows */
	uint64_t rpc_flows;     /* RPC request send -> handling arrows */
};

struct op_stat {
	uint32_t op;
	uint64_t calls, total_ns, self_ns;
};

/* entries_only: op and backward begins become instants (no ends come). */
/* ops grows with the names of agent-recorded ops. */
struct join *join_new(struct pf_writer *w, struct op_table *ops, bool entries_only);
void join_free(struct join *j);
/* Declares a traced process (its process track). */
void join_add_process(struct join *j, const struct target *t);
/* Handles one ring record; returns 0 (records are never refused). */
int join_event(struct join *j, const void *data, uint64_t size);
/* Closes everything still open at ts (tracing stopped). */
void join_finish(struct join *j, uint64_t ts);
/* Latest event timestamp seen. */
uint64_t join_last_ts(const struct join *j);
const struct join_counts *join_counts(const struct join *j);
/* GPU call state (per-API counts for the summary). */
struct gpu_state;
const struct gpu_state *join_gpu(const struct join *j);
/* What the in-process agent delivered (the GPU's own timeline). */
struct gpu_timeline_counts;
const struct gpu_timeline_counts *join_device_counts(const struct join *j);
bool join_agent_status(const struct join *j, int pid, int *code);
/* Whether pid's agent records its CUDA calls (then no libcuda uprobes). */
bool join_agent_calls(const struct join *j, int pid);
/* Address of pid's agent's op-ring descriptor; 0 if it records no ops. */
uint64_t join_ops_desc(const struct join *j, int pid);
/* Per process, for metrics: ops begun, kernel and graph launches,
 * ProfilerStep#N steps, the last step's
 * length. */
struct join_proc_stats {
	int pid;
	uint64_t ops, launches, steps, last_step_ns;
};
int join_process_stats(const struct join *j, struct join_proc_stats *out, int max);
struct gpu_timeline;
const struct gpu_timeline *join_device(const struct join *j);
struct mem_state;
const struct mem_state *join_mem(const struct join *j);
struct pystack;
struct pystack *join_pystack(const struct join *j);
/* Ops sorted by total host time, descending; returns how many (<= max). */
int join_top_ops(const struct join *j, struct op_stat *out, int max);

#endif /* PTBPF_JOIN_H */
