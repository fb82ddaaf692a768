/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the report's step table (user/report/step_table.c): random steps
 * (several processes' steps overlap) and intervals of every kind, fed in
 * about the order a trace has them (each when it ends, some late, a step
 * after the intervals in it; the same again on every pass the table asks
 * for). Within an ample budget (one pass), a small one (older steps
 * finished during the pass, late intervals redone in windows) and a tiny
 * one (windows only), the rows must equal a brute-force count over every
 * nanosecond. Steps belong to one of three threads, and causes of each
 * thread (four names in three classes) split the Other of its steps.
 */
#include "report/step_table.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK_EQ(a, b, what, i) check_eq((unsigned long long)(a), (unsigned long long)(b), \
					 __LINE__, what, i)

static void check_eq(unsigned long long a, unsigned long long b, int line, const char *what,
		     size_t i)
{
	if (a == b) {
		passed++;
		return;
	}
	failed++;
	fprintf(stderr, "FAIL line %d: step %zu %s: %llu != %llu\n", line, i, what, a, b);
}

#define SPAN 4000
#define NSTEPS 40
#define NIVALS 3000

struct ival {
	int kind;      /* SL_*, STEP or CAUSE */
	uint64_t s, e;
	uint64_t when; /* when the trace has it */
	int step;
	int tid, name; /* STEP, CAUSE */
};

#define STEP SL_COUNT
#define CAUSE (SL_COUNT + 1)
#define NTIDS 3
#define NNAMES 4
/* cause name -> class: two names share one, so their order counts */
static const enum step_cause_class name_cls[NNAMES] = { SC_SCHED, SC_CALL, SC_RUNNING, SC_CALL };
static int order[NTIDS + 1][NNAMES]; /* a (tid, name)'s first place in the feed */

static struct ival ivals[NIVALS];
static uint64_t step_s[NSTEPS], step_e[NSTEPS];
static struct ival feed[NIVALS + NSTEPS]; /* both, in trace order */

static uint64_t rnd(uint64_t n)
{
	return (uint64_t)random() % n;
}

static int by_when(const void *a, const void *b)
{
	const struct ival *x = a, *y = b;

	return x->when < y->when ? -1 : x->when > y->when;
}

static void make_input(void)
{
	int n = 0;

	for (int i = 0; i < NSTEPS; i++) {
		step_s[i] = rnd(SPAN - 200);
		step_e[i] = step_s[i] + 1 + rnd(200);
		feed[n++] = (struct ival){ .kind = STEP, .s = step_s[i], .e = step_e[i],
					   .when = step_e[i], .step = i, .tid = 1 + i % NTIDS };
	}
	for (int i = 0; i < NIVALS; i++) {
		ivals[i].kind = (int)rnd(SL_COUNT + 2);
		if (ivals[i].kind == STEP)
			ivals[i].kind = CAUSE;
		ivals[i].tid = 1 + (int)rnd(NTIDS);
		ivals[i].name = (int)rnd(NNAMES);
		ivals[i].s = rnd(SPAN);
		ivals[i].e = ivals[i].s + rnd(i % 10 ? 30 : 400);
		/* Most come as they end; one in 50 (a GPU batch) late. */
		ivals[i].when = ivals[i].e + (rnd(50) ? 0 : rnd(2000));
		feed[n++] = ivals[i];
	}
	qsort(feed, n, sizeof(*feed), by_when);
	memset(order, 0, sizeof(order));
	for (int i = 0, k = 1; i < n; i++)
		if (feed[i].kind == CAUSE && !order[feed[i].tid][feed[i].name])
			order[feed[i].tid][feed[i].name] = k++;
}

/* The table as the report makes it: passes until it says done. */
static struct step_table *table(size_t budget, bool defer, int *passes)
{
	struct step_table *t = steps_new(budget);

	if (defer)
		steps_defer(t);
	*passes = 0;
	do {
		for (int i = 0; i < NIVALS + NSTEPS; i++) {
			if (feed[i].kind == STEP)
				steps_add(t, feed[i].s, feed[i].e, (uint32_t)feed[i].step,
					  feed[i].tid);
			else if (feed[i].kind == CAUSE)
				steps_cause(t, feed[i].tid, (uint32_t)feed[i].name,
					    name_cls[feed[i].name], feed[i].s, feed[i].e);
			else
				steps_interval(t, feed[i].kind, feed[i].s, feed[i].e);
		}
		++*passes;
	} while (steps_next_pass(t));
	return t;
}

/* The cause that takes instant x of thread tid's Other: the first class,
 * then the first given; -1: none. */
static int cause_at(const uint8_t causes[NNAMES], int tid)
{
	int best = -1;

	for (int c = 0; c < NNAMES; c++) {
		if (!causes[c])
			continue;
		if (best < 0 || name_cls[c] < name_cls[best] ||
		    (name_cls[c] == name_cls[best] && order[tid][c] < order[tid][best]))
			best = c;
	}
	return best;
}

/* Brute force, nanosecond by nanosecond; causes: ns per cause name. */
static void expected(int step, struct step_row *r, uint64_t causes[NNAMES])
{
	static uint8_t cover[SPAN + 500][SL_COUNT];
	static uint8_t cause[SPAN + 500][NNAMES];
	static unsigned kernels[SPAN + 500];
	int tid = 1 + step % NTIDS;

	memset(cover, 0, sizeof(cover));
	memset(cause, 0, sizeof(cause));
	memset(kernels, 0, sizeof(kernels));
	memset(causes, 0, NNAMES * sizeof(*causes));
	for (int i = 0; i < NIVALS; i++)
		for (uint64_t x = ivals[i].s; x < ivals[i].e; x++) {
			if (ivals[i].kind == CAUSE) {
				cause[x][ivals[i].name] |= ivals[i].tid == tid;
				continue;
			}
			cover[x][ivals[i].kind] = 1;
			kernels[x] += ivals[i].kind == SL_KERNEL;
		}
	memset(r, 0, sizeof(*r));
	r->start = step_s[step];
	r->dur = step_e[step] - step_s[step];
	for (uint64_t x = step_s[step]; x < step_e[step]; x++) {
		uint64_t *kinds[SL_COUNT] = { &r->busy, &r->copy, &r->set, &r->api, &r->loader,
					      &r->hostop };
		int first = SL_COUNT;

		r->kernel_sum += kernels[x];
		for (int k = SL_COUNT - 1; k >= 0; k--) {
			*kinds[k] += cover[x][k];
			if (cover[x][k])
				first = k;
		}
		r->brk[first]++;
		if (first == SL_COUNT && cause_at(cause[x], tid) >= 0)
			causes[cause_at(cause[x], tid)]++;
	}
}

static void compare(const struct step_row *got, const struct step_row *want, size_t i)
{
	CHECK_EQ(got->start, want->start, "start", i);
	CHECK_EQ(got->dur, want->dur, "dur", i);
	CHECK_EQ(got->kernel_sum, want->kernel_sum, "kernel_sum", i);
	CHECK_EQ(got->busy, want->busy, "busy", i);
	CHECK_EQ(got->copy, want->copy, "copy", i);
	CHECK_EQ(got->set, want->set, "set", i);
	CHECK_EQ(got->api, want->api, "api", i);
	CHECK_EQ(got->loader, want->loader, "loader", i);
	CHECK_EQ(got->hostop, want->hostop, "hostop", i);
	for (int k = 0; k < STEP_BREAKDOWN; k++)
		CHECK_EQ(got->brk[k], want->brk[k], "breakdown", i);
}

static void compare_causes(const struct step_table *t, const struct step_row *got,
			   const uint64_t want[NNAMES], size_t i)
{
	const struct step_cause *c = steps_causes(t, got);
	uint64_t seen[NNAMES] = { 0 };

	CHECK_EQ(got->cause_rest, 0, "cause_rest", i);
	for (int k = 0; k < got->ncause; k++)
		if (c[k].name < NNAMES)
			seen[c[k].name] += c[k].ns;
	for (int c = 0; c < NNAMES; c++)
		CHECK_EQ(seen[c], want[c], "cause", i);
}

int main(void)
{
	for (unsigned seed = 1; seed <= 30; seed++) {
		/* ample: one pass; small: the older half finished during it; tiny:
		 * too small for that (a step alone passes it): windows. */
		const size_t budgets[] = { 1u << 20, 1000, 64, 1u << 20 }; /* the last deferred */
		int passes[4];

		srandom(seed);
		make_input();
		for (int b = 0; b < 4; b++) {
			struct step_table *t = table(budgets[b], b == 3, &passes[b]);
			const struct step_row *rows;
			size_t n;

			rows = steps_rows(t, &n);
			CHECK_EQ(n, NSTEPS, "rows", (size_t)b);
			for (size_t i = 0; i < n; i++) {
				struct step_row want;
				uint64_t causes[NNAMES];

				expected((int)rows[i].name, &want, causes);
				compare(&rows[i], &want, i);
				compare_causes(t, &rows[i], causes, i);
				CHECK_EQ(rows[i].tid, 1 + rows[i].name % NTIDS, "tid", i);
				CHECK_EQ(i == 0 || rows[i - 1].start <= rows[i].start, 1, "by start", i);
			}
			steps_free(t);
		}
		CHECK_EQ(passes[0], 1, "passes (ample budget)", 0);
		CHECK_EQ(passes[2] > 2, 1, "passes (tiny budget) > 2", 0);
		CHECK_EQ(passes[3], 2, "passes (deferred, ample budget)", 0);
		printf("seed %u: passes %d, %d, %d\n", seed, passes[0], passes[1], passes[2]);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
