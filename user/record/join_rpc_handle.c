// SPDX-License-Identifier: BSD-2-Clause
/*
 * join: torch.distributed.rpc requests on their callee. Each is a slice on
 * the thread that ran it, from the request taken up to its handler's
 * return, so the ops the remote function ran nest in it; it is named as
 * the call it serves, where the caller is traced in the same session; its
 * response goes out as an instant with a flow back to the caller's call.
 * See join_rpc_int.h.
 */
#define _GNU_SOURCE
#include "record/join_rpc_int.h"

#include <stdio.h>
#include <string.h>

/* The caller's call this request is, in this session: same message id
 * and payload size, sent to this worker by another process, not yet
 * taken up; the oldest such. */
static struct rpc_call *caller_of(struct rpc_state *s, const struct ptbpf_rpc *r, const char *self)
{
	struct rpc_call *best = NULL;

	for (int i = 0; i < s->ncalls; i++) {
		struct rpc_call *c = &s->calls[i];

		if (c->handled || c->pid == (int)r->ev.pid || c->id != (int64_t)r->ev.arg[1] ||
		    c->bytes != r->ev.arg[2] || (self && c->dst && strcmp(self, c->dst)))
			continue;
		if (!best || c->sent < best->sent)
			best = c;
	}
	return best;
}

/* A request's name where its caller is not traced here: what it calls,
 * on which worker ("?" for what is not known). */
static const char *unmatched_name(struct join *j, const struct ptbpf_rpc *r, const char *self)
{
	char fn[RPC_FN_LEN], name[RPC_FN_LEN + 96];

	if (rpc_payload_function(r->payload, r->copied, fn, sizeof(fn)))
		snprintf(name, sizeof(name), "rpc#%s(? -> %s)", fn, self ? self : "?");
	else
		snprintf(name, sizeof(name), "rpc#%s(? -> %s)", rpc_type_name((uint32_t)r->ev.arg[0]),
			 self ? self : "?");
	return rpc_intern(j, name);
}

void rpc_handle_request(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_state *s = j->rpc;
	struct rpc_proc *p = rpc_proc(j, r->ev.pid);
	const char *self = p ? p->self : NULL;
	struct rpc_call *c = caller_of(s, r, self);
	struct rpc_handle *h;
	struct pf_arg args[6] = {
		{ .name = "message_id", .type = PF_ARG_INT, .i = (int64_t)r->ev.arg[1] },
		{ .name = "type", .type = PF_ARG_STR, .s = rpc_type_name((uint32_t)r->ev.arg[0]) },
		{ .name = "payload_bytes", .type = PF_ARG_UINT, .u = r->ev.arg[2] },
		{ .name = "tensors", .type = PF_ARG_UINT, .u = r->tensors },
	};
	int nargs = 4;
	uint64_t flow = c ? c->flow_req : 0;

	if (c) {
		c->handled = true;
		args[nargs++] = (struct pf_arg){ .name = "caller_pid", .type = PF_ARG_INT, .i = c->pid };
		j->counts.rpc_flows++;
	}
	if (self)
		args[nargs++] = (struct pf_arg){ .name = "worker", .type = PF_ARG_STR, .s = self };
	join_push_frame(j, t, &(struct frame){ .key = (uint64_t)r->ev.arg[1], .ts = r->ev.ts,
		   .seq = NO_SEQ, .kind = FR_RPC, .category = "rpc_remote",
		   .name = c ? c->name : unmatched_name(j, r, self) },
		   &(struct pf_event){ .args = args, .nargs = nargs, .term_flows = &flow,
				       .nterm = flow ? 1 : 0 });
	j->counts.rpc_handled++;
	if (s->nhandles == RPC_MAX_CALLS)
		return;
	h = &s->handles[s->nhandles++];
	*h = (struct rpc_handle){ .pid = r->ev.pid, .tid = r->ev.tid, .id = (int64_t)r->ev.arg[1],
		.ts = r->ev.ts, .caller_pid = c ? c->pid : 0,
		.flow_resp = c ? hash_u64(c->flow_req) | 1 : 0 };
}

/* The innermost handling frame open on t, or -1. */
static int handling_frame(const struct thread *t)
{
	for (int i = t->depth - 1; i >= 0; i--)
		if (t->stack[i].kind == FR_RPC)
			return i;
	return -1;
}

/* increaseCallCount on a thread running a handler: the handler returned
 * (the agent counts the response it now awaits), unless this thread is
 * making a call of its own (its send came first). */
void rpc_handle_busy(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_thread *rt = rpc_thread(t);
	struct rpc_proc *p = rpc_proc(j, r->ev.pid);

	if (!rt || !p)
		return;
	if (rt->call_ts) { /* a call's send: its counter is the client one */
		p->client_counter = r->ev.arg[0];
		return;
	}
	if ((p->client_counter && r->ev.arg[0] == p->client_counter) || handling_frame(t) < 0)
		return;
	rt->returned = r->ev.ts;
	rt->busy_counter = r->ev.arg[0];
}

/* The response's arguments on the slice that ends with it. */
static int response_args(struct join *j, const struct ptbpf_rpc *r, struct pf_arg *args)
{
	char what[RPC_FN_LEN], err[RPC_FN_LEN + 32], text[RPC_PAYLOAD_LEN + 1];
	uint32_t type = (uint32_t)r->ev.arg[0];
	int n = 0;

	args[n++] = (struct pf_arg){ .name = "response_type", .type = PF_ARG_STR,
				     .s = rpc_type_name(type) };
	args[n++] = (struct pf_arg){ .name = "response_bytes", .type = PF_ARG_UINT, .u = r->ev.arg[2] };
	if (type == RPC_EXCEPTION) {
		size_t len = r->copied < RPC_PAYLOAD_LEN ? r->copied : RPC_PAYLOAD_LEN;

		memcpy(text, r->payload, len);
		text[len] = 0;
		text[strcspn(text, "\n")] = 0;
		args[n++] = (struct pf_arg){ .name = "error", .type = PF_ARG_STR,
					     .s = rpc_intern(j, text) };
	} else if (rpc_payload_remote_exception(r->payload, r->copied, what, sizeof(what))) {
		snprintf(err, sizeof(err), "RemoteException: %s", what);
		args[n++] = (struct pf_arg){ .name = "error", .type = PF_ARG_STR,
					     .s = rpc_intern(j, err) };
	}
	return n;
}

/* Closes t's frame i at ts (frames left open above it first), with the
 * response's arguments when it is r. */
static void close_handling(struct join *j, struct thread *t, int i, uint64_t ts,
			   const struct ptbpf_rpc *r)
{
	struct pf_arg args[4];
	int n = r ? response_args(j, r, args) : 0;

	if (!r)
		args[n++] = (struct pf_arg){ .name = "responds_later", .type = PF_ARG_BOOL, .b = true };
	join_close_frames_to(j, t, i, ts, args, n);
}

void rpc_handle_settle(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_thread *rt = t->rpc;
	int i = handling_frame(t);
	bool response = r && r->ev.id == RPC_SEND && !(r->ev.arg[0] & RPC_REQUEST_FLAG);

	if (r && r->ev.id == RPC_COMPLETING)
		return; /* the agent's callback on the way to the response */
	if (i >= 0)
		close_handling(j, t, i, rt->returned,
			       response && t->stack[i].key == r->ev.arg[1] ? r : NULL);
	rt->returned = 0;
}

/* A response goes out: an instant on the sending thread, with the flow
 * back to the caller's call; a handling frame still open for it on this
 * thread (no counter probe in this torch) ends here. One that returned
 * without its response (an RRef fetch before the value was there) ends
 * at its return, if its thread had no record since that said so. */
void rpc_handle_response(struct join *j, struct thread *t, const struct ptbpf_rpc *r)
{
	struct rpc_state *s = j->rpc;
	struct rpc_handle *h = NULL;
	struct pf_arg args[6] = { { .name = "message_id", .type = PF_ARG_INT,
				    .i = (int64_t)r->ev.arg[1] } };
	int n = 1, i = handling_frame(t);
	uint64_t flow = 0;

	for (int k = 0; k < s->nhandles; k++) {
		struct rpc_handle *c = &s->handles[k];

		if (c->pid == (int)r->ev.pid && c->id == (int64_t)r->ev.arg[1] &&
		    (!h || c->tid == (int)r->ev.tid))
			h = c;
	}
	if (i >= 0 && t->stack[i].key == r->ev.arg[1])
		close_handling(j, t, i, r->ev.ts, r);
	n += response_args(j, r, args + n);
	if (h && h->tid != (int)r->ev.tid) {
		struct thread *o = join_find_thread(j, h->pid, h->tid);
		int k = o ? handling_frame(o) : -1;

		if (k >= 0 && o->rpc && o->rpc->returned && o->stack[k].key == (uint64_t)h->id)
			rpc_handle_settle(j, o, NULL);
	}
	if (h) {
		struct rpc_call *c = h->caller_pid ? rpc_find_call(s, h->caller_pid, h->id) : NULL;

		if (c) {
			flow = h->flow_resp;
			c->flow_resp = flow;
		}
		*h = s->handles[--s->nhandles];
	} else {
		j->counts.rpc_unmatched++;
	}
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = r->ev.ts,
		   .name = "rpc send response", .category = "rpc", .args = args, .nargs = n,
		   .flows = &flow, .nflows = flow ? 1 : 0 });
}
