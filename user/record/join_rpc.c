// SPDX-License-Identifier: BSD-2-Clause
/*
 * join: torch.distributed.rpc calls on their caller, from begin to the end
 * of their future, with a flow to the request's handling and back (the
 * handling: join_rpc_handle.c). See join_rpc_int.h for what each record
 * means.
 */
#define _GNU_SOURCE
#include "record/join_rpc_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/names.h"

/* The joiner's RPC state, made with the first RPC record. */
static struct rpc_state *state(struct join *j)
{
	struct rpc_state *s = j->rpc;

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (s && (!(s->calls = calloc(RPC_MAX_CALLS, sizeof(*s->calls))) ||
		  !(s->handles = calloc(RPC_MAX_CALLS, sizeof(*s->handles))))) {
		free(s->calls);
		free(s);
		s = NULL;
	}
	return j->rpc = s;
}

void rpc_free(struct join *j)
{
	if (!j->rpc)
		return;
	free(j->rpc->calls);
	free(j->rpc->handles);
	free(j->rpc);
}

const char *rpc_intern(struct join *j, const char *s)
{
	return s ? str_set_intern(j->strings, s) : NULL;
}

struct rpc_thread *rpc_thread(struct thread *t)
{
	if (!t->rpc && (t->rpc = calloc(1, sizeof(*t->rpc))))
		t->rpc->untimeout = -1;
	return t->rpc;
}

struct rpc_proc *rpc_proc(struct join *j, int pid)
{
	struct rpc_state *s = j->rpc;

	for (int i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	if (s->nprocs == RPC_MAX_PROCS)
		return NULL;
	s->procs[s->nprocs] = (struct rpc_proc){ .pid = pid };
	return &s->procs[s->nprocs++];
}

struct rpc_call *rpc_find_call(struct rpc_state *s, int pid, int64_t id)
{
	for (int i = 0; i < s->ncalls; i++)
		if (s->calls[i].pid == pid && s->calls[i].id == id)
			return &s->calls[i];
	return NULL;
}

/* rpc_sync, rpc_async or rpc_remote: the torch/distributed/rpc/api.py
 * function on the caller's Python stack ("file(line): name" lines). */
static const char *exec_mode(const char *stack)
{
	static const char *const fns[][2] = {
		{ "rpc_sync", "rpc_sync" }, { "rpc_async", "rpc_async" }, { "remote", "rpc_remote" },
	};
	const char *at = stack;

	while (at && (at = strstr(at, "distributed/rpc/api.py("))) {
		const char *name = strstr(at, "): ");
		size_t n;

		if (!name)
			break;
		name += 3;
		n = strcspn(name, "\n");
		for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
			if (n == strlen(fns[i][0]) && !strncmp(name, fns[i][0], n))
				return fns[i][1];
		at = name;
	}
	return NULL;
}

/* The call's name as torch.profiler names it: "rpc_async#fn(w0 -> w1)",
 * "to_here#(w0)->(w1)"; "rpc#..." where the mode is not known (no Python
 * stack), "rpc#TYPE(...)" for the agent's own messages (RRef protocol). */
static const char *call_name(struct join *j, const struct rpc_thread *rt, const char *self)
{
	uint32_t low = rt->call_type & 0xff;
	const char *mode = rt->call_mode, *dst = rt->call_dst ? rt->call_dst : "?";
	char name[512];

	self = self ? self : "?";
	if (low == 0x07 || low == 0x08) /* SCRIPT_ / PYTHON_RREF_FETCH_CALL */
		snprintf(name, sizeof(name), "to_here#(%s)->(%s)", self, dst);
	else if (rt->call_fn)
		snprintf(name, sizeof(name), "%s#%s(%s -> %s)", mode ? mode :
			 low == 0x04 || low == 0x05 ? "rpc_remote" : "rpc", rt->call_fn, self, dst);
	else
		snprintf(name, sizeof(name), "rpc#%s(%s -> %s)", rpc_type_name(rt->call_type),
			 self, dst);
	return rpc_intern(j, name);
}

/* TensorPipeAgent::send: a request is being made (its id comes with its
 * write). Python's rpc_sync/rpc_async/remote looked its destination up
 * first, before pickling its arguments: the call begins there. */
static void on_call(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_thread *rt = rpc_thread(t);
	char fn[RPC_FN_LEN];

	if (!rt)
		return;
	rt->call_ts = r->ev.ts;
	rt->call_type = (uint32_t)r->ev.arg[0];
	rt->call_dst = r->name[0] ? rpc_intern(j, r->name) : NULL;
	rt->call_fn = rpc_payload_function(r->payload, r->copied, fn, sizeof(fn)) ?
		      rpc_intern(j, fn) : NULL;
	rt->call_stack = NULL;
	if (t->py_stack && t->stack_ts == r->ev.ts) { /* sent just before, by rpc.bpf.h */
		rt->call_stack = t->py_stack;
		t->py_stack = NULL;
	}
	rt->call_mode = exec_mode(rt->call_stack);
	if (rt->last == RPC_LOOKUP && rt->lookup && rt->call_dst && rt->lookup == rt->call_dst) {
		rt->call_begin = rt->lookup_ts;
		rt->call_begin_at = "destination lookup (Python)";
	} else {
		rt->call_begin = r->ev.ts;
		rt->call_begin_at = "TensorPipeAgent::send";
	}
}

/* A lane of pid's "RPC calls" tracks free from ts on; -1 if none can be. */
static int take_lane(struct join *j, struct rpc_proc *p, uint64_t ts)
{
	char name[32];
	int i;

	for (i = 0; i < p->nlanes; i++)
		if (!p->lanes[i].busy && p->lanes[i].last_end <= ts)
			break;
	if (i == p->nlanes) {
		if (i == RPC_MAX_LANES)
			return -1;
		if (i)
			snprintf(name, sizeof(name), "RPC calls (%d)", i + 1);
		else
			snprintf(name, sizeof(name), "RPC calls");
		p->lanes[i] = (struct rpc_lane){
			.track = pf_track_child(j->w, join_process_track(j, p->pid), name) };
		p->nlanes++;
	}
	p->lanes[i].busy = true;
	return i;
}

/* The call's slice opens (at its begin, in the past) and its request goes
 * out, with the flow to its handling; on the calling thread an instant
 * (in whatever it was running: an op, a backward node) leads to it. */
static void draw_call(struct join *j, struct thread *t, struct rpc_proc *p, struct rpc_call *c,
		      const struct rpc_thread *rt)
{
	struct pf_arg args[10] = {
		{ .name = "message_id", .type = PF_ARG_INT, .i = c->id },
		{ .name = "type", .type = PF_ARG_STR, .s = rpc_type_name(c->type) },
		{ .name = "destination", .type = PF_ARG_STR, .s = c->dst ? c->dst : "?" },
		{ .name = "payload_bytes", .type = PF_ARG_UINT, .u = c->bytes },
		{ .name = "tensors", .type = PF_ARG_UINT, .u = c->tensors },
		{ .name = "caller_tid", .type = PF_ARG_INT, .i = c->tid },
		{ .name = "begins_at", .type = PF_ARG_STR, .s = rt ? rt->call_begin_at : "request write" },
	};
	int nargs = 7;
	uint64_t track = p->lanes[c->lane].track;

	if (p->self)
		args[nargs++] = (struct pf_arg){ .name = "worker", .type = PF_ARG_STR, .s = p->self };
	if (rt && rt->call_stack)
		args[nargs++] = (struct pf_arg){ .name = "py_stack", .type = PF_ARG_STR,
						 .s = rt->call_stack };
	uint64_t from = hash_u64(c->flow_req) ^ 0x63616c6c, call = c->flow_req;
	struct pf_arg named = { .name = "call", .type = PF_ARG_STR, .s = c->name };

	from |= 1;
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = c->sent, .name = "rpc call",
		   .category = "rpc", .args = &named, .nargs = 1, .flows = &from, .nflows = 1 });
	pf_slice_begin(j->w, &(struct pf_event){ .track = track, .ts = c->begin, .name = c->name,
		       .category = "rpc", .args = args, .nargs = nargs });
	pf_instant(j->w, &(struct pf_event){ .track = track, .ts = c->sent, .name = "rpc send request",
		   .category = "rpc", .args = args, .nargs = 2, .flows = &call, .nflows = 1,
		   .term_flows = &from, .nterm = 1 });
}

/* A request written out (its id now set): the call the same thread began
 * opens; one without a send seen (begun before tracing) opens here. */
static void on_request(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_state *s = j->rpc;
	struct rpc_thread *rt = rpc_thread(t);
	struct rpc_proc *p = rpc_proc(j, r->ev.pid);
	struct rpc_call *c;
	bool began = rt && rt->call_ts;

	if (rt)
		rt->call_ts = 0;
	if (!p || s->ncalls == RPC_MAX_CALLS) {
		j->counts.rpc_not_drawn++;
		return;
	}
	c = &s->calls[s->ncalls];
	*c = (struct rpc_call){ .pid = r->ev.pid, .tid = r->ev.tid, .id = (int64_t)r->ev.arg[1],
		.begin = began ? rt->call_begin : r->ev.ts, .sent = r->ev.ts,
		.type = (uint32_t)r->ev.arg[0], .tensors = r->tensors, .bytes = r->ev.arg[2],
		.dst = began ? rt->call_dst : NULL };
	if (!began && rt) {
		rt->call_type = c->type;
		rt->call_fn = rt->call_mode = rt->call_dst = rt->call_stack = NULL;
	}
	c->name = rt ? call_name(j, rt, p->self) : rpc_intern(j, "rpc#?");
	c->lane = take_lane(j, p, c->begin);
	if (c->lane < 0) {
		j->counts.rpc_not_drawn++;
		return;
	}
	c->flow_req = hash_pair(((uint64_t)c->pid << 32) ^ (uint64_t)c->id, c->sent ^ ++s->flows) | 1;
	s->ncalls++;
	j->counts.rpc_calls++;
	draw_call(j, t, p, c, began ? rt : NULL);
}

/* The call's slice closes at ts; why: NULL for its future's end. */
static void end_call(struct join *j, struct rpc_call *c, uint64_t ts, const char *why)
{
	struct rpc_state *s = j->rpc;
	struct rpc_proc *p = rpc_proc(j, c->pid);
	struct pf_arg args[6];
	int n = 0;

	if (c->responded) {
		args[n++] = (struct pf_arg){ .name = "response_type", .type = PF_ARG_STR,
					     .s = rpc_type_name(c->rtype) };
		args[n++] = (struct pf_arg){ .name = "response_bytes", .type = PF_ARG_UINT,
					     .u = c->rbytes };
		args[n++] = (struct pf_arg){ .name = "response_after_us", .type = PF_ARG_DOUBLE,
					     .d = (c->responded - c->begin) / 1e3 };
	}
	if (c->error)
		args[n++] = (struct pf_arg){ .name = "error", .type = PF_ARG_STR, .s = c->error };
	if (why)
		args[n++] = (struct pf_arg){ .name = why, .type = PF_ARG_BOOL, .b = true };
	if (p) {
		pf_slice_end(j->w, &(struct pf_event){ .track = p->lanes[c->lane].track,
			     .ts = ts < c->begin ? c->begin : ts, .args = args, .nargs = n });
		p->lanes[c->lane].busy = false;
		p->lanes[c->lane].last_end = ts;
	}
	*c = s->calls[--s->ncalls];
}

/* The response, on the caller: the future is completed next (on a pool
 * thread); the flow from the callee's response ends here. */
static void responded(struct join *j, struct rpc_call *c, const struct ptbpf_rpc *r,
		      uint32_t type, const char *error)
{
	struct rpc_proc *p = rpc_proc(j, c->pid);
	struct pf_arg args[2] = {
		{ .name = "message_id", .type = PF_ARG_INT, .i = c->id },
		{ .name = "type", .type = PF_ARG_STR, .s = rpc_type_name(type) },
	};

	c->responded = r->ev.ts;
	c->rtype = type;
	c->rbytes = r->ev.arg[2];
	c->error = error;
	if (p)
		pf_instant(j->w, &(struct pf_event){ .track = p->lanes[c->lane].track,
			   .ts = r->ev.ts, .name = "rpc response", .category = "rpc", .args = args,
			   .nargs = 2, .term_flows = &c->flow_resp, .nterm = c->flow_resp ? 1 : 0 });
	if (c->flow_resp)
		j->counts.rpc_flows++;
}

static void on_response(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_call *c = rpc_find_call(j->rpc, r->ev.pid, (int64_t)r->ev.arg[1]);
	char what[RPC_FN_LEN], err[RPC_FN_LEN + 32];
	const char *error = NULL;

	if (!c) {
		j->counts.rpc_unmatched++;
		return;
	}
	if (rpc_payload_remote_exception(r->payload, r->copied, what, sizeof(what))) {
		snprintf(err, sizeof(err), "RemoteException: %s", what);
		error = rpc_intern(j, err);
	}
	c->fut = r->ev.key;
	responded(j, c, r, (uint32_t)r->ev.arg[0], error);
}

/* A failure's text (the payload bytes copied), one line. */
static const char *fail_text(struct join *j, const struct ptbpf_rpc *r)
{
	char text[RPC_PAYLOAD_LEN + 1];
	size_t n = r->copied < RPC_PAYLOAD_LEN ? r->copied : RPC_PAYLOAD_LEN;

	memcpy(text, r->payload, n);
	text[n] = 0;
	text[strcspn(text, "\n")] = 0;
	return rpc_intern(j, text[0] ? text : "error");
}

/* A call that timed out: the oldest unanswered call of the process whose
 * timeout ("... timeout (N ms) ...") has passed, counted from its begin
 * (which its send's start follows), give or take the 1 ms to which torch
 * rounds expiry times down. */
static struct rpc_call *timed_out(struct rpc_state *s, const struct ptbpf_rpc *r, const char *text)
{
	const char *at = strstr(text, "timeout (");
	struct rpc_call *best = NULL;
	uint64_t ms;

	if (!at || sscanf(at, "timeout (%lu ms)", &ms) != 1)
		return NULL;
	for (int i = 0; i < s->ncalls; i++) {
		struct rpc_call *c = &s->calls[i];

		if (c->pid == (int)r->ev.pid && !c->responded && c->begin + ms * 1000000 <= r->ev.ts + 2000000 &&
		    (!best || c->sent < best->sent))
			best = c;
	}
	return best;
}

/* markFutureWithError: an EXCEPTION response (after its id's removal from
 * the timeout map, on the same thread), a connection error (its calls'
 * ids follow), or a timeout. */
static void on_fail(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_thread *rt = rpc_thread(t);
	const char *text = fail_text(j, r);
	struct rpc_call *c = NULL;

	if (!rt)
		return;
	if (rt->last == RPC_UNTIMEOUT && rt->untimeout >= 0 && !rt->client_error) {
		c = rpc_find_call(j->rpc, r->ev.pid, rt->untimeout);
		if (c)
			responded(j, c, r, RPC_EXCEPTION, text);
	} else if (rt->client_error) {
		rt->fail_text = text;
		return;
	} else if ((c = timed_out(j->rpc, r, text))) {
		c->error = text;
		end_call(j, c, r->ev.ts, "timed_out");
		return;
	}
	if (c)
		end_call(j, c, r->ev.ts, NULL);
	else
		j->counts.rpc_unmatched++;
}

/* removeFromTimeoutMap(id): its call ended; after a connection error,
 * with that error. */
static void on_untimeout(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_thread *rt = rpc_thread(t);
	struct rpc_call *c;

	if (!rt)
		return;
	rt->untimeout = (int64_t)r->ev.arg[1];
	if (!rt->client_error || !rt->fail_text)
		return;
	c = rpc_find_call(j->rpc, r->ev.pid, rt->untimeout);
	if (c) {
		c->error = rt->fail_text;
		end_call(j, c, r->ev.ts, "connection_failed");
	} else {
		j->counts.rpc_unmatched++;
	}
	rt->fail_text = NULL;
}

/* The pool thread about to complete a call's future: the call ends here.
 * The future's waiters wake next, then its callbacks run on this thread
 * (torch.profiler's end of the call among the first); the later ones may
 * wait for the GIL that the woken caller holds, so the counter decrease
 * after them (RPC_DONE) can come milliseconds after the call's end. */
static void on_completing(struct join *j, const struct ptbpf_rpc *r)
{
	struct rpc_call *c = rpc_find_call(j->rpc, r->ev.pid, (int64_t)r->ev.arg[1]);

	if (c && c->responded && (r->ev.arg[0] & RPC_RESPONSE_FLAG))
		end_call(j, c, r->ev.ts, NULL);
}

/* A backward pass asked for by a request goes on in this process from
 * its SendRpcBackward node: a flow from here (the request's handling) to
 * that node's slice, wherever the engine runs it. */
static void on_autograd_send(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_state *s = j->rpc;
	struct rpc_bwd *b = &s->bwd[s->nbwd++ % RPC_MAX_BWD];
	struct pf_arg arg = { .name = "seq", .type = PF_ARG_UINT, .u = r->ev.arg[0] };

	*b = (struct rpc_bwd){ .pid = r->ev.pid, .seq = r->ev.arg[0],
			       .flow = hash_pair(r->ev.key ^ r->ev.pid, r->ev.ts ^ ++s->flows) | 1 };
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = r->ev.ts,
		   .name = "dist autograd: backward goes on from SendRpcBackward",
		   .category = "rpc", .args = &arg, .nargs = 1, .flows = &b->flow, .nflows = 1 });
}

uint64_t rpc_backward_flow(struct join *j, int pid, uint64_t seq)
{
	struct rpc_state *s = j->rpc;

	for (unsigned i = 0; s && i < RPC_MAX_BWD && i < s->nbwd; i++) {
		struct rpc_bwd *b = &s->bwd[i];
		uint64_t flow = b->flow;

		if (b->pid != pid || b->seq != seq || !flow)
			continue;
		b->flow = 0;
		j->counts.rpc_flows++;
		return flow;
	}
	return 0;
}

static void on_send(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_proc *p = rpc_proc(j, r->ev.pid);

	if (p && r->name[0] && (!p->self || strcmp(p->self, r->name)))
		p->self = rpc_intern(j, r->name);
	if (r->ev.arg[0] & RPC_REQUEST_FLAG)
		on_request(j, t, r);
	else
		rpc_handle_response(j, t, r);
}

static void dispatch(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_thread *rt = rpc_thread(t);

	if (rt && rt->returned)
		rpc_handle_settle(j, t, r);
	if (rt && rt->client_error && r->ev.id != RPC_FAIL && r->ev.id != RPC_UNTIMEOUT &&
	    r->ev.id != RPC_CLIENT_ERROR)
		rt->client_error = false;
	switch (r->ev.id) {
	case RPC_SEND: on_send(j, t, r); break;
	case RPC_RECEIVE: rpc_handle_request(j, t, r); break;
	case RPC_CALL: on_call(j, t, r); break;
	case RPC_LOOKUP:
		if (rt) {
			rt->lookup_ts = r->ev.ts;
			rt->lookup = rpc_intern(j, r->name);
		}
		break;
	case RPC_RESPONSE: on_response(j, t, r); break;
	case RPC_COMPLETING: on_completing(j, r); break;
	case RPC_BUSY: rpc_handle_busy(j, t, r); break;
	case RPC_FAIL: on_fail(j, t, r); break;
	case RPC_UNTIMEOUT: on_untimeout(j, t, r); break;
	case RPC_CLIENT_ERROR:
		if (rt)
			rt->client_error = true;
		break;
	case RPC_AUTOGRAD_SEND: on_autograd_send(j, t, r); break;
	}
	if (rt)
		rt->last = (uint8_t)r->ev.id;
}

void rpc_event(struct join *j, struct thread *t, const void *data, uint64_t size)
{
	struct ptbpf_rpc r;

	if (!state(j))
		return;
	/* Older captures (--raw) have the bare event: no names, no payload. */
	memset(&r, 0, sizeof(r));
	memcpy(&r, data, size < sizeof(r) ? size : sizeof(r));
	if (r.copied > RPC_PAYLOAD_LEN)
		r.copied = RPC_PAYLOAD_LEN;
	r.name[RPC_NAME_LEN - 1] = 0;
	if (r.ev.id == RPC_SEND || r.ev.id == RPC_RECEIVE || r.ev.id == RPC_RESPONSE ||
	    r.ev.id == RPC_CALL) {
		if (!rpc_is_message_type((uint32_t)r.ev.arg[0]))
			return;
	}
	dispatch(j, t, &r);
}

/* A record of another kind on a thread whose handler may have returned. */
void rpc_other_event(struct join *j, struct thread *t)
{
	if (j->rpc && t->rpc && t->rpc->returned)
		rpc_handle_settle(j, t, NULL);
}

/* Calls still open when their process went (pid) or tracing stopped (-1). */
void rpc_close_calls(struct join *j, int pid, uint64_t ts)
{
	struct rpc_state *s = j->rpc;

	for (int i = 0; s && i < s->ncalls;) {
		if (pid >= 0 && s->calls[i].pid != pid) {
			i++;
			continue;
		}
		end_call(j, &s->calls[i], ts, pid >= 0 ? "cut_by_exit" : "cut_at_trace_end");
	}
	for (int i = 0; s && i < s->nhandles;) {
		if (pid >= 0 && s->handles[i].pid != pid)
			i++;
		else
			s->handles[i] = s->handles[--s->nhandles];
	}
}
