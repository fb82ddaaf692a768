// SPDX-License-Identifier: BSD-2-Clause
/*
 * join: GPU API calls (uprobes on the CUDA/HIP/NCCL libraries) as slices
 * in the op that issued them, and the op -> launch flows. See join.h.
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

void join_count_launch(struct join *j, int pid)
{
	struct process *p = join_find_process(j, pid);

	if (p)
		p->launches++;
}

/* In an op: an aten op, or (from the agent) another FUNCTION-scope
 * record such as "Torch-Compiled Region", which the profiler draws as an
 * op too. */
bool join_in_op(const struct thread *t)
{
	for (int i = t->depth - 1; i >= 0; i--)
		if (t->stack[i].kind == FR_OP ||
		    (t->stack[i].category && !strcmp(t->stack[i].category, "cpu_op")))
			return true;
	return false;
}

/* A launch inside an op gets a flow from the op: an instant in the op
 * just before the launch starts it (the op's begin is already written).
 * Its id, for the launch slice to end it; 0 past the drawn depth. */
uint64_t join_launch_flow(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	uint64_t ts, flow;

	if (t->depth >= MAX_DRAWN)
		return 0;
	ts = e->ts - 1 > t->stack[t->depth - 1].ts ? e->ts - 1 : t->stack[t->depth - 1].ts;
	flow = hash_u64(((uint64_t)e->tid << 32) ^ e->ts ^ 0x4c41554e4348ULL) | 1;
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = ts, .name = "launch",
		   .category = "join_launch_flow", .flows = &flow, .nflows = 1 });
	j->counts.launch_flows++;
	return flow;
}

/* A GPU API call opens a slice in whatever op issued it; a launch inside
 * an op also gets the op's flow (join_launch_flow). */
void gpu_begin(struct join *j, struct thread *t, const struct ptbpf_gpu_call *c)
{
	struct frame f = { .key = c->ev.key, .ts = c->ev.ts, .seq = NO_SEQ, .kind = FR_GPU };
	bool op = join_in_op(t);
	struct gpu_slice s;
	uint64_t flow = 0;

	gpu_call_begin(j->dec->calls, c, op, &s);
	if (s.launch)
		join_count_launch(j, c->ev.pid);
	f.name = s.name;
	f.category = s.category;
	if (s.launch && op)
		flow = join_launch_flow(j, t, &c->ev);
	join_push_frame(j, t, &f, &(struct pf_event){ .args = s.args, .nargs = s.nargs,
		   .term_flows = &flow, .nterm = flow ? 1 : 0 });
}
