// SPDX-License-Identifier: BSD-2-Clause
/*
 * join: the agent's records (RecordFunction begins and ends from its op
 * rings): ops by name, backward nodes, record_function regions, and the
 * CUDA calls its CUPTI callbacks put among them. See join.h.
 */
#define _GNU_SOURCE
#include "record/join_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/gpu_calls.h"
#include "record/gpu_timeline.h"
#include "lib/cuda_cbid.h"
#include "lib/names.h"
#include "lib/text.h"
#include "ptbpf_agent.h"
#include "record/shapes.h"

static const char bwd_prefix[] = "autograd::engine::evaluate_function: ";

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static bool rf_op_eq(const void *val, const void *key)
{
	return !strcmp(((const struct rf_op *)val)->name, key);
}

/* The ops-table index of an agent-recorded op name, added when new, so
 * the summary's per-op totals cover these ops too; -1 once the bounded
 * table is full. */
static int64_t rf_op_index(struct join *j, const char *name)
{
	uint64_t hash = name_hash(name);
	struct rf_op *o = hash_get_eq(&j->rf_ops, hash, rf_op_eq, name);

	if (o)
		return o->op;
	/* Below MAX_RF_OPS ops, rf_ops has room too. */
	if (j->ops->n >= MAX_RF_OPS || op_table_add(j->ops, name, ""))
		return -1;
	o = hash_add(&j->rf_ops, hash);
	if (!o) /* out of memory: the name is added again next time */
		return -1;
	*o = (struct rf_op){ .name = j->ops->name[j->ops->n - 1], .op = j->ops->n - 1 };
	return o->op;
}

/* Kernel and graph launches among the agent-recorded CUDA calls. */
static bool is_launch(const char *name)
{
	static const char *const launches[] = {
		"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
		"cudaGraphLaunch", "cuLaunchKernel", "cuLaunchKernelEx",
		"cuLaunchCooperativeKernel", "cuGraphLaunch",
	};
	size_t n = strcspn(name, "_"); /* "_ptsz", "_v7000" */

	for (size_t i = 0; i < sizeof(launches) / sizeof(launches[0]); i++)
		if (strlen(launches[i]) == n && !strncmp(name, launches[i], n))
			return true;
	return false;
}

/*
 * A CUDA API call the agent recorded (CUPTI callback): a slice on the
 * thread, named and categorized as the profiler names its runtime/driver
 * records. A launch gets a flow from the op it was made in (or the
 * outside_op mark) and, at its CUPTI correlation, the flow to its kernel;
 * copies and sets get that second flow too.
 */
static void rf_api_begin(struct join *j, struct thread *t, const struct ptbpf_named_event *ne,
			 const char *name)
{
	const struct ptbpf_event *e = &ne->ev;
	bool driver = (e->arg[1] & 0x7f) == 1, launch = is_launch(name), op = join_in_op(t);
	struct frame f = { .key = e->key, .ts = e->ts, .seq = NO_SEQ, .kind = FR_USER,
			   .category = driver ? "cuda_driver" : "cuda_runtime",
			   .name = str_set_intern(j->strings, name) };
	struct pf_arg args[3] = { { .name = "correlation", .type = PF_ARG_UINT,
				    .u = (uint32_t)e->arg[0] } };
	uint64_t flow = 0;
	int nargs = 1;

	/* The agent's records carry CUPTI's callback id: written where the
	 * name does not give it (lib/cuda_cbid.h, which readers ask then). */
	if (e->arg[0] >> 32 && cuda_cbid(name, driver) != (int)(e->arg[0] >> 32))
		args[nargs++] = (struct pf_arg){ .name = "cbid", .type = PF_ARG_UINT,
						 .u = e->arg[0] >> 32 };

	if (launch)
		join_count_launch(j, e->pid);
	if (launch && !op)
		args[nargs++] = (struct pf_arg){ .name = "outside_op", .type = PF_ARG_BOOL, .b = true };
	if (launch && op)
		flow = join_launch_flow(j, t, e);
	join_push_frame(j, t, &f, &(struct pf_event){ .args = args, .nargs = nargs,
		   .term_flows = &flow, .nterm = flow ? 1 : 0 });
	if (t->depth < MAX_DRAWN && (launch || strstr(name, "Memcpy") || strstr(name, "Memset")))
		gpu_timeline_correlate(j->dec->timeline, t->track, e->pid, e->ts,
				       (uint32_t)e->arg[0], false);
}

/*
 * A RecordFunction begin, named as torch.profiler names it. aten:: ops are
 * ops (their sequence number starts the forward->backward flow if the op
 * made an autograd node, see rf_end); evaluate_function records are the
 * backward slices; USER_SCOPE records are regions (steps come from
 * Optimizer.step as with the probes); a BACKWARD_FUNCTION record (the
 * node itself, e.g. "AddmmBackward0") ends the flow; anything else is
 * drawn under its name.
 */
void rf_begin(struct join *j, struct thread *t, const struct ptbpf_named_event *ne,
		     const uint8_t *shapes, size_t slen)
{
	char dims[1024], types[1024];
	struct pf_arg args[3];
	struct pf_event extra = { .args = args };
	const struct ptbpf_event *e = &ne->ev;
	int64_t seq = (int64_t)e->arg[0], op;
	struct frame f = { .key = e->key, .ts = e->ts, .seq = NO_SEQ, .kind = FR_USER };
	char name[PTBPF_NAME_LEN * 4];
	uint64_t flow = 0, rflow = 0;

	text_escape(name, sizeof(name), ne->name, PTBPF_NAME_LEN);
	if (e->arg[1] & OPS_SCOPE_CUDA_API) {
		rf_api_begin(j, t, ne, name);
		return;
	}
	switch (e->arg[1]) {
	case 0: /* FUNCTION */
		if (!strncmp(name, bwd_prefix, sizeof(bwd_prefix) - 1)) {
			f.kind = FR_BWD;
		} else if (!strncmp(name, "aten::", 6) && (op = rf_op_index(j, name)) >= 0) {
			f.kind = FR_OP;
			f.op = (uint32_t)op;
			f.seq = seq >= 0 ? (uint64_t)seq : NO_SEQ;
			f.seq_at_begin = seq >= 0;
		} else {
			f.category = "cpu_op";
		}
		break;
	case 1: /* BACKWARD_FUNCTION */
		f.category = "backward_function";
		if (seq >= 0 && u64_set_remove(j->fwd_seqs, ((uint64_t)e->pid << 48) ^ (uint64_t)seq))
			flow = join_bwd_flow_id(e->pid, (uint64_t)seq);
		else if (seq >= 0) /* a SendRpcBackward a request started */
			rflow = rpc_backward_flow(j, e->pid, (uint64_t)seq);
		extra.term_flows = &rflow;
		extra.nterm = rflow ? 1 : 0;
		break;
	case 7: /* USER_SCOPE */
		break;
	default:
		f.category = "cpu_op";
		break;
	}
	if (f.kind != FR_OP)
		f.name = str_set_intern(j->strings, name);
	if (slen && !shapes_format(shapes, slen, dims, sizeof(dims), types, sizeof(types))) {
		args[0] = (struct pf_arg){ .name = "Input Dims", .type = PF_ARG_STR, .s = dims };
		args[1] = (struct pf_arg){ .name = "Input type", .type = PF_ARG_STR, .s = types };
		extra.nargs = 2;
	} else if (slen) {
		j->counts.bad_shapes++;
	}
	/* RecordFunction's own sequence number, as torch.profiler writes it
	 * ("Sequence number"): every op dispatched with autograd keys. */
	if (seq >= 0 && e->arg[1] == 0)
		args[extra.nargs++] = (struct pf_arg){ .name = "sequence_nr", .type = PF_ARG_UINT,
						       .u = (uint64_t)seq };
	join_push_frame(j, t, &f, extra.nargs || extra.nterm ? &extra : NULL);
	if (flow && t->depth > 0 && t->stack[t->depth - 1].drawn) {
		struct pf_arg arg = { .name = "seq", .type = PF_ARG_UINT, .u = (uint64_t)seq };

		j->counts.bwd_flows++;
		pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
			   .name = "backward node", .category = "backward", .args = &arg,
			   .nargs = 1, .term_flows = &flow, .nterm = 1 });
	}
}

/* The thread holding the open frame that RecordFunction key belongs to:
 * t itself, or (an async end) another thread of the process. */
static struct thread *rf_owner(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	struct thread *o;
	uint32_t pos = 0;

	for (int i = t->depth - 1; i >= 0; i--)
		if (t->stack[i].key == e->key && t->stack[i].kind < FR_GPU)
			return t;
	while ((o = hash_next(&j->threads, &pos))) {
		if (o == t || (int)(o->id >> 32) != (int)e->pid)
			continue;
		for (int i = o->depth - 1; i >= 0; i--)
			if (o->stack[i].key == e->key && o->stack[i].kind < FR_GPU)
				return o;
	}
	return t;
}

/* An op keeps its sequence number only if a node was made while it ran:
 * the thread's next number (arg0) moved past it. */
void rf_end(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	t = rf_owner(j, t, e);
	for (int i = t->depth - 1; i >= 0; i--) {
		struct frame *f = &t->stack[i];

		if (f->key == e->key && f->kind < FR_GPU) {
			if (f->seq != NO_SEQ && (int64_t)e->arg[0] <= (int64_t)f->seq)
				f->seq = NO_SEQ;
			break;
		}
	}
	/* Ended by ~RecordFunction while an exception was in flight. */
	join_end_frame(j, t, e, e->arg[1] & 1 ? CLOSE_UNWOUND : CLOSE_END);
}

/* A CUDA call the agent recorded (rf_api_begin): a slice, not an op. */
static bool is_api_call(const struct frame *f)
{
	return f->kind == FR_USER && f->category && !strncmp(f->category, "cuda_", 5);
}

/*
 * A CUDA graph node: made inside a call on thread t (a launch into a
 * capturing stream), it was captured by the innermost op or region open
 * there; its clones (instantiation) were captured with it. Records come
 * in time order with the op rings' (reorder.c), so t's stack is as it was.
 */
void join_graph_node(struct join *j, const struct ptbpf_agent_event *e)
{
	struct ptbpf_agent_graph_node g;
	struct thread *t = join_find_thread(j, (int)e->ev.pid, (int)e->ev.tid);
	const char *op = NULL;
	uint64_t seq = UINT64_MAX;

	memcpy(&g, e->raw, sizeof(g));
	for (int i = t && g.kind == GRAPH_NODE_CREATED ? t->depth - 1 : -1; i >= 0; i--) {
		const struct frame *f = &t->stack[i];

		if (f->kind < FR_GPU && !is_api_call(f)) {
			op = join_frame_name(j, f);
			seq = f->kind == FR_OP && f->seq != NO_SEQ ? f->seq : UINT64_MAX;
			break;
		}
	}
	gpu_timeline_graph_node(j->dec->timeline, (int)e->ev.pid, &g, op, seq);
}
