// SPDX-License-Identifier: BSD-2-Clause
/* Ring records -> slices. See join.h. */
#define _GNU_SOURCE
#include "record/join.h"

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

/* trace_processor drops slices nested deeper than 512 on one track; keep a
 * margin. Frames past MAX_STACK are not even kept (counted as too deep). */
#define MAX_DRAWN 500
#define MAX_STACK 2048
#define NO_SEQ UINT64_MAX

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
};

struct thread {
	uint64_t id; /* pid << 32 | tid */
	uint64_t track;
	uint64_t stack_ts;    /* a Python stack that came before its frame: */
	const char *py_stack; /* the frame opening at stack_ts gets it */
	int depth;
	struct frame *stack; /* MAX_STACK, allocated on first push */
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
	uint32_t *rf_ops; /* op name -> ops index + 1, for agent-recorded ops */
	struct rpc_pending { int pid; int64_t id; uint64_t flow; } *rpc; /* unmatched sends */
	int nrpc;
	uint32_t rf_cap;
	struct thread *threads; /* open addressing on id */
	uint32_t nthreads, cap;
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

static uint64_t bwd_flow_id(int pid, uint64_t seq)
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
	j->cap = 64;
	j->threads = calloc(j->cap, sizeof(*j->threads));
	j->strings = str_set_new(1 << 16);
	j->fwd_seqs = u64_set_new(1 << 20);
	j->dec = dec;
	if (!j->threads || !j->strings || !j->fwd_seqs) {
		join_free(j);
		return NULL;
	}
	return j;
}

void join_free(struct join *j)
{
	if (!j)
		return;
	for (uint32_t i = 0; i < j->cap; i++)
		free(j->threads[i].stack);
	for (int i = 0; i < j->nprocs; i++)
		str_map_free(j->procs[i].node_names);
	free(j->threads);
	free(j->procs);
	free(j->op_calls);
	free(j->op_total);
	free(j->op_self);
	free(j->rf_ops);
	free(j->rpc);
	str_set_free(j->strings);
	u64_set_free(j->fwd_seqs);
	free(j);
}

static struct process *find_process(struct join *j, int pid)
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

	if (find_process(j, t->pid))
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
	struct process *p = find_process(j, pid);
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

static int grow_threads(struct join *j)
{
	uint32_t cap = j->cap * 2;
	struct thread *t = calloc(cap, sizeof(*t));

	if (!t)
		return -1;
	for (uint32_t i = 0; i < j->cap; i++) {
		uint32_t h;

		if (!j->threads[i].id)
			continue;
		for (h = hash_u64(j->threads[i].id) & (cap - 1); t[h].id; h = (h + 1) & (cap - 1))
			;
		t[h] = j->threads[i];
	}
	free(j->threads);
	j->threads = t;
	j->cap = cap;
	return 0;
}

static struct thread *get_thread(struct join *j, int pid, int tid)
{
	uint64_t id = (uint64_t)pid << 32 | (uint32_t)tid;
	struct thread *t;
	char name[64];
	uint32_t h;

	for (h = hash_u64(id) & (j->cap - 1); j->threads[h].id; h = (h + 1) & (j->cap - 1)) {
		t = &j->threads[h];
		if (t->id != id)
			continue;
		if (!t->track) { /* its process exec'd: a thread of the new image */
			get_process(j, pid);
			target_thread_name(pid, tid, name, sizeof(name));
			t->track = pf_track_thread(j->w, pid, tid, name);
		}
		return t;
	}
	if ((j->nthreads + 1) * 2 > j->cap) {
		if (grow_threads(j))
			return NULL;
		return get_thread(j, pid, tid);
	}
	t = &j->threads[h];
	t->id = id;
	j->nthreads++;
	get_process(j, pid);
	target_thread_name(pid, tid, name, sizeof(name));
	t->track = pf_track_thread(j->w, pid, tid, name);
	return t;
}

static const char *frame_name(const struct join *j, const struct frame *f)
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
static void push_frame(struct join *j, struct thread *t, const struct frame *in,
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
		struct process *p = find_process(j, (int)(t->id >> 32));

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
	e.name = frame_name(j, f);
	e.category = frame_category(f);
	pf_slice_begin(j->w, &e);
}

enum close_why { CLOSE_END, CLOSE_UNWOUND, CLOSE_MISSED, CLOSE_EXIT, CLOSE_STOP, CLOSE_LOST, CLOSE_EXEC };

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

		args[nargs++] = (struct pf_arg){ .name = "seq", .type = PF_ARG_UINT, .u = f.seq };
		/* The first frame to close with a sequence number (the
		 * innermost: the op that made the node) starts its flow. */
		uint64_t k = ((uint64_t)pid << 48) ^ f.seq;

		if (!u64_set_has(j->fwd_seqs, k) && u64_set_add(j->fwd_seqs, k))
			flow = bwd_flow_id(pid, f.seq);
	}
	pf_slice_end(j->w, &(struct pf_event){ .track = t->track, .ts = ts, .args = args,
		     .nargs = nargs, .flows = &flow, .nflows = flow ? 1 : 0 });
}

static void close_top(struct join *j, struct thread *t, uint64_t ts, enum close_why why)
{
	close_top_with(j, t, ts, why, NULL, 0);
}

static bool key_class_matches(uint8_t kind, uint16_t ev_kind)
{
	if (ev_kind == EV_RF_END)
		return kind != FR_GPU;
	if (ev_kind == EV_USER_END)
		return kind == FR_USER;
	if (ev_kind == EV_GPU_RET)
		return kind == FR_GPU;
	return kind == (ev_kind == EV_BWD_END ? FR_BWD : FR_OP);
}

/* Closes the frame whose key matches, and any frame left open above it. */
static void end_frame(struct join *j, struct thread *t, const struct ptbpf_event *e,
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
			char name[48];

			snprintf(name, sizeof(name), "ProfilerStep#%lu", (unsigned long)p->step);
			pf_slice_begin(j->w, &(struct pf_event){ .track = p->steps_track,
				       .ts = p->last_step_end, .name = name, .category = "step" });
			pf_slice_end(j->w, &(struct pf_event){ .track = p->steps_track,
				     .ts = e->ts });
			j->counts.steps++;
			p->steps++;
			p->last_step_ns = e->ts - p->last_step_end;
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

/* __cxa_begin_catch at SP: frames entered at or below SP were unwound. */
static void unwind(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	while (t->depth > 0) {
		struct frame *f = &t->stack[t->depth - 1];

		if (f->kind == FR_USER || f->key > e->key)
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

	push_frame(j, t, &f, NULL);
	if (t->depth == depth || !t->stack[depth].drawn || seq == NO_SEQ)
		return;
	if (u64_set_remove(j->fwd_seqs, ((uint64_t)e->pid << 48) ^ seq)) {
		flow = bwd_flow_id(e->pid, seq);
		j->counts.bwd_flows++;
	}
	/* Arguments and the flow's end ride on a zero-length instant nested in
	 * the slice, since the begin was already written without them. */
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
		   .name = "backward node", .category = "backward", .args = args, .nargs = 2,
		   .term_flows = &flow, .nterm = flow ? 1 : 0 });
}

static void count_launch(struct join *j, int pid)
{
	struct process *p = find_process(j, pid);

	if (p)
		p->launches++;
}

/* In an op: an aten op, or (from the agent) another FUNCTION-scope
 * record such as "Torch-Compiled Region", which the profiler draws as an
 * op too. */
static bool in_op(const struct thread *t)
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
static uint64_t launch_flow(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	uint64_t ts, flow;

	if (t->depth >= MAX_DRAWN)
		return 0;
	ts = e->ts - 1 > t->stack[t->depth - 1].ts ? e->ts - 1 : t->stack[t->depth - 1].ts;
	flow = hash_u64(((uint64_t)e->tid << 32) ^ e->ts ^ 0x4c41554e4348ULL) | 1;
	pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = ts, .name = "launch",
		   .category = "launch_flow", .flows = &flow, .nflows = 1 });
	j->counts.launch_flows++;
	return flow;
}

/* A GPU API call opens a slice in whatever op issued it; a launch inside
 * an op also gets the op's flow (launch_flow). */
static void gpu_begin(struct join *j, struct thread *t, const struct ptbpf_gpu_call *c)
{
	struct frame f = { .key = c->ev.key, .ts = c->ev.ts, .seq = NO_SEQ, .kind = FR_GPU };
	bool op = in_op(t);
	struct gpu_slice s;
	uint64_t flow = 0;

	gpu_call_begin(j->dec->calls, c, op, &s);
	if (s.launch)
		count_launch(j, c->ev.pid);
	f.name = s.name;
	f.category = s.category;
	if (s.launch && op)
		flow = launch_flow(j, t, &c->ev);
	push_frame(j, t, &f, &(struct pf_event){ .args = s.args, .nargs = s.nargs,
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
		   .name = frame_name(j, &f), .category = frame_category(&f) });
}

/* --- ops recorded by the agent (RecordFunction callbacks) --- */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

/* The ops-table index of an agent-recorded op name, added when new, so
 * the summary's per-op totals cover these ops too; -1 once the bounded
 * table is full. */
static int64_t rf_op_index(struct join *j, const char *name)
{
	uint32_t mask, h;

	if (!j->rf_ops) {
		j->rf_cap = 1 << 14;
		j->rf_ops = calloc(j->rf_cap, sizeof(*j->rf_ops));
		if (!j->rf_ops)
			return -1;
	}
	mask = j->rf_cap - 1;
	for (h = name_hash(name) & mask; j->rf_ops[h]; h = (h + 1) & mask)
		if (!strcmp(j->ops->name[j->rf_ops[h] - 1], name))
			return j->rf_ops[h] - 1;
	if (j->ops->n >= j->rf_cap / 2 || op_table_add(j->ops, name, ""))
		return -1;
	j->rf_ops[h] = j->ops->n;
	return j->ops->n - 1;
}

static const char bwd_prefix[] = "autograd::engine::evaluate_function: ";

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
	bool driver = (e->arg[1] & 0x7f) == 1, launch = is_launch(name), op = in_op(t);
	struct frame f = { .key = e->key, .ts = e->ts, .seq = NO_SEQ, .kind = FR_USER,
			   .category = driver ? "cuda_driver" : "cuda_runtime",
			   .name = str_set_intern(j->strings, name) };
	struct pf_arg args[3] = { { .name = "correlation", .type = PF_ARG_UINT,
				    .u = (uint32_t)e->arg[0] } };
	uint64_t flow = 0;
	int nargs = 1;

	if (e->arg[0] >> 32) /* the agent's records carry CUPTI's callback id */
		args[nargs++] = (struct pf_arg){ .name = "cbid", .type = PF_ARG_UINT,
						 .u = e->arg[0] >> 32 };

	if (launch)
		count_launch(j, e->pid);
	if (launch && !op)
		args[nargs++] = (struct pf_arg){ .name = "outside_op", .type = PF_ARG_BOOL, .b = true };
	if (launch && op)
		flow = launch_flow(j, t, e);
	push_frame(j, t, &f, &(struct pf_event){ .args = args, .nargs = nargs,
		   .term_flows = &flow, .nterm = flow ? 1 : 0 });
	if (t->depth < MAX_DRAWN && (launch || strstr(name, "Memcpy") || strstr(name, "Memset")))
		gpu_timeline_correlate(j->dec->timeline, t->track, &(struct ptbpf_event){
			.ts = e->ts, .pid = e->pid, .tid = e->tid, .arg = { (uint32_t)e->arg[0] } });
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
static void rf_begin(struct join *j, struct thread *t, const struct ptbpf_named_event *ne,
		     const uint8_t *shapes, size_t slen)
{
	char dims[1024], types[1024];
	struct pf_arg args[3];
	struct pf_event extra = { .args = args };
	const struct ptbpf_event *e = &ne->ev;
	int64_t seq = (int64_t)e->arg[0], op;
	struct frame f = { .key = e->key, .ts = e->ts, .seq = NO_SEQ, .kind = FR_USER };
	char name[PTBPF_NAME_LEN * 4];
	uint64_t flow = 0;

	escape_str(name, sizeof(name), ne->name, PTBPF_NAME_LEN);
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
		} else {
			f.category = "cpu_op";
		}
		break;
	case 1: /* BACKWARD_FUNCTION */
		f.category = "backward_function";
		if (seq >= 0 && u64_set_remove(j->fwd_seqs, ((uint64_t)e->pid << 48) ^ (uint64_t)seq))
			flow = bwd_flow_id(e->pid, (uint64_t)seq);
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
	push_frame(j, t, &f, extra.nargs ? &extra : NULL);
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
	for (int i = t->depth - 1; i >= 0; i--)
		if (t->stack[i].key == e->key && t->stack[i].kind != FR_GPU)
			return t;
	for (uint32_t k = 0; k < j->cap; k++) {
		struct thread *o = &j->threads[k];

		if (!o->id || o == t || (int)(o->id >> 32) != (int)e->pid)
			continue;
		for (int i = o->depth - 1; i >= 0; i--)
			if (o->stack[i].key == e->key && o->stack[i].kind != FR_GPU)
				return o;
	}
	return t;
}

/* An op keeps its sequence number only if a node was made while it ran:
 * the thread's next number (arg0) moved past it. */
static void rf_end(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	t = rf_owner(j, t, e);
	for (int i = t->depth - 1; i >= 0; i--) {
		struct frame *f = &t->stack[i];

		if (f->key == e->key && f->kind != FR_GPU) {
			if (f->seq != NO_SEQ && (int64_t)e->arg[0] <= (int64_t)f->seq)
				f->seq = NO_SEQ;
			break;
		}
	}
	/* Ended by ~RecordFunction while an exception was in flight. */
	end_frame(j, t, e, e->arg[1] & 1 ? CLOSE_UNWOUND : CLOSE_END);
}

/* --- torch.distributed.rpc --- */

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

#define RPC_REQUEST_FLAG 0x100
#define MAX_RPC_PENDING  4096

/*
 * A message sent or a request taken up: an instant on the thread, with the
 * message's type and id. A request's send and its handling in the other
 * process are joined by a flow: message ids count per sender, so a
 * handling (pid B, id X) takes the oldest unanswered send of id X made by
 * another process.
 */
static void rpc_event(struct join *j, struct thread *t, const struct ptbpf_event *e)
{
	bool send = e->id == RPC_SEND, request = e->arg[0] & RPC_REQUEST_FLAG;
	int64_t id = (int64_t)e->arg[1];
	struct pf_arg args[2] = {
		{ .name = "type", .type = PF_ARG_STR, .s = rpc_type_name((uint32_t)e->arg[0]) },
		{ .name = "message_id", .type = PF_ARG_INT, .i = id },
	};
	uint64_t flow = 0;

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

int join_thread_event(struct join *j, const void *data, uint64_t size)
{
	const struct ptbpf_event *e = data;
	struct thread *t;

	t = get_thread(j, e->pid, e->tid);
	if (!t)
		return 0;
	if (j->entries_only && (e->kind == EV_OP_BEGIN || e->kind == EV_BWD_BEGIN)) {
		entry_instant(j, t, e);
		return 0;
	}
	switch (e->kind) {
	case EV_OP_BEGIN:
		push_frame(j, t, &(struct frame){ .key = e->key, .ts = e->ts, .op = e->id,
			   .seq = NO_SEQ, .kind = FR_OP }, NULL);
		break;
	case EV_OP_END:
	case EV_BWD_END:
	case EV_USER_END:
	case EV_GPU_RET:
		end_frame(j, t, e, CLOSE_END);
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
			gpu_timeline_correlate(j->dec->timeline, t->track, e);
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
		close_thread(j, t, e->ts, CLOSE_EXIT);
		/* Keep the entry (its track) but not the stack: processes that
		 * churn threads must not grow the loader. */
		free(t->stack);
		t->stack = NULL;
		break;
	case EV_RPC:
		if (j->rpc || (j->rpc = calloc(MAX_RPC_PENDING, sizeof(*j->rpc))))
			rpc_event(j, t, e);
		break;
	case EV_NAMED_RF_BEGIN:
		if (size >= sizeof(struct ptbpf_named_event))
			rf_begin(j, t, data, (const uint8_t *)data + sizeof(struct ptbpf_named_event),
				 size - sizeof(struct ptbpf_named_event));
		break;
	case EV_RF_END:
		rf_end(j, t, e);
		break;
	case EV_OPS_GAP: {
		/* Ends may be among the lost records: rather than leave a frame
		 * open to the end of the trace, what is open stops here; and no
		 * step is drawn across the gap (its bounds are not known). */
		struct process *p = find_process(j, (int)e->pid);

		close_thread(j, t, e->ts, CLOSE_LOST);
		if (p)
			p->last_step_end = 0;
		pf_instant(j->w, &(struct pf_event){ .track = t->track, .ts = e->ts,
			   .name = "op records lost here (ptbpf fell behind)", .category = "ptbpf",
			   .args = &(struct pf_arg){ .name = "lost_records", .type = PF_ARG_UINT,
						     .u = e->arg[0] }, .nargs = 1 });
		break;
	}
	case EV_PY_STACK:
		py_stack(j, t, data, size);
		break;
	case EV_MEM:
		/* An allocation belongs to the op that made it: the innermost
		 * frame open on the thread (torch.profiler's "self" memory). */
		if ((int64_t)e->arg[0] > 0 && t->depth > 0)
			t->stack[t->depth - 1].alloc_bytes += e->arg[0];
		break;
	case EV_NAMED_USER_BEGIN:
		if (size >= sizeof(struct ptbpf_named_event)) {
			const struct ptbpf_named_event *ne = data;
			char name[PTBPF_NAME_LEN * 4];

			escape_str(name, sizeof(name), ne->name, PTBPF_NAME_LEN);
			push_frame(j, t, &(struct frame){ .key = e->key, .ts = e->ts,
				   .seq = NO_SEQ, .kind = FR_USER,
				   .name = str_set_intern(j->strings, name) }, NULL);
		}
		break;
	}
	return 0;
}

void join_process_gone(struct join *j, int pid, uint64_t ts)
{
	for (uint32_t i = 0; i < j->cap; i++)
		if (j->threads[i].id && (int)(j->threads[i].id >> 32) == pid)
			close_thread(j, &j->threads[i], ts, CLOSE_EXIT);
}

void join_process_exec(struct join *j, int pid, uint64_t ts)
{
	struct process *p = find_process(j, pid);

	for (uint32_t i = 0; i < j->cap; i++) {
		struct thread *t = &j->threads[i];

		if (!t->id || (int)(t->id >> 32) != pid)
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

void join_finish(struct join *j, uint64_t ts)
{
	for (uint32_t i = 0; i < j->cap; i++)
		if (j->threads[i].id)
			close_thread(j, &j->threads[i], ts, CLOSE_STOP);
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
			.launches = j->procs[i].launches, .steps = j->procs[i].steps,
			.last_step_ns = j->procs[i].last_step_ns };
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
