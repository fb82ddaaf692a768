// SPDX-License-Identifier: BSD-2-Clause
/*
 * The step table within a memory budget. See step_table.h.
 *
 * First pass: intervals are kept as unions (compacted whenever the budget
 * fills), kernels also one by one (their summed time). When they still
 * pass the budget, the older half is finished: the steps known by then
 * that end before the median interval end get their rows, and the
 * intervals before the earliest step still open are dropped. A trace is
 * written in about time order, so that is all a pass needs, but for the
 * kernel view's intervals: a thread's run or blocking call is written when
 * it ends, a quiet CPU's switches once a second. An interval
 * that comes later but reaches back before the drop point undoes the rows
 * it touches, and a step that starts before it cannot be made in the
 * first pass; such steps (and all steps left, should nothing be droppable)
 * are made in windows: a window [lo, hi) starts at the first step not
 * done; each further pass keeps the intervals clipped to it, and when they
 * pass the budget, hi moves down to a step's end (never below the earliest
 * end, so each window completes a step). Kernels' summed time goes
 * straight into the rows left during the first windowed pass.
 */
#include "report/step_table.h"

#include <stdlib.h>
#include <string.h>

struct interval {
	uint64_t start, end;
};

struct ivals {
	struct interval *v;
	size_t n, cap;
};

/* A list of causes: one thread's intervals of one cause. */
struct cause_list {
	int64_t tid;
	uint32_t name;
	enum step_cause_class cls;
};

#define NLISTS (SL_COUNT + STEP_CAUSE_LISTS)

struct step {
	struct step_row row;
	bool done;  /* the row is final */
	bool lost;  /* intervals of it were dropped before it was done: a window makes it */
};

struct step_table {
	struct step *steps;
	size_t n, cap;
	bool sorted;           /* steps by start */
	uint64_t longest;      /* the longest step */
	struct step_row *out;  /* the rows, once all are done */
	struct ivals lists[NLISTS]; /* the kinds, then the cause lists */
	struct cause_list causes[STEP_CAUSE_LISTS];
	struct step_cause *pool; /* the rows' causes, each row's in a run */
	size_t npool, pool_cap;
	int ncauses, last_cause;
	uint64_t causes_dropped;
	struct ivals kernels;  /* first pass: every kernel, for kernel_sum */
	uint64_t longest_kernel;
	size_t max, count;     /* intervals kept: at most, now */
	uint64_t drop;         /* first pass: intervals before this are gone */
	uint64_t finished;     /* first pass: the latest end of a step done */
	bool dropped;          /* first pass: none are kept any more */
	int passes;            /* ends of passes seen */
	bool windowed;
	bool kernels_direct;   /* kernel_sum straight into the rows not done */
	uint64_t lo, hi;       /* the window */
	uint64_t *ends;        /* ends of the steps not done, ascending, up to hi */
	size_t nends;
};

struct step_table *steps_new(size_t max_intervals)
{
	struct step_table *t = calloc(1, sizeof(*t));

	if (t)
		t->max = max_intervals < 16 ? 16 : max_intervals;
	return t;
}

void steps_defer(struct step_table *t)
{
	t->dropped = true;
}

void steps_free(struct step_table *t)
{
	if (!t)
		return;
	for (int k = 0; k < NLISTS; k++)
		free(t->lists[k].v);
	free(t->kernels.v);
	free(t->steps);
	free(t->out);
	free(t->ends);
	free(t->pool);
	free(t);
}

/* The lists in use: the kinds, then the cause lists made so far. */
static int nlists(const struct step_table *t)
{
	return SL_COUNT + t->ncauses;
}

static bool push(struct ivals *v, uint64_t s, uint64_t e)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 256;
		struct interval *g = realloc(v->v, cap * sizeof(*g));

		if (!g)
			return false;
		v->v = g;
		v->cap = cap;
	}
	v->v[v->n++] = (struct interval){ s, e };
	return true;
}

static int by_start(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int step_by_start(const void *a, const void *b)
{
	const struct step_row *x = &((const struct step *)a)->row;
	const struct step_row *y = &((const struct step *)b)->row;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->dur < y->dur ? -1 : x->dur > y->dur;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void sort_steps(struct step_table *t)
{
	if (!t->sorted && t->n)
		qsort(t->steps, t->n, sizeof(*t->steps), step_by_start);
	t->sorted = true;
}

static uint64_t step_end(const struct step *s)
{
	return s->row.start + s->row.dur;
}

/* Index of the first step (by start) that may end after x. */
static size_t first_step_after(const struct step_table *t, uint64_t x)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x >= t->longest && t->steps[mid].row.start <= x - t->longest)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void steps_add(struct step_table *t, uint64_t start, uint64_t end, uint32_t name, int64_t tid)
{
	steps_add_key(t, start, end, name, tid, 0);
}

void steps_add_key(struct step_table *t, uint64_t start, uint64_t end, uint32_t name,
		   int64_t tid, uint64_t key)
{
	struct step *s;

	if (t->passes)
		return;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct step *g = realloc(t->steps, cap * sizeof(*g));

		if (!g)
			return;
		t->steps = g;
		t->cap = cap;
	}
	s = &t->steps[t->n];
	*s = (struct step){ .row = { .name = name, .start = start,
				     .dur = end > start ? end - start : 0, .tid = tid,
				     .key = key },
			    .lost = t->dropped || start < t->drop };
	t->sorted = t->sorted && (!t->n || t->steps[t->n - 1].row.start <= start);
	t->sorted |= !t->n;
	t->longest = s->row.dur > t->longest ? s->row.dur : t->longest;
	t->n++;
}

/* Sorted and disjoint: the union. */
static void compact(struct ivals *v)
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

static void recount(struct step_table *t)
{
	t->count = t->kernels.n;
	for (int k = 0; k < nlists(t); k++)
		t->count += t->lists[k].n;
}

/* Index of the first interval of a sorted list that starts at or after x. */
static size_t first_from(const struct ivals *v, uint64_t x)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->v[mid].start < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the first interval of a compacted list that ends after x. */
static size_t first_ending_after(const struct ivals *v, uint64_t x)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->v[mid].end <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Length of a compacted list's union within [s, e). */
static uint64_t within(const struct ivals *v, uint64_t s, uint64_t e)
{
	uint64_t sum = 0;

	for (size_t i = first_ending_after(v, s); i < v->n && v->v[i].start < e; i++) {
		uint64_t a = v->v[i].start > s ? v->v[i].start : s;
		uint64_t b = v->v[i].end < e ? v->v[i].end : e;

		sum += b > a ? b - a : 0;
	}
	return sum;
}

/* List k joins the union in tmp, within [s, e): the union's length. */
static uint64_t add_within(const struct step_table *t, int k, uint64_t s, uint64_t e,
			   struct ivals *tmp)
{
	const struct ivals *v = &t->lists[k];

	for (size_t i = first_ending_after(v, s); i < v->n && v->v[i].start < e; i++)
		if (!push(tmp, v->v[i].start > s ? v->v[i].start : s,
			  v->v[i].end < e ? v->v[i].end : e))
			break;
	compact(tmp);
	return within(tmp, s, e);
}

/* A cause's share of the row's Other: kept in c if among the largest. */
static void keep_cause(struct step_row *r, struct step_cause *c, uint32_t name, uint64_t ns)
{
	int min = 0;

	if (r->ncause < STEP_CAUSES) {
		c[r->ncause++] = (struct step_cause){ name, ns };
		return;
	}
	for (int i = 1; i < STEP_CAUSES; i++)
		if (c[i].ns < c[min].ns)
			min = i;
	if (ns <= c[min].ns) {
		r->cause_rest += ns;
		return;
	}
	r->cause_rest += c[min].ns;
	c[min] = (struct step_cause){ name, ns };
}

/* The row's causes into the pool (a row made again leaves its old run). */
static void pool_causes(struct step_table *t, struct step_row *r, const struct step_cause *c)
{
	r->cause_at = 0;
	if (!r->ncause)
		return;
	if (t->npool + (size_t)r->ncause > t->pool_cap) {
		size_t cap = t->pool_cap ? t->pool_cap * 2 : 1024;
		struct step_cause *g;

		while (cap < t->npool + (size_t)r->ncause)
			cap *= 2;
		if (!(g = realloc(t->pool, cap * sizeof(*g)))) {
			for (int i = 0; i < r->ncause; i++) /* told as the rest */
				r->cause_rest += c[i].ns;
			r->ncause = 0;
			return;
		}
		t->pool = g;
		t->pool_cap = cap;
	}
	r->cause_at = (uint32_t)t->npool;
	memcpy(t->pool + t->npool, c, (size_t)r->ncause * sizeof(*c));
	t->npool += (size_t)r->ncause;
}

const struct step_cause *steps_causes(const struct step_table *t, const struct step_row *row)
{
	return row->ncause ? t->pool + row->cause_at : NULL;
}

/* Other, split by the causes of the step's thread, class by class; tmp
 * holds the union of the kinds (covered: its length). */
static void split_other(struct step_table *t, struct step_row *r, struct ivals *tmp,
			uint64_t covered)
{
	uint64_t s = r->start, e = r->start + r->dur;
	struct step_cause kept[STEP_CAUSES];

	r->ncause = 0;
	r->cause_rest = 0;
	for (int cls = 0; cls < SC_CLASSES; cls++) {
		for (int c = 0; c < t->ncauses; c++) {
			const struct cause_list *l = &t->causes[c];
			uint64_t u;

			if (l->tid != r->tid || l->cls != (enum step_cause_class)cls)
				continue;
			u = add_within(t, SL_COUNT + c, s, e, tmp);
			if (u > covered)
				keep_cause(r, kept, l->name, u - covered);
			covered = u;
		}
	}
	pool_causes(t, r, kept);
}

/* A row from the compacted lists (kernel_sum is made apart). */
static void make_row(struct step_table *t, struct step_row *r, struct ivals *tmp)
{
	uint64_t s = r->start, e = r->start + r->dur, prev = 0;
	uint64_t *kinds[SL_COUNT] = { &r->busy, &r->copy, &r->set, &r->api, &r->loader,
				      &r->hostop };

	tmp->n = 0;
	for (int k = 0; k < SL_COUNT; k++) {
		uint64_t u = add_within(t, k, s, e, tmp);

		*kinds[k] = within(&t->lists[k], s, e);
		r->brk[k] = u - prev;
		prev = u;
	}
	r->brk[SL_COUNT] = r->dur > prev ? r->dur - prev : 0;
	split_other(t, r, tmp, prev);
}

/* Summed time of the kept kernels (sorted by start) within [s, e). */
static uint64_t kernel_sum_of(const struct step_table *t, uint64_t s, uint64_t e)
{
	const struct ivals *v = &t->kernels;
	size_t lo = 0, hi = v->n;
	uint64_t sum = 0;

	while (lo < hi) { /* the first kernel that may end after s */
		size_t mid = lo + (hi - lo) / 2;

		if (s >= t->longest_kernel && v->v[mid].start <= s - t->longest_kernel)
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

/* First pass: rows for the steps known, not lost, that end by h. */
static void finish_known(struct step_table *t, uint64_t h)
{
	struct ivals tmp = { 0 };

	sort_steps(t);
	if (t->kernels.n)
		qsort(t->kernels.v, t->kernels.n, sizeof(*t->kernels.v), by_start);
	for (size_t i = 0; i < t->n; i++) {
		struct step *s = &t->steps[i];

		if (s->done || s->lost || step_end(s) > h)
			continue;
		make_row(t, &s->row, &tmp);
		s->row.kernel_sum = kernel_sum_of(t, s->row.start, step_end(s));
		s->done = true;
		t->finished = step_end(s) > t->finished ? step_end(s) : t->finished;
	}
	free(tmp.v);
}

static void drop_all(struct step_table *t)
{
	for (int k = 0; k < nlists(t); k++)
		t->lists[k].n = 0;
	free(t->kernels.v);
	t->kernels = (struct ivals){ 0 };
	t->count = 0;
	t->dropped = true;
	for (size_t i = 0; i < t->n; i++)
		t->steps[i].lost = !t->steps[i].done;
}

/* First pass, over the budget: finish the older half and drop what no
 * step still open needs. False if nothing could be dropped. */
static bool finish_older_half(struct step_table *t)
{
	size_t nfrag = 0, k2 = 0;
	uint64_t *ends, h, d;

	for (int k = 0; k < nlists(t); k++)
		nfrag += t->lists[k].n;
	if (!nfrag || !(ends = malloc(nfrag * sizeof(*ends))))
		return false;
	for (int k = 0; k < nlists(t); k++)
		for (size_t i = 0; i < t->lists[k].n; i++)
			ends[k2++] = t->lists[k].v[i].end;
	qsort(ends, nfrag, sizeof(*ends), u64_cmp);
	h = ends[nfrag / 2];
	free(ends);
	finish_known(t, h);
	d = h;
	for (size_t i = 0; i < t->n; i++)
		if (!t->steps[i].done && !t->steps[i].lost && t->steps[i].row.start < d)
			d = t->steps[i].row.start;
	if (d <= t->drop)
		return false;
	t->drop = d;
	for (int k = 0; k < nlists(t); k++) {
		struct ivals *v = &t->lists[k];
		size_t first = first_ending_after(v, d);

		if (first)
			memmove(v->v, v->v + first, (v->n - first) * sizeof(*v->v));
		v->n -= first;
	}
	k2 = 0;
	for (size_t i = 0; i < t->kernels.n; i++)
		if (t->kernels.v[i].end > d)
			t->kernels.v[k2++] = t->kernels.v[i];
	t->kernels.n = k2;
	recount(t);
	return true;
}

/* An interval that comes after rows it touches were made: they are made
 * again in windows. */
static void undo_done(struct step_table *t, uint64_t s, uint64_t e)
{
	sort_steps(t);
	for (size_t i = first_step_after(t, s); i < t->n && t->steps[i].row.start < e; i++) {
		struct step *st = &t->steps[i];

		if (st->done && step_end(st) > s) {
			st->row = (struct step_row){ .name = st->row.name, .start = st->row.start,
						     .dur = st->row.dur, .tid = st->row.tid };
			st->done = false;
			st->lost = true;
		}
	}
}

/* The window ends earlier: at the latest step end that leaves at most half
 * the budget (or the earliest end, whatever that keeps). */
static void shrink_window(struct step_table *t)
{
	size_t lo = 0, hi = t->nends, keep;

	while (lo < hi) { /* the first end that keeps too much */
		size_t mid = lo + (hi - lo) / 2, below = 0;

		for (int k = 0; k < nlists(t); k++)
			below += first_from(&t->lists[k], t->ends[mid]);
		if (below <= t->max / 2)
			lo = mid + 1;
		else
			hi = mid;
	}
	keep = lo ? lo : 1;
	if (keep > t->nends)
		return;
	t->nends = keep;
	t->hi = t->ends[keep - 1];
	for (int k = 0; k < nlists(t); k++) {
		struct ivals *v = &t->lists[k];

		v->n = first_from(v, t->hi);
		if (v->n && v->v[v->n - 1].end > t->hi)
			v->v[v->n - 1].end = t->hi;
	}
	recount(t);
}

static void make_room(struct step_table *t)
{
	for (int k = 0; k < nlists(t); k++)
		compact(&t->lists[k]);
	recount(t);
	if (t->count <= t->max / 2)
		return;
	if (t->windowed)
		shrink_window(t);
	else if (!finish_older_half(t))
		drop_all(t);
}

/* Windowed passes: a kernel's time within each step not done it overlaps. */
static void kernel_into_rows(struct step_table *t, uint64_t s, uint64_t e)
{
	for (size_t i = first_step_after(t, s); i < t->n && t->steps[i].row.start < e; i++) {
		struct step *st = &t->steps[i];
		uint64_t a = st->row.start > s ? st->row.start : s;
		uint64_t b = step_end(st) < e ? step_end(st) : e;

		if (!st->done)
			st->row.kernel_sum += b > a ? b - a : 0;
	}
}

/* An interval into list kind (a step_list, or a cause list). */
static void add(struct step_table *t, int kind, uint64_t start, uint64_t end)
{
	bool ok = true;

	if (end <= start)
		return;
	if (kind == SL_KERNEL && t->kernels_direct)
		kernel_into_rows(t, start, end);
	if (t->windowed) {
		start = start > t->lo ? start : t->lo;
		end = end < t->hi ? end : t->hi;
		if (end <= start)
			return;
	} else {
		if (start < t->finished)
			undo_done(t, start, end < t->finished ? end : t->finished);
		if (t->dropped)
			return;
		if (start < t->drop) {
			start = t->drop;
			if (end <= start)
				return;
		}
		if (kind == SL_KERNEL) {
			ok = push(&t->kernels, start, end);
			t->count += ok;
			if (end - start > t->longest_kernel)
				t->longest_kernel = end - start;
		}
	}
	if (ok && (ok = push(&t->lists[kind], start, end)))
		t->count++;
	if (!ok || t->count > t->max)
		make_room(t);
}

void steps_interval(struct step_table *t, enum step_list kind, uint64_t start, uint64_t end)
{
	if (kind < SL_COUNT)
		add(t, kind, start, end);
}

/* The cause list of (tid, name), made when new; -1 past the limit. */
static int cause_list(struct step_table *t, int64_t tid, uint32_t name,
		      enum step_cause_class cls)
{
	const struct cause_list *l = &t->causes[t->last_cause];

	if (t->ncauses && l->tid == tid && l->name == name)
		return t->last_cause;
	for (int c = 0; c < t->ncauses; c++)
		if (t->causes[c].tid == tid && t->causes[c].name == name)
			return t->last_cause = c;
	if (t->ncauses == STEP_CAUSE_LISTS)
		return -1;
	t->causes[t->ncauses] = (struct cause_list){ .tid = tid, .name = name, .cls = cls };
	return t->last_cause = t->ncauses++;
}

void steps_cause(struct step_table *t, int64_t tid, uint32_t name, enum step_cause_class cls,
		 uint64_t start, uint64_t end)
{
	int c = cause_list(t, tid, name, cls);

	if (c < 0) {
		t->causes_dropped += !t->passes;
		return;
	}
	add(t, SL_COUNT + c, start, end);
}

uint64_t steps_causes_dropped(const struct step_table *t)
{
	return t->causes_dropped;
}

/* Windowed passes: rows for the steps inside the window. */
static void finish_window(struct step_table *t)
{
	struct ivals tmp = { 0 };

	for (int k = 0; k < nlists(t); k++)
		compact(&t->lists[k]);
	for (size_t i = 0; i < t->n; i++) {
		struct step *s = &t->steps[i];

		if (!s->done && s->row.start >= t->lo && step_end(s) <= t->hi) {
			make_row(t, &s->row, &tmp);
			s->done = true;
		}
	}
	free(tmp.v);
}

/* The next window, from the first step not done; false if none is left. */
static bool open_window(struct step_table *t)
{
	size_t first = t->n;

	t->nends = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->steps[i].done)
			continue;
		if (first == t->n)
			first = i;
		t->ends[t->nends++] = step_end(&t->steps[i]);
	}
	if (first == t->n)
		return false;
	qsort(t->ends, t->nends, sizeof(*t->ends), u64_cmp);
	t->windowed = true;
	t->lo = t->steps[first].row.start;
	t->hi = UINT64_MAX;
	for (int k = 0; k < nlists(t); k++)
		t->lists[k].n = 0;
	t->count = 0;
	return true;
}

/* Every row is made: the caller's copy. */
static bool all_done(struct step_table *t)
{
	t->out = malloc((t->n ? t->n : 1) * sizeof(*t->out));
	if (!t->out) {
		t->n = 0; /* no table rather than a wrong one */
		return false;
	}
	for (size_t i = 0; i < t->n; i++)
		t->out[i] = t->steps[i].row;
	return false;
}

bool steps_next_pass(struct step_table *t)
{
	if (t->passes++) {
		finish_window(t);
		t->kernels_direct = false;
		return open_window(t) || all_done(t);
	}
	sort_steps(t);
	if (!t->dropped) {
		for (int k = 0; k < nlists(t); k++)
			compact(&t->lists[k]);
		finish_known(t, UINT64_MAX);
	}
	free(t->kernels.v);
	t->kernels = (struct ivals){ 0 };
	t->ends = malloc((t->n ? t->n : 1) * sizeof(*t->ends));
	if (!t->ends) {
		t->n = 0;
		return all_done(t);
	}
	t->kernels_direct = true;
	return open_window(t) || all_done(t);
}

const struct step_row *steps_rows(const struct step_table *t, size_t *n)
{
	*n = t->out ? t->n : 0;
	return t->out;
}
