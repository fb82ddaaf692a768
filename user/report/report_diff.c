// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf report --diff A.pftrace B.pftrace [--json] [--top N] [--html OUT]`:
 * what changed between two traces of a job, per operator (calls, host and
 * device total time) and per kernel (calls, total time), largest change
 * first, and their steps (count, mean length). Ops and kernels are matched
 * by name; one only in A or only in B shows zeros on the other side.
 */
#define _GNU_SOURCE
#include "report/report.h"

#include <stdlib.h>
#include <string.h>

#include "report/kname.h"
#include "report/report_data.h"

#define DIFF_KERNEL_WIDTH 80

struct diff_row {
	const char *name;
	char *display;      /* kernels */
	uint64_t calls[2], total[2], dev[2];
};

struct side {
	struct report r;
	struct tr_reader *tr;
	const struct step_row *rows;
	size_t nrows;
};

struct diff {
	const struct report_opts *opt;
	struct side s[2];
	struct diff_row *ops, *ks;
	size_t nops, nks;
};

static int64_t delta(const uint64_t v[2])
{
	return (int64_t)(v[1] - v[0]);
}

static int by_change(const void *a, const void *b)
{
	const struct diff_row *x = a, *y = b;
	int64_t dx = llabs(delta(x->total)) + llabs(delta(x->dev));
	int64_t dy = llabs(delta(y->total)) + llabs(delta(y->dev));

	return dx < dy ? 1 : dx > dy ? -1 : strcmp(x->name, y->name);
}

/* Rows of both sides matched by name: n rows into *out (NULL when out of memory). */
static struct diff_row *join(struct report *a, struct report *b, size_t na, size_t nb,
			     const struct rd_op *oa, const struct rd_op *ob,
			     const struct rd_kernel *ka, const struct rd_kernel *kb, size_t *n)
{
	struct diff_row *v = calloc(na + nb + 1, sizeof(*v));
	struct rd_map index = { 0 }; /* B's name id -> row + 1 */

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < na; i++) {
		uint32_t name = oa ? oa[i].name : ka[i].name;
		const char *s = rd_str(a, name);
		uint64_t *slot = rd_map_slot(&index, rd_str_id(b, s, strlen(s)), true);
		struct diff_row *d = &v[(*n)++];

		d->name = s;
		d->calls[0] = oa ? oa[i].calls : ka[i].calls;
		d->total[0] = oa ? oa[i].total : ka[i].total;
		d->dev[0] = oa ? oa[i].dev_total : 0;
		if (slot)
			*slot = *n;
	}
	for (size_t i = 0; i < nb; i++) {
		uint32_t name = ob ? ob[i].name : kb[i].name;
		uint64_t *slot = rd_map_slot(&index, name, false);
		struct diff_row *d = slot && *slot ? &v[*slot - 1] : &v[(*n)++];

		if (!d->name)
			d->name = rd_str(b, name);
		d->calls[1] = ob ? ob[i].calls : kb[i].calls;
		d->total[1] = ob ? ob[i].total : kb[i].total;
		d->dev[1] = ob ? ob[i].dev_total : 0;
	}
	rd_map_free(&index);
	qsort(v, *n, sizeof(*v), by_change);
	return v;
}

static void display_names(struct diff *d)
{
	const char **names = calloc(d->nks + 1, sizeof(*names));
	char **out = calloc(d->nks + 1, sizeof(*out));

	for (size_t i = 0; names && out && i < d->nks; i++) {
		names[i] = d->ks[i].name;
		out[i] = d->ks[i].display = malloc(DIFF_KERNEL_WIDTH + 1);
		if (!out[i])
			return;
	}
	if (names && out)
		kname_column(names, d->nks, DIFF_KERNEL_WIDTH, out);
	free(names);
	free(out);
}

static uint64_t mean_step(const struct side *s)
{
	uint64_t t = 0;

	for (size_t i = 0; i < s->nrows; i++)
		t += s->rows[i].dur;
	return s->nrows ? t / s->nrows : 0;
}

static uint64_t kernel_total(const struct side *s)
{
	uint64_t t = 0;

	for (size_t i = 0; i < s->r.nk; i++)
		t += s->r.k_v[i].total;
	return t;
}

static void print_text(const struct diff *d)
{
	int top = d->opt->top;

	printf("ptbpf report --diff: A %s, B %s (B - A; ms)\n", d->opt->path, d->opt->path_b);
	printf("  steps %zu / %zu, mean step %.3f / %.3f ms, kernel time %.3f / %.3f ms\n",
	       d->s[0].nrows, d->s[1].nrows, mean_step(&d->s[0]) / 1e6, mean_step(&d->s[1]) / 1e6,
	       kernel_total(&d->s[0]) / 1e6, kernel_total(&d->s[1]) / 1e6);
	printf("\nOperators by change (host total, then device total)\n  %-44s %9s %9s %10s "
	       "%10s %10s %10s %10s\n", "op", "calls A", "calls B", "host A", "host B", "diff",
	       "device A", "device B");
	for (size_t i = 0; i < d->nops && (int)i < top; i++) {
		const struct diff_row *o = &d->ops[i];

		printf("  %-44.44s %9lu %9lu %10.3f %10.3f %+10.3f %10.3f %10.3f\n", o->name,
		       (unsigned long)o->calls[0], (unsigned long)o->calls[1], o->total[0] / 1e6,
		       o->total[1] / 1e6, delta(o->total) / 1e6, o->dev[0] / 1e6, o->dev[1] / 1e6);
	}
	if (!d->nks)
		return;
	printf("\nKernels by change (total device time)\n  %-60s %8s %8s %10s %10s %10s\n",
	       "kernel", "calls A", "calls B", "total A", "total B", "diff");
	for (size_t i = 0; i < d->nks && (int)i < top; i++) {
		const struct diff_row *k = &d->ks[i];
		char name[64];

		kname_short(k->name, 60, name);
		printf("  %-60s %8lu %8lu %10.3f %10.3f %+10.3f\n", k->display ? k->display : name,
		       (unsigned long)k->calls[0], (unsigned long)k->calls[1], k->total[0] / 1e6,
		       k->total[1] / 1e6, delta(k->total) / 1e6);
	}
}

static void json_rows(FILE *o, const struct diff_row *v, size_t n, bool kernels)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(o, "%s{\"name\": ", i ? ", " : "");
		json_str(o, v[i].name);
		if (kernels) {
			fputs(", \"display_name\": ", o);
			json_str(o, v[i].display ? v[i].display : v[i].name);
			fprintf(o, ", \"calls_a\": %lu, \"calls_b\": %lu, \"total_a_ns\": %lu, "
				"\"total_b_ns\": %lu}", (unsigned long)v[i].calls[0],
				(unsigned long)v[i].calls[1], (unsigned long)v[i].total[0],
				(unsigned long)v[i].total[1]);
			continue;
		}
		fprintf(o, ", \"calls_a\": %lu, \"calls_b\": %lu, \"host_total_a_ns\": %lu, "
			"\"host_total_b_ns\": %lu, \"device_total_a_ns\": %lu, "
			"\"device_total_b_ns\": %lu}", (unsigned long)v[i].calls[0],
			(unsigned long)v[i].calls[1], (unsigned long)v[i].total[0],
			(unsigned long)v[i].total[1], (unsigned long)v[i].dev[0],
			(unsigned long)v[i].dev[1]);
	}
}

static void diff_json(FILE *o, void *ctx)
{
	const struct diff *d = ctx;

	fputs("{\"diff\": {\"a\": ", o);
	json_str(o, d->opt->path);
	fputs(", \"b\": ", o);
	json_str(o, d->opt->path_b);
	fprintf(o, ", \"steps_a\": %zu, \"steps_b\": %zu, \"mean_step_a_ns\": %lu, "
		"\"mean_step_b_ns\": %lu, \"kernel_total_a_ns\": %lu, \"kernel_total_b_ns\": %lu, "
		"\"operators\": [", d->s[0].nrows, d->s[1].nrows,
		(unsigned long)mean_step(&d->s[0]), (unsigned long)mean_step(&d->s[1]),
		(unsigned long)kernel_total(&d->s[0]), (unsigned long)kernel_total(&d->s[1]));
	json_rows(o, d->ops, d->nops, false);
	fputs("], \"kernels\": [", o);
	json_rows(o, d->ks, d->nks, true);
	fputs("]}}\n", o);
}

int report_diff(const struct report_opts *opt)
{
	struct diff d = { .opt = opt };
	int rc = 1;

	if (opt->html && report_html_check(opt))
		return 1;
	for (int i = 0; i < 2; i++) {
		if (report_read(&d.s[i].r, i ? opt->path_b : opt->path, opt, &d.s[i].tr))
			goto out;
		d.s[i].rows = steps_rows(d.s[i].r.steps, &d.s[i].nrows);
	}
	d.ops = join(&d.s[0].r, &d.s[1].r, d.s[0].r.ops.n, d.s[1].r.ops.n, d.s[0].r.ops.v,
		     d.s[1].r.ops.v, NULL, NULL, &d.nops);
	d.ks = join(&d.s[0].r, &d.s[1].r, d.s[0].r.nk, d.s[1].r.nk, NULL, NULL, d.s[0].r.k_v,
		    d.s[1].r.k_v, &d.nks);
	if (!d.ops || !d.ks)
		goto out;
	display_names(&d);
	if (opt->html && report_html_write(opt, opt->path, diff_json, &d))
		goto out;
	if (opt->json)
		diff_json(stdout, &d);
	else if (!opt->html)
		print_text(&d);
	rc = 0;
out:
	for (size_t i = 0; d.ks && i < d.nks; i++)
		free(d.ks[i].display);
	free(d.ops);
	free(d.ks);
	for (int i = 0; i < 2; i++) {
		tr_close(d.s[i].tr);
		rd_free(&d.s[i].r);
	}
	return rc;
}
