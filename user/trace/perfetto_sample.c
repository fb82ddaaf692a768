// SPDX-License-Identifier: BSD-2-Clause
/*
 * CPU samples as Perfetto's own perf sampler (traced_perf) writes them
 * (perfetto.h): a PerfSample packet per sample, stamped in MONOTONIC, whose
 * callstack is interned on the samples' sequence with its frames, their
 * mappings, function names and mapping paths, each defined in the packet
 * that first uses it. trace_processor (v58) resolves a frame only through
 * a mapping, so every frame has one.
 */
#define _GNU_SOURCE /* perfetto_int.h (strnlen, clock_gettime) */
#include "trace/perfetto_int.h"
#include "trace/pf_fields.h"

#include <stdlib.h>

/* Bounds of the sequence's tables: past one, the sequence starts over. */
#define SAMPLE_NAMES_MAX (1u << 18)
#define SAMPLE_NAME_BYTES (16u << 20)
#define SAMPLE_FRAMES_MAX (1u << 18)
#define SAMPLE_STACKS_MAX (1u << 18)
#define SAMPLE_NAME_LEN 1024 /* function names are cut here */

struct frame_ent {
	uint64_t mapping, name, rel_pc;
	uint32_t iid;
};

struct stack_ent {
	uint64_t *frames;
	uint32_t n, iid;
};

struct sample_seq {
	uint32_t id;
	bool started;                 /* its incremental state cleared */
	struct intern_table names;    /* function names */
	struct intern_table paths;    /* mapping paths (a mapping per path) */
	struct hash_table frames;     /* struct frame_ent */
	struct hash_table stacks;     /* struct stack_ent */
};

/* What one packet defines, in the order it writes them. */
struct sample_defs {
	uint64_t name_iid[PF_SAMPLE_FRAMES_MAX], path_iid[PF_SAMPLE_FRAMES_MAX];
	const char *name[PF_SAMPLE_FRAMES_MAX], *path[PF_SAMPLE_FRAMES_MAX];
	size_t name_len[PF_SAMPLE_FRAMES_MAX];
	struct frame_ent frame[PF_SAMPLE_FRAMES_MAX];
	int nnames, npaths, nframes;
	uint64_t stack[PF_SAMPLE_FRAMES_MAX];
	uint32_t stack_iid; /* the callstack's */
	bool stack_new;     /* ... defined in this packet */
};

static void tables_init(struct sample_seq *q)
{
	hash_init(&q->names.h, SAMPLE_NAMES_MAX, sizeof(struct intern_str));
	q->names.max_bytes = SAMPLE_NAME_BYTES;
	hash_init(&q->paths.h, SAMPLE_NAMES_MAX, sizeof(struct intern_str));
	q->paths.max_bytes = SAMPLE_NAME_BYTES;
	hash_init(&q->frames, SAMPLE_FRAMES_MAX, sizeof(struct frame_ent));
	hash_init(&q->stacks, SAMPLE_STACKS_MAX, sizeof(struct stack_ent));
}

static void tables_free(struct sample_seq *q)
{
	struct stack_ent *e;

	pf_intern_table_free(&q->names);
	pf_intern_table_free(&q->paths);
	hash_free(&q->frames);
	for (uint32_t i = 0; (e = hash_next(&q->stacks, &i));)
		free(e->frames);
	hash_free(&q->stacks);
}

void sample_seq_free(struct pf_writer *w)
{
	if (!w->samples)
		return;
	tables_free(w->samples);
	free(w->samples);
	w->samples = NULL;
}

static struct sample_seq *sample_seq(struct pf_writer *w)
{
	struct sample_seq *q = w->samples;

	if (q)
		return q;
	if (w->nseqs + SEQ_ID + 1 >= SEQ_MAX || !(q = calloc(1, sizeof(*q))))
		return NULL;
	q->id = w->main_seq.id + 1 + w->nseqs++;
	tables_init(q);
	return w->samples = q;
}

/* iid of s in t; new: its first use (defined in this packet). 0 if full. */
static uint64_t intern_new(struct intern_table *t, const char *s, size_t len, bool *is_new)
{
	uint32_t before = hash_count(&t->h);
	uint64_t iid = pf_intern(t, s, len);

	*is_new = iid && hash_count(&t->h) != before;
	return iid;
}

static bool frame_eq(const void *val, const void *key)
{
	const struct frame_ent *a = val, *b = key;

	return a->mapping == b->mapping && a->name == b->name && a->rel_pc == b->rel_pc;
}

static bool stack_eq(const void *val, const void *key)
{
	const struct stack_ent *a = val, *b = key;

	return a->n == b->n && !memcmp(a->frames, b->frames, a->n * sizeof(a->frames[0]));
}

/* Interns frame f into d->stack[i]; false if a table is full. */
static bool put_frame(struct sample_seq *q, const struct pf_frame *f, struct sample_defs *d,
		      int i)
{
	struct frame_ent k = { .rel_pc = f->rel_pc }, *e;
	const char *path = f->mapping ? f->mapping : "[unknown]";
	bool is_new;
	uint64_t h;

	k.mapping = intern_new(&q->paths, path, strnlen(path, PF_STR_MAX), &is_new);
	if (!k.mapping)
		return false;
	if (is_new) {
		d->path[d->npaths] = path;
		d->path_iid[d->npaths++] = k.mapping;
	}
	if (f->function) {
		size_t len = strnlen(f->function, SAMPLE_NAME_LEN);

		if (len == SAMPLE_NAME_LEN) /* cut at a UTF-8 boundary */
			while (len > 0 && ((uint8_t)f->function[len] & 0xC0) == 0x80)
				len--;
		if (!(k.name = intern_new(&q->names, f->function, len, &is_new)))
			return false;
		if (is_new) {
			d->name[d->nnames] = f->function;
			d->name_len[d->nnames] = len;
			d->name_iid[d->nnames++] = k.name;
		}
	}
	h = hash_pair(hash_pair(k.mapping, k.name), k.rel_pc);
	if (!(e = hash_get_eq(&q->frames, h, frame_eq, &k))) {
		if (!(e = hash_add(&q->frames, h)))
			return false;
		k.iid = hash_count(&q->frames);
		*e = k;
		d->frame[d->nframes++] = k;
	}
	d->stack[i] = e->iid;
	return true;
}

/* Interns s's callstack; false if a table is full. */
static bool put_stack(struct sample_seq *q, const struct pf_sample *s, struct sample_defs *d)
{
	struct stack_ent k = { .frames = d->stack, .n = (uint32_t)s->nframes }, *e;
	uint64_t h = 0x9e3779b97f4a7c15ull;

	d->nnames = d->npaths = d->nframes = 0;
	d->stack_new = false;
	for (int i = 0; i < s->nframes; i++) {
		if (!put_frame(q, &s->frames[i], d, i))
			return false;
		h = hash_pair(h, d->stack[i]);
	}
	if ((e = hash_get_eq(&q->stacks, h, stack_eq, &k))) {
		d->stack_iid = e->iid;
		return true;
	}
	if (!(e = hash_add(&q->stacks, h)))
		return false;
	e->n = k.n;
	e->iid = hash_count(&q->stacks);
	e->frames = malloc(k.n * sizeof(k.frames[0]) + 1);
	if (!e->frames) {
		hash_remove(&q->stacks, h, NULL);
		return false;
	}
	memcpy(e->frames, k.frames, k.n * sizeof(k.frames[0]));
	d->stack_iid = e->iid;
	d->stack_new = true;
	return true;
}

static void put_string(struct pb *b, uint32_t field, uint64_t iid, const char *s, size_t len)
{
	size_t at = pb_begin(b, field);

	pb_uint(b, F_ENTRY_IID, iid);
	pb_bytes(b, F_ENTRY_NAME, s, len);
	pb_end(b, at);
}

static void put_defs(struct pf_writer *w, const struct sample_defs *d, int nstack)
{
	struct pb *b = &w->pb;
	size_t at = pb_begin(b, F_PKT_INTERNED), m;

	for (int i = 0; i < d->nnames; i++)
		put_string(b, F_ID_FUNCTION_NAMES, d->name_iid[i], d->name[i], d->name_len[i]);
	for (int i = 0; i < d->npaths; i++) {
		put_string(b, F_ID_MAPPING_PATHS, d->path_iid[i], d->path[i],
			   strnlen(d->path[i], PF_STR_MAX));
		m = pb_begin(b, F_ID_MAPPINGS); /* one mapping per path, same iid */
		pb_uint(b, F_MAP_IID, d->path_iid[i]);
		pb_uint(b, F_MAP_PATHS, d->path_iid[i]);
		pb_end(b, m);
	}
	for (int i = 0; i < d->nframes; i++) {
		m = pb_begin(b, F_ID_FRAMES);
		pb_uint(b, F_FRAME_IID, d->frame[i].iid);
		if (d->frame[i].name)
			pb_uint(b, F_FRAME_NAME, d->frame[i].name);
		pb_uint(b, F_FRAME_MAPPING, d->frame[i].mapping);
		pb_uint(b, F_FRAME_REL_PC, d->frame[i].rel_pc);
		pb_end(b, m);
	}
	if (d->stack_new) {
		m = pb_begin(b, F_ID_CALLSTACKS);
		pb_uint(b, F_STACK_IID, d->stack_iid);
		for (int i = 0; i < nstack; i++)
			pb_uint(b, F_STACK_FRAMES, d->stack[i]);
		pb_end(b, m);
	}
	pb_end(b, at);
}

void pf_perf_sample(struct pf_writer *w, const struct pf_sample *s)
{
	static struct sample_defs d; /* one writer thread */
	struct pf_sample one = *s;
	struct sample_seq *q;
	size_t at;

	if (!w || w->copy || !(q = sample_seq(w)))
		return;
	if (one.nframes > PF_SAMPLE_FRAMES_MAX)
		one.nframes = PF_SAMPLE_FRAMES_MAX;
	if (one.nframes > 0 && !put_stack(q, &one, &d)) {
		/* A table is full: start the sequence over, with empty tables. */
		tables_free(q);
		tables_init(q);
		q->started = false;
		if (!put_stack(q, &one, &d))
			one.nframes = 0;
	}
	pf_packet_begin_on(w, q->id, q->started ? SEQ_NEEDS_INCREMENTAL_STATE :
			SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
	if (!q->started)
		pb_uint(&w->pb, F_PKT_FIRST_ON_SEQ, 1);
	q->started = true;
	pb_uint(&w->pb, F_PKT_TIMESTAMP, s->ts);
	pb_uint(&w->pb, F_PKT_CLOCK_ID, CLOCK_ID_MONOTONIC);
	if (one.nframes > 0)
		put_defs(w, &d, one.nframes);
	at = pb_begin(&w->pb, F_PKT_PERF_SAMPLE);
	pb_uint(&w->pb, F_PS_CPU, s->cpu);
	pb_uint(&w->pb, F_PS_PID, (uint32_t)s->pid);
	pb_uint(&w->pb, F_PS_TID, (uint32_t)s->tid);
	if (one.nframes > 0)
		pb_uint(&w->pb, F_PS_CALLSTACK, d.stack_iid);
	pb_uint(&w->pb, F_PS_CPU_MODE, CPU_MODE_USER);
	pb_end(&w->pb, at);
	pf_packet_end(w);
}
