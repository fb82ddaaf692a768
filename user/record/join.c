// SPDX-License-Identifier: BSD-2-Clause
/* Ring records -> slices. See join.h. */
#define _GNU_SOURCE
#include "record/join_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "record/gpu_timeline.h"
#include "record/gpu_calls.h"
#include "record/memtrack.h"
#include "lib/names.h"
#include "record/pystack.h"
#include "record/shapes.h"
#include "ptbpf_agent.h"
#include "attach/target.h"
#include "lib/text.h"


uint64_t join_bwd_flow_id(int pid, uint64_t seq)
{
	return hash_u64(((uint64_t)pid << 40) ^ seq ^ 0x5054425046ULL) | 1;
}

struct join *join_new(struct pf_writer *w, struct op_table *ops, bool entries_only,
		      const struct decoders *dec)
{
	struct join *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->entries_only = entries_only;
	j->w = w;
	j->ops = ops;
	hash_init(&j->threads, MAX_THREADS, sizeof(struct thread));
	hash_init(&j->rf_ops, MAX_RF_OPS, sizeof(struct rf_op));
	j->strings = str_set_new(1 << 16);
	j->fwd_seqs = u64_set_new(1 << 20);
	j->dec = dec;
	if (!j->strings || !j->fwd_seqs) {
		join_free(j);
		return NULL;
	}
	return j;
}

void join_free(struct join *j)
{
	struct thread *t;
	uint32_t pos = 0;

	if (!j)
		return;
	while ((t = hash_next(&j->threads, &pos))) {
		free(t->stack);
		free(t->rpc);
	}
	for (int i = 0; i < j->nprocs; i++)
		str_map_free(j->procs[i].node_names);
	hash_free(&j->threads);
	free(j->procs);
	free(j->op_calls);
	free(j->op_total);
	free(j->op_self);
	hash_free(&j->rf_ops);
	rpc_free(j);
	str_set_free(j->strings);
	u64_set_free(j->fwd_seqs);
	free(j);
}

struct process *join_find_process(struct join *j, int pid)
{
	for (int i = 0; i < j->nprocs; i++)
		if (j->procs[i].pid == pid)
			return &j->procs[i];
	return NULL;
}

static struct process *add_process(struct join *j, int pid, const char *name,
				   const char *cmdline, const char *const *labels, int nlabels)
{
	struct process *p = realloc(j->procs, (j->nprocs + 1) * sizeof(*p));
	const char *argv[1] = { cmdline };

	if (!p)
		return NULL;
	j->procs = p;
	p = &j->procs[j->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->track = pf_track_process(j->w, pid, name, argv, cmdline && *cmdline ? 1 : 0,
				    labels, nlabels);
	p->steps_track = pf_track_child(j->w, p->track, "Steps (Optimizer.step)");
	p->node_names = str_map_new(4096);
	return p;
}

/* "python3 [rank 3/8]": the rank, where the environment gives one, names
 * the process, so merged ranks read apart; all variables are labels. */
void join_add_process(struct join *j, const struct target *t)
{
	const char *labels[TARGET_MAX_LABELS], *rank = target_label(t, "RANK"),
		   *world = target_label(t, "WORLD_SIZE");
	char name[200], base[128];

	if (join_find_process(j, t->pid))
		return;
	if (t->ns_pid != t->pid)
		snprintf(base, sizeof(base), "%s (pid %d in its namespace)", t->comm, t->ns_pid);
	else
		snprintf(base, sizeof(base), "%s", t->comm);
	if (rank)
		snprintf(name, sizeof(name), "%s [rank %s%s%s]", base, rank, world ? "/" : "",
			 world ? world : "");
	else
		snprintf(name, sizeof(name), "%s", base);
	for (int i = 0; i < t->nlabels; i++)
		labels[i] = t->labels[i];
	add_process(j, t->pid, name, t->cmdline, labels, t->nlabels);
}

static struct process *get_process(struct join *j, int pid)
{
	struct process *p = join_find_process(j, pid);
	char comm[64];

	if (p)
		return p;
	target_thread_name(pid, pid, comm, sizeof(comm));
	return add_process(j, pid, comm, NULL, NULL, 0);
}

uint64_t join_process_track(void *ctx, int pid)
{
	struct process *p = get_process(ctx, pid);

	return p ? p->track : 0;
}

static uint64_t thread_id(int pid, int tid)
{
	return (uint64_t)pid << 32 | (uint32_t)tid;
}

/* pid/tid's thread, added (with its track) when new; NULL when the table
 * is full (the caller counts the record). */
static struct thread *get_thread(struct join *j, int pid, int tid)
{
	uint64_t id = thread_id(pid, tid), key = hash_u64(id);
	struct thread *t = hash_get(&j->threads, key);
	char name[64];

	if (t && t->track)
		return t;
	/* New, or its process exec'd: a thread of the new image. */
	if (!t && !(t = hash_add(&j->threads, key)))
		return NULL;
	t->id = id;
	get_process(j, pid);
	target_thread_name(pid, tid, name, sizeof(name));
	t->track = pf_track_thread(j->w, pid, tid, name);
	return t;
}

struct thread *join_find_thread(struct join *j, int pid, int tid)
{
	struct thread *t = hash_get(&j->threads, hash_u64(thread_id(pid, tid)));

	return t && t->track ? t : NULL;
}

uint64_t join_thread_track(void *ctx, int pid, int tid)
{
	struct thread *t = get_thread(ctx, pid, tid);

	return t ? t->track : 0;
}

const char *join_frame_name(const struct join *j, const struct frame *f)
{
	if (f->kind == FR_OP)
		return f->op < j->ops->n ? j->ops->name[f->op] : "aten::?";
	return f->name;
}

static const char *frame_category(const struct frame *f)
{
	if (f->category)
		return f->category;
	if (f->kind == FR_OP)
		return "cpu_op";
	if (f->kind == FR_GPU)
		return f->category;
	if (f->kind == FR_BWD)
		return "backward";
	if (!strncmp(f->name, "enumerate(DataLoader)", 21))
		return "dataloader";
	return "user_annotation";
}

/* Opens a frame; `extra` (may be NULL) adds arguments and flows. */
void join_push_frame(struct join *j, struct thread *t, const struct frame *in,
		       const struct pf_event *extra)
{
	struct pf_event e = extra ? *extra : (struct pf_event){ 0 };
	struct pf_arg args[4];
	struct frame *f;

	if (!t->stack && !(t->stack = calloc(MAX_STACK, sizeof(*t->stack)))) {
		j->counts.too_deep++;
		return;
	}
	if (t->depth >= MAX_STACK) {
		j->counts.too_deep++;
		return;
	}
	f = &t->stack[t->depth++];
	*f = *in;
	if (t->py_stack && t->stack_ts == f->ts) {
		f->py_stack = t->py_stack;
		t->py_stack = NULL;
	}
	if (f->kind == FR_OP) {
		struct process *p = join_find_process(j, (int)(t->id >> 32));

		if (p)
			p->ops++;
	}
	f->drawn = t->depth <= MAX_DRAWN;
	if (!f->drawn) {
		j->counts.too_deep++;
		return;
	}
	if (f->kind == FR_OP && f->op < j->ops->n && j->ops->overload[f->op][0] &&
	    e.nargs < (int)(sizeof(args) / sizeof(args[0]))) {
		for (int i = 0; i < e.nargs; i++)
			args[i] = e.args[i];
		args[e.nargs++] = (struct pf_arg){ .name = "overload", .type = PF_ARG_STR,
						   .s = j->ops->overload[f->op] };
		e.args = args;
	}
	e.track = t->track;
	e.ts = f->ts;
	e.name = join_frame_name(j, f);
	e.category = frame_category(f);
	pf_slice_begin(j->w, &e);
}


static bool grow_op_stats(struct join *j)
{
	uint32_t cap = j->ops->n, old = j->op_cap;
	uint64_t **arrays[] = { &j->op_calls, &j->op_total, &j->op_self };

	for (int i = 0; i < 3; i++) {
		uint64_t *a = realloc(*arrays[i], cap * sizeof(uint64_t));

		if (!a)
			return false;
		memset(a + old, 0, (cap - old) * sizeof(uint64_t));
		*arrays[i] = a;
	}
	j->op_cap = cap;
	return true;
}

static void account_op(struct join *j, struct thread *t, const struct frame *f,
		       uint64_t dur)
{
	if (t->depth > 0)
		t->stack[t->depth - 1].child_ns += dur;
	if (f->kind != FR_OP || f->op >= j->ops->n)
		return;
	if (f->op >= j->op_cap && !grow_op_stats(j))
		return;
	j->op_calls[f->op]++;
	j->op_total[f->op] += dur;
	j->op_self[f->op] += dur > f->child_ns ? dur - f->child_ns : 0;
}

/* Closes the innermost frame; `extra` (may be NULL) adds end arguments. */
static void close_top_with(struct join *j, struct thread *t, uint64_t ts, enum close_why why,
			   const struct pf_arg *extra, int nextra)
{
	struct frame f = t->stack[--t->depth];
	uint64_t dur = ts > f.ts ? ts - f.ts : 0, flow = 0;
	static const char *const why_name[] = {
		[CLOSE_UNWOUND] = "unwound_by_exception", [CLOSE_MISSED] = "end_not_seen",
		[CLOSE_EXIT] = "cut_by_exit", [CLOSE_STOP] = "cut_at_trace_end",
		[CLOSE_LOST] = "cut_by_lost_records", [CLOSE_EXEC] = "cut_by_exec",
	};
	struct pf_arg args[4 + GPU_MAX_ARGS];
	int nargs = 0;

	account_op(j, t, &f, dur);
	j->counts.unwound += why == CLOSE_UNWOUND;
	j->counts.end_missed += why == CLOSE_MISSED;
	j->counts.cut_by_exit += why == CLOSE_EXIT;
	j->counts.cut_at_stop += why == CLOSE_STOP;
	j->counts.cut_by_loss += why == CLOSE_LOST;
	j->counts.cut_by_exec += why == CLOSE_EXEC;
	if (!f.drawn)
		return;
	j->counts.frames++;
	if (why != CLOSE_END)
		args[nargs++] = (struct pf_arg){ .name = why_name[why], .type = PF_ARG_BOOL,
						 .b = true };
	if (f.alloc_bytes)
		args[nargs++] = (struct pf_arg){ .name = "alloc_bytes", .type = PF_ARG_UINT,
						 .u = f.alloc_bytes };
	if (f.py_stack)
		args[nargs++] = (struct pf_arg){ .name = "py_stack", .type = PF_ARG_STR,
						 .s = f.py_stack };
	for (int i = 0; i < nextra && nargs < (int)(sizeof(args) / sizeof(args[0]) - 1); i++)
		args[nargs++] = extra[i];
	if (f.seq != NO_SEQ) {
		int pid = t->id >> 32;

		if (!f.seq_at_begin)
			args[nargs++] = (struct pf_arg){ .name = "seq", .type = PF_ARG_UINT,
							 .u = f.seq };
		/* The first frame to close with a sequence number (the
		 * innermost: the op that made the node) starts its flow. */
		uint64_t k = ((uint64_t)pid << 48) ^ f.seq;

		if (!u64_set_has(j->fwd_seqs, k) && u64_set_add(j->fwd_seqs, k))
			flow = join_bwd_flow_id(pid, f.seq);
	}
	pf_slice_end(j->w, &(struct pf_event){ .track = t->track, .ts = ts, .args = args,
		     .nargs = nargs, .flows = &flow, .nflows = flow ? 1 : 0 });
}

static void close_top(struct join *j, struct thread *t, uint64_t ts, enum close_why why)
{
	close_top_with(j, t, ts, why, NULL, 0);
}

void join_close_frames_to(struct join *j, struct thread *t, int i, uint64_t ts,
		     const struct pf_arg *args, int nargs)
{
	if (i < 0 || i >= t->depth)
		return;
	while (t->depth - 1 > i)
		close_top(j, t, ts, CLOSE_MISSED);
	close_top_with(j, t, ts, CLOSE_END, args, nargs);
}

static bool key_class_matches(uint8_t kind, uint16_t ev_kind)
{
	if (ev_kind == EV_RF_END)
		return kind != FR_GPU && kind != FR_RPC;
	if (ev_kind == EV_USER_END)
		return kind == FR_USER;
	if (ev_kind == EV_GPU_RET)
		return kind == FR_GPU;
	return kind == (ev_kind == EV_BWD_END ? FR_BWD : FR_OP);
}

/* Closes the frame whose key matches, and any frame left open above it. */
void join_end_frame(struct join *j, struct thread *t, const struct ptbpf_event *e,
		      enum close_why why)
{
	struct gpu_slice gs;
	int i;

	for (i = t->depth - 1; i >= 0; i--)
		if (t->stack[i].key == e->key && key_class_matches(t->stack[i].kind, e->kind))
			break;
	if (i < 0) {
		j->counts.end_unmatched++;
		return;
	}
	while (t->depth - 1 > i)
		close_top(j, t, e->ts, CLOSE_MISSED);
	if (t->stack[i].kind == FR_USER &&
	    !strncmp(t->stack[i].name, "Optimizer.step#", 15)) {
		struct process *p = get_process(j, e->pid);

		close_top(j, t, e->ts, why);
		if (p && p->last_step_end) {
			struct pf_arg tid = { .name = "tid", .type = PF_ARG_INT, .i = e->tid };
			char name[48];

			snprintf(name, sizeof(name), "ProfilerStep#%lu", (unsigned long)p->step);
			pf_slice_begin(j->w, &(struct pf_event){ .track = p->steps_track,
				       .ts = p->last_step_end, .name = name, .category = "step",
				       .args = &tid, .nargs = 1 });
			pf_slice_end(j->w, &(struct pf_event){ .track = p->steps_track,
				     .ts = e->ts });
			j->counts.steps++;
		}
		if (p) {
			p->last_step_end = e->ts;
			p->step++;
		}
		return;
	}
	if (e->kind == EV_GPU_RET) {
		gpu_call_end(j->dec->calls, e, &gs);
		close_top_with(j, t, e->ts, CLOSE_END, gs.args, gs.nargs);
		return;
	}
	close_top(j, t, e->ts, why);
}

/* __cxa_begin_catch at SP: frames entered at or below SP were unwound
 * (regions and RPC handling are keyed by object and message id: they stay). */
static void unwind(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	while (t->depth > 0) {
		struct frame *f = &t->stack[t->depth - 1];

		if (f->kind == FR_USER || f->kind == FR_RPC || f->key > e->key)
			break;
		close_top(j, t, e->ts, CLOSE_UNWOUND);
	}
}

/* "autograd::engine::evaluate_function: AddmmBackward0", as the profiler
 * names it, from the Node's mangled class name. */
static const char *node_label(struct join *j, const char *mangled, uint64_t vptr)
{
	char pretty[256], label[300];
	const char *s = pretty;

	if (!mangled || !mangled[0] || demangle_type(mangled, pretty, sizeof(pretty)))
		snprintf(pretty, sizeof(pretty), "Node@%#lx", (unsigned long)vptr);
	if (!strncmp(s, "torch::autograd::generated::", 28))
		s += 28;
	snprintf(label, sizeof(label), "autograd::engine::evaluate_function: %s", s);
	return str_set_intern(j->strings, label);
}

/* Names arrive once per class (EV_NAMED_NODE_TYPE); should that record have
 * been lost, read the name from the (still running) target. */
static const char *node_name(struct join *j, int pid, uint64_t vptr)
{
	struct process *p = get_process(j, pid);
	const char *s = p ? str_map_get(p->node_names, vptr) : NULL;
	char mangled[256];
	uint64_t ti = 0, np = 0;

	if (s)
		return s;
	if (target_read(pid, vptr - 8, &ti, 8) || target_read(pid, ti + 8, &np, 8) ||
	    target_read_str(pid, np, mangled, sizeof(mangled)))
		mangled[0] = 0;
	s = node_label(j, mangled, vptr);
	if (p && mangled[0])
		str_map_put(p->node_names, vptr, s);
	return s;
}

void join_node_type(struct join *j, const struct ptbpf_named_event *ne)
{
	struct process *p = get_process(j, ne->ev.pid);
	char mangled[PTBPF_NAME_LEN + 1];

	memcpy(mangled, ne->name, PTBPF_NAME_LEN);
	mangled[PTBPF_NAME_LEN] = 0;
	if (p && mangled[0])
		str_map_put(p->node_names, ne->ev.key, node_label(j, mangled, ne->ev.key));
}

static void bwd_begin(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	uint64_t seq = e->arg[1], flow = 0;
	struct frame f = { .key = e->key, .ts = e->ts, .seq = NO_SEQ, .kind = FR_BWD,
			   .name = node_name(j, e->pid, e->arg[0]) };
	struct pf_arg args[2] = {
		{ .name = "seq", .type = PF_ARG_UINT, .u = seq },
		{ .name = "fwd_thread_id", .type = PF_ARG_UINT, .u = e->arg[2] },
	};
	int depth = t->depth;

	join_push_frame(j, t, &f, NULL);
	if (t->depth == depth || !t->stack[depth].drawn || seq == NO_SEQ)
		return;
	if (u64_set_remove(j->fwd_seqs, ((uint64_t)e->pid << 48) ^ seq)) {
		flow = join_bwd_flow_id(e->pid, seq);
		j->counts.bwd_flows++;
	} else { /* a SendRpcBackward a request started (distributed autograd) */
		flow = rpc_backward_flow(j, e->pid, seq);
	}
	/* Arguments and the flow's end ride on a zero-length instant nested in
	 * the slice, since the begin was already written without them. */
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
		   .name = "backward node", .category = "backward", .args = args, .nargs = 2,
		   .term_flows = &flow, .nterm = flow ? 1 : 0 });
}

static void attribute_seq(struct thread *t, uint64_t seq)
{
	for (int i = t->depth - 1; i >= 0; i--) {
		if (t->stack[i].kind == FR_OP) {
			t->stack[i].seq = seq;
			return;
		}
	}
}

/* --entries-only: an op or backward node as a point in time. */
static void entry_instant(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	struct frame f = { .op = e->id, .kind = e->kind == EV_OP_BEGIN ? FR_OP : FR_BWD };

	if (f.kind == FR_BWD)
		f.name = node_name(j, e->pid, e->arg[0]);
	else if (e->id < j->ops->n && e->id >= j->op_cap)
		grow_op_stats(j);
	if (f.kind == FR_OP && e->id < j->op_cap)
		j->op_calls[e->id]++;
	j->counts.frames++;
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
		   .name = join_frame_name(j, &f), .category = frame_category(&f) });
}


static void close_thread(struct join *j, struct thread *t, uint64_t ts, enum close_why why)
{
	while (t->depth > 0)
		close_top(j, t, ts, why);
}

/* A Python stack belongs to the op or call that opened at its ts: the
 * innermost frame if it is open already, else the next one to open. */
static void py_stack(struct join *j, struct thread *t, const void *data, uint64_t size)
{
	const struct ptbpf_event *e = data;
	char buf[PY_MAX_FRAMES * 256];
	const char *s;

	if (size < sizeof(*e) || e->arg[1] != PY_STACK_OK ||
	    !pystack_format(j->dec->py, data, size, buf, sizeof(buf))) {
		j->counts.py_stacks_empty++;
		return;
	}
	s = str_set_intern(j->strings, buf);
	j->counts.py_stacks++;
	if (t->depth > 0 && t->stack[t->depth - 1].ts == e->ts && !t->stack[t->depth - 1].py_stack) {
		t->stack[t->depth - 1].py_stack = s;
	} else {
		t->py_stack = s;
		t->stack_ts = e->ts;
	}
}

/* Keeps the thread's entry (its track) but not its stack: processes that
 * churn threads must not grow the loader. */
static void thread_exit(struct join *j, struct thread *t, uint64_t ts)
{
	close_thread(j, t, ts, CLOSE_EXIT);
	free(t->stack);
	t->stack = NULL;
	free(t->rpc);
	t->rpc = NULL;
}

/* Ends may be among the lost records: rather than leave a frame open to
 * the end of the trace, what is open stops here; and no step is drawn
 * across the gap (its bounds are not known). */
static void ops_gap(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	struct process *p = join_find_process(j, (int)e->pid);
	struct pf_arg args[2] = {
		{ .name = "lost_records", .type = PF_ARG_UINT, .u = e->arg[0] },
		{ .name = "lost_ops", .type = PF_ARG_UINT, .u = e->arg[1] },
	};

	close_thread(j, t, e->ts, CLOSE_LOST);
	if (p)
		p->last_step_end = 0;
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
		   .name = "op records lost here (ptbpf fell behind)", .category = "ptbpf",
		   .args = args, .nargs = 2 });
}

/* A record_function region (uprobes: its name read at its begin). */
static void user_begin(struct join *j, struct thread *t, const struct ptbpf_named_event *ne)
{
	char name[PTBPF_NAME_LEN * 4];

	text_escape(name, sizeof(name), ne->name, PTBPF_NAME_LEN);
	join_push_frame(j, t, &(struct frame){ .key = ne->ev.key, .ts = ne->ev.ts, .seq = NO_SEQ,
		   .kind = FR_USER, .name = str_set_intern(j->strings, name) }, NULL);
}

/* An allocation belongs to the op that made it: the innermost frame open
 * on the thread (torch.profiler's "self" memory). */
static void own_alloc(struct thread *t, const struct ptbpf_event *e)
{
	if ((int64_t)e->arg[0] > 0 && t->depth > 0)
		t->stack[t->depth - 1].alloc_bytes += e->arg[0];
}

int join_thread_event(struct join *j, const void *data, uint64_t size)
{
	const struct ptbpf_event *e = data;
	struct thread *t = get_thread(j, e->pid, e->tid);

	if (!t) {
		j->counts.no_thread++;
		return 0;
	}
	if (t->rpc && e->kind != EV_RPC) /* a handler's return, decided now */
		rpc_other_event(j, t);
	if (j->entries_only && (e->kind == EV_OP_BEGIN || e->kind == EV_BWD_BEGIN)) {
		entry_instant(j, t, e);
		return 0;
	}
	switch (e->kind) {
	case EV_OP_BEGIN:
		join_push_frame(j, t, &(struct frame){ .key = e->key, .ts = e->ts, .op = e->id,
			   .seq = NO_SEQ, .kind = FR_OP }, NULL);
		break;
	case EV_OP_END:
	case EV_BWD_END:
	case EV_USER_END:
	case EV_GPU_RET:
		join_end_frame(j, t, e, CLOSE_END);
		break;
	case EV_GPU_CALL:
		/* Older captures (--raw) end before the attributes. */
		if (size >= offsetof(struct ptbpf_gpu_call, attr)) {
			struct ptbpf_gpu_call c = { 0 };

			memcpy(&c, data, size < sizeof(c) ? size : sizeof(c));
			gpu_begin(j, t, &c);
		}
		break;
	case EV_AGENT_CORR:
		if (t->depth < MAX_DRAWN)
			gpu_timeline_correlate(j->dec->timeline, t->track, e->pid, e->ts, e->arg[0],
					       true);
		break;
	case EV_UNWIND:
		unwind(j, t, e);
		break;
	case EV_BWD_BEGIN:
		bwd_begin(j, t, e);
		break;
	case EV_SEQ:
		attribute_seq(t, e->arg[0]);
		break;
	case EV_THREAD_EXIT:
		thread_exit(j, t, e->ts);
		break;
	case EV_RPC:
		rpc_event(j, t, data, size);
		break;
	case EV_NAMED_RF_BEGIN:
		if (size >= sizeof(struct ptbpf_named_event))
			rf_begin(j, t, data, (const uint8_t *)data + sizeof(struct ptbpf_named_event),
				 size - sizeof(struct ptbpf_named_event));
		break;
	case EV_RF_END:
		rf_end(j, t, e);
		break;
	case EV_OPS_GAP:
		ops_gap(j, t, e);
		break;
	case EV_PY_STACK:
		py_stack(j, t, data, size);
		break;
	case EV_MEM:
		own_alloc(t, e);
		break;
	case EV_NAMED_USER_BEGIN:
		if (size >= sizeof(struct ptbpf_named_event))
			user_begin(j, t, data);
		break;
	}
	return 0;
}

void join_process_gone(struct join *j, int pid, uint64_t ts)
{
	struct thread *t;
	uint32_t pos = 0;

	while ((t = hash_next(&j->threads, &pos)))
		if ((int)(t->id >> 32) == pid)
			close_thread(j, t, ts, CLOSE_EXIT);
	rpc_close_calls(j, pid, ts);
}

void join_process_exec(struct join *j, int pid, uint64_t ts)
{
	struct process *p = join_find_process(j, pid);
	struct thread *t;
	uint32_t pos = 0;

	while ((t = hash_next(&j->threads, &pos))) {
		if ((int)(t->id >> 32) != pid)
			continue;
		close_thread(j, t, ts, CLOSE_EXEC);
		t->track = 0;
	}
	if (p) {
		pf_instant(j->w, &(struct pf_event){ .track = p->track, .ts = ts,
			   .name = "exec: a new process image follows", .category = "process" });
		p->pid = -pid; /* not found again */
	}
}

void join_ops_no_ring(struct join *j, int pid, uint64_t ts, uint64_t records, uint64_t ops)
{
	struct process *p = get_process(j, pid);
	struct pf_arg args[2] = {
		{ .name = "lost_records", .type = PF_ARG_UINT, .u = records },
		{ .name = "lost_ops", .type = PF_ARG_UINT, .u = ops },
	};

	if (p)
		pf_instant(j->w, &(struct pf_event){ .track = p->track, .ts = ts,
			   .name = "op records lost (threads found no free ring)",
			   .category = "ptbpf", .args = args, .nargs = 2 });
}

void join_finish(struct join *j, uint64_t ts)
{
	struct thread *t;
	uint32_t pos = 0;

	while ((t = hash_next(&j->threads, &pos)))
		close_thread(j, t, ts, CLOSE_STOP);
	rpc_close_calls(j, -1, ts);
}

const struct join_counts *join_counts(const struct join *j)
{
	return &j->counts;
}

static const struct join *sort_ctx;

static int by_total_desc(const void *a, const void *b)
{
	uint64_t ta = sort_ctx->op_total[((const struct op_stat *)a)->op];
	uint64_t tb = sort_ctx->op_total[((const struct op_stat *)b)->op];

	return ta < tb ? 1 : ta > tb ? -1 : 0;
}

int join_process_stats(const struct join *j, struct join_proc_stats *out, int max)
{
	int n = 0;

	for (int i = 0; i < j->nprocs && n < max; i++)
		out[n++] = (struct join_proc_stats){
			.pid = j->procs[i].pid, .ops = j->procs[i].ops,
			.launches = j->procs[i].launches };
	return n;
}

int join_top_ops(const struct join *j, struct op_stat *out, int max)
{
	struct op_stat *all;
	uint32_t n = 0;
	int k;

	all = calloc(j->op_cap + 1, sizeof(*all));
	if (!all)
		return 0;
	for (uint32_t i = 0; i < j->op_cap; i++)
		if (j->op_calls[i])
			all[n++] = (struct op_stat){ .op = i, .calls = j->op_calls[i],
						     .total_ns = j->op_total[i],
						     .self_ns = j->op_self[i] };
	sort_ctx = j;
	qsort(all, n, sizeof(*all), by_total_desc);
	k = n < (uint32_t)max ? (int)n : max;
	memcpy(out, all, k * sizeof(*out));
	free(all);
	return k;
}
