// SPDX-License-Identifier: BSD-2-Clause
/* The report's CPU samples. See report_samples.h. */
#define _GNU_SOURCE /* memrchr */
#include "report/report_samples.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TOP_MAX 10 /* rows of each table: the section stays short */

struct rd_count {
	uint32_t name, file; /* file: native functions only, else RD_NONE */
	bool unnamed;        /* a native function without a symbol: name is the file's */
	uint64_t n;
};

struct rd_table {
	struct rd_map index; /* name id -> index + 1 */
	struct rd_count *v;
	size_t n, cap;
};

struct rd_sample_proc {
	int64_t pid;
	uint64_t samples, with_python, with_native;
	struct rd_table py, native;
};

struct rd_samples {
	struct rd_sample_proc *v;
	size_t n, cap;
	struct rd_map index; /* pid -> index + 1 */
};

static struct rd_count *count_of(struct rd_table *t, uint32_t name)
{
	bool added;
	struct rd_count *c = rd_keyed(&t->index, name, (void **)&t->v, &t->n, &t->cap,
				      sizeof(*t->v), &added);

	if (c && added)
		*c = (struct rd_count){ .name = name, .file = RD_NONE };
	return c;
}

static struct rd_sample_proc *proc_of(struct report *r, int64_t pid)
{
	struct rd_samples *s = r->samples;
	struct rd_sample_proc *p;
	bool added;

	if (!s && !(s = r->samples = calloc(1, sizeof(*s))))
		return NULL;
	p = rd_keyed(&s->index, (uint64_t)pid, (void **)&s->v, &s->n, &s->cap, sizeof(*s->v),
		     &added);
	if (p && added)
		p->pid = pid;
	return p;
}

/* The file's last path component: where a function has no name. */
static struct tr_str basename_of(const struct tr_str *path)
{
	struct tr_str b = *path;
	const char *slash = b.len ? memrchr(b.s, '/', b.len) : NULL;

	if (slash) {
		b.len -= (uint32_t)(slash + 1 - b.s);
		b.s = slash + 1;
		b.id = TR_INLINE;
	}
	return b;
}

bool rd_samples_add(struct report *r, const struct tr_sample *s)
{
	struct rd_sample_proc *p = proc_of(r, s->pid);
	struct rd_count *c;

	if (!p)
		return false;
	p->samples++;
	if (s->has_py) {
		if (!(c = count_of(&p->py, rd_rid(r, &s->py_leaf))))
			return false;
		c->n++;
		p->with_python++;
	}
	if (s->has_native) {
		struct tr_str file = basename_of(&s->native_file);
		uint32_t name = s->native_leaf.len ? rd_rid(r, &s->native_leaf) :
				rd_rid(r, &file);

		if (!(c = count_of(&p->native, name)))
			return false;
		c->file = rd_rid(r, &file);
		c->unnamed = !s->native_leaf.len;
		c->n++;
		p->with_native++;
	}
	return true;
}

static void table_free(struct rd_table *t)
{
	rd_map_free(&t->index);
	free(t->v);
}

void rd_samples_free(struct report *r)
{
	struct rd_samples *s = r->samples;

	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		table_free(&s->v[i].py);
		table_free(&s->v[i].native);
	}
	rd_map_free(&s->index);
	free(s->v);
	free(s);
	r->samples = NULL;
}

static int by_count(const void *a, const void *b)
{
	const struct rd_count *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

/* The table's rows, most samples first (sorted in place: the index is
 * not used after the pass). */
static size_t top_rows(const struct rd_table *t, int top)
{
	size_t n = top < TOP_MAX ? (size_t)(top > 0 ? top : 0) : TOP_MAX;

	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), by_count);
	return t->n < n ? t->n : n;
}

static const char *proc_name(const struct report *r, int64_t pid)
{
	for (int i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid)
			return rd_str(r, r->procs[i].name);
	return "";
}

static int64_t sample_hz(const struct report *r)
{
	for (int i = 0; i < r->nattrs; i++)
		if (!r->attrs[i].is_str && !strcmp(rd_str(r, r->attrs[i].key), "dev.ptbpf.cpu_sample_hz"))
			return r->attrs[i].i;
	return 0;
}

void report_samples_text(const struct report *r, int top)
{
	const struct rd_samples *s = r->samples;
	int64_t hz = sample_hz(r);

	if (!s || !s->n)
		return;
	printf("\nCPU samples of the traced threads (%s%" PRId64 " per second of a thread's CPU "
	       "time): where each process's CPU time went\n", hz ? "" : "rate unknown: ", hz);
	for (size_t i = 0; i < s->n; i++) {
		const struct rd_sample_proc *p = &s->v[i];
		size_t npy = top_rows(&p->py, top), nnat = top_rows(&p->native, top);

		printf("  pid %" PRId64 " %s: %lu samples (%.1f s of CPU), %.0f%% in Python code\n",
		       p->pid, proc_name(r, p->pid), (unsigned long)p->samples,
		       hz ? (double)p->samples / (double)hz : 0.0,
		       100.0 * (double)p->with_python / (double)p->samples);
		if (npy)
			printf("    %-72s %8s %6s\n", "innermost Python frame", "samples", "share");
		for (size_t k = 0; k < npy; k++)
			printf("    %-72.72s %8lu %5.1f%%\n", rd_str(r, p->py.v[k].name),
			       (unsigned long)p->py.v[k].n, 100.0 * p->py.v[k].n / p->samples);
		if (nnat)
			printf("    %-72s %8s %6s\n", "native function (leaf; file)", "samples", "share");
		for (size_t k = 0; k < nnat; k++) {
			char what[256];

			snprintf(what, sizeof(what), "%s (%s)", p->native.v[k].unnamed ? "?" :
				 rd_str(r, p->native.v[k].name), rd_str(r, p->native.v[k].file));
			printf("    %-72.72s %8lu %5.1f%%\n", what, (unsigned long)p->native.v[k].n,
			       100.0 * p->native.v[k].n / p->samples);
		}
	}
}

static void json_rows(FILE *o, const struct report *r, const struct rd_sample_proc *p,
		      const struct rd_table *t, size_t n, bool native)
{
	for (size_t k = 0; k < n; k++) {
		fprintf(o, "%s{\"%s\": ", k ? ", " : "", native ? "function" : "frame");
		json_str(o, t->v[k].unnamed ? "" : rd_str(r, t->v[k].name));
		if (native) {
			fputs(", \"file\": ", o);
			json_str(o, rd_str(r, t->v[k].file));
		}
		fprintf(o, ", \"samples\": %lu, \"share\": %.4f}", (unsigned long)t->v[k].n,
			(double)t->v[k].n / (double)p->samples);
	}
}

void report_samples_json(FILE *o, const struct report *r, int top)
{
	const struct rd_samples *s = r->samples;

	fprintf(o, ", \"cpu_sample_hz\": %" PRId64 ", \"cpu_samples\": [", sample_hz(r));
	for (size_t i = 0; s && i < s->n; i++) {
		const struct rd_sample_proc *p = &s->v[i];
		size_t npy = top_rows(&p->py, top), nnat = top_rows(&p->native, top);

		fprintf(o, "%s{\"pid\": %" PRId64 ", \"name\": ", i ? ", " : "", p->pid);
		json_str(o, proc_name(r, p->pid));
		fprintf(o, ", \"samples\": %lu, \"with_python\": %lu, \"python\": [",
			(unsigned long)p->samples, (unsigned long)p->with_python);
		json_rows(o, r, p, &p->py, npy, false);
		fputs("], \"native\": [", o);
		json_rows(o, r, p, &p->native, nnat, true);
		fputs("]}", o);
	}
	fputs("]", o);
}
