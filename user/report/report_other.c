// SPDX-License-Identifier: BSD-2-Clause
/*
 * The report's "Other, by cause" table (report_other.h).
 */
#define _GNU_SOURCE
#include "report/report_other.h"

#include <stdlib.h>

#include "report/report_causes.h"

#define NO_VIEW "the trace has no kernel view (traced with --no-sched or --raw, or by an " \
		"older ptbpf): Other is not split"

static const char *cause_str(const struct report *r, const struct rc_total *t)
{
	return t->name == RD_NONE ? "other causes (past the largest per step)" : rd_str(r, t->name);
}

void report_other_text(const struct report *r, const struct step_row *rows, size_t nrows,
		       int top)
{
	struct rc_totals s;

	if (!nrows || !rc_sum(r, r->steps, rows, nrows, &s))
		return;
	if (s.other_ns && s.steps_ns) {
		printf("\nOther (%.1f%% of step time), by what each step's thread was doing "
		       "(the kernel view)\n", 100.0 * s.other_ns / s.steps_ns);
		if (!s.kernel_view) {
			printf("  %s\n", NO_VIEW);
		} else {
			printf("  %10s %8s  %s\n", "ms/step", "of step", "cause");
			for (size_t i = 0; i < s.n && (int)i < top; i++)
				printf("  %10.3f %7.1f%%  %s\n", s.v[i].ns / 1e6 / nrows,
				       100.0 * s.v[i].ns / s.steps_ns, cause_str(r, &s.v[i]));
			printf("  %10.3f %7.1f%%  %s\n",
			       (s.other_ns - s.explained_ns) / 1e6 / nrows,
			       100.0 * (s.other_ns - s.explained_ns) / s.steps_ns,
			       "unexplained (no record of the thread then)");
			if (steps_causes_dropped(r->steps))
				printf("  (%lu intervals of causes past the table's %d (thread, cause) "
				       "pairs were left out: their time is in unexplained)\n",
				       (unsigned long)steps_causes_dropped(r->steps),
				       STEP_CAUSE_LISTS);
		}
	}
	free(s.v);
}

void report_other_json(FILE *o, const struct report *r, const struct step_row *rows,
		       size_t nrows)
{
	struct rc_totals s;

	if (!rc_sum(r, r->steps, rows, nrows, &s))
		return;
	fprintf(o, ", \"other_causes\": {\"kernel_view\": %s, \"steps_ns\": %lu, "
		"\"other_ns\": %lu, \"unexplained_ns\": %lu, \"causes_left_out\": %lu, "
		"\"causes\": [", s.kernel_view ? "true" : "false", (unsigned long)s.steps_ns,
		(unsigned long)s.other_ns, (unsigned long)(s.other_ns - s.explained_ns),
		(unsigned long)steps_causes_dropped(r->steps));
	for (size_t i = 0; i < s.n; i++) {
		fprintf(o, "%s{\"cause\": ", i ? ", " : "");
		json_str(o, cause_str(r, &s.v[i]));
		fprintf(o, ", \"ns\": %lu, \"advice\": ", (unsigned long)s.v[i].ns);
		json_str(o, s.v[i].name == RD_NONE ? "" : rc_advice(cause_str(r, &s.v[i])));
		fputs("}", o);
	}
	fputs("]}", o);
	free(s.v);
}

void report_other_advice(const struct report *r, const struct step_row *rows, size_t nrows,
			 double share, char *buf, size_t size)
{
	struct rc_totals s;

	if (!rc_sum(r, r->steps, rows, nrows, &s) || !s.kernel_view || !s.n || !s.steps_ns) {
		snprintf(buf, size, "%.0f%% of the step is none of kernel, copy, CUDA call, "
			 "DataLoader or op time (Python, waits, other threads)%s", share,
			 s.kernel_view ? "" : ": trace with the kernel view (without --no-sched) "
			 "to see why");
	} else {
		const char *top = cause_str(r, &s.v[0]);

		snprintf(buf, size, "%.0f%% of the step is none of kernel, copy, CUDA call, "
			 "DataLoader or op time; most of it (%.0f%% of the step) is %s: %s.",
			 share, 100.0 * s.v[0].ns / s.steps_ns, top,
			 s.v[0].name == RD_NONE ? "see the table" : rc_advice(top));
	}
	for (char *c = buf; *c; c++) /* it goes into JSON strings as it is */
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
			*c = '\'';
	free(s.v);
}

/* What covered a gap, by the step table's kinds (a gap's own stream is
 * idle: another stream's kernel or copy, or the host). */
static const char *const gap_kinds[STEP_BREAKDOWN - 1] = {
	"a kernel on another stream", "a copy on another stream", "a memset on another stream",
	"a CUDA API call (any thread)", "DataLoader (any thread)", "host ops (any thread)",
};

/* The gaps that overlap a step, largest first; NULL and *n 0 if none (or
 * no memory). A trace with gaps and no step (one cut before its first
 * step ended) has none: *n must not stay the count of all gaps. */
static struct step_row *gaps_in_steps(const struct report *r, const struct step_row *steps,
				      size_t nsteps, size_t *n)
{
	const struct step_row *g = r->gaps ? steps_rows(r->gaps, n) : NULL;
	struct step_row *v;
	size_t k = 0, j = 0;

	if (!g || !*n || !nsteps || !(v = malloc(*n * sizeof(*v)))) {
		*n = 0;
		return NULL;
	}
	for (size_t i = 0; i < *n; i++) { /* both by start */
		while (j < nsteps && steps[j].start + steps[j].dur <= g[i].start)
			j++;
		for (size_t s = j; s < nsteps && steps[s].start < g[i].start + g[i].dur; s++)
			if (steps[s].start + steps[s].dur > g[i].start) {
				v[k++] = g[i];
				break;
			}
	}
	*n = k;
	return v;
}

static int gap_by_dur(const void *a, const void *b)
{
	const struct step_row *x = a, *y = b;

	return x->dur < y->dur ? 1 : x->dur > y->dur ? -1 : 0;
}

uint64_t report_gap_unexplained(const struct report *r, const struct step_row *g)
{
	const struct step_cause *cs = steps_causes(r->gaps, g);
	uint64_t explained = g->cause_rest, other = g->brk[STEP_BREAKDOWN - 1];

	for (int c = 0; c < g->ncause; c++)
		explained += cs[c].ns;
	return other > explained ? other - explained : 0;
}

const char *report_gap_main(const struct report *r, const struct step_row *g)
{
	const struct step_cause *cs = steps_causes(r->gaps, g);
	uint64_t best = 0;
	const char *name = "unexplained";

	for (int k = 0; k < STEP_BREAKDOWN - 1; k++)
		if (g->brk[k] > best)
			best = g->brk[k], name = gap_kinds[k];
	for (int c = 0; c < g->ncause; c++)
		if (cs[c].ns > best)
			best = cs[c].ns, name = rd_str(r, cs[c].name);
	if (report_gap_unexplained(r, g) > best)
		name = "unexplained";
	return name;
}

void report_gaps_text(const struct report *r, const struct step_row *steps, size_t nsteps,
		      int top)
{
	size_t n;
	struct step_row *g = gaps_in_steps(r, steps, nsteps, &n);
	struct rc_totals s;
	uint64_t kinds[STEP_BREAKDOWN] = { 0 };

	if (!g || !n || !rc_sum(r, r->gaps, g, n, &s)) {
		free(g);
		return;
	}
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			kinds[k] += g[i].brk[k];
	printf("\nGPU idle gaps (a stream idle %u us or more between two of its activities, "
	       "in steps): %zu, %.3f ms\n  %10s %8s  %s\n", RC_GAP_MIN_NS / 1000, n,
	       s.steps_ns / 1e6, "ms", "of idle", "what the host was doing (the first that "
	       "covers each instant; then the launching thread)");
	for (int k = 0; k < STEP_BREAKDOWN - 1; k++)
		if (kinds[k])
			printf("  %10.3f %7.1f%%  %s\n", kinds[k] / 1e6,
			       100.0 * kinds[k] / s.steps_ns, gap_kinds[k]);
	for (size_t i = 0; i < s.n && (int)i < top; i++)
		printf("  %10.3f %7.1f%%  launching thread: %s\n", s.v[i].ns / 1e6,
		       100.0 * s.v[i].ns / s.steps_ns, cause_str(r, &s.v[i]));
	printf("  %10.3f %7.1f%%  unexplained%s\n", (s.other_ns - s.explained_ns) / 1e6,
	       100.0 * (s.other_ns - s.explained_ns) / s.steps_ns,
	       s.kernel_view ? "" : " (the trace has no kernel view)");
	qsort(g, n, sizeof(*g), gap_by_dur);
	if (r->gaps_skipped)
		printf("  (%lu more gaps, past the first %u, not analysed)\n",
		       (unsigned long)r->gaps_skipped, RC_MAX_GAPS);
	printf("  the largest (and what woke the launching thread last in it%s):\n",
	       r->wakes_dropped ? "; some wakeups past the limit left out" : "");
	for (size_t i = 0; i < n && (int)i < (top < 5 ? top : 5); i++) {
		uint32_t by = rc_woken_by(r, g[i].tid, g[i].start, g[i].start + g[i].dur);

		printf("  %10.3f ms at %.6f s on %s: mostly %s%s%s\n", g[i].dur / 1e6,
		       g[i].start / 1e9, g[i].name != RD_NONE ? rd_str(r, g[i].name) : "a stream",
		       report_gap_main(r, &g[i]), by != RD_NONE ? "; woken by " : "",
		       by != RD_NONE ? rd_str(r, by) : "");
	}
	free(s.v);
	free(g);
}

void report_gaps_json(FILE *o, const struct report *r, const struct step_row *steps,
		      size_t nsteps)
{
	size_t n = 0, all = 0, outside;
	struct step_row *g = gaps_in_steps(r, steps, nsteps, &n);
	struct rc_totals s = { 0 };
	uint64_t kinds[STEP_BREAKDOWN] = { 0 };
	uint32_t by;

	if (r->gaps) /* the gaps analysed: in a whole step, or not */
		steps_rows(r->gaps, &all);
	outside = all > n ? all - n : 0;
	if (g && n && !rc_sum(r, r->gaps, g, n, &s))
		n = 0;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			kinds[k] += g[i].brk[k];
	fprintf(o, ", \"gpu_idle\": {\"min_gap_ns\": %u, \"gaps\": %zu, \"not_in_steps\": %zu, "
		"\"idle_ns\": %lu, \"covered_ns\": {", RC_GAP_MIN_NS, n, outside,
		(unsigned long)s.steps_ns);
	for (int k = 0; k < STEP_BREAKDOWN - 1; k++) {
		fputs(k ? ", " : "", o);
		json_str(o, gap_kinds[k]);
		fprintf(o, ": %lu", (unsigned long)kinds[k]);
	}
	fprintf(o, "}, \"unexplained_ns\": %lu, \"launching_thread\": [",
		(unsigned long)(s.other_ns - s.explained_ns));
	for (size_t i = 0; i < s.n; i++) {
		fprintf(o, "%s{\"cause\": ", i ? ", " : "");
		json_str(o, cause_str(r, &s.v[i]));
		fprintf(o, ", \"ns\": %lu}", (unsigned long)s.v[i].ns);
	}
	fprintf(o, "], \"not_analysed\": %lu, \"wakeups_left_out\": %lu, \"largest\": [",
		(unsigned long)r->gaps_skipped, (unsigned long)r->wakes_dropped);
	if (n)
		qsort(g, n, sizeof(*g), gap_by_dur);
	for (size_t i = 0; i < n && i < 20; i++) {
		fprintf(o, "%s{\"stream\": ", i ? ", " : "");
		json_str(o, g[i].name != RD_NONE ? rd_str(r, g[i].name) : "");
		fprintf(o, ", \"start_ns\": %lu, \"dur_ns\": %lu, \"launching_tid\": %ld, "
			"\"mostly\": ", (unsigned long)g[i].start, (unsigned long)g[i].dur,
			(long)g[i].tid);
		json_str(o, report_gap_main(r, &g[i]));
		by = rc_woken_by(r, g[i].tid, g[i].start, g[i].start + g[i].dur);
		fputs(", \"woken_by\": ", o);
		if (by != RD_NONE)
			json_str(o, rd_str(r, by));
		else
			fputs("null", o);
		fputs("}", o);
	}
	fputs("]}", o);
	free(s.v);
	free(g);
}
