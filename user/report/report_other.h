/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's "Other, by cause" table (report_causes.c splits it): the
 * part of step time that no kind of work covers, by what each step's
 * thread was doing then, as text and as JSON, and the recommendation
 * that names its largest cause.
 */
#ifndef PTBPF_REPORT_OTHER_H
#define PTBPF_REPORT_OTHER_H

#include <stdbool.h>
#include <stdio.h>

#include "report/report_data.h"

void report_other_text(const struct report *r, const struct step_row *rows, size_t nrows,
		       int top);
/* `, "other_causes": {...}` */
void report_other_json(FILE *o, const struct report *r, const struct step_row *rows,
		       size_t nrows);
/* GPU idle gaps inside the steps (the gaps' rows that overlap a step): what
 * covered them, the launching thread's causes, the largest gaps. */
void report_gaps_text(const struct report *r, const struct step_row *steps, size_t nsteps,
		      int top);
/* The part of a gap's Other its launching thread's causes leave. */
uint64_t report_gap_unexplained(const struct report *r, const struct step_row *g);
/* A gap's largest part: a kind, a cause, or "unexplained". */
const char *report_gap_main(const struct report *r, const struct step_row *g);
/* `, "gpu_idle": {...}` */
void report_gaps_json(FILE *o, const struct report *r, const struct step_row *steps,
		      size_t nsteps);
/* The recommendation for Other (share: Other's share of step time, in
 * %), into buf. */
void report_other_advice(const struct report *r, const struct step_row *rows, size_t nrows,
			 double share, char *buf, size_t size);

#endif /* PTBPF_REPORT_OTHER_H */
