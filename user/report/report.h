/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf report` (user/report/report.c): step, operator, kernel, memory and
 * Python call-site tables from a trace, as text, JSON or a page
 * (report_html.c); `report --diff A B` (report_diff.c). */
#ifndef PTBPF_REPORT_H
#define PTBPF_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct report_opts;
/* `ptbpf report`: the exit code (0, 1 error, 2 usage: --diff's). */
int report_run(const struct report_opts *opt);

struct report;
struct step_row;
struct tr_reader;
struct tr_status;

struct report_opts {
	const char *path, *path_b; /* path_b: --diff's second trace */
	const char *html;          /* --html OUT */
	bool json, by_shape, force;
	bool both_op_tables;       /* JSON: "operators_by_shape" too (the page) */
	int top;
};

extern const char *const report_breakdown_names[];

/* Reads the trace at path into r (rd_init'ed here; the caller rd_free's
 * it and closes *tr): 0, or -1 with one line printed. */
int report_read(struct report *r, const char *path, const struct report_opts *opt,
		struct tr_reader **tr);
/* The report as one JSON object (report --json). */
void report_json(FILE *o, struct report *r, const char *path, const struct tr_status *st,
		 const struct step_row *rows, size_t nrows, const struct report_opts *opt);
/* The line a report starts with when its trace counted losses (what,
 * how many, why; report_losses.c); false, and "", when it counted none. */
bool report_loss_line(const struct report *r, char *line, size_t len);
/* The same as JSON members: "losses" (one object each) and "loss_line". */
void report_losses_json(FILE *o, const struct report *r);
/* report --diff A B: 0, 1 or 2 (report_diff.c). */
int report_diff(const struct report_opts *opt);
/* Whether --html's output may be written (before reading the trace): 0 or -1. */
int report_html_check(const struct report_opts *opt);
/* --html's page around the JSON data() writes (report_html.c): 0, or -1
 * with one line printed. */
int report_html_write(const struct report_opts *opt, const char *input,
		      void (*data)(FILE *o, void *ctx), void *ctx);
/* The report's page: 0, or -1 with one line printed. */
int report_html(const struct report_opts *opt, struct report *r, struct tr_reader *tr,
		const struct step_row *rows, size_t nrows);

#endif /* PTBPF_REPORT_H */
