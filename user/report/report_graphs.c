// SPDX-License-Identifier: BSD-2-Clause
/* The report's CUDA-graph and compiled-graph views. See report_graphs.h. */
#include "report/report_graphs.h"

#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"

/* One part of g's time: its row for name, the first free one, or other. */
static void add_part(struct rd_graph *g, uint32_t name, uint64_t ns)
{
	int i;

	for (i = 0; i < RD_GRAPH_PARTS && g->part[i].ns && g->part[i].name != name; i++)
		;
	if (i == RD_GRAPH_PARTS) {
		g->other_ns += ns;
		return;
	}
	g->part[i].name = name;
	g->part[i].ns += ns;
}

/* A kernel into the row of (pid, key): graph ids and AOT IDs repeat across
 * processes (ranks), so each process has rows of its own. */
static void add(struct rd_map *m, struct rd_graph **v, size_t *n, size_t *cap, int64_t pid,
		int64_t key, int64_t part, uint64_t dur)
{
	bool added;
	uint64_t k = hash_pair((uint64_t)pid, (uint64_t)key); /* both whole, in one hash */
	struct rd_graph *g = rd_keyed(m, k, (void **)v, n, cap, sizeof(**v), &added);

	if (!g)
		return;
	if (added)
		*g = (struct rd_graph){ .key = key, .pid = pid };
	g->kernels++;
	g->ns += dur;
	if (part != RD_UNSET) {
		g->ns_named += dur;
		add_part(g, (uint32_t)part, dur);
	}
}

static void graphs_kernel(struct report *r, const struct rd_track *t, const struct rd_frame *f,
			  uint64_t dur)
{
	const int64_t *v = f->a.v;
	int64_t pid = t->owner_pid > 0 ? t->owner_pid : -1; /* one value for "unknown" */

	if (v[A_GRAPH_ID] != RD_UNSET)
		add(&r->cuda_graphs, &r->cg_v, &r->ncg, &r->cg_cap, pid, v[A_GRAPH_ID],
		    v[A_CAPTURED_BY], dur);
	/* a graph by its AOT ID, else (older traces) by its module */
	if (v[A_INDUCTOR_GRAPH] != RD_UNSET || v[A_INDUCTOR_MODULE] != RD_UNSET)
		add(&r->compiled, &r->cc_v, &r->ncc, &r->cc_cap, pid,
		    v[A_INDUCTOR_GRAPH] != RD_UNSET ? v[A_INDUCTOR_GRAPH] : v[A_INDUCTOR_MODULE],
		    v[A_ATEN_OPS], dur);
}

static int by_time(const void *a, const void *b)
{
	const struct rd_graph *x = *(struct rd_graph *const *)a, *y = *(struct rd_graph *const *)b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* The rows, longest first (NULL when none or out of memory). */
static const struct rd_graph **sorted(const struct rd_graph *v, size_t n)
{
	const struct rd_graph **s = n ? malloc(n * sizeof(*s)) : NULL;

	for (size_t i = 0; s && i < n; i++)
		s[i] = &v[i];
	if (s)
		qsort(s, n, sizeof(*s), by_time);
	return s;
}

/* g's largest part: its index, or -1. */
static int top_part(const struct rd_graph *g)
{
	int best = -1;

	for (int i = 0; i < RD_GRAPH_PARTS && g->part[i].ns; i++)
		if (best < 0 || g->part[i].ns > g->part[best].ns)
			best = i;
	return best;
}

/* A module's file name (its path's last part); a graph's name as it is. */
static const char *last_part(const char *s)
{
	const char *slash = strrchr(s, '/');

	return slash ? slash + 1 : s;
}

/* Whether the rows are of more than one process. */
static bool several_pids(const struct rd_graph *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i].pid != v[0].pid)
			return true;
	return false;
}

static void text_table(const struct report *r, const struct rd_graph *v, size_t n, int top,
		       bool cuda)
{
	const struct rd_graph **s = sorted(v, n);
	bool pids = several_pids(v, n);

	if (!s)
		return;
	if (cuda)
		printf("\nCUDA graphs: replayed kernels, by the op that captured them (device ms)\n"
		       "  %s%-10s %8s %10s %9s  %s\n", pids ? "pid      " : "", "graph", "kernels",
		       "device ms", "captured", "largest capturing op");
	else
		printf("\nCompiled graphs (torch.compile): Triton kernels, by the ATen ops they fuse "
		       "(device ms)\n  %s%-14s %8s %10s  %s\n", pids ? "pid      " : "", "graph",
		       "kernels", "device ms", "largest fused ATen ops");
	for (size_t i = 0; i < n && (int)i < top; i++) {
		const struct rd_graph *g = s[i];
		int p = top_part(g);
		const char *part = p >= 0 ? rd_str(r, g->part[p].name) : "-";
		double share = p >= 0 ? 100.0 * g->part[p].ns / (g->ns ? g->ns : 1) : 0.0;

		if (pids)
			printf("  %-8ld ", (long)g->pid);
		else
			fputs("  ", stdout);
		if (cuda)
			printf("%-10ld %8lu %10.3f %8.1f%%  %s (%.1f%%)\n", (long)g->key,
			       (unsigned long)g->kernels, g->ns / 1e6,
			       100.0 * g->ns_named / (g->ns ? g->ns : 1), part, share);
		else
			printf("%-14.14s %8lu %10.3f  %.60s (%.1f%%)\n",
			       last_part(rd_str(r, (uint32_t)g->key)), (unsigned long)g->kernels,
			       g->ns / 1e6, part, share);
	}
	free(s);
}

void report_graphs_text(const struct report *r, int top)
{
	if (r->ncg)
		text_table(r, r->cg_v, r->ncg, top, true);
	if (r->ncc)
		text_table(r, r->cc_v, r->ncc, top, false);
}

static void json_table(FILE *o, const struct report *r, const char *key,
		       const struct rd_graph *v, size_t n, bool cuda)
{
	const struct rd_graph **s = sorted(v, n);

	fprintf(o, ", \"%s\": [", key);
	for (size_t i = 0; s && i < n; i++) {
		const struct rd_graph *g = s[i];

		fprintf(o, "%s{\"pid\": %ld, \"graph\": ", i ? ", " : "", (long)g->pid);
		if (cuda)
			fprintf(o, "%ld", (long)g->key);
		else
			json_str(o, rd_str(r, (uint32_t)g->key));
		fprintf(o, ", \"kernels\": %lu, \"device_ns\": %lu, \"%s\": %lu, \"parts\": [",
			(unsigned long)g->kernels, (unsigned long)g->ns,
			cuda ? "captured_ns" : "with_aten_ops_ns", (unsigned long)g->ns_named);
		for (int k = 0; k < RD_GRAPH_PARTS && g->part[k].ns; k++) {
			fputs(k ? ", {\"name\": " : "{\"name\": ", o);
			json_str(o, rd_str(r, g->part[k].name));
			fprintf(o, ", \"device_ns\": %lu}", (unsigned long)g->part[k].ns);
		}
		fprintf(o, "], \"other_ns\": %lu}", (unsigned long)g->other_ns);
	}
	fputs("]", o);
	free(s);
}

void report_graphs_json(FILE *o, const struct report *r)
{
	json_table(o, r, "cuda_graphs", r->cg_v, r->ncg, true);
	json_table(o, r, "compiled_graphs", r->cc_v, r->ncc, false);
}

static void graphs_free(struct report *r)
{
	free(r->cg_v);
	free(r->cc_v);
	rd_map_free(&r->cuda_graphs);
	rd_map_free(&r->compiled);
}

const struct rd_graph_view report_graph_view = { graphs_kernel, graphs_free };
