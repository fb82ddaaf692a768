// SPDX-License-Identifier: BSD-2-Clause
/*
 * The job's ranks in a capture: what the pass keeps for the hang summary
 * (report_hang.c), and the "waiting for" table (report_ranks.h).
 *
 * Collectives are matched across ranks by their ends: a collective ends
 * on every rank once the last one has entered it, so, sorted by end, one
 * collective's slices come together, each rank's once, and every rank's
 * entry is before every rank's end. A rank's arrival is its slice's
 * start; the others waited for the last one from the second-last
 * arrival (every one of them) or from their own (in all). The late rank's
 * thread between the second-last arrival and its own goes to the step
 * table's machinery (struct report's late), whose rows the kernel view's
 * causes split, as the GPU idle gaps are.
 */
#define _GNU_SOURCE
#include "report/report_ranks_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/step_table.h"

static struct rk_data *data(struct report *r)
{
	if (!r->ranks)
		r->ranks = calloc(1, sizeof(*r->ranks));
	return r->ranks;
}

struct rk_thread *rk_thread_of(struct report *r, int64_t pid, int64_t tid)
{
	struct rk_data *d = data(r);
	struct rk_thread *t;
	bool added;

	if (!d || tid <= 0 || (d->nth >= RK_MAX_THREADS &&
			       !rd_map_slot(&d->thread_ix, (uint64_t)tid, false)))
		return NULL;
	t = rd_keyed(&d->thread_ix, (uint64_t)tid, (void **)&d->th, &d->nth, &d->th_cap,
		     sizeof(*d->th), &added);
	if (t && added) {
		t->tid = tid;
		t->stack = t->call = RD_NONE;
	}
	if (t && pid > 0)
		t->pid = pid;
	return t;
}

void rk_rank_name(const struct report *r, int64_t pid, char *buf, size_t len)
{
	for (int i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid && r->procs[i].rank >= 0) {
			snprintf(buf, len, "rank %ld", (long)r->procs[i].rank);
			return;
		}
	snprintf(buf, len, "pid %ld", (long)pid);
}

static void count(struct rk_count *c, int n, uint32_t name, uint64_t v)
{
	for (int i = 0; i < n; i++)
		if (c[i].name == name || !c[i].n) {
			c[i].name = name;
			c[i].n += v;
			return;
		}
}

static int by_count(const void *a, const void *b)
{
	const struct rk_count *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

void rk_causes_line(const struct report *r, const struct rk_thread *t, char *buf, size_t len)
{
	struct rk_count c[RK_CAUSES];
	size_t at = 0;

	buf[0] = 0;
	memcpy(c, t->cause, sizeof(c));
	qsort(c, RK_CAUSES, sizeof(*c), by_count);
	for (int i = 0; i < 3 && c[i].n && at < len; i++) {
		int pct = (int)(100.0 * c[i].n / (t->cause_ns ? t->cause_ns : 1) + 0.5);

		if (pct < 1 && i)
			break;
		at += (size_t)snprintf(buf + at, len - at, "%s%s %d%%", i ? ", " : "",
				       rd_str(r, c[i].name), pct);
	}
}

static bool push(struct rk_data *d, struct rk_item **v, size_t *n, size_t *cap,
		 const struct rk_item *it)
{
	if (d->nregions + d->nops + d->nsteps >= RK_MAX_ITEMS ||
	    !rd_room((void **)v, cap, *n, sizeof(**v))) {
		d->dropped++;
		return false;
	}
	(*v)[(*n)++] = *it;
	return true;
}

/* c10d's profiling title of a collective ("gloo:all_reduce"). */
static bool coll_region(const char *s)
{
	return !strncmp(s, "gloo:", 5) || !strncmp(s, "nccl:", 5) || !strncmp(s, "mpi:", 4) ||
	       !strncmp(s, "ucc:", 4);
}

static void blocked(struct report *r, const struct rd_track *t, const struct rd_frame *f)
{
	struct rk_thread *th;

	if (f->a.v[A_BEGUN_BEFORE] == RD_UNSET || f->a.v[A_STACK] == RD_UNSET ||
	    !(th = rk_thread_of(r, t->pid, t->owner_tid)) || th->call != RD_NONE)
		return;
	th->stack = (uint32_t)f->a.v[A_STACK];
	th->call = f->name;
}

static void rk_slice(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		     uint64_t end)
{
	struct rk_data *d = data(r);
	const char *name = rd_str(r, f->name);
	struct rk_item it = { .pid = t->pid, .tid = t->tid, .name = f->name, .start = f->ts,
			      .end = end };

	if (!d)
		return;
	if (t->owner_tid) {
		blocked(r, t, f);
		return;
	}
	if (!t->thread)
		return;
	if (coll_region(name)) {
		push(d, &d->regions, &d->nregions, &d->regions_cap, &it);
	} else if (!strncmp(name, "c10d::", 6)) {
		for (int i = 0; i < t->depth; i++) /* the outermost only */
			if (!strncmp(rd_str(r, t->stack[i].name), "c10d::", 6))
				return;
		push(d, &d->ops, &d->nops, &d->ops_cap, &it);
	} else if (!strncmp(name, "ProfilerStep#", 13)) {
		push(d, &d->steps, &d->nsteps, &d->steps_cap, &it);
	}
}

static void hang_arg(struct report *r, struct rk_hang *h, const struct tr_arg *g)
{
	static const char *const u[] = { "gone_ts", "steps", "step_start", "median_step_ns",
					 "coll_entered", "coll_left", "coll_left_seq",
					 "coll_enter_ts", "coll_left_ts", "coll_open_ts",
					 "limit_ns" };
	uint64_t *dst[] = { &h->gone_ts, &h->steps, &h->step_start, &h->median,
			    &h->coll_entered, &h->coll_left, &h->coll_left_seq,
			    &h->coll_enter_ts, &h->coll_left_ts, &h->coll_open_ts, &h->limit };
	const char *k = rd_str(r, rd_rid(r, &g->name));
	uint32_t s = g->type == TR_ARG_STR ? rd_rid(r, &g->s) : RD_NONE;

	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++)
		if (!strcmp(k, u[i]) && g->type != TR_ARG_STR)
			*dst[i] = g->u;
	if (!strcmp(k, "pid") && g->type == TR_ARG_INT)
		h->pid = g->i;
	else if (!strcmp(k, "seen_hung"))
		h->seen_hung = g->u != 0;
	else if (!strcmp(k, "rank"))
		h->rank = s;
	else if (!strcmp(k, "state"))
		h->state = s;
	else if (!strcmp(k, "coll_name"))
		h->coll_name = s;
	else if (!strcmp(k, "coll_left_name"))
		h->coll_left_name = s;
}

static void rk_instant(struct report *r, const struct rd_track *t, const struct tr_event *e,
		       uint32_t name)
{
	struct rk_data *d = data(r);
	struct rk_hang *h;

	if (!d || d->nhang == RK_MAX_HANG || strcmp(rd_str(r, t->name), "ptbpf hang") ||
	    strcmp(rd_str(r, name), "rank"))
		return;
	h = &d->hang[d->nhang++];
	*h = (struct rk_hang){ .ts = e->ts, .rank = RD_NONE, .state = RD_NONE,
			       .coll_name = RD_NONE, .coll_left_name = RD_NONE };
	for (int i = 0; i < e->nargs; i++)
		hang_arg(r, h, &e->args[i]);
}

static void rk_sample(struct report *r, const struct tr_sample *s)
{
	struct rk_thread *t = rk_thread_of(r, s->pid, s->tid);

	if (!t)
		return;
	t->samples++;
	if (s->has_py && s->py_leaf.len)
		count(t->leaf, RK_LEAVES, rd_rid(r, &s->py_leaf), 1);
}

static void rk_cause(struct report *r, int64_t tid, uint32_t name, uint64_t start, uint64_t end)
{
	struct rk_thread *t = end > start ? rk_thread_of(r, 0, tid) : NULL;

	if (!t)
		return;
	count(t->cause, RK_CAUSES, name, end - start);
	t->cause_ns += end - start;
}

static int by_end(const void *a, const void *b)
{
	const struct rk_item *x = a, *y = b;

	return x->end < y->end ? -1 : x->end > y->end;
}

static int by_pid_start(const void *a, const void *b)
{
	const struct rk_item *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The item of pid's (sorted by pid, start) that holds ts, or NULL. */
static const struct rk_item *holding(const struct rk_item *v, size_t n, int64_t pid, uint64_t ts)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first item after (pid, ts) */
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].pid < pid || (v[mid].pid == pid && v[mid].start <= ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && v[lo - 1].pid == pid && v[lo - 1].start <= ts && v[lo - 1].end >= ts)
		return &v[lo - 1];
	return NULL;
}

/* The thread a rank arrived on: its step's (a gloo region is drawn on
 * the worker thread that ended it), its c10d:: op's, else the region's. */
static int64_t arrival_tid(const struct rk_data *d, const struct rk_item *c)
{
	const struct rk_item *s = holding(d->steps, d->nsteps, c->pid, c->start);

	if (!s)
		s = holding(d->ops, d->nops, c->pid, c->start);
	return s ? s->tid : c->tid;
}

/* One collective of every rank in it (g[0..n)): a row, or merged into
 * the step's row if the others waited longer here. */
static void matched(struct report *r, struct rk_data *d, struct rk_item **g, int n)
{
	int last = 0, second = -1;
	uint64_t first = g[0]->start;
	const struct rk_item *step;
	struct rk_late row;

	for (int i = 1; i < n; i++)
		if (g[i]->start > g[last]->start)
			last = i;
	for (int i = 0; i < n; i++) {
		if (i != last && (second < 0 || g[i]->start > g[second]->start))
			second = i;
		first = g[i]->start < first ? g[i]->start : first;
	}
	step = holding(d->steps, d->nsteps, g[last]->pid, g[last]->start);
	row = (struct rk_late){ .step = step ? step->name : RD_NONE, .coll = g[last]->name,
				.pid = g[last]->pid, .tid = arrival_tid(d, g[last]),
				.first = first, .second = g[second]->start,
				.last = g[last]->start, .nranks = n };
	d->groups++;
	if (d->nlate && row.step != RD_NONE && d->late[d->nlate - 1].step == row.step) {
		struct rk_late *prev = &d->late[d->nlate - 1];

		if (row.last - row.second > prev->last - prev->second)
			*prev = row;
		return;
	}
	if (rd_room((void **)&d->late, &d->late_cap, d->nlate, sizeof(*d->late)))
		d->late[d->nlate++] = row;
}

/* Whether c joins the collective g[0..n): same name, a rank not in it,
 * entered before any of it ended and ended after all of it entered. */
static bool joins(struct rk_item **g, int n, const struct rk_item *c)
{
	for (int i = 0; i < n; i++)
		if (g[i]->pid == c->pid || g[i]->name != c->name || c->start > g[i]->end ||
		    g[i]->start > c->end)
			return false;
	return true;
}

static bool has_pid(const struct rk_item *v, size_t n, int64_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].pid == pid;
}

/* Each rank's collectives: its regions, or where it has none its c10d:: ops. */
static size_t pick(struct rk_data *d, struct rk_item *out)
{
	size_t n = 0;

	if (d->nregions)
		qsort(d->regions, d->nregions, sizeof(*d->regions), by_pid_start);
	if (d->nops)
		qsort(d->ops, d->nops, sizeof(*d->ops), by_pid_start);
	if (d->nsteps)
		qsort(d->steps, d->nsteps, sizeof(*d->steps), by_pid_start);
	for (size_t i = 0; i < d->nregions; i++)
		out[n++] = d->regions[i];
	for (size_t i = 0; i < d->nops; i++)
		if (!has_pid(d->regions, d->nregions, d->ops[i].pid))
			out[n++] = d->ops[i];
	return n;
}

/* The ranks in collectives: the most any collective had (one whose
 * ranks were not all traced yet, or any more, names no last rank). */
static int ranks_in(struct rk_item *all, size_t n, size_t *ends, size_t *ngroups)
{
	struct rk_item *g[RK_MAX_HANG];
	int ng = 0, most = 0;

	*ngroups = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && ng < RK_MAX_HANG && joins(g, ng, &all[i])) {
			g[ng++] = &all[i];
			continue;
		}
		if (ng) /* a collective: all[i - ng .. i) */
			ends[(*ngroups)++] = i;
		most = ng > most ? ng : most;
		ng = 0;
		if (i < n)
			g[ng++] = &all[i];
	}
	return most;
}

static void rk_first_pass_done(struct report *r)
{
	struct rk_data *d = r->ranks;
	struct rk_item *all, *g[RK_MAX_HANG];
	size_t n, *ends, ngroups, from = 0;

	if (!d || d->nregions + d->nops < 2 || !r->late ||
	    !(all = malloc((d->nregions + d->nops) * sizeof(*all))))
		return;
	if (!(ends = malloc((d->nregions + d->nops + 1) * sizeof(*ends)))) {
		free(all);
		return;
	}
	if ((n = pick(d, all)))
		qsort(all, n, sizeof(*all), by_end);
	d->nranks = ranks_in(all, n, ends, &ngroups);
	for (size_t k = 0; k < ngroups; from = ends[k++]) {
		int ng = (int)(ends[k] - from);

		if (ng < 2 || ng != d->nranks)
			continue;
		for (int i = 0; i < ng; i++)
			g[i] = &all[from + (size_t)i];
		matched(r, d, g, ng);
	}
	free(ends);
	free(all);
	for (size_t i = 0; i < d->nlate; i++)
		steps_add_key(r->late, d->late[i].second, d->late[i].last, d->late[i].coll,
			      d->late[i].tid, i);
}

static void rk_free(struct report *r)
{
	struct rk_data *d = r->ranks;

	if (!d)
		return;
	rd_map_free(&d->thread_ix);
	free(d->th);
	free(d->regions);
	free(d->ops);
	free(d->steps);
	free(d->late);
	free(d);
	r->ranks = NULL;
}

/* ---- the "waiting for" table ---- */

static bool preempted(const char *cause)
{
	return !strncmp(cause, "preempted by ", 13);
}

/* The cause of a late arrival: the largest cause other than running where
 * it covers a quarter of the lateness, else the largest; the stretches it
 * was preempted count as one (by whichever task took its CPU), named by
 * the task that took most. Its name and ns; false if none. */
static bool late_cause(const struct report *r, const struct step_row *row, uint32_t *name,
		       uint64_t *ns)
{
	const struct step_cause *c = steps_causes(r->late, row), *best = NULL, *other = NULL;
	const struct step_cause *top_pre = NULL;
	uint64_t pre = 0, best_ns = 0, other_ns = 0;

	for (int i = 0; i < row->ncause; i++)
		if (preempted(rd_str(r, c[i].name))) {
			pre += c[i].ns;
			if (!top_pre || c[i].ns > top_pre->ns)
				top_pre = &c[i];
		}
	for (int i = 0; i < row->ncause; i++) {
		const char *n = rd_str(r, c[i].name);
		uint64_t v = &c[i] == top_pre ? pre : c[i].ns;

		if (preempted(n) && &c[i] != top_pre)
			continue; /* the same stretches, by a task that took less */
		if (!best || v > best_ns)
			best = &c[i], best_ns = v;
		if (strncmp(n, "running", 7) && (!other || v > other_ns))
			other = &c[i], other_ns = v;
	}
	if (other && other_ns * 4 >= row->dur)
		best = other, best_ns = other_ns;
	if (best)
		*name = best->name, *ns = best_ns;
	return best != NULL;
}

struct rk_by_rank {
	int64_t pid;
	uint64_t rows, waited;
};

static size_t by_rank(const struct report *r, struct rk_by_rank *v, size_t max)
{
	const struct rk_data *d = r->ranks;
	size_t n = 0;

	for (size_t i = 0; i < d->nlate; i++) {
		size_t k = 0;

		while (k < n && v[k].pid != d->late[i].pid)
			k++;
		if (k == n && n == max)
			continue;
		if (k == n)
			v[n++] = (struct rk_by_rank){ .pid = d->late[i].pid };
		v[k].rows++;
		v[k].waited += d->late[i].last - d->late[i].second;
	}
	return n;
}

static void cause_text(const struct report *r, const struct step_row *row, char *buf,
		       size_t len)
{
	uint32_t name;
	uint64_t ns;

	if (!late_cause(r, row, &name, &ns))
		snprintf(buf, len, "%s", r->sched_bundles ? "not explained" :
			 "not known (no kernel view in the trace)");
	else
		snprintf(buf, len, "%s %.0f%%", rd_str(r, name), 100.0 * ns / (row->dur ? row->dur : 1));
}

void rk_waiting_text(const struct report *r, int top)
{
	const struct rk_data *d = r->ranks;
	struct rk_by_rank ranks[RK_MAX_HANG];
	const struct step_row *rows;
	size_t nrows, nr;

	if (!d || !d->nlate || !(rows = steps_rows(r->late, &nrows)) || !nrows)
		return;
	printf("\nWaiting for: per step, the last rank to arrive in the collective the others "
	       "waited longest in (%lu collectives of %d ranks matched; ms)\n  %-16s %-20s "
	       "%-10s %8s %8s  %s\n", (unsigned long)d->groups, d->nranks, "step", "collective",
	       "last", "waited", "longest", "its cause of lateness (kernel view)");
	for (size_t i = 0; i < nrows && (int)i < top; i++) {
		const struct rk_late *l = &d->late[rows[i].key];
		char who[32], cause[160];

		rk_rank_name(r, l->pid, who, sizeof(who));
		cause_text(r, &rows[i], cause, sizeof(cause));
		printf("  %-16.16s %-20.20s %-10s %8.2f %8.2f  %s\n",
		       l->step != RD_NONE ? rd_str(r, l->step) : "-", rd_str(r, l->coll), who,
		       (l->last - l->second) / 1e6, (l->last - l->first) / 1e6, cause);
	}
	if (nrows > (size_t)top)
		printf("  ... %lu more (--top, or --json for all)\n", (unsigned long)(nrows - top));
	nr = by_rank(r, ranks, RK_MAX_HANG);
	for (size_t k = 0; k < nr; k++) {
		char who[32];

		rk_rank_name(r, ranks[k].pid, who, sizeof(who));
		printf("  %s was last in %lu of %lu steps; the others waited %.1f ms for it\n", who,
		       (unsigned long)ranks[k].rows, (unsigned long)d->nlate, ranks[k].waited / 1e6);
	}
}

void rk_waiting_json(FILE *o, const struct report *r)
{
	const struct rk_data *d = r->ranks;
	const struct step_row *rows;
	size_t nrows;

	if (!d || !d->nlate || !(rows = steps_rows(r->late, &nrows)) || !nrows)
		return;
	fprintf(o, ", \"waiting_for\": {\"collectives\": %lu, \"ranks\": %d, \"steps\": [",
		(unsigned long)d->groups, d->nranks);
	for (size_t i = 0; i < nrows; i++) {
		const struct rk_late *l = &d->late[rows[i].key];
		const struct step_cause *cs;
		uint32_t name = RD_NONE;
		uint64_t ns = 0;
		char who[32];

		rk_rank_name(r, l->pid, who, sizeof(who));
		fprintf(o, "%s{\"step\": ", i ? ", " : "");
		json_str(o, l->step != RD_NONE ? rd_str(r, l->step) : "");
		fprintf(o, ", \"collective\": ");
		json_str(o, rd_str(r, l->coll));
		fprintf(o, ", \"last\": ");
		json_str(o, who);
		fprintf(o, ", \"last_pid\": %ld, \"last_tid\": %ld, \"ranks\": %d, "
			"\"waited_ms\": %.3f, \"longest_ms\": %.3f, \"cause\": ", (long)l->pid,
			(long)l->tid, l->nranks, (l->last - l->second) / 1e6,
			(l->last - l->first) / 1e6);
		late_cause(r, &rows[i], &name, &ns);
		json_str(o, rd_str(r, name));
		fprintf(o, ", \"cause_share\": %.3f, \"causes\": [",
			(double)ns / (rows[i].dur ? rows[i].dur : 1));
		cs = steps_causes(r->late, &rows[i]);
		for (int k = 0; k < rows[i].ncause; k++) {
			fprintf(o, "%s{\"cause\": ", k ? ", " : "");
			json_str(o, rd_str(r, cs[k].name));
			fprintf(o, ", \"ms\": %.3f}", cs[k].ns / 1e6);
		}
		fprintf(o, "]}");
	}
	fprintf(o, "]}");
}

const struct rd_rank_view rk_rank_view = { rk_slice, rk_instant, rk_sample, rk_cause,
					   rk_first_pass_done, rk_free };
