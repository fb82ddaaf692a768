// SPDX-License-Identifier: BSD-2-Clause
/*
 * join: torch.distributed.rpc messages: a flow from each request's send to
 * its handling, and from the response back. See join.h.
 */
#define _GNU_SOURCE
#include "record/join_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/gpu_calls.h"
#include "record/gpu_timeline.h"
#include "lib/names.h"
#include "ptbpf_agent.h"

#define RPC_REQUEST_FLAG 0x100
#define MAX_RPC_PENDING  4096

static const char *rpc_type_name(uint32_t type)
{
	static const char *const names[] = {
		"SCRIPT_CALL", "SCRIPT_RET", "PYTHON_CALL", "PYTHON_RET", "SCRIPT_REMOTE_CALL",
		"PYTHON_REMOTE_CALL", "REMOTE_RET", "SCRIPT_RREF_FETCH_CALL",
		"PYTHON_RREF_FETCH_CALL", "SCRIPT_RREF_FETCH_RET", "PYTHON_RREF_FETCH_RET",
		"RREF_USER_DELETE", "RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_ACK",
		"FORWARD_AUTOGRAD_REQ", "FORWARD_AUTOGRAD_RESP", "BACKWARD_AUTOGRAD_REQ",
		"BACKWARD_AUTOGRAD_RESP", "CLEANUP_AUTOGRAD_CONTEXT_REQ",
		"CLEANUP_AUTOGRAD_CONTEXT_RESP", "RUN_WITH_PROFILING_REQ",
		"RUN_WITH_PROFILING_RESP", "RREF_BACKWARD_REQ", "RREF_BACKWARD_RESP",
	};
	uint32_t low = type & 0xff;

	if (low < sizeof(names) / sizeof(names[0]))
		return names[low];
	return low == 0x37 ? "EXCEPTION" : "?";
}

/*
 * A message sent or a request taken up: an instant on the thread, with the
 * message's type and id. A request's send and its handling in the other
 * process are joined by a flow: message ids count per sender, so a
 * handling (pid B, id X) takes the oldest unanswered send of id X made by
 * another process.
 */
void rpc_event(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	bool send = e->id == RPC_SEND, request = e->arg[0] & RPC_REQUEST_FLAG;
	int64_t id = (int64_t)e->arg[1];
	struct pf_arg args[2] = {
		{ .name = "type", .type = PF_ARG_STR, .s = rpc_type_name((uint32_t)e->arg[0]) },
		{ .name = "message_id", .type = PF_ARG_INT, .i = id },
	};
	uint64_t flow = 0;

	if (!j->rpc && !(j->rpc = calloc(MAX_RPC_PENDING, sizeof(*j->rpc))))
		return;
	if ((e->arg[0] & ~0x3ffu) || !(e->arg[0] & 0x300)) /* not a MessageType: skip */
		return;
	if (request && send && j->nrpc < MAX_RPC_PENDING) {
		flow = hash_pair(((uint64_t)e->pid << 32) ^ (uint64_t)id, e->ts) | 1;
		j->rpc[j->nrpc++] = (struct rpc_pending){ .pid = (int)e->pid, .id = id, .flow = flow };
	} else if (request) {
		for (int i = 0; i < j->nrpc; i++) {
			if (j->rpc[i].id != id || j->rpc[i].pid == (int)e->pid)
				continue;
			flow = j->rpc[i].flow;
			j->rpc[i] = j->rpc[--j->nrpc];
			j->counts.rpc_flows++;
			break;
		}
	}
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
		   .name = send ? (request ? "rpc send request" : "rpc send response") :
				  "rpc handle request",
		   .category = "rpc", .args = args, .nargs = 2,
		   .flows = send && flow ? &flow : NULL, .nflows = send && flow ? 1 : 0,
		   .term_flows = !send && flow ? &flow : NULL, .nterm = !send && flow ? 1 : 0 });
}
