/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * join_rpc's insides, shared by record/join_rpc.c (the caller's calls) and
 * record/join_rpc_handle.c (the callee's handling) only.
 *
 * A call, on its caller, is keyed by (pid, message id): message ids count
 * per sending agent. It begins where Python looked its destination up
 * (RPC_LOOKUP, when the same thread's next RPC step is its send), else at
 * TensorPipeAgent::send; it is written once its id is known (the request
 * written out), on a lane of the process's "RPC calls" tracks; it ends
 * when a pool thread is about to complete its future (RPC_COMPLETING: its
 * waiters wake, then its callbacks run), or at its failure. On the
 * callee, a request is handled on the thread that took it up, from
 * RequestCallback::operator() to its return (the agent's next counter
 * change there, RPC_BUSY, decided at the thread's next record).
 */
#ifndef PTBPF_JOIN_RPC_INT_H
#define PTBPF_JOIN_RPC_INT_H

#include "record/join_int.h"
#include "record/rpc_names.h"

#define RPC_MAX_CALLS   4096 /* open calls and handled requests, each */
#define RPC_MAX_PROCS   256
#define RPC_MAX_LANES   64
#define RPC_FN_LEN      256

struct rpc_call {
	int pid, tid;
	int64_t id;
	uint64_t begin, sent, responded, fut;
	uint32_t type, tensors, rtype;
	uint64_t bytes, rbytes;
	uint64_t flow_req, flow_resp;
	const char *name, *dst, *error;
	int lane;
	bool handled; /* a traced callee took it up */
};

struct rpc_handle {
	int pid, tid;
	int64_t id;
	uint64_t ts, flow_resp, frame_key;
	const char *name;
	int caller_pid; /* 0: not known */
};

struct rpc_lane {
	uint64_t track, last_end;
	bool busy;
};

struct rpc_proc {
	int pid;
	const char *self; /* its worker name, once a message showed it */
	struct rpc_lane lanes[RPC_MAX_LANES];
	int nlanes;
	/* the client counter's offset in the agent (a BUSY followed by a request) */
	uint64_t client_counter;
};

/* A thread's RPC steps in progress. */
struct rpc_thread {
	uint64_t lookup_ts;          /* the last RPC_LOOKUP, if the last step */
	const char *lookup;
	uint64_t call_ts;            /* RPC_CALL seen, its request not yet written */
	uint32_t call_type;
	const char *call_dst, *call_mode, *call_fn, *call_stack, *call_begin_at;
	uint64_t call_begin;
	int64_t untimeout;           /* the last step was RPC_UNTIMEOUT of this id, -1 */
	const char *fail_text;       /* RPC_FAIL in a client error, its call next */
	bool client_error;
	uint64_t returned;           /* a handler may have returned here (RPC_BUSY) */
	uint64_t busy_counter;       /* ... the counter it changed */
	uint8_t last;                /* the last step's probe */
};

/* A backward pass that goes on in this process from a SendRpcBackward
 * node (its sequence number), with the flow from the request that asked. */
struct rpc_bwd {
	int pid;
	uint64_t seq, flow;
};
#define RPC_MAX_BWD 256

struct rpc_state {
	struct rpc_bwd bwd[RPC_MAX_BWD]; /* a ring: the oldest is overwritten */
	unsigned nbwd;
	struct rpc_call *calls;
	int ncalls;
	struct rpc_handle *handles;
	int nhandles;
	struct rpc_proc procs[RPC_MAX_PROCS];
	int nprocs;
	uint64_t flows;
};

/* join_rpc.c */
struct rpc_proc *rpc_proc(struct join *j, int pid);
struct rpc_call *rpc_find_call(struct rpc_state *s, int pid, int64_t id);
struct rpc_thread *rpc_thread(struct thread *t);
const char *rpc_intern(struct join *j, const char *s);
/* join_rpc_handle.c */
void rpc_handle_request(struct join *j, struct thread *t, const struct ptbpf_rpc *r);
void rpc_handle_busy(struct join *j, struct thread *t, const struct ptbpf_rpc *r);
void rpc_handle_response(struct join *j, struct thread *t, const struct ptbpf_rpc *r);
/* A record after a handler's possible return: closes it, unless r (an RPC
 * record, or NULL) shows the counter change was a nested call's. */
void rpc_handle_settle(struct join *j, struct thread *t, const struct ptbpf_rpc *r);

#endif /* PTBPF_JOIN_RPC_INT_H */
