// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU idle track (gap_track.h). The trace is read as `ptbpf report`
 * reads it (the gaps' table is made in a second pass); then a writer of
 * its own appends, past the trace's end marker, a "GPU idle" child track
 * of each stream that had gaps and a slice per gap: named by its largest
 * part (what covered it on the host, else the launching thread's cause,
 * else "unexplained"), with the parts as arguments. Its packets are on
 * sequences of their own and it ends with a new end marker, so readers
 * still find the trace complete. Only analysed gaps are drawn (the
 * report's limit: RC_MAX_GAPS); the rest are counted in an attribute.
 */
#define _GNU_SOURCE
#include "offline/gap_track.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "report/report.h"
#include "report/report_causes.h"
#include "report/report_other.h"
#include "trace/perfetto.h"
#include "trace/trace_read.h"

#define MAX_STREAMS 1024 /* GPU idle tracks made at most; gaps past them counted */

/* The launching thread's causes, largest first, as one line. */
static void causes_line(const struct report *r, const struct step_row *g, char *buf,
			size_t size)
{
	const struct step_cause *cs = steps_causes(r->gaps, g);
	size_t n = 0;

	buf[0] = 0;
	for (int c = 0; c < g->ncause && n < size; c++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s %.3f ms", c ? "; " : "",
				      rd_str(r, cs[c].name), cs[c].ns / 1e6);
}

static void gap_slice(struct pf_writer *w, const struct report *r, const struct step_row *g,
		      uint64_t track)
{
	static const char *const covered[STEP_BREAKDOWN - 1] = {
		"covered_kernel_ns", "covered_copy_ns", "covered_memset_ns",
		"covered_cuda_api_ns", "covered_dataloader_ns", "covered_host_ops_ns",
	};
	struct pf_arg a[STEP_BREAKDOWN + 4];
	uint32_t by = rc_woken_by(r, g->tid, g->start, g->start + g->dur);
	char causes[512];
	int n = 0;

	for (int k = 0; k < STEP_BREAKDOWN - 1; k++)
		if (g->brk[k])
			a[n++] = (struct pf_arg){ .name = covered[k], .type = PF_ARG_UINT,
						  .u = g->brk[k] };
	if (g->tid)
		a[n++] = (struct pf_arg){ .name = "launching_tid", .type = PF_ARG_UINT,
					  .u = (uint64_t)g->tid };
	causes_line(r, g, causes, sizeof(causes));
	if (causes[0])
		a[n++] = (struct pf_arg){ .name = "launching_thread", .type = PF_ARG_STR,
					  .s = causes };
	if (by != RD_NONE)
		a[n++] = (struct pf_arg){ .name = "woken_by", .type = PF_ARG_STR,
					  .s = rd_str(r, by) };
	a[n++] = (struct pf_arg){ .name = "unexplained_ns", .type = PF_ARG_UINT,
				  .u = report_gap_unexplained(r, g) };
	struct pf_event e = { .track = track, .ts = g->start, .category = "gpu_idle",
			      .name = report_gap_main(r, g), .args = a, .nargs = n };

	pf_slice_begin(w, &e);
	e = (struct pf_event){ .track = track, .ts = g->start + g->dur };
	pf_slice_end(w, &e);
}

/* The GPU idle track of stream track uuid, made at its first gap; 0 past
 * MAX_STREAMS. */
static uint64_t idle_track(struct pf_writer *w, uint64_t *streams, uint64_t *tracks,
			   size_t *n, uint64_t uuid)
{
	for (size_t i = 0; i < *n; i++)
		if (streams[i] == uuid)
			return tracks[i];
	if (*n == MAX_STREAMS)
		return 0;
	streams[*n] = uuid;
	return tracks[(*n)++] = pf_track_child(w, uuid, "GPU idle");
}

long gap_track_append(const char *path, int fd)
{
	struct report r = { 0 };
	struct report_opts opt = { .top = 0 };
	struct tr_reader *tr = NULL;
	struct pf_writer *w = NULL;
	uint64_t *streams = NULL, *tracks = NULL;
	const struct step_row *g;
	size_t n = 0, nstreams = 0;
	long written = -1, past = 0;
	off_t size = lseek(fd, 0, SEEK_END);

	if (size < 0) {
		log_warn("no GPU idle track: %s\n", strerror(errno));
		goto out;
	}
	if (size > GAP_TRACK_MAX_BYTES) {
		log_msg("no GPU idle track: the trace is over %d MB (`ptbpf report` lists the "
			"gaps)\n", GAP_TRACK_MAX_BYTES >> 20);
		goto out;
	}
	if (report_read(&r, path, &opt, &tr))
		goto out;
	g = r.gaps ? steps_rows(r.gaps, &n) : NULL;
	if (!n) {
		written = 0;
		goto out;
	}
	streams = calloc(MAX_STREAMS, sizeof(*streams));
	tracks = calloc(MAX_STREAMS, sizeof(*tracks));
	if (!streams || !tracks || !(w = pf_writer_open_appending(fd))) {
		log_warn("no GPU idle track: %s\n", strerror(errno ? errno : ENOMEM));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t t = g[i].key ? idle_track(w, streams, tracks, &nstreams, g[i].key) : 0;

		if (t)
			gap_slice(w, &r, &g[i], t);
		else
			past++;
	}
	pf_trace_attr_int(w, "dev.ptbpf.gpu_idle_gaps", (int64_t)(n - (size_t)past));
	pf_trace_attr_int(w, "dev.ptbpf.gpu_idle_gaps_not_drawn",
			  (int64_t)(r.gaps_skipped + (uint64_t)past));
	if (pf_writer_close(w)) {
		w = NULL;
		log_warn("no GPU idle track: writing it failed\n");
		goto out;
	}
	w = NULL;
	written = (long)(n - (size_t)past);
out:
	if (w)
		pf_writer_close(w);
	if (written < 0 && size >= 0 && ftruncate(fd, size) == 0)
		lseek(fd, size, SEEK_SET); /* the trace as it was */
	free(streams);
	free(tracks);
	tr_close(tr);
	rd_free(&r);
	return written;
}
