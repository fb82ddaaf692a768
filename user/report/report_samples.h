/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's CPU samples (trace_read.h's tr_sample): per process, the
 * innermost Python frames and the native functions the samples were in,
 * by count and share, as text and as JSON (the HTML page draws the JSON).
 * The pass over the trace hands it each sample (rd_samples_add,
 * report_data.h).
 * A sample is ~1/hz s of a thread's CPU time, so the shares say where the
 * process's CPU time went, inside ops and between them.
 */
#ifndef PTBPF_REPORT_SAMPLES_H
#define PTBPF_REPORT_SAMPLES_H

#include <stdio.h>

#include "report/report_data.h"

void report_samples_text(const struct report *r, int top);
/* `, "cpu_samples": [...]` */
void report_samples_json(FILE *o, const struct report *r, int top);

#endif /* PTBPF_REPORT_SAMPLES_H */
