// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf report --html OUT.html FILE.pftrace`: one self-contained page
 * (user/html/: its HTML, CSS and JavaScript, built into ptbpf by
 * user/report/html/embed.sh) with the report's JSON inside it, which the page's
 * script draws as the TensorBoard plugin's views (overview with the step
 * time breakdown and recommendations, operators, kernels, memory) and more
 * (Python call sites, what the trace lost, ptbpf's own cost, where to open
 * the trace). Charts are SVG drawn by the page itself: no library, no
 * network (the page's Content-Security-Policy allows none).
 */
#define _GNU_SOURCE
#include "lib/log.h"
#include "report/report.h"

#include <string.h>

#include "lib/files.h"
#include "report/report_data.h"
#include "report_assets.h"

/* The page with its three parts in place of the template's markers. */
static void page(FILE *o, void (*data)(FILE *o, void *ctx), void *ctx)
{
	static const char *const marks[] = { "<!--PTBPF:CSS-->", "<!--PTBPF:DATA-->",
					     "<!--PTBPF:JS-->" };
	const char *t = (const char *)report_page_html;

	for (int i = 0; i < 3; i++) {
		const char *m = strstr(t, marks[i]);

		if (!m)
			break;
		fwrite(t, 1, (size_t)(m - t), o);
		if (i == 0)
			fputs((const char *)report_page_css, o);
		else if (i == 1)
			data(o, ctx);
		else
			fputs((const char *)report_page_js, o);
		t = m + strlen(marks[i]);
	}
	fputs(t, o);
}

int report_html_check(const struct report_opts *opt)
{
	return outfile_check(opt->html, opt->force, "report");
}

struct report_page {
	const struct report_opts *opt;
	struct report *r;
	struct tr_reader *tr;
	const struct step_row *rows;
	size_t nrows;
};

static void report_data(FILE *o, void *ctx)
{
	struct report_page *p = ctx;
	struct report_opts opt = *p->opt;

	opt.both_op_tables = true;
	report_json(o, p->r, p->opt->path, tr_status(p->tr), p->rows, p->nrows, &opt);
}

int report_html_write(const struct report_opts *opt, const char *input,
		      void (*data)(FILE *o, void *ctx), void *ctx)
{
	struct outfile out = { .fd = -1 };
	FILE *o = rd_output_open(&out, opt->html, opt->force, input, "report");
	int rc;

	if (!o)
		return -1;
	page(o, data, ctx);
	rc = rd_output_commit(&out, o, "report");
	outfile_discard(&out);
	if (!rc)
		log_msg("report: wrote %s\n", opt->html);
	return rc;
}

int report_html(const struct report_opts *opt, struct report *r, struct tr_reader *tr,
		const struct step_row *rows, size_t nrows)
{
	struct report_page p = { opt, r, tr, rows, nrows };

	return report_html_write(opt, opt->path, report_data, &p);
}
