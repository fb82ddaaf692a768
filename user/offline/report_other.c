// SPDX-License-Identifier: BSD-2-Clause
/*
 * The report's "Other, by cause" table (report_other.h).
 */
#define _GNU_SOURCE
#include "offline/report_other.h"

#include <stdlib.h>

#include "offline/report_causes.h"

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

	if (!nrows || !rc_sum(r, rows, nrows, &s))
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
		}
	}
	free(s.v);
}

void report_other_json(FILE *o, const struct report *r, const struct step_row *rows,
		       size_t nrows)
{
	struct rc_totals s;

	if (!rc_sum(r, rows, nrows, &s))
		return;
	fprintf(o, ", \"other_causes\": {\"kernel_view\": %s, \"steps_ns\": %lu, "
		"\"other_ns\": %lu, \"unexplained_ns\": %lu, \"causes\": [",
		s.kernel_view ? "true" : "false", (unsigned long)s.steps_ns,
		(unsigned long)s.other_ns, (unsigned long)(s.other_ns - s.explained_ns));
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

	if (!rc_sum(r, rows, nrows, &s) || !s.kernel_view || !s.n || !s.steps_ns) {
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
