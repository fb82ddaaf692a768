/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's CPU samples (trace_read.h's tr_sample): per process, the
 * innermost Python frames and the native functions the samples were in,
 * by count and share, as text and as JSON (the HTML page draws the JSON).
 * A sample is ~1/hz s of a thread's CPU time, so the shares say where the
 * process's CPU time went, inside ops and between them.
 */
#ifndef PTBPF_REPORT_SAMPLES_H
#define PTBPF_REPORT_SAMPLES_H

#include <stdio.h>

#include "offline/report_data.h"

/* One sample of the trace (report_data.c's pass); false when out of memory. */
bool rd_samples_add(struct report *r, const struct tr_sample *s);
void rd_samples_free(struct report *r);
void report_samples_text(const struct report *r, int top);
/* `, "cpu_samples": [...]` */
void report_samples_json(FILE *o, const struct report *r, int top);

#endif /* PTBPF_REPORT_SAMPLES_H */
