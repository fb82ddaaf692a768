// SPDX-License-Identifier: BSD-2-Clause
/* The report's one streaming pass over a trace. See report_data.h. */
#define _GNU_SOURCE
#include "report/report_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/c10_device.h"
#include "lib/log.h"
#include "lib/names.h"

#define MAX_DEPTH 512

/* The argument names of enum rd_arg, as ptbpf writes them. */

/* ---- tables ---- */

static struct rd_track *track_of(struct report *r, uint64_t uuid)
{
	bool added;
	struct rd_track *t = rd_keyed(&r->tracks, uuid, (void **)&r->track_v, &r->ntracks,
				   &r->track_cap, sizeof(*r->track_v), &added);

	if (t && added) {
		t->name = RD_NONE;
		t->uuid = uuid;
	}
	return t;
}

/* An op's row: by name, or by name and input shapes. */
static uint64_t op_key(const struct rd_frame *f, bool by_shape)
{
	int64_t shapes = f->a.v[A_DIMS];
	uint64_t s = by_shape && shapes != RD_UNSET ? (uint64_t)shapes + 1 : 0;

	return s << 32 | f->name;
}

static struct rd_op *op_of(struct rd_optable *t, uint64_t key)
{
	bool added;
	struct rd_op *o = rd_keyed(&t->index, key, (void **)&t->v, &t->n, &t->cap, sizeof(*t->v),
				&added);

	if (o && added) {
		o->name = (uint32_t)key;
		o->shapes = key >> 32 ? (uint32_t)(key >> 32) - 1 : RD_NONE;
	}
	return o;
}

static void site_done(struct report *r, uint32_t site, uint64_t dur)
{
	bool added;
	struct rd_site *st = rd_keyed(&r->sites, site + 1ull, (void **)&r->site_v, &r->nsites,
				   &r->site_cap, sizeof(*r->site_v), &added);

	if (!st)
		return;
	st->site = site;
	st->calls++;
	st->total += dur;
}

static void kernel_done(struct report *r, uint32_t name, uint64_t dur)
{
	bool added;
	struct rd_kernel *k = rd_keyed(&r->kernels, name, (void **)&r->k_v, &r->nk, &r->k_cap,
				    sizeof(*r->k_v), &added);

	if (!k)
		return;
	if (added)
		*k = (struct rd_kernel){ .name = name, .min = UINT64_MAX, .display = RD_NONE };
	k->calls++;
	k->total += dur;
	k->min = dur < k->min ? dur : k->min;
	k->max = dur > k->max ? dur : k->max;
}

static bool is_op_cat(const struct report *r, uint32_t cat)
{
	return cat == r->cat_cpu || cat == r->cat_bwd || cat == r->cat_bwdfn;
}

static bool is_region_cat(const struct report *r, uint32_t cat)
{
	return cat == r->cat_user || cat == r->cat_loader;
}

/* At a launch's correlation: the thread's open frames, until the launch's
 * GPU activity comes (memory grows with the launches in flight only). */
static void note_launch(struct report *r, const struct rd_track *t, uint64_t flow,
			const struct tr_event *e, int64_t corr)
{
	struct rd_launch l = { .corr = corr, .pid = t->pid, .tid = t->tid, .ts = e->ts };
	uint64_t *slot;
	size_t idx;

	for (int i = t->depth - 1; i >= 0; i--) {
		const struct rd_frame *f = &t->stack[i];

		if (f->cat == r->cat_cpu && l.nops < RD_MAX_ANCESTORS) {
			l.ops[0][l.nops] = op_key(f, false);
			l.ops[1][l.nops++] = op_key(f, true);
		}
		if (is_op_cat(r, f->cat) && !l.op_id)
			l.op_id = f->id;
		if (is_region_cat(r, f->cat) && !l.ann_id)
			l.ann_id = f->id, l.ann_name = f->name;
	}
	if (!(slot = rd_map_slot(&r->launches, flow, true)))
		return;
	if (*slot) { /* the same flow again: the later launch */
		r->launch_v[*slot - 1] = l;
		return;
	}
	if (r->nfree) {
		idx = r->launch_free[--r->nfree];
	} else if (rd_room((void **)&r->launch_v, &r->launch_cap, r->nlaunch,
			   sizeof(*r->launch_v))) {
		idx = r->nlaunch++;
	} else {
		rd_map_del(&r->launches, flow);
		return;
	}
	r->launch_v[idx] = l;
	*slot = idx + 1;
}

/* A GPU activity's device time goes to the op that launched it (self) and
 * to every op around that one (total), each op row once. */
static void attribute(struct rd_optable *t, const uint64_t *ops, int nops, uint64_t dur)
{
	for (int i = 0; i < nops; i++) {
		struct rd_op *o;
		bool seen = false;

		for (int k = 0; k < i; k++)
			seen |= ops[k] == ops[i];
		if (seen || !(o = op_of(t, ops[i])))
			continue;
		o->dev_total += dur;
		if (i == 0)
			o->dev_self += dur;
	}
}

/* A CUDA graph's replayed kernel: its self time is the op's that captured
 * it (ptbpf's captured_by), its total that op's and those around the
 * replay (the graph launch). The by-shape table leaves it out: the
 * capture's shapes are not kept. */
static void replayed(struct report *r, uint32_t captured_by, const struct rd_launch *l,
		     uint64_t dur)
{
	uint64_t ops[RD_MAX_ANCESTORS + 1] = { captured_by };
	int n = 1;

	for (int i = 0; l && i < l->nops; i++)
		ops[n++] = l->ops[0][i];
	attribute(&r->ops, ops, n, dur);
}

static void launch_done(struct report *r, uint64_t flow)
{
	uint64_t *slot = rd_map_slot(&r->launches, flow, false);

	if (!slot || !*slot)
		return;
	if (rd_room((void **)&r->launch_free, &r->free_cap, r->nfree, sizeof(*r->launch_free)))
		r->launch_free[r->nfree++] = *slot - 1;
	rd_map_del(&r->launches, flow);
}

/* ---- memory counters ---- */

static void memory_track(struct report *r, struct rd_track *t, const char *name)
{
	const char *sp = strchr(name, ' ');
	size_t plen = sp ? (size_t)(sp - name) : strlen(name);
	uint32_t device;

	if (!c10_device_parse(name, &device)) {
		t->dev_type = device & 0xff;
		t->dev_id = (device >> 8) & 0xff;
	}
	for (size_t i = 0; i < r->ntracks; i++) {
		struct rd_track *o = &r->track_v[i];
		const char *on;

		if (o == t || !o->mem || o->mem == t->mem || o->pid != t->pid)
			continue;
		on = rd_str(r, o->name);
		if (!strncmp(on, name, plen) && on[plen] == ' ') {
			o->sibling = (size_t)(t - r->track_v) + 1;
			t->sibling = i + 1;
		}
	}
}

static void counter_value(struct report *r, struct rd_track *t, uint64_t ts, int64_t v)
{
	int64_t before = t->value;
	bool first = !t->has_value;

	if (v > t->peak || !t->peak_ts)
		t->peak = v, t->peak_ts = ts;
	t->value = v;
	t->has_value = true;
	if (t->mem)
		rd_curve_add(&t->curve, ts, v);
	if (t->mem && r->hooks && r->hooks->counter)
		r->hooks->counter(r, t, ts, before, first);
}

/* ---- descriptors ---- */

static int64_t label_int(const struct tr_track *d, const char *key)
{
	size_t kl = strlen(key);

	for (int i = 0; i < d->nlabels; i++) {
		const struct tr_str *l = &d->labels[i];
		char buf[32];

		if (l->len <= kl || l->len - kl - 1 >= sizeof(buf) || strncmp(l->s, key, kl) ||
		    l->s[kl] != '=')
			continue;
		memcpy(buf, l->s + kl + 1, l->len - kl - 1);
		buf[l->len - kl - 1] = 0;
		return strtoll(buf, NULL, 10);
	}
	return -1;
}

static void process_seen(struct report *r, const struct tr_track *d)
{
	struct rd_proc *p = NULL;

	for (int i = 0; i < r->nprocs && !p; i++)
		if (r->procs[i].pid == d->pid)
			p = &r->procs[i];
	if (!p && r->nprocs == RD_MAX_PROCS)
		return;
	if (!p)
		p = &r->procs[r->nprocs++];
	p->pid = d->pid;
	p->name = d->proc_name.len ? rd_rid(r, &d->proc_name) : RD_NONE;
	p->rank = label_int(d, "RANK");
	p->local_rank = label_int(d, "LOCAL_RANK");
	p->world_size = label_int(d, "WORLD_SIZE");
}

static void descriptor(struct report *r, const struct tr_track *d)
{
	int64_t pid = d->pid, tid = d->tid;
	struct rd_track *t;

	if (d->parent && pid < 0) { /* a child track of a process: its pid */
		uint64_t *slot = rd_map_slot(&r->tracks, d->parent, false);

		if (slot && *slot)
			pid = r->track_v[*slot - 1].pid, tid = 0;
	}
	if (!d->uuid || !(t = track_of(r, d->uuid)))
		return;
	if (d->parent) {
		uint64_t *slot = rd_map_slot(&r->tracks, d->parent, false);

		if (slot && *slot && r->track_v[*slot - 1].thread)
			t->owner_tid = r->track_v[*slot - 1].tid;
	}
	t->thread = d->kind == TR_TRACK_THREAD;
	if (t->thread && tid > 0) {
		uint64_t *seen = rd_map_slot(&r->thread_tids, (uint64_t)tid, true);

		if (seen)
			*seen = 1;
	}
	t->process = d->kind == TR_TRACK_PROCESS;
	t->pid = pid;
	t->tid = tid;
	if (t->process)
		process_seen(r, d);
	if (d->name.len && d->name.len < 64) {
		char buf[64];
		size_t len = d->name.len;
		unsigned dev, stream;

		memcpy(buf, d->name.s, len);
		buf[len] = 0;
		t->name = rd_str_id(r, buf, len);
		if (len > 17 && !strcmp(buf + len - 17, " memory allocated"))
			t->mem = 1;
		else if (len > 16 && !strcmp(buf + len - 16, " memory reserved"))
			t->mem = 2;
		if (t->mem)
			memory_track(r, t, buf);
		if (sscanf(buf, "GPU %u / stream %u", &dev, &stream) == 2) {
			t->gpu = true;
			t->owner_pid = pid;
			t->pid = dev;
			t->tid = stream;
			t->context = -1;
		}
	}
	if (r->hooks && r->hooks->descriptor)
		r->hooks->descriptor(r, t, d);
}

/* ---- events ---- */

/* An interval of a kind: into the steps' table and the GPU gaps'. */
static void tables_interval(struct report *r, enum step_list kind, uint64_t start, uint64_t end)
{
	if (r->steps && !r->steps_done)
		steps_interval(r->steps, kind, start, end);
	if (r->gaps && !r->gaps_done)
		steps_interval(r->gaps, kind, start, end);
}

/* After a pass: true if a table wants the trace read again. */
static bool next_pass(struct report *r)
{
	if (r->late && !r->late_done)
		r->late_done = !steps_next_pass(r->late);
	if (r->steps && !r->steps_done)
		r->steps_done = !steps_next_pass(r->steps);
	if (r->gaps && !r->gaps_done)
		r->gaps_done = !steps_next_pass(r->gaps);
	return (r->steps && !r->steps_done) || (r->gaps && !r->gaps_done) ||
	       (r->late && !r->late_done);
}

/* Which of the step table's kinds a slice is (SL_COUNT: none). */
static enum step_list slice_kind(const struct report *r, const struct rd_track *t, uint32_t cat)
{
	if (is_op_cat(r, cat))
		return t->thread ? SL_HOSTOP : SL_COUNT; /* autograd's ops run inside bwd */
	if (cat == r->cat_kernel)
		return SL_KERNEL;
	if (cat == r->cat_memcpy)
		return SL_MEMCPY;
	if (cat == r->cat_memset)
		return SL_MEMSET;
	if (cat == r->cat_rt || cat == r->cat_drv)
		return SL_RUNTIME;
	if (cat == r->cat_loader)
		return SL_DATALOADER;
	return SL_COUNT;
}

static void op_done(struct report *r, struct rd_track *t, const struct rd_frame *f, uint64_t dur)
{
	struct rd_optable *tabs[2] = { &r->ops, r->want_shapes ? &r->ops_shape : NULL };
	bool top = true;

	for (int k = 0; k < 2; k++) {
		struct rd_op *o = tabs[k] ? op_of(tabs[k], op_key(f, k)) : NULL;

		if (!o)
			continue;
		o->calls++;
		o->total += dur;
		o->self += dur > f->child ? dur - f->child : 0;
		o->alloc += f->a.v[A_ALLOC] != RD_UNSET ? (uint64_t)f->a.v[A_ALLOC] : 0;
	}
	for (int i = 0; i < t->depth && top; i++)
		top = t->stack[i].cat != r->cat_cpu;
	if (top && f->a.v[A_STACK] != RD_UNSET) /* each op's time once: outermost ops only */
		site_done(r, (uint32_t)f->a.v[A_STACK], dur);
}

/* An RPC call (on its caller), a request's handling (on its callee), or an
 * op run by one: "CALL#remote_op: OP", as torch.profiler names it. */
static void rpc_done(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		     uint64_t dur)
{
	struct rd_optable *tab = f->cat == r->cat_rpc ? &r->rpc_calls : &r->rpc_handled;
	uint32_t name = f->name;
	struct rd_op *o;
	char buf[1024];

	if (f->cat == r->cat_cpu) {
		int i = t->depth - 1;

		while (i >= 0 && t->stack[i].cat != r->cat_rpc_remote)
			i--;
		if (i < 0)
			return;
		snprintf(buf, sizeof(buf), "%s#remote_op: %s", rd_str(r, t->stack[i].name),
			 rd_str(r, f->name));
		name = rd_str_id(r, buf, strlen(buf));
		tab = &r->rpc_remote;
	}
	if ((o = op_of(tab, name))) {
		o->calls++;
		o->total += dur;
	}
}

/* The thread a step ran on: its track's, or for a process's steps the
 * "tid" of the thread that ended it (Optimizer.step), moved into the
 * process's pid range where `ptbpf merge` moved its pids. */
static int64_t step_tid(const struct rd_track *t, const struct rd_frame *f)
{
	int64_t tid = f->a.v[A_TID];

	if (t->thread)
		return t->tid;
	if (tid == RD_UNSET || tid <= 0)
		return 0;
	return t->pid > 0 ? (t->pid & ~(int64_t)(PTBPF_PID_STRIDE - 1)) + tid : tid;
}

static void end_slice(struct report *r, struct rd_track *t, const struct tr_event *e)
{
	struct rd_frame f = t->stack[--t->depth];
	uint64_t ts = e->ts, dur = ts > f.ts ? ts - f.ts : 0;
	const struct rd_launch *l = NULL;
	uint64_t *slot;
	struct rd_args end;

	tables_interval(r, slice_kind(r, t, f.cat), f.ts, ts);
	if (r->pass) { /* the step tables' further passes */
		if (r->kview)
			r->kview->slice(r, t, &f, ts, NULL);
		return;
	}
	rd_args_clear(&end);
	rd_read_args(r, e, &end);
	rd_args_merge(&f.a, &end);
	if (!f.flow_out && e->nflows)
		f.flow_out = e->flows[0];
	if (t->depth > 0 && f.cat != r->cat_syscall && f.cat != r->cat_fault &&
	    f.cat != r->cat_sched)
		t->stack[t->depth - 1].child += dur;
	if (f.flow_in && (slot = rd_map_slot(&r->launches, f.flow_in, false)) && *slot)
		l = &r->launch_v[*slot - 1];
	if (f.cat == r->cat_rpc || f.cat == r->cat_rpc_remote || (f.cat == r->cat_cpu && t->thread))
		rpc_done(r, t, &f, dur);
	if (f.cat == r->cat_cpu) {
		op_done(r, t, &f, dur);
	} else if (f.cat == r->cat_kernel) {
		kernel_done(r, f.name, dur);
		if (r->gview)
			r->gview->kernel(r, t, &f, dur);
	} else if (f.cat == r->cat_step && r->steps) {
		steps_add(r->steps, f.ts, ts, f.name, step_tid(t, &f));
	}
	if (r->kview)
		r->kview->slice(r, t, &f, ts, l);
	if (r->rview)
		r->rview->slice(r, t, &f, ts);
	if (f.cat == r->cat_kernel && f.a.v[A_CAPTURED_BY] != RD_UNSET)
		replayed(r, (uint32_t)f.a.v[A_CAPTURED_BY], l, dur);
	else if (l && f.cat == r->cat_kernel) {
		attribute(&r->ops, l->ops[0], l->nops, dur);
		if (r->want_shapes)
			attribute(&r->ops_shape, l->ops[1], l->nops, dur);
	}
	if (r->hooks && r->hooks->slice)
		r->hooks->slice(r, t, &f, ts, l);
	if (l)
		launch_done(r, f.flow_in);
}

static void begin_slice(struct report *r, struct rd_track *t, const struct tr_event *e,
			uint32_t name, uint32_t cat)
{
	struct rd_frame *f;

	if (!t->stack && !(t->stack = calloc(MAX_DEPTH, sizeof(*t->stack))))
		return;
	if (t->depth == MAX_DEPTH) {
		t->overflow++;
		return;
	}
	f = &t->stack[t->depth++];
	*f = (struct rd_frame){ .name = name, .cat = cat, .ts = e->ts,
				.flow_in = e->nterm ? e->term[0] : 0,
				.flow_out = e->nflows ? e->flows[0] : 0 };
	rd_args_clear(&f->a);
	if (r->pass && t->owner_tid) /* what a thread blocked in: named in every pass */
		rd_read_args(r, e, &f->a);
	if (r->pass)
		return;
	if (t->thread)
		f->id = ++r->next_id;
	rd_read_args(r, e, &f->a);
}

/* A backward node's sequence number, forward thread and the flow from its
 * forward op ride on an instant in its slice (join.c): they go to the
 * slices it is in, up to the evaluate_function one. */
static void backward_node(struct report *r, struct rd_track *t, const struct rd_args *a,
			  const struct tr_event *e)
{
	for (int i = t->depth - 1; i >= 0; i--) {
		struct rd_frame *f = &t->stack[i];

		if (a->v[A_SEQ] != RD_UNSET && f->a.v[A_SEQ] == RD_UNSET)
			f->a.v[A_SEQ] = a->v[A_SEQ];
		if (i == t->depth - 1) {
			if (a->v[A_FWD_TID] != RD_UNSET)
				f->a.v[A_FWD_TID] = a->v[A_FWD_TID];
			if (e->nterm)
				f->bwd_in = e->term[0];
		}
		if (f->cat == r->cat_bwd)
			break;
	}
}

static void instant(struct report *r, struct rd_track *t, const struct tr_event *e,
		    uint32_t name)
{
	struct rd_args a;

	rd_args_clear(&a);
	rd_read_args(r, e, &a);
	if (name == r->name_corr) {
		/* The correlation: the instant's, or its CUDA call slice's. */
		int64_t corr = a.v[A_CORRELATION] != RD_UNSET ? a.v[A_CORRELATION] :
			       t->depth ? t->stack[t->depth - 1].a.v[A_CORRELATION] : RD_UNSET;

		for (int i = 0; i < e->nflows; i++)
			note_launch(r, t, e->flows[i], e, corr != RD_UNSET ? corr : -1);
	} else if (name == r->name_bwd_node) {
		backward_node(r, t, &a, e);
	} else if (name == r->name_device_props) {
		rd_device_props(r, t, e, &a);
	}
	if (r->rview)
		r->rview->instant(r, t, e, name);
	if (r->hooks && r->hooks->instant)
		r->hooks->instant(r, t, e, &a, name);
}

static void track_event(struct report *r, const struct tr_event *e)
{
	uint32_t name = e->has_name ? rd_rid(r, &e->name) : RD_NONE;
	uint32_t cat = e->has_cat ? rd_rid(r, &e->cat) : RD_NONE;
	struct rd_track *t;

	if (!(t = track_of(r, e->track)))
		return;
	if (!r->pass) {
		r->events++;
		if (!r->first_ts || e->ts < r->first_ts)
			r->first_ts = e->ts;
		r->last_ts = e->ts > r->last_ts ? e->ts : r->last_ts;
		if (!t->first_ts)
			t->first_ts = e->ts;
	}
	if (e->type == TE_SLICE_BEGIN) {
		begin_slice(r, t, e, name, cat);
	} else if (e->type == TE_SLICE_END && t->overflow) {
		t->overflow--;
	} else if (e->type == TE_SLICE_END && t->depth > 0) {
		end_slice(r, t, e);
	} else if (r->pass) {
		return; /* counters and instants: the first pass's */
	} else if (e->type == TE_COUNTER && e->has_counter) {
		counter_value(r, t, e->ts, e->counter);
	} else if (e->type == TE_INSTANT) {
		instant(r, t, e, name);
	}
}

static void trace_attrs(struct report *r, struct tr_reader *tr, const struct tr_packet *p)
{
	struct tr_attr at[RD_MAX_ATTRS];
	int n = tr_attrs(tr, p, at, RD_MAX_ATTRS);

	for (int i = 0; i < n; i++) {
		uint32_t key = rd_rid(r, &at[i].key);
		int k;

		for (k = 0; k < r->nattrs && r->attrs[k].key != key; k++)
			;
		if (k == RD_MAX_ATTRS)
			continue;
		r->nattrs += k == r->nattrs;
		r->attrs[k] = (struct rd_attr){ .key = key, .is_str = at[i].is_str, .i = at[i].i,
						.s = at[i].is_str ? rd_rid(r, &at[i].s) : RD_NONE };
	}
}

/* One pass over the trace: 0, or -1 on a read error (printed). */
static int read_pass(struct report *r, struct tr_reader *tr)
{
	struct tr_packet p;
	struct tr_track d;
	struct tr_sample smp;
	uint64_t samples_left = 0;
	struct tr_event *e = malloc(sizeof(*e));
	int64_t off;
	int got;

	if (!e)
		return -1;
	while ((got = tr_next(tr, &p)) > 0) {
		if (!r->pass && p.desc.n && tr_track(tr, &p, &d))
			descriptor(r, &d);
		if (!r->pass && p.snapshot.n && !r->has_clock && tr_clock_offset(&p, &off)) {
			int64_t boot;

			r->has_clock = true, r->clock_offset = off;
			if (tr_clock_offset_boot(&p, &boot))
				r->has_boot = true, r->boot_minus_mono = off - boot;
		}
		if (p.ftrace.n && r->kview)
			r->kview->ftrace(r, p.ftrace.d, p.ftrace.n);
		if (!r->pass && p.attrs.n && !p.end_marker)
			trace_attrs(r, tr, &p);
		if (p.event.n && tr_event(tr, &p, e))
			track_event(r, e);
		if (!r->pass && p.sample.n && tr_sample(tr, &p, &smp)) {
			if (!rd_samples_add(r, &smp))
				samples_left++;
			if (r->rview)
				r->rview->sample(r, &smp);
		}
	}
	free(e);
	if (samples_left)
		fprintf(stderr, "ptbpf: report: out of memory: %lu CPU samples left out of its "
			"tables\n", (unsigned long)samples_left);
	return got;
}

static int op_by_total(const void *a, const void *b)
{
	const struct rd_op *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static int site_by_total(const void *a, const void *b)
{
	const struct rd_site *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static int k_by_total(const void *a, const void *b)
{
	const struct rd_kernel *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static int op_by_alloc(const void *a, const void *b)
{
	const struct rd_op *x = *(const struct rd_op *const *)a,
			   *y = *(const struct rd_op *const *)b;

	return x->alloc < y->alloc ? 1 : x->alloc > y->alloc ? -1 : 0;
}

const struct rd_op **rd_allocating_ops(const struct report *r, size_t *n)
{
	const struct rd_op **v = calloc(r->ops.n + 1, sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < r->ops.n; i++)
		if (r->ops.v[i].alloc)
			v[(*n)++] = &r->ops.v[i];
	qsort(v, *n, sizeof(*v), op_by_alloc);
	return v;
}

int rd_read(struct report *r, struct tr_reader *tr)
{
	if (read_pass(r, tr) < 0)
		return -1;
	if (r->rview)
		r->rview->first_pass_done(r);
	while (next_pass(r)) {
		if (tr_rewind(tr))
			return -1;
		r->pass++;
		for (size_t i = 0; i < r->ntracks; i++)
			r->track_v[i].depth = r->track_v[i].overflow = 0;
		if (r->kview)
			r->kview->pass(r);
		if (read_pass(r, tr) < 0)
			return -1;
	}
	for (size_t i = 0; i < r->ntracks; i++)
		if (r->track_v[i].mem && r->track_v[i].has_value)
			rd_curve_finish(&r->track_v[i].curve);
	if (r->ops.n)
		qsort(r->ops.v, r->ops.n, sizeof(*r->ops.v), op_by_total);
	if (r->ops_shape.n)
		qsort(r->ops_shape.v, r->ops_shape.n, sizeof(*r->ops_shape.v), op_by_total);
	if (r->nk)
		qsort(r->k_v, r->nk, sizeof(*r->k_v), k_by_total);
	for (int i = 0; i < 3; i++) {
		struct rd_optable *t = (struct rd_optable *[]){ &r->rpc_calls, &r->rpc_handled,
								&r->rpc_remote }[i];

		if (t->n)
			qsort(t->v, t->n, sizeof(*t->v), op_by_total);
	}
	if (r->nsites)
		qsort(r->site_v, r->nsites, sizeof(*r->site_v), site_by_total);
	return 0;
}

bool rd_init(struct report *r)
{
	r->set = str_set_new(1 << 20);
	if (!r->set) {
		log_msg("reading the trace: out of memory\n");
		return false;
	}
	r->arg_base = (uint32_t)r->ns;
	for (int k = 0; k < A_COUNT; k++)
		rd_str_id(r, rd_arg_names[k], strlen(rd_arg_names[k]));
	r->ops_shape.by_shape = true;
	r->cat_cpu = rd_str_id(r, "cpu_op", 6);
	r->cat_kernel = rd_str_id(r, "kernel", 6);
	r->cat_memcpy = rd_str_id(r, "gpu_memcpy", 10);
	r->cat_memset = rd_str_id(r, "gpu_memset", 10);
	r->cat_rt = rd_str_id(r, "cuda_runtime", 12);
	r->cat_drv = rd_str_id(r, "cuda_driver", 11);
	r->cat_loader = rd_str_id(r, "dataloader", 10);
	r->cat_step = rd_str_id(r, "step", 4);
	r->cat_bwd = rd_str_id(r, "backward", 8);
	r->cat_bwdfn = rd_str_id(r, "backward_function", 17);
	r->cat_user = rd_str_id(r, "user_annotation", 15);
	r->name_corr = rd_str_id(r, "cupti correlation", 17);
	r->name_bwd_node = rd_str_id(r, "backward node", 13);
	r->name_device_props = rd_str_id(r, "device properties", 17);
	r->cat_rpc = rd_str_id(r, "rpc", 3);
	r->cat_rpc_remote = rd_str_id(r, "rpc_remote", 10);
	r->cat_syscall = rd_str_id(r, "syscall", 7);
	r->cat_fault = rd_str_id(r, "fault", 5);
	r->cat_sched = rd_str_id(r, "sched", 5);
	r->cat_block = rd_str_id(r, "block", 5); /* also an argument's name (A_BLOCK) */
	r->cat_gpu_idle = rd_str_id(r, "gpu_idle", 8);
	if (r->ns != r->arg_base + A_COUNT + 20) { /* a string table that failed */
		log_msg("reading the trace: out of memory\n");
		return false;
	}
	return true;
}

void rd_free(struct report *r)
{
	rd_samples_free(r);
	for (size_t i = 0; i < r->ntracks; i++) {
		free(r->track_v[i].stack);
		free(r->track_v[i].curve.ts);
		free(r->track_v[i].curve.v);
	}
	free(r->track_v);
	free(r->ops.v);
	free(r->ops_shape.v);
	free(r->k_v);
	free(r->launch_v);
	free(r->launch_free);
	free(r->rids);
	free(r->s);
	str_set_free(r->set);
	rd_map_free(&r->s_index);
	rd_map_free(&r->tracks);
	rd_map_free(&r->ops.index);
	rd_map_free(&r->ops_shape.index);
	for (int i = 0; i < 3; i++) {
		struct rd_optable *t = (struct rd_optable *[]){ &r->rpc_calls, &r->rpc_handled,
								&r->rpc_remote }[i];

		free(t->v);
		rd_map_free(&t->index);
	}
	rd_map_free(&r->kernels);
	if (r->gview)
		r->gview->free(r);
	rd_map_free(&r->sites);
	free(r->site_v);
	rd_map_free(&r->launches);
	steps_free(r->steps);
	steps_free(r->late);
	if (r->rview)
		r->rview->free(r);
	steps_free(r->gaps);
	rd_map_free(&r->thread_tids);
	rd_map_free(&r->sched_seen);
	free(r->claims);
	free(r->cpus);
	free(r->wakes);
}
