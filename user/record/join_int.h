/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join's insides, shared by record/join*.c only: a thread's stack of open
 * frames, the processes, and what the other files add to them.
 *   join.c        threads, processes, frames: push, end, unwind, close;
 *                 steps, op statistics, a thread's records by kind
 *   join_agent.c  the agent's RecordFunction records (ops, nodes, regions,
 *                 CUDA calls)
 *   join_gpu.c    GPU API calls from uprobes, op -> launch flows
 *   join_rpc.c    torch.distributed.rpc calls on their caller;
 *   join_rpc_handle.c  ... and their handling on the callee
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

struct rpc_state;
struct rpc_thread;

/* RecordFunction frames (the agent's) are the kinds below FR_GPU. */
enum frame_kind { FR_OP, FR_BWD, FR_USER, FR_GPU, FR_RPC };

struct frame {
	uint64_t key, ts, child_ns, seq;
	uint64_t alloc_bytes; /* --memory: bytes allocated while it was innermost */
	const char *py_stack; /* --py-stacks: interned, or NULL */
	const char *name;     /* FR_BWD/FR_USER/FR_RPC: interned; FR_GPU: the API's */
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
	struct rpc_thread *rpc; /* its RPC steps in progress (join_rpc.c), or NULL */
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
	uint64_t ops, launches; /* for metrics */
	struct str_map *node_names; /* vptr -> "AddmmBackward0" */
};

struct join {
	struct pf_writer *w;
	struct op_table *ops;
	struct hash_table rf_ops; /* FNV-1a of an agent-recorded op's name -> struct rf_op */
	struct rpc_state *rpc; /* torch.distributed.rpc calls (join_rpc.c), or NULL */
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

enum close_why {
	CLOSE_END, CLOSE_UNWOUND, CLOSE_MISSED, CLOSE_EXIT, CLOSE_STOP, CLOSE_LOST, CLOSE_EXEC
};

/* join.c */
uint64_t join_bwd_flow_id(int pid, uint64_t seq);
void join_end_frame(struct join *j, struct thread *t, const struct ptbpf_event *e,
		      enum close_why why);
void join_push_frame(struct join *j, struct thread *t, const struct frame *in,
		       const struct pf_event *extra);
/* Closes t's frames down to index i at ts, i with args (those above it:
 * their ends were not seen). */
void join_close_frames_to(struct join *j, struct thread *t, int i, uint64_t ts,
		     const struct pf_arg *args, int nargs);
struct process *join_find_process(struct join *j, int pid);
/* join_agent.c */
void rf_begin(struct join *j, struct thread *t, const struct ptbpf_named_event *ne,
		     const uint8_t *shapes, size_t slen);
void rf_end(struct join *j, struct thread *t, const struct ptbpf_event *e);
/* join_gpu.c */
void join_count_launch(struct join *j, int pid);
/* pid/tid's thread if the joiner has it, else NULL (nothing is added). */
struct thread *join_find_thread(struct join *j, int pid, int tid);
const char *join_frame_name(const struct join *j, const struct frame *f);
bool join_in_op(const struct thread *t);
uint64_t join_launch_flow(struct join *j, struct thread *t, const struct ptbpf_event *e);
void gpu_begin(struct join *j, struct thread *t, const struct ptbpf_gpu_call *c);
/* join_rpc.c */
void rpc_event(struct join *j, struct thread *t, const void *data, uint64_t size);
void rpc_other_event(struct join *j, struct thread *t);
/* Calls still open when pid went (or, pid -1, when tracing stopped). */
void rpc_close_calls(struct join *j, int pid, uint64_t ts);
/* The flow to a backward node of pid (its sequence number) from the RPC
 * request that started it there (distributed autograd), once; 0: none. */
uint64_t rpc_backward_flow(struct join *j, int pid, uint64_t seq);
void rpc_free(struct join *j);

#endif /* PTBPF_JOIN_INT_H */
