/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join: turns each thread's records into trace slices. Per thread it keeps the
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
	uint64_t frames;        /* slices written */
	uint64_t unwound;       /* closed by an exception (__cxa_begin_catch) */
	uint64_t cut_by_exit;   /* open when their thread/process exited */
	uint64_t cut_at_stop;   /* open when tracing stopped */
	uint64_t cut_by_loss;   /* open where the agent's ring lost records */
	uint64_t cut_by_exec;   /* open when their process exec'd */
	uint64_t end_missed;    /* closed because an outer frame ended first */
	uint64_t end_unmatched; /* an end with no begin: begun before attach, or a
				 * return after its entry probe went at detach */
	uint64_t too_deep;      /* beyond the trace's nesting limit, not drawn */
	uint64_t bad_shapes;    /* input-shape bytes that did not parse */
	uint64_t py_stacks;     /* Python stacks attached to a slice */
	uint64_t py_stacks_empty; /* ... that had no Python frame (a thread with
				   * no Python, or between its frames) */
	uint64_t steps;         /* ProfilerStep#N slices */
	uint64_t bwd_flows;     /* forward->backward arrows */
	uint64_t launch_flows;  /* op->launch arrows */
	uint64_t rpc_calls;     /* RPC calls drawn on their caller */
	uint64_t rpc_handled;   /* RPC requests drawn on their callee */
	uint64_t rpc_flows;     /* RPC arrows: request -> handling, response -> call */
	uint64_t rpc_unmatched; /* RPC responses and failures of calls not seen
				 * (begun before tracing) */
	uint64_t rpc_not_drawn; /* RPC calls past the open-call or lane limits */
	uint64_t no_thread;     /* records of threads past the thread table's
				 * limit (or out of memory): not joined */
};

struct op_stat {
	uint32_t op;
	uint64_t calls, total_ns, self_ns;
};

/* The decoders that parts of records on a thread go to (record/route.c
 * makes them and hands the other records to them directly). */
struct decoders {
	struct gpu_state *calls;       /* GPU API calls (record/gpu_calls.c) */
	struct gpu_timeline *timeline; /* the agent's CUPTI records (record/gpu_timeline.c) */
	struct mem_state *mem;         /* allocator records (record/memtrack.c) */
	struct pystack *py;            /* Python stacks and code objects (record/pystack.c) */
	struct sample_view *samples;   /* CPU samples (record/samples.c) */
};

/* entries_only: op and backward begins become instants (no ends come).
 * ops grows with the names of agent-recorded ops. */
struct join *join_new(struct pf_writer *w, struct op_table *ops, bool entries_only,
		      const struct decoders *dec);
void join_free(struct join *j);
/* Declares a traced process (its process track). */
void join_add_process(struct join *j, const struct target *t);
/* pid's process track (the decoders' callback: ctx is the join). */
uint64_t join_process_track(void *ctx, int pid);
/* pid/tid's thread track, made when new (the kernel view's callback: ctx
 * is the join); 0 when the thread table is full. */
uint64_t join_thread_track(void *ctx, int pid, int tid);
/* A record of one thread (an op, call, region, node, stack, allocation,
 * thread exit...): its frame stack; 0 (records are never refused). */
int join_thread_event(struct join *j, const void *data, uint64_t size);
/* pid exited at ts: what its threads still have open closes there. */
void join_process_gone(struct join *j, int pid, uint64_t ts);
/* pid exec'd: its image's frames are cut and its tracks end; what comes
 * next is a new process (new tracks, named when it is attached). */
void join_process_exec(struct join *j, int pid, uint64_t ts);
/* Threads of pid that found no free op ring lost records and ops (BEGINs)
 * before ts: an instant on the process's track says so. */
void join_ops_no_ring(struct join *j, int pid, uint64_t ts, uint64_t records, uint64_t ops);
/* A backward node's class name (names the nodes of that vtable). */
void join_node_type(struct join *j, const struct ptbpf_named_event *ne);
/* A CUDA graph node made or cloned (the agent's record, on the thread that
 * made it): the op open there captured it. */
void join_graph_node(struct join *j, const struct ptbpf_agent_event *e);
/* Closes everything still open at ts (tracing stopped). */
void join_finish(struct join *j, uint64_t ts);
const struct join_counts *join_counts(const struct join *j);
/* Per process, for metrics: ops begun, kernel and graph launches,
 * ProfilerStep#N steps, the last step's
 * length. */
struct join_proc_stats {
	int pid;
	uint64_t ops, launches;
};
int join_process_stats(const struct join *j, struct join_proc_stats *out, int max);
/* Ops sorted by total host time, descending; returns how many (<= max). */
int join_top_ops(const struct join *j, struct op_stat *out, int max);

#endif /* PTBPF_JOIN_H */
