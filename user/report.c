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

#include "memtrack.h"
#include "names.h"
#include "pbread.h"

enum {
	F_TRACE_PACKET = 1, F_PKT_TIMESTAMP = 8, F_PKT_SEQ_ID = 10, F_PKT_TRACK_EVENT = 11,
	F_PKT_INTERNED = 12, F_PKT_SEQ_FLAGS = 13, F_PKT_TRACK_DESC = 60,
	F_ID_CATEGORIES = 1, F_ID_NAMES = 2, F_ENTRY_IID = 1, F_ENTRY_NAME = 2,
	F_TD_UUID = 1, F_TD_NAME = 2, F_TD_PROCESS = 3, F_TD_THREAD = 4,
	F_PD_PID = 1, F_PD_NAME = 6, F_THD_PID = 1, F_THD_TID = 2, F_THD_NAME = 5,
	F_TE_ARGS = 4, F_ID_ARG_NAMES = 3, F_DA_NAME_IID = 1, F_DA_UINT = 3, F_DA_INT = 4,
	F_DA_NAME = 10, F_TD_PARENT = 5, F_DA_STRING = 6, F_TE_COUNTER = 30,
	F_TE_CAT_IIDS = 3, F_TE_TYPE = 9, F_TE_NAME_IID = 10, F_TE_TRACK = 11,
	F_TE_CATEGORIES = 22, F_TE_NAME = 23, F_TE_FLOWS = 47, F_TE_TERM_FLOWS = 48,
};
enum { TE_SLICE_BEGIN = 1, TE_SLICE_END = 2, TE_INSTANT = 3, TE_COUNTER = 4 };

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

struct interval {
	uint64_t start, end;
};

struct ivals {
	struct interval *v;
	size_t n, cap;
};

struct launch { /* at a correlation: the ops it was made in (op keys) */
	uint64_t ops[MAX_ANCESTORS];
	int nops;
};

struct report {
	struct strings str;
	struct map names;   /* seq << 32 | iid -> string id + 1 (event names) */
	struct map cats;    /* seq << 32 | iid -> string id + 1 (categories) */
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
	struct map launches; /* flow id -> index + 1 into launch_v */
	struct launch *launch_v;
	size_t nlaunch, launch_cap;
	struct ivals kern, copy, set, api, loader, hostop, steps;
	uint32_t *step_names; /* one per steps.v[] */
	size_t step_cap;
	uint64_t events;
	FILE *kineto;       /* export: Chrome/Kineto JSON events go here */
	bool kineto_first;
	struct mem_pending mem_pending;
	struct map argnames; /* seq << 32 | iid -> string id + 1 (arg names) */
	uint32_t name_correlation, name_alloc, name_dims, name_types, name_stack;
	uint32_t cat_cpu, cat_kernel, cat_memcpy, cat_memset, cat_rt, cat_drv, cat_loader,
		 cat_step, cat_bwd, cat_bwdfn, name_corr;
};

static bool push_ival(struct ivals *v, uint64_t s, uint64_t e)
{
	if (!room((void **)&v->v, &v->cap, v->n, sizeof(*v->v)))
		return false;
	v->v[v->n++] = (struct interval){ s, e };
	return true;
}

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

/* At a launch's correlation: remember the ops open on that thread. */
static void note_launch(struct report *r, const struct track *t, uint64_t flow)
{
	struct launch l = { 0 }, *slot;
	bool added;

	for (int i = t->depth - 1; i >= 0 && l.nops < MAX_ANCESTORS; i--)
		if (t->stack[i].cat == r->cat_cpu)
			l.ops[l.nops++] = op_key(r, &t->stack[i]);
	if (l.nops && (slot = keyed(&r->launches, flow, (void **)&r->launch_v, &r->nlaunch,
				    &r->launch_cap, sizeof(*r->launch_v), &added)))
		*slot = l;
}

/* A kernel's device time goes to the op that launched it (self) and to
 * every op around that one (total), each op name once. */
static void attribute_kernel(struct report *r, uint64_t flow, uint64_t dur)
{
	uint64_t *slot = map_slot(&r->launches, flow, false);
	const struct launch *l;

	if (!slot || !*slot)
		return;
	l = &r->launch_v[*slot - 1];
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
}

static uint32_t lookup(struct report *r, struct map *m, uint64_t seq, uint64_t iid)
{
	uint64_t *slot = map_slot(m, seq << 32 | iid, false);

	return slot && *slot ? (uint32_t)*slot - 1 : str_id(&r->str, "?", 1);
}

static void interned(struct report *r, uint64_t seq, const uint8_t *d, size_t n, bool *bad)
{
	const uint8_t *p = d;
	struct field f, g;

	while (next_field(&p, d + n, &f, bad)) {
		struct map *m = f.num == F_ID_NAMES ? &r->names :
				f.num == F_ID_CATEGORIES ? &r->cats :
				f.num == F_ID_ARG_NAMES ? &r->argnames : NULL;
		const uint8_t *q = f.d;
		uint64_t iid = 0, *slot;
		uint32_t id = 0;

		if (!m || f.wt != WT_LEN)
			continue;
		while (next_field(&q, f.d + f.len, &g, bad)) {
			if (g.num == F_ENTRY_IID && g.wt == WT_VARINT)
				iid = g.v;
			else if (g.num == F_ENTRY_NAME && g.wt == WT_LEN)
				id = str_id(&r->str, (const char *)g.d, g.len);
		}
		slot = map_slot(m, seq << 32 | iid, true);
		if (slot)
			*slot = (uint64_t)id + 1;
	}
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
	const struct track *t = &r->track_v[m->track];
	int64_t reserved = t->sibling ? r->track_v[t->sibling - 1].value : 0;

	if (!m->on)
		return;
	m->on = false;
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
		*m = (struct mem_pending){ .on = true, .track = (size_t)(t - r->track_v), .ts = ts,
					   .bytes = v - before };
	}
}

static void descriptor(struct report *r, const uint8_t *d, size_t n, bool *bad)
{
	const uint8_t *p = d, *q;
	struct field f, g;
	uint64_t uuid = 0, parent = 0;
	int64_t pid = -1, tid = -1;
	const uint8_t *name = NULL, *pname = NULL, *tname = NULL;
	size_t name_len = 0, pname_len = 0, tname_len = 0;
	bool thread = false, process = false;
	struct track *t;

	while (next_field(&p, d + n, &f, bad)) {
		if (f.num == F_TD_UUID && f.wt == WT_VARINT) {
			uuid = f.v;
		} else if (f.num == F_TD_PARENT && f.wt == WT_VARINT) {
			parent = f.v;
		} else if (f.num == F_TD_NAME && f.wt == WT_LEN) {
			name = f.d, name_len = f.len;
		} else if ((f.num == F_TD_THREAD || f.num == F_TD_PROCESS) && f.wt == WT_LEN) {
			thread = f.num == F_TD_THREAD;
			process = !thread;
			for (q = f.d; next_field(&q, f.d + f.len, &g, bad);) {
				if (g.num == F_THD_PID && g.wt == WT_VARINT)
					pid = (int32_t)g.v;
				else if (thread && g.num == F_THD_TID && g.wt == WT_VARINT)
					tid = (int64_t)g.v;
				else if (thread && g.num == F_THD_NAME && g.wt == WT_LEN)
					tname = g.d, tname_len = g.len;
				else if (process && g.num == F_PD_NAME && g.wt == WT_LEN)
					pname = g.d, pname_len = g.len;
			}
		}
	}
	if (parent && pid < 0) { /* a child track of a process: its pid */
		uint64_t *slot = map_slot(&r->tracks, parent, false);

		if (slot && *slot)
			pid = r->track_v[*slot - 1].pid, tid = 0;
	}
	if (!uuid || !(t = track_of(r, uuid)))
		return;
	t->thread = thread;
	t->pid = pid;
	t->tid = tid;
	if (name && name_len < 64) {
		char buf[64];
		unsigned dev, stream;

		memcpy(buf, name, name_len);
		buf[name_len] = 0;
		if (name_len > 17 && !strcmp(buf + name_len - 17, " memory allocated"))
			t->mem = 1;
		else if (name_len > 16 && !strcmp(buf + name_len - 16, " memory reserved"))
			t->mem = 2;
		if (t->mem)
			memory_track(r, t, buf);
		if (sscanf(buf, "GPU %u / stream %u", &dev, &stream) == 2) {
			t->gpu = true;
			t->pid = dev;
			t->tid = stream;
		}
	}
	if (r->kineto && (pname || tname)) {
		char buf[512];
		size_t len = pname ? pname_len : tname_len;

		len = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
		memcpy(buf, pname ? pname : tname, len);
		buf[len] = 0;
		kineto_sep(r);
		fprintf(r->kineto, "{\"ph\": \"M\", \"name\": \"%s\", \"pid\": %ld, \"tid\": %ld, "
			"\"args\": {\"name\": ", pname ? "process_name" : "thread_name", (long)pid,
			(long)(pname ? 0 : tid));
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

static void end_slice(struct report *r, struct track *t, uint64_t ts, const struct ev_args *a)
{
	struct frame f = t->stack[--t->depth];
	uint64_t alloc = a->alloc;

	uint64_t dur = ts > f.ts ? ts - f.ts : 0;

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
			o->alloc += alloc;
		}
		for (int i = 0; i < t->depth && top; i++)
			top = t->stack[i].cat != r->cat_cpu;
		if (top && f.site != NONE) /* each op's time once: outermost ops only */
			site_done(r, f.site, dur);
		if (t->thread)
			push_ival(&r->hostop, f.ts, ts);
	} else if ((f.cat == r->cat_bwd || f.cat == r->cat_bwdfn) && t->thread) {
		push_ival(&r->hostop, f.ts, ts); /* autograd's ops run inside these */
	} else if (f.cat == r->cat_kernel) {
		kernel_done(r, f.name, dur);
		push_ival(&r->kern, f.ts, ts);
		if (f.flow_in)
			attribute_kernel(r, f.flow_in, dur);
	} else if (f.cat == r->cat_memcpy) {
		push_ival(&r->copy, f.ts, ts);
	} else if (f.cat == r->cat_memset) {
		push_ival(&r->set, f.ts, ts);
	} else if (f.cat == r->cat_rt || f.cat == r->cat_drv) {
		push_ival(&r->api, f.ts, ts);
	} else if (f.cat == r->cat_loader) {
		push_ival(&r->loader, f.ts, ts);
	} else if (f.cat == r->cat_step) {
		if (room((void **)&r->step_names, &r->step_cap, r->steps.n,
			 sizeof(*r->step_names)) && push_ival(&r->steps, f.ts, ts))
			r->step_names[r->steps.n - 1] = f.name;
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

/* One debug annotation (f: its bytes) into a. */
static void arg(struct report *r, uint64_t seq, const struct field *f, struct ev_args *a,
		bool *bad)
{
	const uint8_t *q = f->d, *str = NULL;
	size_t len = 0;
	struct field g;
	uint32_t an = NONE;
	int64_t v = -1;

	while (next_field(&q, f->d + f->len, &g, bad)) {
		if (g.num == F_DA_NAME_IID && g.wt == WT_VARINT)
			an = lookup(r, &r->argnames, seq, g.v);
		else if (g.num == F_DA_NAME && g.wt == WT_LEN)
			an = str_id(&r->str, (const char *)g.d, g.len);
		else if ((g.num == F_DA_UINT || g.num == F_DA_INT) && g.wt == WT_VARINT)
			v = (int64_t)g.v;
		else if (g.num == F_DA_STRING && g.wt == WT_LEN)
			str = g.d, len = g.len;
	}
	if (an == r->name_correlation) {
		a->corr = v;
	} else if (an == r->name_alloc) {
		a->alloc = (uint64_t)v;
	} else if (an == r->name_dims && str) {
		a->dims = str_id(&r->str, (const char *)str, len);
	} else if (an == r->name_types && str) {
		a->types = str_id(&r->str, (const char *)str, len);
	} else if (an == r->name_stack && str) {
		a->site = call_site(r, (const char *)str, len);
	}
}

static void track_event(struct report *r, uint64_t seq, uint64_t ts, const uint8_t *d,
			size_t n, bool *bad)
{
	const uint8_t *p = d;
	struct field f;
	uint64_t type = 0, track = 0, flows[8], term[8];
	uint32_t name = UINT32_MAX, cat = UINT32_MAX;
	int nflows = 0, nterm = 0;
	int64_t counter = 0;
	struct ev_args a = { .corr = -1, .dims = NONE, .types = NONE, .site = NONE };
	struct track *t;

	while (next_field(&p, d + n, &f, bad)) {
		switch (f.num) {
		case F_TE_TYPE: type = f.v; break;
		case F_TE_TRACK: track = f.v; break;
		case F_TE_NAME_IID: name = lookup(r, &r->names, seq, f.v); break;
		case F_TE_NAME:
			if (f.wt == WT_LEN)
				name = str_id(&r->str, (const char *)f.d, f.len);
			break;
		case F_TE_CAT_IIDS: cat = lookup(r, &r->cats, seq, f.v); break;
		case F_TE_CATEGORIES:
			if (f.wt == WT_LEN)
				cat = str_id(&r->str, (const char *)f.d, f.len);
			break;
		case F_TE_FLOWS:
			if (nflows < 8)
				flows[nflows++] = f.v;
			break;
		case F_TE_TERM_FLOWS:
			if (nterm < 8)
				term[nterm++] = f.v;
			break;
		case F_TE_ARGS:
			if (f.wt == WT_LEN)
				arg(r, seq, &f, &a, bad);
			break;
		case F_TE_COUNTER:
			counter = (int64_t)f.v;
			break;
		}
	}
	r->events++;
	if (!(t = track_of(r, track)))
		return;
	if (r->mem_pending.on && !(type == TE_COUNTER && t->mem == 2))
		memory_flush(r); /* no reserved counter came with it */
	if (type == TE_SLICE_BEGIN) {
		if (!t->stack && !(t->stack = calloc(MAX_DEPTH, sizeof(*t->stack))))
			return;
		if (t->depth < MAX_DEPTH)
			t->stack[t->depth++] = (struct frame){ .name = name, .cat = cat, .ts = ts,
							       .flow_in = nterm ? term[0] : 0,
							       .corr = a.corr, .shapes = a.dims,
							       .types = a.types, .site = a.site };
		else
			t->overflow++;
	} else if (type == TE_SLICE_END && t->overflow) {
		t->overflow--;
	} else if (type == TE_SLICE_END && t->depth > 0) {
		end_slice(r, t, ts, &a);
	} else if (type == TE_COUNTER && t->mem) {
		memory_counter(r, t, ts, counter);
	} else if (type == TE_INSTANT && name == r->name_corr) {
		for (int i = 0; i < nflows; i++)
			note_launch(r, t, flows[i]);
		if (r->kineto && a.corr >= 0) { /* the launch -> kernel flow's start */
			kineto_sep(r);
			fprintf(r->kineto, "{\"ph\": \"s\", \"id\": %ld, \"pid\": %ld, \"tid\": %ld, "
				"\"ts\": %.3f, \"cat\": \"ac2g\", \"name\": \"ac2g\"}", (long)a.corr,
				(long)t->pid, (long)t->tid, ts / 1e3);
		}
	}
}

static void packet(struct report *r, const uint8_t *d, size_t n, bool *bad)
{
	const uint8_t *p = d, *te = NULL;
	size_t te_len = 0;
	uint64_t seq = 0, ts = 0;
	struct field f;

	while (next_field(&p, d + n, &f, bad)) {
		if (f.num == F_PKT_SEQ_ID && f.wt == WT_VARINT)
			seq = f.v;
		else if (f.num == F_PKT_TIMESTAMP && f.wt == WT_VARINT)
			ts = f.v;
	}
	p = d;
	while (next_field(&p, d + n, &f, bad)) {
		if (f.wt != WT_LEN)
			continue;
		if (f.num == F_PKT_INTERNED)
			interned(r, seq, f.d, f.len, bad);
		else if (f.num == F_PKT_TRACK_DESC)
			descriptor(r, f.d, f.len, bad);
		else if (f.num == F_PKT_TRACK_EVENT)
			te = f.d, te_len = f.len;
	}
	if (te)
		track_event(r, seq, ts, te, te_len, bad);
}

static int by_start(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorted, disjoint: the union of the intervals. */
static void merge_ivals(struct ivals *v)
{
	size_t k = 0;

	if (!v->n)
		return;
	qsort(v->v, v->n, sizeof(*v->v), by_start);
	for (size_t i = 1; i < v->n; i++) {
		if (v->v[i].start <= v->v[k].end) {
			if (v->v[i].end > v->v[k].end)
				v->v[k].end = v->v[i].end;
		} else {
			v->v[++k] = v->v[i];
		}
	}
	v->n = k + 1;
}

/* Length of (a union) within [s, e). */
static uint64_t within(const struct ivals *v, uint64_t s, uint64_t e)
{
	size_t lo = 0, hi = v->n;
	uint64_t sum = 0;

	while (lo < hi) { /* the first interval ending after s */
		size_t mid = (lo + hi) / 2;

		if (v->v[mid].end <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < v->n && v->v[i].start < e; i++) {
		uint64_t a = v->v[i].start > s ? v->v[i].start : s;
		uint64_t b = v->v[i].end < e ? v->v[i].end : e;

		sum += b > a ? b - a : 0;
	}
	return sum;
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

struct step_row {
	uint64_t start, dur, kernel_sum, busy, copy, set, api, loader, hostop;
	/* The TensorBoard plugin's breakdown: each instant of the step goes to
	 * the first of kernel, memcpy, memset, runtime, dataloader, CPU exec
	 * that covers it, else to other. */
	uint64_t brk[7];
};

static const char *const brk_names[7] = { "Kernel", "Memcpy", "Memset", "Runtime", "DataLoader",
					  "CPU Exec", "Other" };

static int by_start(const void *a, const void *b);

/* Length of the union of the first n interval lists within [s, e). */
static uint64_t union_within(struct ivals *const *lists, int n, uint64_t s, uint64_t e)
{
	struct ivals tmp = { 0 };
	uint64_t sum = 0, cur_s = 0, cur_e = 0;
	bool open = false;

	for (int l = 0; l < n; l++) {
		const struct ivals *v = lists[l];
		size_t lo = 0, hi = v->n;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (v->v[mid].end <= s)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t i = lo; i < v->n && v->v[i].start < e; i++)
			if (!push_ival(&tmp, v->v[i].start > s ? v->v[i].start : s,
				       v->v[i].end < e ? v->v[i].end : e))
				break;
	}
	qsort(tmp.v, tmp.n, sizeof(*tmp.v), by_start);
	for (size_t i = 0; i < tmp.n; i++) {
		if (open && tmp.v[i].start <= cur_e) {
			if (tmp.v[i].end > cur_e)
				cur_e = tmp.v[i].end;
			continue;
		}
		if (open)
			sum += cur_e - cur_s;
		cur_s = tmp.v[i].start;
		cur_e = tmp.v[i].end;
		open = true;
	}
	if (open)
		sum += cur_e - cur_s;
	free(tmp.v);
	return sum;
}

static void step_rows(struct report *r, struct step_row *rows)
{
	uint64_t longest = 0;
	size_t first = 0;

	/* Kernel time summed (concurrent streams add up), over kernels sorted
	 * by start: the ones overlapping a step start after its start minus
	 * the longest kernel. */
	qsort(r->kern.v, r->kern.n, sizeof(*r->kern.v), by_start);
	for (size_t k = 0; k < r->kern.n; k++)
		if (r->kern.v[k].end - r->kern.v[k].start > longest)
			longest = r->kern.v[k].end - r->kern.v[k].start;
	for (size_t i = 0; i < r->steps.n; i++) {
		uint64_t s = r->steps.v[i].start, e = r->steps.v[i].end;
		size_t lo = 0, hi = r->kern.n;

		rows[i] = (struct step_row){ .start = s, .dur = e - s };
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (r->kern.v[mid].start + longest < s)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (first = lo; first < r->kern.n && r->kern.v[first].start < e; first++) {
			uint64_t a = r->kern.v[first].start > s ? r->kern.v[first].start : s;
			uint64_t b = r->kern.v[first].end < e ? r->kern.v[first].end : e;

			rows[i].kernel_sum += b > a ? b - a : 0;
		}
	}
	merge_ivals(&r->kern); /* as a union: GPU busy */
	merge_ivals(&r->copy);
	merge_ivals(&r->set);
	merge_ivals(&r->api);
	merge_ivals(&r->loader);
	merge_ivals(&r->hostop);
	for (size_t i = 0; i < r->steps.n; i++) {
		uint64_t s = r->steps.v[i].start, e = r->steps.v[i].end;

		rows[i].busy = within(&r->kern, s, e);
		rows[i].copy = within(&r->copy, s, e);
		rows[i].set = within(&r->set, s, e);
		rows[i].api = within(&r->api, s, e);
		rows[i].loader = within(&r->loader, s, e);
		rows[i].hostop = within(&r->hostop, s, e);
		{
			struct ivals *const lists[6] = { &r->kern, &r->copy, &r->set, &r->api,
							 &r->loader, &r->hostop };
			uint64_t prev = 0;

			for (int k = 0; k < 6; k++) {
				uint64_t u = union_within(lists, k + 1, s, e);

				rows[i].brk[k] = u - prev;
				prev = u;
			}
			rows[i].brk[6] = rows[i].dur > prev ? rows[i].dur - prev : 0;
		}
	}
}

/* Advice backed by the steps' breakdown: the share of step time each
 * category took, summed over all steps. */
static void recommendations(const struct report *r, const struct step_row *rows, FILE *o,
			    bool json)
{
	uint64_t tot[7] = { 0 }, all = 0;
	int n = 0;

	for (size_t i = 0; i < r->steps.n; i++)
		for (int k = 0; k < 7; k++)
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

static void print_text(struct report *r, const char *path, int top, const struct step_row *rows,
		       double secs)
{

	printf("ptbpf report %s: %lu track events in %.2f s (%.1f M/s)\n", path,
	       (unsigned long)r->events, secs, r->events / (secs > 0 ? secs : 1e-9) / 1e6);
	if (r->steps.n) {
		/* The first `top` steps, then the mean of all of them. */
		size_t shown = r->steps.n < (size_t)top ? r->steps.n : (size_t)top;
		struct step_row mean = { 0 };

		for (size_t i = 0; i < r->steps.n; i++) {
			mean.dur += rows[i].dur, mean.kernel_sum += rows[i].kernel_sum;
			mean.busy += rows[i].busy, mean.copy += rows[i].copy;
			mean.set += rows[i].set, mean.api += rows[i].api;
			mean.loader += rows[i].loader, mean.hostop += rows[i].hostop;
			for (int k = 0; k < 7; k++)
				mean.brk[k] += rows[i].brk[k];
		}
		printf("\nSteps (ms; GPU busy = kernels' union over the step)\n");
		printf("  %-18s %9s %9s %7s %8s %8s %9s %9s %9s\n", "step", "length", "kernels",
		       "busy%", "memcpy", "memset", "cuda api", "dataload", "host ops");
		for (size_t i = 0; i <= shown; i++) {
			const struct step_row *w = i < shown ? &rows[i] : &mean;
			double div = i < shown ? 1.0 : (double)r->steps.n;

			if (i == shown && r->steps.n > shown)
				printf("  ... %zu more steps (all of them: --json)\n",
				       r->steps.n - shown);
			printf("  %-18.18s %9.3f %9.3f %6.1f%% %8.3f %8.3f %9.3f %9.3f %9.3f\n",
			       i < shown ? str_at(r, r->step_names[i]) : "mean of all",
			       w->dur / 1e6 / div, w->kernel_sum / 1e6 / div,
			       w->dur ? 100.0 * w->busy / w->dur : 0, w->copy / 1e6 / div,
			       w->set / 1e6 / div, w->api / 1e6 / div, w->loader / 1e6 / div,
			       w->hostop / 1e6 / div);
		}
		printf("\nStep time breakdown (ms; each instant counted once, in this order)\n  %-18s",
		       "step");
		for (int k = 0; k < 7; k++)
			printf(" %10s", brk_names[k]);
		printf("\n");
		for (size_t i = 0; i <= shown; i++) {
			printf("  %-18.18s", i < shown ? str_at(r, r->step_names[i]) : "mean of all");
			for (int k = 0; k < 7; k++)
				printf(" %10.3f", (i < shown ? rows[i].brk[k] :
						   mean.brk[k] / (double)r->steps.n) / 1e6);
			printf("\n");
		}
		recommendations(r, rows, stdout, false);
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

static void print_json(struct report *r, const char *path, const struct step_row *rows)
{

	printf("{\"trace\": ");
	json_str(stdout, path);
	printf(", \"track_events\": %lu, \"steps\": [", (unsigned long)r->events);
	for (size_t i = 0; i < r->steps.n; i++) {
		printf("%s{\"name\": ", i ? ", " : "");
		json_str(stdout, str_at(r, r->step_names[i]));
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
	recommendations(r, rows, stdout, true);
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

int report_main(int argc, char **argv)
{
	struct report r = { 0 };
	const char *path = NULL, *kineto = NULL;
	bool json = false, bad = false, export = !strcmp(argv[1], "export");
	int top = 25, rc = 1;
	struct step_row *rows = NULL;
	struct timespec t0, t1;
	uint8_t *data = NULL;
	long size = 0;
	FILE *f;

	for (int i = 2; i < argc; i++) {
		char *end;

		if (export && !strcmp(argv[i], "--kineto") && i + 1 < argc) {
			kineto = argv[++i];
		} else if (!export && !strcmp(argv[i], "--json")) {
			json = true;
		} else if (!export && !strcmp(argv[i], "--group-by-shape")) {
			r.by_shape = true;
		} else if (!strcmp(argv[i], "--top") && i + 1 < argc) {
			top = (int)strtol(argv[++i], &end, 10);
			if (*end || top < 1) {
				fprintf(stderr, "ptbpf: report: --top takes a positive number\n");
				return 2;
			}
		} else if (!path && argv[i][0] != '-') {
			path = argv[i];
		} else {
			path = NULL;
			break;
		}
	}
	if (!path || (export && !kineto)) {
		fprintf(stderr, export ? "ptbpf: usage: ptbpf export --kineto OUT.json FILE.pftrace\n" :
			"ptbpf: usage: ptbpf report FILE.pftrace [--json] [--top N] "
			"[--group-by-shape]\n");
		return 2;
	}
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(data = malloc(size ? size : 1)) || fread(data, 1, size, f) != (size_t)size) {
		fprintf(stderr, "ptbpf: report: cannot read %s: %s\n", path,
			errno ? strerror(errno) : "short read");
		goto out;
	}
	r.str.set = str_set_new(1 << 20);
	if (!r.str.set)
		goto out;
	r.cat_cpu = str_id(&r.str, "cpu_op", 6);
	r.cat_kernel = str_id(&r.str, "kernel", 6);
	r.cat_memcpy = str_id(&r.str, "gpu_memcpy", 10);
	r.cat_memset = str_id(&r.str, "gpu_memset", 10);
	r.cat_rt = str_id(&r.str, "cuda_runtime", 12);
	r.cat_drv = str_id(&r.str, "cuda_driver", 11);
	r.cat_loader = str_id(&r.str, "dataloader", 10);
	r.cat_step = str_id(&r.str, "step", 4);
	r.cat_bwd = str_id(&r.str, "backward", 8);
	r.cat_bwdfn = str_id(&r.str, "backward_function", 17);
	r.name_corr = str_id(&r.str, "cupti correlation", 17);
	r.name_correlation = str_id(&r.str, "correlation", 11);
	r.name_alloc = str_id(&r.str, "alloc_bytes", 11);
	r.name_dims = str_id(&r.str, "Input Dims", 10);
	r.name_types = str_id(&r.str, "Input type", 10);
	r.name_stack = str_id(&r.str, "py_stack", 8);
	if (kineto) {
		r.kineto = fopen(kineto, "wx");
		if (!r.kineto) {
			fprintf(stderr, "ptbpf: export: cannot create %s: %s\n", kineto,
				errno == EEXIST ? "it exists (not overwritten)" : strerror(errno));
			goto out;
		}
		r.kineto_first = true;
		fputs("{\"schemaVersion\": 1, \"displayTimeUnit\": \"ms\", \"traceName\": ", r.kineto);
		json_str(r.kineto, path);
		fputs(", \"deviceProperties\": [], \"traceEvents\": [", r.kineto);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	{
		const uint8_t *p = data, *end = data + size;
		struct field fl;

		while (next_field(&p, end, &fl, &bad))
			if (fl.num == F_TRACE_PACKET && fl.wt == WT_LEN)
				packet(&r, fl.d, fl.len, &bad);
	}
	if (bad) {
		fprintf(stderr, "ptbpf: report: %s is not a Perfetto trace (malformed protobuf)\n",
			path);
		goto out;
	}
	rows = calloc(r.steps.n ? r.steps.n : 1, sizeof(*rows));
	if (!rows)
		goto out;
	step_rows(&r, rows);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	qsort(r.op_v, r.nops, sizeof(*r.op_v), op_by_total);
	qsort(r.k_v, r.nk, sizeof(*r.k_v), k_by_total);
	qsort(r.site_v, r.nsites, sizeof(*r.site_v), site_by_total);
	if (r.kineto) {
		memory_flush(&r);
		fputs("\n]}\n", r.kineto);
		if (ferror(r.kineto) || fclose(r.kineto)) {
			r.kineto = NULL;
			fprintf(stderr, "ptbpf: export: writing %s failed\n", kineto);
			goto out;
		}
		r.kineto = NULL;
		fprintf(stderr, "ptbpf: export: wrote %s (%lu track events)\n", kineto,
			(unsigned long)r.events);
	} else if (json) {
		print_json(&r, path, rows);
	} else {
		print_text(&r, path, top, rows, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	rc = 0;
out:
	if (r.kineto) { /* failed half way: no partial file */
		fclose(r.kineto);
		unlink(kineto);
	}
	if (f)
		fclose(f);
	free(data);
	free(rows);
	for (size_t i = 0; i < r.ntracks; i++)
		free(r.track_v[i].stack);
	free(r.track_v);
	free(r.op_v);
	free(r.k_v);
	free(r.launch_v);
	free(r.step_names);
	free(r.str.s);
	str_set_free(r.str.set);
	map_free(&r.str.index);
	map_free(&r.names);
	map_free(&r.cats);
	map_free(&r.tracks);
	map_free(&r.ops);
	map_free(&r.kernels);
	map_free(&r.sites);
	free(r.site_v);
	map_free(&r.launches);
	map_free(&r.argnames);
	{
		struct ivals *all[] = { &r.kern, &r.copy, &r.set, &r.api, &r.loader, &r.hostop,
					&r.steps };

		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			free(all[i]->v);
	}
	return rc;
}
