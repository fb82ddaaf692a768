// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf report FILE.pftrace [--json] [--top N]`: what torch.profiler's
 * key_averages and the TensorBoard plugin's views answer, from a ptbpf
 * trace, in one streaming pass over it:
 *   - operators: calls, host total and self time, device total and self
 *     time (the GPU time of the kernels each op launched, itself or through
 *     the ops it called), by op name;
 *   - kernels: calls, total, mean, min and max device time;
 *   - steps (ProfilerStep#N): length, and within it kernel, memcpy and
 *     memset time on the GPU, the GPU's busy share (kernels' union), CUDA
 *     API time, DataLoader time and host op time (any thread), and the
 *     TensorBoard plugin's breakdown of it (Kernel, Memcpy, Memset,
 *     Runtime, DataLoader, CPU Exec, Other) with advice drawn from it.
 * A kernel is tied to its op through the trace's launch -> kernel flow:
 * the "cupti correlation" instant sits in the launching thread's open
 * frames.
 */
#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "memtrack.h"
#include "names.h"
#include "step_table.h"
#include "trace_read.h"

#define MAX_DEPTH 512
#define MAX_ANCESTORS 8

/* A u64 -> u64 hash map, open addressing, grows by doubling. */
struct map {
	uint64_t *k, *v;
	size_t n, cap;
};

static uint64_t *map_slot(struct map *m, uint64_t key, bool add)
{
	size_t i;

	if (add && (m->n + 1) * 2 > m->cap) {
		struct map g = { 0 };

		g.cap = m->cap ? m->cap * 2 : 1024;
		g.k = calloc(g.cap, sizeof(*g.k));
		g.v = calloc(g.cap, sizeof(*g.v));
		if (!g.k || !g.v) {
			free(g.k);
			free(g.v);
			return NULL;
		}
		for (size_t j = 0; j < m->cap; j++) {
			if (!m->k[j])
				continue;
			for (i = hash_u64(m->k[j]) & (g.cap - 1); g.k[i]; i = (i + 1) & (g.cap - 1))
				;
			g.k[i] = m->k[j];
			g.v[i] = m->v[j];
			g.n++;
		}
		free(m->k);
		free(m->v);
		*m = g;
	}
	if (!m->cap)
		return NULL;
	key |= 1ull << 63; /* never 0 */
	for (i = hash_u64(key) & (m->cap - 1); m->k[i]; i = (i + 1) & (m->cap - 1))
		if (m->k[i] == key)
			return &m->v[i];
	if (!add)
		return NULL;
	m->k[i] = key;
	m->n++;
	return &m->v[i];
}

/* Removes key (backward-shift deletion keeps every probe run unbroken). */
static void map_del(struct map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i, j;

	if (!m->cap)
		return;
	key |= 1ull << 63;
	for (i = hash_u64(key) & mask; m->k[i] != key; i = (i + 1) & mask)
		if (!m->k[i])
			return;
	for (j = (i + 1) & mask; m->k[j]; j = (j + 1) & mask) {
		size_t home = hash_u64(m->k[j]) & mask;

		/* j's entry may move to i if i lies on its probe run home..j. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->k[i] = m->k[j];
			m->v[i] = m->v[j];
			i = j;
		}
	}
	m->k[i] = 0;
	m->n--;
}

static void map_free(struct map *m)
{
	free(m->k);
	free(m->v);
}

/* Room for one more element of unit bytes after n in *p; the capacity
 * grows only with the memory. */
static bool room(void **p, size_t *cap, size_t n, size_t unit)
{
	size_t c = *cap ? *cap * 2 : 256;
	void *g;

	if (n < *cap)
		return true;
	g = realloc(*p, c * unit);
	if (!g)
		return false;
	*p = g;
	*cap = c;
	return true;
}

/* Names: interned strings, referred to by index. */
struct strings {
	struct str_set *set;
	const char **s;
	size_t n, cap;
	struct map index; /* hash of the pointer -> index + 1 */
};

static uint32_t str_id(struct strings *t, const char *s, size_t len)
{
	const char *p = str_set_add_n(t->set, s, len);
	uint64_t *slot;

	if (!p)
		p = "(names full)";
	slot = map_slot(&t->index, (uint64_t)(uintptr_t)p, true);
	if (!slot)
		return 0;
	if (!*slot) {
		if (!room((void **)&t->s, &t->cap, t->n, sizeof(*t->s)))
			return 0;
		t->s[t->n++] = p;
		*slot = t->n;
	}
	return (uint32_t)*slot - 1;
}

#define NONE UINT32_MAX

struct opstat {
	uint32_t name, shapes; /* shapes: with --group-by-shape, else NONE */
	uint64_t calls, total, self, dev_total, dev_self;
	uint64_t alloc;        /* bytes allocated in it (--memory traces) */
};

struct sitestat { /* ops below a Python frame (traces with stacks) */
	uint32_t site;    /* "file.py(12): f", the innermost Python frame */
	uint64_t calls, total;
};

struct kstat {
	uint32_t name;
	uint64_t calls, total, min, max;
};

struct frame {
	uint32_t name, cat;
	uint32_t shapes, site; /* "Input Dims" and the innermost "py_stack" line, or NONE */
	uint32_t types;        /* "Input type", or NONE */
	uint64_t ts, child;
	uint64_t flow_in; /* kernels: the flow from their launch's correlation */
	int64_t corr;     /* the "correlation" argument, or -1 */
};

struct track {
	struct frame *stack;
	int depth, overflow; /* overflow: begins past MAX_DEPTH, not kept */
	bool thread, gpu;
	int64_t pid, tid;    /* threads; GPU stream tracks: device, stream */
	uint8_t mem;         /* 1: "... memory allocated" counter, 2: "... reserved" */
	uint8_t dev_type, dev_id; /* memory counters: c10::Device of "cuda:0 ..." */
	uint32_t name;       /* counters: the track's name */
	int64_t peak;        /* counters: the largest value, and when */
	uint64_t peak_ts;
	int64_t value;       /* memory counters: the value in force */
	bool has_value;      /* ... once one was seen */
	size_t sibling;      /* memory counters: the pair's other track, index + 1 */
};

/* export: an allocated-bytes change waits one event for the reserved
 * counter its writer puts right after it (memtrack.c), then becomes a
 * Kineto "[memory]" instant. */
struct mem_pending {
	bool on;
	size_t track;  /* index into track_v */
	uint64_t ts;
	int64_t bytes; /* the change */
};

struct launch { /* at a correlation: the ops it was made in (op keys) */
	uint64_t ops[MAX_ANCESTORS];
	int nops;
};

struct report {
	struct strings str;
	uint32_t *rids;     /* the reader's string ids -> string id + 1 */
	size_t nrids;
	int pass;           /* 0: the pass that makes the tables; later: steps only */
	struct map tracks;  /* uuid -> index + 1 into track_v */
	struct track *track_v;
	size_t ntracks, track_cap;
	struct map ops;     /* name id -> index + 1 into op_v */
	struct opstat *op_v;
	size_t nops, op_cap;
	struct map sites;   /* site id -> index + 1 into site_v */
	struct sitestat *site_v;
	size_t nsites, site_cap;
	bool by_shape;      /* --group-by-shape */
	struct map kernels; /* name id -> index + 1 into k_v */
	struct kstat *k_v;
	size_t nk, k_cap;
	struct map launches; /* flow id -> index + 1 into launch_v, until its kernel */
	struct launch *launch_v;
	size_t nlaunch, launch_cap;
	size_t *launch_free; /* launch_v slots whose kernels came, to reuse */
	size_t nfree, free_cap;
	struct step_table *steps;
	uint64_t events;
	FILE *kineto;       /* export: Chrome/Kineto JSON events go here */
	bool kineto_first;
	struct mem_pending mem_pending;
	uint32_t name_correlation, name_alloc, name_dims, name_types, name_stack;
	uint32_t cat_cpu, cat_kernel, cat_memcpy, cat_memset, cat_rt, cat_drv, cat_loader,
		 cat_step, cat_bwd, cat_bwdfn, name_corr;
};

/* The entry of a growable array that key names (m: key -> index + 1),
 * zeroed and *added when new; NULL when out of memory. */
static void *keyed(struct map *m, uint64_t key, void **v, size_t *n, size_t *cap,
		   size_t unit, bool *added)
{
	uint64_t *slot = map_slot(m, key, true);

	*added = false;
	if (!slot)
		return NULL;
	if (!*slot) {
		if (!room(v, cap, *n, unit))
			return NULL;
		memset((char *)*v + *n * unit, 0, unit);
		*slot = ++*n;
		*added = true;
	}
	return (char *)*v + (*slot - 1) * unit;
}

static struct track *track_of(struct report *r, uint64_t uuid)
{
	bool added;

	return keyed(&r->tracks, uuid, (void **)&r->track_v, &r->ntracks, &r->track_cap,
		     sizeof(*r->track_v), &added);
}

/* An op's row: by name, or by name and input shapes (--group-by-shape). */
static uint64_t op_key(const struct report *r, const struct frame *f)
{
	uint64_t shapes = r->by_shape && f->shapes != NONE ? f->shapes + 1ull : 0;

	return shapes << 32 | f->name;
}

static struct opstat *op_of(struct report *r, uint64_t key)
{
	bool added;
	struct opstat *o = keyed(&r->ops, key + 1, (void **)&r->op_v, &r->nops, &r->op_cap,
				 sizeof(*r->op_v), &added);

	if (o && added) {
		o->name = (uint32_t)key;
		o->shapes = key >> 32 ? (uint32_t)(key >> 32) - 1 : NONE;
	}
	return o;
}

static void site_done(struct report *r, uint32_t site, uint64_t dur)
{
	bool added;
	struct sitestat *st = keyed(&r->sites, site + 1ull, (void **)&r->site_v, &r->nsites,
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
	struct kstat *k = keyed(&r->kernels, name, (void **)&r->k_v, &r->nk, &r->k_cap,
				sizeof(*r->k_v), &added);

	if (!k)
		return;
	if (added)
		*k = (struct kstat){ .name = name, .min = UINT64_MAX };
	k->calls++;
	k->total += dur;
	k->min = dur < k->min ? dur : k->min;
	k->max = dur > k->max ? dur : k->max;
}

/* At a launch's correlation: remember the ops open on that thread (until
 * its kernel comes: memory grows with the launches in flight only). */
static void note_launch(struct report *r, const struct track *t, uint64_t flow)
{
	struct launch l = { 0 };
	uint64_t *slot;
	size_t idx;

	for (int i = t->depth - 1; i >= 0 && l.nops < MAX_ANCESTORS; i--)
		if (t->stack[i].cat == r->cat_cpu)
			l.ops[l.nops++] = op_key(r, &t->stack[i]);
	if (!l.nops || !(slot = map_slot(&r->launches, flow, true)))
		return;
	if (*slot) { /* the same flow again: the later launch */
		r->launch_v[*slot - 1] = l;
		return;
	}
	if (r->nfree) {
		idx = r->launch_free[--r->nfree];
	} else if (room((void **)&r->launch_v, &r->launch_cap, r->nlaunch, sizeof(*r->launch_v))) {
		idx = r->nlaunch++;
	} else {
		map_del(&r->launches, flow);
		return;
	}
	r->launch_v[idx] = l;
	*slot = idx + 1;
}

/* A kernel's device time goes to the op that launched it (self) and to
 * every op around that one (total), each op name once. */
static void attribute_kernel(struct report *r, uint64_t flow, uint64_t dur)
{
	uint64_t *slot = map_slot(&r->launches, flow, false);
	const struct launch *l;
	size_t idx;

	if (!slot || !*slot)
		return;
	idx = *slot - 1;
	l = &r->launch_v[idx];
	for (int i = 0; i < l->nops; i++) {
		struct opstat *o;
		bool seen = false;

		for (int k = 0; k < i; k++)
			seen |= l->ops[k] == l->ops[i];
		if (seen || !(o = op_of(r, l->ops[i])))
			continue;
		o->dev_total += dur;
		if (i == 0)
			o->dev_self += dur;
	}
	map_del(&r->launches, flow);
	if (room((void **)&r->launch_free, &r->free_cap, r->nfree, sizeof(*r->launch_free)))
		r->launch_free[r->nfree++] = idx;
}

/* The report's id of a string of the trace; interned ones by their
 * reader id, once. */
static uint32_t rid(struct report *r, const struct tr_str *s)
{
	if (s->id == TR_INLINE)
		return str_id(&r->str, s->s, s->len);
	if (s->id >= r->nrids) {
		size_t n = r->nrids ? r->nrids : 256;
		uint32_t *g;

		while (n <= s->id)
			n *= 2;
		g = realloc(r->rids, n * sizeof(*g));
		if (!g)
			return str_id(&r->str, s->s, s->len);
		memset(g + r->nrids, 0, (n - r->nrids) * sizeof(*g));
		r->rids = g;
		r->nrids = n;
	}
	if (!r->rids[s->id])
		r->rids[s->id] = str_id(&r->str, s->s, s->len) + 1;
	return r->rids[s->id] - 1;
}

static void json_str(FILE *o, const char *s);

static void kineto_sep(struct report *r)
{
	fputs(r->kineto_first ? "\n  " : ",\n  ", r->kineto);
	r->kineto_first = false;
}

/* Track descriptors: threads (pid, tid), processes (their names, as
 * Kineto metadata), GPU stream tracks ("GPU d / stream s"). */
/* A memory counter track ("cuda:0 memory allocated"): its device, and
 * its pair's other track. */
static void memory_track(struct report *r, struct track *t, const char *name)
{
	const char *sp = strchr(name, ' ');
	size_t plen = sp ? (size_t)(sp - name) : strlen(name);
	uint32_t device;

	t->name = str_id(&r->str, name, strlen(name));
	if (!mem_device_parse(name, &device)) {
		t->dev_type = device & 0xff;
		t->dev_id = (device >> 8) & 0xff;
	}
	for (size_t i = 0; i < r->ntracks; i++) {
		struct track *o = &r->track_v[i];
		const char *on;

		if (o == t || !o->mem || o->mem == t->mem || o->pid != t->pid)
			continue;
		on = r->str.s[o->name];
		if (!strncmp(on, name, plen) && on[plen] == ' ') {
			o->sibling = (size_t)(t - r->track_v) + 1;
			t->sibling = i + 1;
		}
	}
}

/* The waiting "[memory]" instant, with the reserved bytes now in force. */
static void memory_flush(struct report *r)
{
	struct mem_pending *m = &r->mem_pending;
	const struct track *t;
	int64_t reserved;

	if (!m->on)
		return;
	m->on = false;
	t = &r->track_v[m->track];
	reserved = t->sibling ? r->track_v[t->sibling - 1].value : 0;
	kineto_sep(r);
	fprintf(r->kineto, "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", "
		"\"name\": \"[memory]\", \"pid\": %ld, \"tid\": 0, \"ts\": %.3f, \"args\": "
		"{\"Device Type\": %u, \"Device Id\": %u, \"Addr\": 0, \"Bytes\": %ld, "
		"\"Total Allocated\": %ld, \"Total Reserved\": %ld}}", (long)t->pid, m->ts / 1e3,
		t->dev_type, t->dev_id, (long)m->bytes, (long)t->value, (long)reserved);
}

/* A memory counter's new value; with the export on, the allocated
 * counter's changes become "[memory]" instants. */
static void memory_counter(struct report *r, struct track *t, uint64_t ts, int64_t v)
{
	struct mem_pending *m = &r->mem_pending;
	int64_t before = t->value;
	bool first = !t->has_value;

	if (v > t->peak || !t->peak_ts)
		t->peak = v, t->peak_ts = ts;
	t->value = v;
	t->has_value = true;
	if (!r->kineto || (first && t->mem == 1))
		return; /* the first value: what came before tracing, not one block */
	if (t->mem == 2 && m->on && t->sibling == m->track + 1 && m->ts == ts) {
		memory_flush(r); /* its reserved bytes came with it */
		return;
	}
	if (t->mem == 1) {
		memory_flush(r);
		/* Wrapping, not overflowing, on values no allocator reports. */
		*m = (struct mem_pending){ .on = true, .track = (size_t)(t - r->track_v), .ts = ts,
					   .bytes = (int64_t)((uint64_t)v - (uint64_t)before) };
	}
}

static void descriptor(struct report *r, const struct tr_track *d)
{
	int64_t pid = d->pid, tid = d->tid;
	struct track *t;

	if (d->parent && pid < 0) { /* a child track of a process: its pid */
		uint64_t *slot = map_slot(&r->tracks, d->parent, false);

		if (slot && *slot)
			pid = r->track_v[*slot - 1].pid, tid = 0;
	}
	if (!d->uuid || !(t = track_of(r, d->uuid)))
		return;
	t->thread = d->kind == TR_TRACK_THREAD;
	t->pid = pid;
	t->tid = tid;
	if (d->name.len && d->name.len < 64) {
		char buf[64];
		size_t len = d->name.len;
		unsigned dev, stream;

		memcpy(buf, d->name.s, len);
		buf[len] = 0;
		if (len > 17 && !strcmp(buf + len - 17, " memory allocated"))
			t->mem = 1;
		else if (len > 16 && !strcmp(buf + len - 16, " memory reserved"))
			t->mem = 2;
		if (t->mem)
			memory_track(r, t, buf);
		if (sscanf(buf, "GPU %u / stream %u", &dev, &stream) == 2) {
			t->gpu = true;
			t->pid = dev;
			t->tid = stream;
		}
	}
	if (r->kineto && d->proc_name.len &&
	    (d->kind == TR_TRACK_PROCESS || d->kind == TR_TRACK_THREAD)) {
		bool proc = d->kind == TR_TRACK_PROCESS;
		char buf[512];
		size_t len = d->proc_name.len < sizeof(buf) - 1 ? d->proc_name.len : sizeof(buf) - 1;

		memcpy(buf, d->proc_name.s, len);
		buf[len] = 0;
		kineto_sep(r);
		fprintf(r->kineto, "{\"ph\": \"M\", \"name\": \"%s\", \"pid\": %ld, \"tid\": %ld, "
			"\"args\": {\"name\": ", proc ? "process_name" : "thread_name", (long)pid,
			(long)(proc ? 0 : tid));
		json_str(r->kineto, buf);
		fputs("}}", r->kineto);
	}
}

/* ptbpf's categories as Kineto names them: backward nodes and their
 * evaluate_function records are ops there, steps and DataLoader regions
 * user annotations. */
static const char *kineto_cat(const char *cat)
{
	if (!strcmp(cat, "backward") || !strcmp(cat, "backward_function"))
		return "cpu_op";
	if (!strcmp(cat, "step") || !strcmp(cat, "dataloader"))
		return "user_annotation";
	return cat;
}

/* One list item at *p, advanced past it: a list of integers ("Input
 * Dims"), or a quoted name without quotes or backslashes ("Input type"). */
static bool int_list(const char **p)
{
	const char *q = *p;

	if (*q++ != '[')
		return false;
	while (*q == '-' || (*q >= '0' && *q <= '9') || *q == ',' || *q == ' ')
		q++;
	*p = q + 1;
	return *q == ']';
}

static bool plain_name(const char **p)
{
	const char *q = *p;

	if (*q++ != '"')
		return false;
	while (*q && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
		q++;
	*p = q + 1;
	return *q == '"';
}

/* "[item, item, ...]" and nothing after it, each item as item() reads. */
static bool is_list(const char *s, bool (*item)(const char **))
{
	const char *p = s;

	if (*p++ != '[')
		return false;
	while (*p != ']') {
		if (!item(&p))
			return false;
		if (*p == ',' && p[1] == ' ')
			p += 2;
		else if (*p != ']')
			return false;
	}
	return !p[1];
}

static bool is_dims(const char *s)
{
	return is_list(s, int_list);
}

static bool is_types(const char *s)
{
	return is_list(s, plain_name);
}

/* s, which ptbpf wrote as JSON, verbatim if it has the form ok() checks,
 * else as a JSON string. */
static void json_raw(FILE *o, const char *s, bool (*ok)(const char *))
{
	if (ok(s))
		fputs(s, o);
	else
		json_str(o, s);
}

/* One complete event, as Kineto writes them (microseconds). */
static void kineto_slice(struct report *r, const struct track *t, const struct frame *f,
			 uint64_t end)
{
	const char **S = r->str.s;

	if (t->pid < 0) /* not a thread, process or GPU track: a counter */
		return;
	kineto_sep(r);
	fprintf(r->kineto, "{\"ph\": \"X\", \"cat\": ");
	json_str(r->kineto, kineto_cat(f->cat < r->str.n ? S[f->cat] : ""));
	fputs(", \"name\": ", r->kineto);
	json_str(r->kineto, f->name < r->str.n ? S[f->name] : "");
	fprintf(r->kineto, ", \"pid\": %ld, \"tid\": %ld, \"ts\": %.3f, \"dur\": %.3f",
		(long)t->pid, (long)t->tid, f->ts / 1e3, (end > f->ts ? end - f->ts : 0) / 1e3);
	if (t->gpu)
		fprintf(r->kineto, ", \"args\": {\"device\": %ld, \"stream\": %ld%s",
			(long)t->pid, (long)t->tid, f->corr >= 0 ? ", " : "");
	else
		fputs(", \"args\": {", r->kineto);
	if (f->corr >= 0)
		fprintf(r->kineto, "\"correlation\": %ld", (long)f->corr);
	if (f->shapes != NONE && f->types != NONE) {
		fprintf(r->kineto, "%s\"Input Dims\": ", f->corr >= 0 ? ", " : "");
		json_raw(r->kineto, S[f->shapes], is_dims);
		fputs(", \"Input type\": ", r->kineto);
		json_raw(r->kineto, S[f->types], is_types);
	}
	fputs("}}", r->kineto);
	if (t->gpu && f->corr >= 0) { /* the launch -> kernel flow's end */
		kineto_sep(r);
		fprintf(r->kineto, "{\"ph\": \"f\", \"id\": %ld, \"pid\": %ld, \"tid\": %ld, "
			"\"ts\": %.3f, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
			(long)f->corr, (long)t->pid, (long)t->tid, f->ts / 1e3);
	}
}

/* What a track event's arguments say that the report uses. */
struct ev_args {
	int64_t corr;      /* "correlation", or -1 */
	uint64_t alloc;    /* "alloc_bytes" (at a slice's end) */
	uint32_t dims;     /* "Input Dims" string, or NONE */
	uint32_t types;    /* "Input type" string, or NONE */
	uint32_t site;     /* the first line of "py_stack", or NONE */
};

/* Which of the step table's kinds a slice is (SL_COUNT: none). */
static enum step_list slice_kind(const struct report *r, const struct track *t, uint32_t cat)
{
	if (cat == r->cat_cpu || cat == r->cat_bwd || cat == r->cat_bwdfn)
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

static void end_slice(struct report *r, struct track *t, uint64_t ts, const struct ev_args *a)
{
	struct frame f = t->stack[--t->depth];
	uint64_t dur = ts > f.ts ? ts - f.ts : 0;

	if (r->steps)
		steps_interval(r->steps, slice_kind(r, t, f.cat), f.ts, ts);
	if (r->pass)
		return; /* the step table's further passes */
	if (r->kineto)
		kineto_slice(r, t, &f, ts);
	if (t->depth > 0)
		t->stack[t->depth - 1].child += dur;
	if (f.site == NONE) /* stacks ride on the end */
		f.site = a->site;
	if (f.cat == r->cat_cpu) {
		struct opstat *o = op_of(r, op_key(r, &f));
		bool top = true;

		if (o) {
			o->calls++;
			o->total += dur;
			o->self += dur > f.child ? dur - f.child : 0;
			o->alloc += a->alloc;
		}
		for (int i = 0; i < t->depth && top; i++)
			top = t->stack[i].cat != r->cat_cpu;
		if (top && f.site != NONE) /* each op's time once: outermost ops only */
			site_done(r, f.site, dur);
	} else if (f.cat == r->cat_kernel) {
		kernel_done(r, f.name, dur);
		if (f.flow_in)
			attribute_kernel(r, f.flow_in, dur);
	} else if (f.cat == r->cat_step && r->steps) {
		steps_add(r->steps, f.ts, ts, f.name);
	}
}

/* The frame of a py_stack (innermost first, one per line) that the user
 * wrote: the innermost outside torch's own package, else the innermost. */
static uint32_t call_site(struct report *r, const char *s, size_t len)
{
	const char *p = s, *end = s + len;
	size_t first = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (p == s)
			first = n;
		if (!memmem(p, n, "/torch/", 7) && !memmem(p, n, "<frozen ", 8))
			return str_id(&r->str, p, n);
		p += n + 1;
	}
	return str_id(&r->str, s, first);
}

/* What the report uses of an event's debug annotations. */
static void event_args(struct report *r, const struct tr_event *e, struct ev_args *a)
{
	for (int i = 0; i < e->nargs; i++) {
		const struct tr_arg *g = &e->args[i];
		uint32_t an = rid(r, &g->name);
		int64_t v = g->type == TR_ARG_INT ? g->i : g->type == TR_ARG_UINT ? (int64_t)g->u : -1;

		if (an == r->name_correlation)
			a->corr = v;
		else if (an == r->name_alloc)
			a->alloc = (uint64_t)v;
		else if (an == r->name_dims && g->type == TR_ARG_STR)
			a->dims = str_id(&r->str, g->s.s, g->s.len);
		else if (an == r->name_types && g->type == TR_ARG_STR)
			a->types = str_id(&r->str, g->s.s, g->s.len);
		else if (an == r->name_stack && g->type == TR_ARG_STR)
			a->site = call_site(r, g->s.s, g->s.len);
	}
}

static void track_event(struct report *r, const struct tr_event *e)
{
	uint32_t name = e->has_name ? rid(r, &e->name) : UINT32_MAX;
	uint32_t cat = e->has_cat ? rid(r, &e->cat) : UINT32_MAX;
	struct ev_args a = { .corr = -1, .dims = NONE, .types = NONE, .site = NONE };
	struct track *t;

	if (!r->pass) {
		r->events++;
		event_args(r, e, &a);
	}
	if (!(t = track_of(r, e->track)))
		return;
	if (!r->pass && r->mem_pending.on && !(e->type == TE_COUNTER && t->mem == 2))
		memory_flush(r); /* no reserved counter came with it */
	if (e->type == TE_SLICE_BEGIN) {
		if (!t->stack && !(t->stack = calloc(MAX_DEPTH, sizeof(*t->stack))))
			return;
		if (t->depth < MAX_DEPTH)
			t->stack[t->depth++] = (struct frame){ .name = name, .cat = cat, .ts = e->ts,
							       .flow_in = e->nterm ? e->term[0] : 0,
							       .corr = a.corr, .shapes = a.dims,
							       .types = a.types, .site = a.site };
		else
			t->overflow++;
	} else if (e->type == TE_SLICE_END && t->overflow) {
		t->overflow--;
	} else if (e->type == TE_SLICE_END && t->depth > 0) {
		end_slice(r, t, e->ts, &a);
	} else if (r->pass) {
		return; /* counters and instants: the first pass's */
	} else if (e->type == TE_COUNTER && t->mem) {
		memory_counter(r, t, e->ts, e->counter);
	} else if (e->type == TE_INSTANT && name == r->name_corr) {
		for (int i = 0; i < e->nflows; i++)
			note_launch(r, t, e->flows[i]);
		if (r->kineto && a.corr >= 0) { /* the launch -> kernel flow's start */
			kineto_sep(r);
			fprintf(r->kineto, "{\"ph\": \"s\", \"id\": %ld, \"pid\": %ld, \"tid\": %ld, "
				"\"ts\": %.3f, \"cat\": \"ac2g\", \"name\": \"ac2g\"}", (long)a.corr,
				(long)t->pid, (long)t->tid, e->ts / 1e3);
		}
	}
}

/* One pass over the trace: 0, or -1 on a read error (printed). */
static int read_trace(struct report *r, struct tr_reader *tr)
{
	struct tr_packet p;
	struct tr_track d;
	struct tr_event *e = malloc(sizeof(*e));
	int got;

	if (!e)
		return -1;
	while ((got = tr_next(tr, &p)) > 0) {
		if (p.desc.n && !r->pass && tr_track(tr, &p, &d))
			descriptor(r, &d);
		if (p.event.n && tr_event(tr, &p, e))
			track_event(r, e);
	}
	free(e);
	return got;
}

static int op_by_total(const void *a, const void *b)
{
	const struct opstat *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static int op_by_alloc(const void *a, const void *b)
{
	const struct opstat *x = *(const struct opstat *const *)a,
			    *y = *(const struct opstat *const *)b;

	return x->alloc < y->alloc ? 1 : x->alloc > y->alloc ? -1 : 0;
}

static int site_by_total(const void *a, const void *b)
{
	const struct sitestat *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

/* The ops that allocated, most bytes first (NULL-terminated; caller frees). */
static const struct opstat **allocating_ops(const struct report *r, size_t *n)
{
	const struct opstat **v = calloc(r->nops + 1, sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < r->nops; i++)
		if (r->op_v[i].alloc)
			v[(*n)++] = &r->op_v[i];
	qsort(v, *n, sizeof(*v), op_by_alloc);
	return v;
}

static int k_by_total(const void *a, const void *b)
{
	const struct kstat *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

static void json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20)
			fprintf(o, "\\u%04x", c);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

static const char *const brk_names[STEP_BREAKDOWN] = { "Kernel", "Memcpy", "Memset", "Runtime",
							"DataLoader", "CPU Exec", "Other" };

/* Advice backed by the steps' breakdown: the share of step time each
 * category took, summed over all steps. */
static void recommendations(const struct report *r, const struct step_row *rows, size_t nrows,
			    FILE *o, bool json)
{
	uint64_t tot[STEP_BREAKDOWN] = { 0 }, all = 0;
	int n = 0;

	for (size_t i = 0; i < nrows; i++)
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			tot[k] += rows[i].brk[k], all += rows[i].brk[k];
	if (!all)
		return;
#define SHARE(k) (100.0 * tot[k] / all)
#define ADVICE(cond, ...) do { if (cond) { \
		if (json) fprintf(o, "%s\"", n ? ", " : ""); else fprintf(o, "  - "); \
		fprintf(o, __VA_ARGS__); fputs(json ? "\"" : "\n", o); n++; } } while (0)
	if (json)
		fputs(", \"recommendations\": [", o);
	else
		fputs("\nRecommendations (shares of all step time)\n", o);
	ADVICE(r->nk && SHARE(0) < 50 && SHARE(3) + SHARE(5) > 30,
	       "The GPU runs kernels %.0f%% of the time while the host spends %.0f%% in CUDA "
	       "calls and ops: launch-bound. Batch more work per launch (larger batches, "
	       "torch.compile, CUDA graphs).", SHARE(0), SHARE(3) + SHARE(5));
	ADVICE(SHARE(4) > 10, "DataLoader takes %.0f%% of the step time: more workers "
	       "(num_workers), pin_memory, or prefetching.", SHARE(4));
	ADVICE(SHARE(1) > 10, "Memcpy takes %.0f%%: keep tensors on the GPU, pin host memory "
	       "and copy with non_blocking=True.", SHARE(1));
	ADVICE(SHARE(6) > 25, "%.0f%% of the step is none of kernel, copy, CUDA call, "
	       "DataLoader or op time (Python, waits, other threads): look at the thread "
	       "tracks.", SHARE(6));
	ADVICE(!r->nk, "No GPU kernels in this trace: the steps are host time only (CPU "
	       "ops %.0f%%); the operator table is the place to look.", SHARE(5));
	ADVICE(!n && SHARE(0) >= 50, "The GPU runs kernels %.0f%% of the step time: the "
	       "kernels themselves are the target (see the kernel table).", SHARE(0));
	if (json)
		fputs("]", o);
#undef ADVICE
#undef SHARE
}

/* A string by id; "" for an id the trace never defined (a slice without
 * a name). */
static const char *str_at(const struct report *r, uint32_t id)
{
	return id < r->str.n ? r->str.s[id] : "";
}

/* Peaks of the memory counters, and the ops that allocated most. */
static void print_memory_text(const struct report *r, int top)
{
	const struct opstat **v;
	size_t n;
	bool any = false;

	for (size_t i = 0; i < r->ntracks; i++) {
		const struct track *t = &r->track_v[i];

		if (!t->mem || !t->peak_ts)
			continue;
		if (!any)
			printf("\nMemory (peaks of the allocator's counters)\n");
		any = true;
		printf("  pid %-8ld %-30s peak %10.2f MiB at %.6f s\n", (long)t->pid, str_at(r, t->name),
		       t->peak / 1048576.0, t->peak_ts / 1e9);
	}
	v = allocating_ops(r, &n);
	if (v && n) {
		printf("\nOps by bytes allocated in them (self)\n  %-44s %12s %8s\n", "op", "MiB",
		       "calls");
		for (size_t i = 0; i < n && (int)i < top; i++)
			printf("  %-44.44s %12.3f %8lu\n", str_at(r, v[i]->name), v[i]->alloc / 1048576.0,
			       (unsigned long)v[i]->calls);
	}
	free(v);
}

static void print_text(struct report *r, const char *path, const struct tr_reader *tr, int top,
		       const struct step_row *rows, size_t nrows, double secs)
{
	char how[512];

	tr_describe(tr, how, sizeof(how));
	printf("ptbpf report %s: %s; %lu track events in %.2f s (%.1f M/s)\n", path, how,
	       (unsigned long)r->events, secs, r->events / (secs > 0 ? secs : 1e-9) / 1e6);
	if (nrows) {
		/* The first `top` steps, then the mean of all of them. */
		size_t shown = nrows < (size_t)top ? nrows : (size_t)top;
		struct step_row mean = { 0 };

		for (size_t i = 0; i < nrows; i++) {
			mean.dur += rows[i].dur, mean.kernel_sum += rows[i].kernel_sum;
			mean.busy += rows[i].busy, mean.copy += rows[i].copy;
			mean.set += rows[i].set, mean.api += rows[i].api;
			mean.loader += rows[i].loader, mean.hostop += rows[i].hostop;
			for (int k = 0; k < STEP_BREAKDOWN; k++)
				mean.brk[k] += rows[i].brk[k];
		}
		printf("\nSteps (ms; GPU busy = kernels' union over the step)\n");
		printf("  %-18s %9s %9s %7s %8s %8s %9s %9s %9s\n", "step", "length", "kernels",
		       "busy%", "memcpy", "memset", "cuda api", "dataload", "host ops");
		for (size_t i = 0; i <= shown; i++) {
			const struct step_row *w = i < shown ? &rows[i] : &mean;
			double div = i < shown ? 1.0 : (double)nrows;

			if (i == shown && nrows > shown)
				printf("  ... %zu more steps (all of them: --json)\n",
				       nrows - shown);
			printf("  %-18.18s %9.3f %9.3f %6.1f%% %8.3f %8.3f %9.3f %9.3f %9.3f\n",
			       i < shown ? str_at(r, rows[i].name) : "mean of all",
			       w->dur / 1e6 / div, w->kernel_sum / 1e6 / div,
			       w->dur ? 100.0 * w->busy / w->dur : 0, w->copy / 1e6 / div,
			       w->set / 1e6 / div, w->api / 1e6 / div, w->loader / 1e6 / div,
			       w->hostop / 1e6 / div);
		}
		printf("\nStep time breakdown (ms; each instant counted once, in this order)\n  %-18s",
		       "step");
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			printf(" %10s", brk_names[k]);
		printf("\n");
		for (size_t i = 0; i <= shown; i++) {
			printf("  %-18.18s", i < shown ? str_at(r, rows[i].name) : "mean of all");
			for (int k = 0; k < STEP_BREAKDOWN; k++)
				printf(" %10.3f", (i < shown ? rows[i].brk[k] :
						   mean.brk[k] / (double)nrows) / 1e6);
			printf("\n");
		}
		recommendations(r, rows, nrows, stdout, false);
	}
	printf("\nOperators by host total time (ms; device = GPU time of the kernels they "
	       "launched)%s\n  %-44s %8s %10s %10s %10s %10s%s\n",
	       r->by_shape ? ", by op and input shapes" : "", "op", "calls", "host tot",
	       "host self", "dev tot", "dev self", r->by_shape ? "  input shapes" : "");
	for (size_t i = 0; i < r->nops && (int)i < top; i++) {
		const struct opstat *o = &r->op_v[i];

		printf("  %-44.44s %8lu %10.3f %10.3f %10.3f %10.3f", str_at(r, o->name),
		       (unsigned long)o->calls, o->total / 1e6, o->self / 1e6, o->dev_total / 1e6,
		       o->dev_self / 1e6);
		if (r->by_shape)
			printf("  %.120s", o->shapes != NONE ? str_at(r, o->shapes) : "-");
		printf("\n");
	}
	print_memory_text(r, top);
	if (r->nsites) {
		printf("\nPython call sites of the outermost ops (the innermost frame outside "
		       "torch; host ms)\n  %-70s %8s %10s\n", "site", "ops", "host tot");
		for (size_t i = 0; i < r->nsites && (int)i < top; i++)
			printf("  %-70.70s %8lu %10.3f\n", str_at(r, r->site_v[i].site),
			       (unsigned long)r->site_v[i].calls, r->site_v[i].total / 1e6);
	}
	if (r->nk) {
		printf("\nKernels by total device time\n  %-60s %8s %10s %9s %9s %9s\n", "kernel",
		       "calls", "total ms", "mean us", "min us", "max us");
		for (size_t i = 0; i < r->nk && (int)i < top; i++) {
			const struct kstat *k = &r->k_v[i];

			printf("  %-60.60s %8lu %10.3f %9.2f %9.2f %9.2f\n", str_at(r, k->name),
			       (unsigned long)k->calls, k->total / 1e6, k->total / 1e3 / k->calls,
			       k->min / 1e3, k->max / 1e3);
		}
	}
}

static void print_json(struct report *r, const char *path, const struct tr_reader *tr,
		       const struct step_row *rows, size_t nrows)
{
	const struct tr_status *st = tr_status(tr);

	printf("{\"trace\": ");
	json_str(stdout, path);
	printf(", \"trace_status\": {\"complete\": %s, \"cut\": %s, \"damaged\": %s, "
	       "\"packets\": %lu, \"bytes\": %lu, \"dropped_bytes\": %lu, "
	       "\"malformed_packets\": %lu}", st->complete ? "true" : "false",
	       st->cut ? "true" : "false", st->damaged ? "true" : "false",
	       (unsigned long)st->packets, (unsigned long)st->bytes, (unsigned long)st->dropped,
	       (unsigned long)st->undecodable);
	printf(", \"track_events\": %lu, \"steps\": [", (unsigned long)r->events);
	for (size_t i = 0; i < nrows; i++) {
		printf("%s{\"name\": ", i ? ", " : "");
		json_str(stdout, str_at(r, rows[i].name));
		printf(", \"start_ns\": %lu, \"dur_ns\": %lu, \"kernel_ns\": %lu, "
		       "\"gpu_busy_ns\": %lu, \"memcpy_ns\": %lu, \"memset_ns\": %lu, "
		       "\"cuda_api_ns\": %lu, \"dataloader_ns\": %lu, \"host_ops_ns\": %lu, "
		       "\"breakdown_ns\": {\"Kernel\": %lu, \"Memcpy\": %lu, \"Memset\": %lu, "
		       "\"Runtime\": %lu, \"DataLoader\": %lu, \"CPU Exec\": %lu, \"Other\": %lu}}",
		       (unsigned long)rows[i].start, (unsigned long)rows[i].dur,
		       (unsigned long)rows[i].kernel_sum, (unsigned long)rows[i].busy,
		       (unsigned long)rows[i].copy, (unsigned long)rows[i].set,
		       (unsigned long)rows[i].api, (unsigned long)rows[i].loader,
		       (unsigned long)rows[i].hostop, (unsigned long)rows[i].brk[0],
		       (unsigned long)rows[i].brk[1], (unsigned long)rows[i].brk[2],
		       (unsigned long)rows[i].brk[3], (unsigned long)rows[i].brk[4],
		       (unsigned long)rows[i].brk[5], (unsigned long)rows[i].brk[6]);
	}
	printf("]");
	recommendations(r, rows, nrows, stdout, true);
	printf(", \"operators\": [");
	for (size_t i = 0; i < r->nops; i++) {
		const struct opstat *o = &r->op_v[i];

		printf("%s{\"name\": ", i ? ", " : "");
		json_str(stdout, str_at(r, o->name));
		printf(", \"calls\": %lu, \"host_total_ns\": %lu, \"host_self_ns\": %lu, "
		       "\"device_total_ns\": %lu, \"device_self_ns\": %lu, \"alloc_bytes\": %lu",
		       (unsigned long)o->calls, (unsigned long)o->total, (unsigned long)o->self,
		       (unsigned long)o->dev_total, (unsigned long)o->dev_self,
		       (unsigned long)o->alloc);
		if (o->shapes != NONE) {
			printf(", \"input_shapes\": ");
			json_str(stdout, str_at(r, o->shapes));
		}
		printf("}");
	}
	printf("], \"memory\": [");
	for (size_t i = 0, n = 0; i < r->ntracks; i++) {
		const struct track *t = &r->track_v[i];

		if (!t->mem || !t->peak_ts)
			continue;
		printf("%s{\"pid\": %ld, \"counter\": ", n++ ? ", " : "", (long)t->pid);
		json_str(stdout, str_at(r, t->name));
		printf(", \"peak_bytes\": %ld, \"peak_ts_ns\": %lu}", (long)t->peak,
		       (unsigned long)t->peak_ts);
	}
	printf("], \"python_sites\": [");
	for (size_t i = 0; i < r->nsites; i++) {
		printf("%s{\"site\": ", i ? ", " : "");
		json_str(stdout, str_at(r, r->site_v[i].site));
		printf(", \"ops\": %lu, \"host_total_ns\": %lu}",
		       (unsigned long)r->site_v[i].calls, (unsigned long)r->site_v[i].total);
	}
	printf("], \"kernels\": [");
	for (size_t i = 0; i < r->nk; i++) {
		const struct kstat *k = &r->k_v[i];

		printf("%s{\"name\": ", i ? ", " : "");
		json_str(stdout, str_at(r, k->name));
		printf(", \"calls\": %lu, \"total_ns\": %lu, \"min_ns\": %lu, \"max_ns\": %lu}",
		       (unsigned long)k->calls, (unsigned long)k->total, (unsigned long)k->min,
		       (unsigned long)k->max);
	}
	printf("]}\n");
}

/* Intervals the step table keeps at most (16 bytes each): past them it
 * reads the trace again, a window of steps a pass. PTBPF_REPORT_INTERVALS
 * sets another budget (the tests make it small). */
#define REPORT_INTERVALS (1u << 18)

struct report_args {
	const char *path, *kineto;
	bool export, json, force;
	int top;
};

/* 0, or 2 with the usage printed. */
static int parse_args(int argc, char **argv, struct report_args *a, struct report *r)
{
	*a = (struct report_args){ .export = !strcmp(argv[1], "export"), .top = 25 };
	for (int i = 2; i < argc; i++) {
		char *end;

		if (a->export && !strcmp(argv[i], "--kineto") && i + 1 < argc && !a->kineto) {
			a->kineto = argv[++i];
		} else if (a->export && !strcmp(argv[i], "--force")) {
			a->force = true;
		} else if (!a->export && !strcmp(argv[i], "--json")) {
			a->json = true;
		} else if (!a->export && !strcmp(argv[i], "--group-by-shape")) {
			r->by_shape = true;
		} else if (!a->export && !strcmp(argv[i], "--top") && i + 1 < argc) {
			errno = 0;
			a->top = (int)strtol(argv[++i], &end, 10);
			if (errno || end == argv[i] || *end || a->top < 1) {
				fprintf(stderr, "ptbpf: report: --top takes a positive number, not '%s'\n",
					argv[i]);
				return 2;
			}
		} else if (!a->path && argv[i][0] != '-') {
			a->path = argv[i];
		} else {
			a->path = NULL;
			break;
		}
	}
	if (!a->path || (a->export && !a->kineto)) {
		fprintf(stderr, a->export ?
			"ptbpf: usage: ptbpf export --kineto OUT.json FILE.pftrace [--force]\n" :
			"ptbpf: usage: ptbpf report FILE.pftrace [--json] [--top N] "
			"[--group-by-shape]\n");
		return 2;
	}
	return 0;
}

/* The names the report looks for, as string ids. */
static bool report_init(struct report *r)
{
	r->str.set = str_set_new(1 << 20);
	if (!r->str.set)
		return false;
	r->cat_cpu = str_id(&r->str, "cpu_op", 6);
	r->cat_kernel = str_id(&r->str, "kernel", 6);
	r->cat_memcpy = str_id(&r->str, "gpu_memcpy", 10);
	r->cat_memset = str_id(&r->str, "gpu_memset", 10);
	r->cat_rt = str_id(&r->str, "cuda_runtime", 12);
	r->cat_drv = str_id(&r->str, "cuda_driver", 11);
	r->cat_loader = str_id(&r->str, "dataloader", 10);
	r->cat_step = str_id(&r->str, "step", 4);
	r->cat_bwd = str_id(&r->str, "backward", 8);
	r->cat_bwdfn = str_id(&r->str, "backward_function", 17);
	r->name_corr = str_id(&r->str, "cupti correlation", 17);
	r->name_correlation = str_id(&r->str, "correlation", 11);
	r->name_alloc = str_id(&r->str, "alloc_bytes", 11);
	r->name_dims = str_id(&r->str, "Input Dims", 10);
	r->name_types = str_id(&r->str, "Input type", 10);
	r->name_stack = str_id(&r->str, "py_stack", 8);
	return true;
}

static void report_free(struct report *r)
{
	for (size_t i = 0; i < r->ntracks; i++)
		free(r->track_v[i].stack);
	free(r->track_v);
	free(r->op_v);
	free(r->k_v);
	free(r->launch_v);
	free(r->launch_free);
	free(r->rids);
	free(r->str.s);
	str_set_free(r->str.set);
	map_free(&r->str.index);
	map_free(&r->tracks);
	map_free(&r->ops);
	map_free(&r->kernels);
	map_free(&r->sites);
	free(r->site_v);
	map_free(&r->launches);
	steps_free(r->steps);
}

/* The step table's further passes, while it asks for them. */
static int step_passes(struct report *r, struct tr_reader *tr)
{
	while (steps_next_pass(r->steps)) {
		if (tr_rewind(tr))
			return -1;
		r->pass++;
		for (size_t i = 0; i < r->ntracks; i++)
			r->track_v[i].depth = r->track_v[i].overflow = 0;
		if (read_trace(r, tr) < 0)
			return -1;
	}
	return 0;
}

/* export: the Kineto JSON under OUT.partial, through a FILE of its own. */
static int export_open(struct report *r, const struct report_args *a, struct outfile *out)
{
	int fd;

	if (outfile_open(out, a->kineto, a->force, (const char *const[]){ a->path }, 1, "export"))
		return -1;
	fd = dup(out->fd);
	if (fd < 0 || !(r->kineto = fdopen(fd, "w"))) {
		outfile_cannot_write("export", out->tmp, errno);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	r->kineto_first = true;
	fputs("{\"schemaVersion\": 1, \"displayTimeUnit\": \"ms\", \"traceName\": ", r->kineto);
	json_str(r->kineto, a->path);
	fputs(", \"deviceProperties\": [], \"traceEvents\": [", r->kineto);
	return 0;
}

static int export_close(struct report *r, const struct report_args *a, struct outfile *out)
{
	int err = 0;

	memory_flush(r);
	fputs("\n]}\n", r->kineto);
	if (ferror(r->kineto))
		err = EIO;
	if (fclose(r->kineto) && !err)
		err = errno;
	r->kineto = NULL;
	if (err) {
		fprintf(stderr, "ptbpf: export: writing %s failed: %s\n", out->tmp, strerror(err));
		return -1;
	}
	if (outfile_commit(out, "export"))
		return -1;
	fprintf(stderr, "ptbpf: export: wrote %s (%lu track events)\n", a->kineto,
		(unsigned long)r->events);
	return 0;
}

int report_main(int argc, char **argv)
{
	struct report r = { 0 };
	struct report_args a;
	struct outfile out = { .fd = -1 };
	struct tr_reader *tr = NULL;
	const struct step_row *rows = NULL;
	size_t nrows = 0;
	const char *budget = getenv("PTBPF_REPORT_INTERVALS");
	struct timespec t0, t1;
	int rc;

	rc = parse_args(argc, argv, &a, &r);
	if (rc)
		return rc;
	rc = 1;
	tr = tr_open(a.path, a.export ? "export" : "report");
	if (!tr || !report_init(&r))
		goto out;
	if (a.export && export_open(&r, &a, &out))
		goto out;
	if (!a.export &&
	    !(r.steps = steps_new(budget ? strtoul(budget, NULL, 10) : REPORT_INTERVALS)))
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (read_trace(&r, tr) < 0 || (r.steps && step_passes(&r, tr)))
		goto out;
	if (r.steps)
		rows = steps_rows(r.steps, &nrows);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	tr_warn_if_cut(tr, a.export ? "export" : "report");
	if (r.nops)
		qsort(r.op_v, r.nops, sizeof(*r.op_v), op_by_total);
	if (r.nk)
		qsort(r.k_v, r.nk, sizeof(*r.k_v), k_by_total);
	if (r.nsites)
		qsort(r.site_v, r.nsites, sizeof(*r.site_v), site_by_total);
	if (a.export) {
		if (export_close(&r, &a, &out))
			goto out;
	} else if (a.json) {
		print_json(&r, a.path, tr, rows, nrows);
	} else {
		print_text(&r, a.path, tr, a.top, rows, nrows,
			   (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	rc = 0;
out:
	if (r.kineto) /* failed half way */
		fclose(r.kineto);
	outfile_discard(&out);
	tr_close(tr);
	report_free(&r);
	return rc;
}
