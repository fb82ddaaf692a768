// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf report FILE.pftrace [--json] [--top N] [--group-by-shape]
 * [--html OUT.html [--force]]`, and `ptbpf report --diff A B`: what
 * torch.profiler's key_averages and the TensorBoard plugin's views answer,
 * from a ptbpf trace, in one streaming pass over it (report_data.c):
 *   - steps (ProfilerStep#N): length, and within it kernel, memcpy and
 *     memset time on the GPU, the GPU's busy share (kernels' union), CUDA
 *     API time, DataLoader time and host op time (any thread), and the
 *     TensorBoard plugin's breakdown of it (Kernel, Memcpy, Memset,
 *     Runtime, DataLoader, CPU Exec, Other) with advice drawn from it;
 *   - operators: calls, host total and self time, device total and self
 *     time (the GPU time of the kernels each op launched, itself or through
 *     the ops it called), by op name (or op and input shapes);
 *   - kernels: calls, total, mean, min and max device time, each with a
 *     short name that tells it from the others (kname.c);
 *   - memory peaks and curves, Python call sites, the trace's own counts.
 * As text, as one JSON object, or as a page (report_html.c).
 */
#define _GNU_SOURCE
#include "report/report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "report/kname.h"
#include "report/report_data.h"
#include "report/report_causes.h"
#include "report/report_other.h"
#include "report/report_ranks.h"
#include "report/report_graphs.h"
#include "report/report_rpc.h"
#include "report/report_samples.h"

/* Intervals the step table keeps at most (16 bytes each): past them it
 * reads the trace again, a window of steps a pass. PTBPF_REPORT_INTERVALS
 * sets another budget (the tests make it small). */
#define REPORT_INTERVALS (1u << 18)
#define TEXT_KERNEL_WIDTH 60
#define JSON_KERNEL_WIDTH 80

const char *const report_breakdown_names[STEP_BREAKDOWN] = {
	"Kernel", "Memcpy", "Memset", "Runtime", "DataLoader", "CPU Exec", "Other"
};

/* Advice backed by the steps' breakdown: the share of step time each
 * category took, summed over all steps. */
static void recommendations(const struct report *r, const struct step_row *rows, size_t nrows,
			    FILE *o, bool json)
{
	uint64_t tot[STEP_BREAKDOWN] = { 0 }, all = 0, busy = 0, len = 0;
	int n = 0;

	for (size_t i = 0; i < nrows; i++) {
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			tot[k] += rows[i].brk[k], all += rows[i].brk[k];
		busy += rows[i].busy;
		len += rows[i].dur;
	}
	if (!all)
		return;
#define SHARE(k) (100.0 * tot[k] / all)
#define ADVICE(cond, ...) do { if (cond) { \
		if (json) fprintf(o, "%s\"", n ? ", " : ""); else fprintf(o, "  - "); \
		fprintf(o, __VA_ARGS__); fputs(json ? "\"" : "\n", o); n++; } } while (0)
	if (json)
		fputs(", \"recommendations\": [", o);
	else
		fputs("\nRecommendations (shares of all step time)\n", o);
	ADVICE(r->nk && SHARE(0) < 50 && SHARE(3) + SHARE(5) > 30,
	       "The GPU runs kernels %.0f%% of the time while the host spends %.0f%% in CUDA "
	       "calls and ops: launch-bound. Batch more work per launch (larger batches, "
	       "torch.compile, CUDA graphs).", SHARE(0), SHARE(3) + SHARE(5));
	ADVICE(r->nk && len && 100.0 * busy / len < 50 && !(SHARE(0) < 50 &&
							 SHARE(3) + SHARE(5) > 30),
	       "The GPU is busy %.0f%% of the step time: a larger batch size could use it "
	       "better.", 100.0 * busy / len);
	ADVICE(SHARE(4) > 10, "DataLoader takes %.0f%% of the step time: more workers "
	       "(num_workers), pin_memory, or prefetching.", SHARE(4));
	ADVICE(SHARE(1) > 10, "Memcpy takes %.0f%%: keep tensors on the GPU, pin host memory "
	       "and copy with non_blocking=True.", SHARE(1));
	if (SHARE(6) > 25) {
		char other[512];

		report_other_advice(r, rows, nrows, SHARE(6), other, sizeof(other));
		ADVICE(true, "%s", other);
	}
	ADVICE(!r->nk, "No GPU kernels in this trace: the steps are host time only (CPU "
	       "ops %.0f%%); the operator table is the place to look.", SHARE(5));
	ADVICE(!n && SHARE(0) >= 50, "The GPU runs kernels %.0f%% of the step time: the "
	       "kernels themselves are the target (see the kernel table).", SHARE(0));
	if (json)
		fputs("]", o);
#undef ADVICE
#undef SHARE
}

/* Short names for the first n kernels (k_v[i].display), within width. */
static void kernel_names(struct report *r, size_t n, size_t width)
{
	const char **names = calloc(n + 1, sizeof(*names));
	char **out = calloc(n + 1, sizeof(*out));

	for (size_t i = 0; names && out && i < n; i++) {
		names[i] = rd_str(r, r->k_v[i].name);
		if (!(out[i] = malloc(width + 1)))
			n = i;
	}
	if (names && out) {
		kname_column(names, n, width, out);
		for (size_t i = 0; i < n; i++)
			r->k_v[i].display = rd_str_id(r, out[i], strlen(out[i]));
	}
	for (size_t i = 0; out && i < n; i++)
		free(out[i]);
	free(out);
	free(names);
}

/* Peaks of the memory counters, and the ops that allocated most. */
static void print_memory_text(const struct report *r, int top)
{
	const struct rd_op **v;
	size_t n;
	bool any = false;

	for (size_t i = 0; i < r->ntracks; i++) {
		const struct rd_track *t = &r->track_v[i];

		if (!t->mem || !t->peak_ts)
			continue;
		if (!any)
			printf("\nMemory (peaks of the allocator's counters)\n");
		any = true;
		printf("  pid %-8ld %-30s peak %10.2f MiB at %.6f s\n", (long)t->pid,
		       rd_str(r, t->name), t->peak / 1048576.0, t->peak_ts / 1e9);
	}
	v = rd_allocating_ops(r, &n);
	if (v && n) {
		printf("\nOps by bytes allocated in them (self)\n  %-44s %12s %8s\n", "op", "MiB",
		       "calls");
		for (size_t i = 0; i < n && (int)i < top; i++)
			printf("  %-44.44s %12.3f %8lu\n", rd_str(r, v[i]->name),
			       v[i]->alloc / 1048576.0, (unsigned long)v[i]->calls);
	}
	free(v);
}

static void print_steps_text(const struct report *r, int top, const struct step_row *rows,
			     size_t nrows)
{
	/* The first `top` steps, then the mean of all of them. */
	size_t shown = nrows < (size_t)top ? nrows : (size_t)top;
	struct step_row mean = { 0 };

	for (size_t i = 0; i < nrows; i++) {
		mean.dur += rows[i].dur, mean.kernel_sum += rows[i].kernel_sum;
		mean.busy += rows[i].busy, mean.copy += rows[i].copy;
		mean.set += rows[i].set, mean.api += rows[i].api;
		mean.loader += rows[i].loader, mean.hostop += rows[i].hostop;
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			mean.brk[k] += rows[i].brk[k];
	}
	printf("\nSteps (ms; GPU busy = kernels' union over the step)\n");
	printf("  %-18s %9s %9s %7s %8s %8s %9s %9s %9s\n", "step", "length", "kernels",
	       "busy%", "memcpy", "memset", "cuda api", "dataload", "host ops");
	for (size_t i = 0; i <= shown; i++) {
		const struct step_row *w = i < shown ? &rows[i] : &mean;
		double div = i < shown ? 1.0 : (double)nrows;

		if (i == shown && nrows > shown)
			printf("  ... %zu more steps (all of them: --json)\n", nrows - shown);
		printf("  %-18.18s %9.3f %9.3f %6.1f%% %8.3f %8.3f %9.3f %9.3f %9.3f\n",
		       i < shown ? rd_str(r, rows[i].name) : "mean of all",
		       w->dur / 1e6 / div, w->kernel_sum / 1e6 / div,
		       w->dur ? 100.0 * w->busy / w->dur : 0, w->copy / 1e6 / div,
		       w->set / 1e6 / div, w->api / 1e6 / div, w->loader / 1e6 / div,
		       w->hostop / 1e6 / div);
	}
	printf("\nStep time breakdown (ms; each instant counted once, in this order)\n  %-18s",
	       "step");
	for (int k = 0; k < STEP_BREAKDOWN; k++)
		printf(" %10s", report_breakdown_names[k]);
	printf("\n");
	for (size_t i = 0; i <= shown; i++) {
		printf("  %-18.18s", i < shown ? rd_str(r, rows[i].name) : "mean of all");
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			printf(" %10.3f", (i < shown ? rows[i].brk[k] :
					   mean.brk[k] / (double)nrows) / 1e6);
		printf("\n");
	}
	report_other_text(r, rows, nrows, top);
	report_gaps_text(r, rows, nrows, top);
	recommendations(r, rows, nrows, stdout, false);
}

static void print_text(struct report *r, const char *path, const struct tr_reader *tr,
		       const struct report_opts *opt, const struct step_row *rows, size_t nrows,
		       double secs)
{
	const struct rd_optable *ops = opt->by_shape ? &r->ops_shape : &r->ops;
	size_t nk = r->nk < (size_t)opt->top ? r->nk : (size_t)opt->top;
	char how[2048];

	tr_describe(tr, how, sizeof(how));
	printf("ptbpf report %s: %s; %lu track events in %.2f s (%.1f M/s", path, how,
	       (unsigned long)r->events, secs, r->events / (secs > 0 ? secs : 1e-9) / 1e6);
	if (r->pass) /* the step tables did not fit their budget in one pass */
		printf(", the trace read %d times", r->pass + 1);
	printf(")\n");
	if (report_loss_line(r, how, sizeof(how)))
		printf("%s\n", how);
	rk_hang_text(r);
	if (nrows)
		print_steps_text(r, opt->top, rows, nrows);
	rk_waiting_text(r, opt->top);
	printf("\nOperators by host total time (ms; device = GPU time of the kernels they "
	       "launched)%s\n  %-44s %8s %10s %10s %10s %10s%s\n",
	       opt->by_shape ? ", by op and input shapes" : "", "op", "calls", "host tot",
	       "host self", "dev tot", "dev self", opt->by_shape ? "  input shapes" : "");
	for (size_t i = 0; i < ops->n && (int)i < opt->top; i++) {
		const struct rd_op *o = &ops->v[i];

		printf("  %-44.44s %8lu %10.3f %10.3f %10.3f %10.3f", rd_str(r, o->name),
		       (unsigned long)o->calls, o->total / 1e6, o->self / 1e6, o->dev_total / 1e6,
		       o->dev_self / 1e6);
		if (opt->by_shape)
			printf("  %.120s", o->shapes != RD_NONE ? rd_str(r, o->shapes) : "-");
		printf("\n");
	}
	print_memory_text(r, opt->top);
	report_rpc_text(r, opt->top);
	report_samples_text(r, opt->top);
	if (r->nsites) {
		printf("\nPython call sites of the outermost ops (the innermost frame outside "
		       "torch; host ms)\n  %-70s %8s %10s\n", "site", "ops", "host tot");
		for (size_t i = 0; i < r->nsites && (int)i < opt->top; i++)
			printf("  %-70.70s %8lu %10.3f\n", rd_str(r, r->site_v[i].site),
			       (unsigned long)r->site_v[i].calls, r->site_v[i].total / 1e6);
	}
	if (!r->nk)
		return;
	kernel_names(r, nk, TEXT_KERNEL_WIDTH);
	printf("\nKernels by total device time (names shortened; --json has them in full)\n"
	       "  %-60s %8s %10s %9s %9s %9s\n", "kernel", "calls", "total ms", "mean us",
	       "min us", "max us");
	for (size_t i = 0; i < nk; i++) {
		const struct rd_kernel *k = &r->k_v[i];

		printf("  %-60s %8lu %10.3f %9.2f %9.2f %9.2f\n", rd_str(r, k->display),
		       (unsigned long)k->calls, k->total / 1e6, k->total / 1e3 / k->calls,
		       k->min / 1e3, k->max / 1e3);
	}
	report_graphs_text(r, opt->top);
}

static void json_ops(FILE *o, const struct report *r, const struct rd_optable *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct rd_op *op = &t->v[i];

		fprintf(o, "%s{\"name\": ", i ? ", " : "");
		json_str(o, rd_str(r, op->name));
		fprintf(o, ", \"calls\": %lu, \"host_total_ns\": %lu, \"host_self_ns\": %lu, "
			"\"device_total_ns\": %lu, \"device_self_ns\": %lu, \"alloc_bytes\": %lu",
			(unsigned long)op->calls, (unsigned long)op->total, (unsigned long)op->self,
			(unsigned long)op->dev_total, (unsigned long)op->dev_self,
			(unsigned long)op->alloc);
		if (op->shapes != RD_NONE) {
			fputs(", \"input_shapes\": ", o);
			json_str(o, rd_str(r, op->shapes));
		}
		fputs("}", o);
	}
}

static void json_steps(FILE *o, const struct report *r, const struct step_row *rows,
		       size_t nrows)
{
	for (size_t i = 0; i < nrows; i++) {
		fprintf(o, "%s{\"name\": ", i ? ", " : "");
		json_str(o, rd_str(r, rows[i].name));
		fprintf(o, ", \"start_ns\": %lu, \"dur_ns\": %lu, \"kernel_ns\": %lu, "
			"\"gpu_busy_ns\": %lu, \"memcpy_ns\": %lu, \"memset_ns\": %lu, "
			"\"cuda_api_ns\": %lu, \"dataloader_ns\": %lu, \"host_ops_ns\": %lu, "
			"\"breakdown_ns\": {", (unsigned long)rows[i].start,
			(unsigned long)rows[i].dur, (unsigned long)rows[i].kernel_sum,
			(unsigned long)rows[i].busy, (unsigned long)rows[i].copy,
			(unsigned long)rows[i].set, (unsigned long)rows[i].api,
			(unsigned long)rows[i].loader, (unsigned long)rows[i].hostop);
		for (int k = 0; k < STEP_BREAKDOWN; k++)
			fprintf(o, "%s\"%s\": %lu", k ? ", " : "", report_breakdown_names[k],
				(unsigned long)rows[i].brk[k]);
		fputs("}, \"other_causes_ns\": {", o);
		const struct step_cause *c = steps_causes(r->steps, &rows[i]);

		for (int k = 0; k < rows[i].ncause; k++) {
			fputs(k ? ", " : "", o);
			json_str(o, rd_str(r, c[k].name));
			fprintf(o, ": %lu", (unsigned long)c[k].ns);
		}
		fprintf(o, "}, \"other_causes_rest_ns\": %lu}", (unsigned long)rows[i].cause_rest);
	}
}

static void json_memory(FILE *o, const struct report *r)
{
	size_t n = 0;

	fputs("], \"memory\": [", o);
	for (size_t i = 0; i < r->ntracks; i++) {
		const struct rd_track *t = &r->track_v[i];

		if (!t->mem || !t->peak_ts)
			continue;
		fprintf(o, "%s{\"pid\": %ld, \"counter\": ", n++ ? ", " : "", (long)t->pid);
		json_str(o, rd_str(r, t->name));
		fprintf(o, ", \"peak_bytes\": %ld, \"peak_ts_ns\": %lu, \"curve\": [", (long)t->peak,
			(unsigned long)t->peak_ts);
		for (size_t k = 0; k < t->curve.n; k++)
			fprintf(o, "%s[%lu, %ld]", k ? ", " : "", (unsigned long)t->curve.ts[k],
				(long)t->curve.v[k]);
		fputs("]}", o);
	}
}

/* The trace's processes, devices and ptbpf's own attributes. */
static void json_trace_info(FILE *o, const struct report *r)
{
	fputs(", \"processes\": [", o);
	for (int i = 0; i < r->nprocs; i++) {
		const struct rd_proc *p = &r->procs[i];

		fprintf(o, "%s{\"pid\": %ld, \"name\": ", i ? ", " : "", (long)p->pid);
		json_str(o, rd_str(r, p->name));
		fprintf(o, ", \"rank\": %ld, \"world_size\": %ld}", (long)p->rank,
			(long)p->world_size);
	}
	fputs("], \"devices\": [", o);
	for (int i = 0; i < r->ndevices; i++) {
		const struct rd_device *d = &r->devices[i];

		fprintf(o, "%s{\"pid\": %ld, \"id\": %ld", i ? ", " : "", (long)d->pid, (long)d->id);
		for (int k = 0; k < d->nprops; k++) {
			const struct tr_arg *a = &d->props[k];

			fputs(", ", o);
			json_str(o, rd_str(r, a->name.id));
			if (a->type == TR_ARG_STR) {
				fputs(": ", o);
				json_str(o, rd_str(r, a->s.id));
			} else {
				fprintf(o, ": %ld", (long)(a->type == TR_ARG_INT ? a->i :
							  (int64_t)a->u));
			}
		}
		fputs("}", o);
	}
	fputs("], \"trace_attributes\": {", o);
	for (int i = 0; i < r->nattrs; i++) {
		fputs(i ? ", " : "", o);
		json_str(o, rd_str(r, r->attrs[i].key));
		fputs(": ", o);
		if (r->attrs[i].is_str)
			json_str(o, rd_str(r, r->attrs[i].s));
		else
			fprintf(o, "%ld", (long)r->attrs[i].i);
	}
	fprintf(o, "}, \"first_ts_ns\": %lu, \"last_ts_ns\": %lu", (unsigned long)r->first_ts,
		(unsigned long)r->last_ts);
}

void report_json(FILE *o, struct report *r, const char *path, const struct tr_status *st,
		 const struct step_row *rows, size_t nrows, const struct report_opts *opt)
{
	fputs("{\"trace\": ", o);
	json_str(o, path);
	fprintf(o, ", \"trace_status\": {\"complete\": %s, \"cut\": %s, \"damaged\": %s, "
		"\"packets\": %lu, \"bytes\": %lu, \"dropped_bytes\": %lu, "
		"\"malformed_packets\": %lu}", st->complete ? "true" : "false",
		st->cut ? "true" : "false", st->damaged ? "true" : "false",
		(unsigned long)st->packets, (unsigned long)st->bytes, (unsigned long)st->dropped,
		(unsigned long)st->undecodable);
	report_losses_json(o, r);
	fprintf(o, ", \"passes\": %d, \"track_events\": %lu, \"steps\": [", r->pass + 1,
		(unsigned long)r->events);
	json_steps(o, r, rows, nrows);
	fputs("]", o);
	report_other_json(o, r, rows, nrows);
	report_gaps_json(o, r, rows, nrows);
	rk_hang_json(o, r);
	rk_waiting_json(o, r);
	recommendations(r, rows, nrows, o, true);
	fputs(", \"operators\": [", o);
	json_ops(o, r, opt->by_shape ? &r->ops_shape : &r->ops);
	if (opt->both_op_tables && r->want_shapes) {
		fputs("], \"operators_by_shape\": [", o);
		json_ops(o, r, &r->ops_shape);
	}
	json_memory(o, r);
	fputs("], \"python_sites\": [", o);
	for (size_t i = 0; i < r->nsites; i++) {
		fprintf(o, "%s{\"site\": ", i ? ", " : "");
		json_str(o, rd_str(r, r->site_v[i].site));
		fprintf(o, ", \"ops\": %lu, \"host_total_ns\": %lu}",
			(unsigned long)r->site_v[i].calls, (unsigned long)r->site_v[i].total);
	}
	kernel_names(r, r->nk, JSON_KERNEL_WIDTH);
	fputs("], \"kernels\": [", o);
	for (size_t i = 0; i < r->nk; i++) {
		const struct rd_kernel *k = &r->k_v[i];

		fprintf(o, "%s{\"name\": ", i ? ", " : "");
		json_str(o, rd_str(r, k->name));
		fputs(", \"display_name\": ", o);
		json_str(o, rd_str(r, k->display));
		fprintf(o, ", \"calls\": %lu, \"total_ns\": %lu, \"min_ns\": %lu, \"max_ns\": %lu}",
			(unsigned long)k->calls, (unsigned long)k->total, (unsigned long)k->min,
			(unsigned long)k->max);
	}
	fputs("]", o);
	report_graphs_json(o, r);
	report_rpc_json(o, r);
	report_samples_json(o, r, opt->top);
	json_trace_info(o, r);
	fputs("}\n", o);
}

int report_read(struct report *r, const char *path, const struct report_opts *opt,
		struct tr_reader **tr)
{
	const char *budget = getenv("PTBPF_REPORT_INTERVALS");

	r->want_shapes = opt->by_shape || opt->html;
	r->kview = &rc_kernel_view;
	r->gview = &report_graph_view;
	r->rview = &rk_rank_view;
	*tr = tr_open(path, "report");
	if (!*tr || !rd_init(r) ||
	    !(r->steps = steps_new(budget ? strtoul(budget, NULL, 10) : REPORT_INTERVALS)) ||
	    !(r->gaps = steps_new(budget ? strtoul(budget, NULL, 10) : REPORT_INTERVALS))) {
		if (*tr && r->set)
			log_msg("report: out of memory\n");
		return -1;
	}
	steps_defer(r->gaps); /* GPU traces only: one more pass */
	if ((r->late = steps_new(budget ? strtoul(budget, NULL, 10) : REPORT_INTERVALS)))
		steps_defer(r->late); /* collectives of several ranks only */
	if (rd_read(r, *tr) < 0)
		return -1;
	rc_wakes_sort(r);
	tr_warn_if_cut(*tr, "report");
	return 0;
}

int report_run(const struct report_opts *opt)
{
	struct report r = { 0 };
	struct report_opts a = *opt;
	struct tr_reader *tr = NULL;
	const struct step_row *rows = NULL;
	size_t nrows = 0;
	uint64_t t0, t1;
	int rc;

	if (a.path_b)
		return report_diff(&a);
	rc = 1;
	if (a.html && report_html_check(&a))
		goto out;
	t0 = clock_mono_ns();
	if (report_read(&r, a.path, &a, &tr))
		goto out;
	rows = steps_rows(r.steps, &nrows);
	t1 = clock_mono_ns();
	if (a.html && report_html(&a, &r, tr, rows, nrows))
		goto out;
	if (a.json)
		report_json(stdout, &r, a.path, tr_status(tr), rows, nrows, &a);
	else if (!a.html)
		print_text(&r, a.path, tr, &a, rows, nrows,
			   (double)(t1 - t0) / 1e9);
	rc = 0;
out:
	tr_close(tr);
	rd_free(&r);
	return rc;
}
