/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join's insides, shared by record/join*.c only: a thread's stack of open
 * frames, the processes, and what the other files add to them.
 *   join.c        threads, processes, frames: push, end, unwind, close;
 *                 steps, op statistics, a thread's records by kind
 *   join_agent.c  the agent's RecordFunction records (ops, nodes, regions,
 *                 CUDA calls)
 *   join_gpu.c    GPU API calls from uprobes, op -> launch flows
 *   join_rpc.c    torch.distributed.rpc flows
 */
#ifndef PTBPF_JOIN_INT_H
#define PTBPF_JOIN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/hash.h"
#include "record/join.h"

/* trace_processor drops slices nested deeper than 512 on one track; keep a
 * margin. Frames past MAX_STACK are not even kept (counted as too deep). */
#define MAX_DRAWN 500
#define MAX_STACK 2048
#define NO_SEQ UINT64_MAX
/* Threads ever seen (their entries stay for their tracks); records of
 * threads past it are counted (no_thread), not joined. */
#define MAX_THREADS (1u << 20)
/* Agent-recorded op names given an ops-table index (and the table's size
 * while they are added). */
#define MAX_RF_OPS (1u << 13)

enum frame_kind { FR_OP, FR_BWD, FR_USER, FR_GPU };

struct frame {
	uint64_t key, ts, child_ns, seq;
	uint64_t alloc_bytes; /* --memory: bytes allocated while it was innermost */
	const char *py_stack; /* --py-stacks: interned, or NULL */
	const char *name;     /* FR_BWD/FR_USER: interned; FR_GPU: the API's */
	const char *category; /* FR_GPU; others: NULL for the kind's own */
	uint32_t op;
	uint8_t kind;
	bool drawn;
	bool seq_at_begin; /* its begin has it (sequence_nr): the end does not repeat it */
};

struct thread {
	uint64_t id; /* pid << 32 | tid */
	uint64_t track;
	uint64_t stack_ts;    /* a Python stack that came before its frame: */
	const char *py_stack; /* the frame opening at stack_ts gets it */
	int depth;
	struct frame *stack; /* MAX_STACK, allocated on first push */
};

/* An agent-recorded op: its name (the ops table's own string) and index. */
struct rf_op {
	const char *name;
	uint32_t op;
};

struct process {
	int pid;
	uint64_t track, steps_track;
	uint64_t step, last_step_end;
	uint64_t ops, launches, steps, last_step_ns; /* for metrics */
	struct str_map *node_names; /* vptr -> "AddmmBackward0" */
};

struct join {
	struct pf_writer *w;
	struct op_table *ops;
	struct hash_table rf_ops; /* FNV-1a of an agent-recorded op's name -> struct rf_op */
	struct rpc_pending { int pid; int64_t id; uint64_t flow; } *rpc; /* unmatched sends */
	int nrpc;
	/* hash_u64(id) -> struct thread, inline: a thread pointer is good
	 * until the next get_thread, which only join_thread_event calls,
	 * before it takes one. */
	struct hash_table threads;
	struct process *procs;
	int nprocs;
	struct u64_set *fwd_seqs; /* pid<<48 ^ seq with a forward op seen */
	struct str_set *strings;
	const struct decoders *dec; /* for parts of records on threads */
	uint64_t *op_calls, *op_total, *op_self;
	uint32_t op_cap; /* ops grow as processes are attached */
	struct join_counts counts;
	bool entries_only;
};

enum close_why { CLOSE_END, CLOSE_UNWOUND, CLOSE_MISSED, CLOSE_EXIT, CLOSE_STOP, CLOSE_LOST, CLOSE_EXEC };

/* join.c */
uint64_t bwd_flow_id(int pid, uint64_t seq);
void end_frame(struct join *j, struct thread *t, const struct ptbpf_event *e,
		      enum close_why why);
void push_frame(struct join *j, struct thread *t, const struct frame *in,
		       const struct pf_event *extra);
struct process *find_process(struct join *j, int pid);
/* join_agent.c */
void rf_begin(struct join *j, struct thread *t, const struct ptbpf_named_event *ne,
		     const uint8_t *shapes, size_t slen);
void rf_end(struct join *j, struct thread *t, const struct ptbpf_event *e);
/* join_gpu.c */
void count_launch(struct join *j, int pid);
bool in_op(const struct thread *t);
uint64_t launch_flow(struct join *j, struct thread *t, const struct ptbpf_event *e);
void gpu_begin(struct join *j, struct thread *t, const struct ptbpf_gpu_call *c);
/* join_rpc.c */
void rpc_event(struct join *j, struct thread *t, const struct ptbpf_event *e);

#endif /* PTBPF_JOIN_INT_H */
