// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf merge A.pftrace B.pftrace ... -o JOB.pftrace`: one trace from the
 * traces of several ranks and hosts. Each input's events are stamped in its
 * host's CLOCK_MONOTONIC; its ClockSnapshots say what REALTIME was at the
 * same instants. The merge moves every timestamp onto REALTIME (the one
 * clock hosts share, through NTP or PTP) and keeps the inputs apart: its
 * own packet sequence each (interned names stay per input), track uuids and
 * flow ids salted per input, pids moved into a range per input (a pid means
 * one process to the Perfetto UI), and process names prefixed with the
 * input's file name. It prints how far each input's clock mapping drifted
 * over its trace: what the alignment cannot be better than. Each packet
 * sequence of an input (ptbpf's writer puts each track's events on one of
 * its own) becomes a sequence of the output, its timestamps in full: its
 * default clock is MONOTONIC there.
 *
 * Two streaming passes over each input (the trace reader, one input at a
 * time): the first finds its clock mapping, earliest timestamp and NCCL
 * kernels, the second rewrites its packets into the output. Only the fields
 * ptbpf's writer (user/trace/perfetto.c) uses are rewritten; everything else is
 * copied byte for byte. Timestamps are checked: one that the shift would
 * take out of range drops its packet (counted), it never wraps.
 */
#define _GNU_SOURCE
#include "offline/merge.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/files.h"
#include "offline/merge_rpc.h"
#include "offline/merge_sched.h"
#include "trace/pbread.h"
#include "trace/pbwrite.h"
#include "trace/perfetto.h"
#include "trace/trace_read.h"

#define PID_STRIDE PTBPF_PID_STRIDE
#define MAX_INPUTS 256
#define MAX_OPEN_SLICES 64

struct input {
	const char *path;
	char label[64];     /* file name without .pftrace */
	struct tr_reader *tr;
	uint64_t salt;
	int64_t offset;     /* REALTIME - MONOTONIC at its first snapshot */
	int64_t boot_minus_mono; /* BOOTTIME - MONOTONIC then (scheduler bundles are BOOTTIME) */
	uint32_t ncpus;     /* its scheduler bundles' highest CPU + 1 */
	uint32_t cpu_off;   /* added to its CPUs in the output */
	int64_t drift;      /* change of that offset up to its last snapshot */
	int nsnapshots;
	uint64_t min_ts;    /* the earliest timestamp of a packet it keeps */
	uint64_t *coll_end; /* NCCL kernels' end times (its MONOTONIC), in order */
	int ncoll, coll_cap;
	int64_t refined;    /* the collectives' correction, added to offset */
	int64_t residual;   /* median |difference| left after it, ns */
	bool aligned;       /* refined and residual are set */
	uint64_t dropped;   /* packets whose timestamp the shift took out of range */
	uint32_t *seq_in, *seq_out; /* its sequences and theirs in the output */
	int nseq, seq_cap;
};

/* Output sequence 1 is the clock snapshot's; inputs' ones follow. */
static uint32_t next_seq = 2;

/* The output sequence of input sequence seq (0 if out of memory). */
static uint32_t out_seq(struct input *in, uint32_t seq)
{
	for (int i = in->nseq - 1; i >= 0; i--)
		if (in->seq_in[i] == seq)
			return in->seq_out[i];
	if (in->nseq == in->seq_cap) {
		int cap = in->seq_cap ? 2 * in->seq_cap : 16;
		uint32_t *a = realloc(in->seq_in, cap * sizeof(*a)), *b;

		if (!a)
			return 0;
		in->seq_in = a;
		b = realloc(in->seq_out, cap * sizeof(*b));
		if (!b)
			return 0;
		in->seq_out = b;
		in->seq_cap = cap;
	}
	in->seq_in[in->nseq] = seq;
	return in->seq_out[in->nseq++] = next_seq++;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static uint64_t salted(const struct input *in, uint64_t id)
{
	return id ? (id ^ in->salt) | 1 : 0;
}

/* |x| without overflow at INT64_MIN. */
static uint64_t magnitude(int64_t x)
{
	return x < 0 ? -(uint64_t)x : (uint64_t)x;
}

/* ts moved by off, if that stays a timestamp (0 .. INT64_MAX). */
static bool shift_ts(uint64_t ts, int64_t off, uint64_t *out)
{
	uint64_t m = magnitude(off);

	if (off >= 0 ? ts > (uint64_t)INT64_MAX - m : ts < m)
		return false;
	*out = off >= 0 ? ts + m : ts - m;
	return *out <= (uint64_t)INT64_MAX;
}

/* The output drops the inputs' clock snapshots (packets stamped in another
 * clock than MONOTONIC) and their end markers; a sequence's first packet
 * stays (its defaults), without its snapshot. */
static bool kept(const struct tr_packet *p)
{
	return (!p->snapshot.n || p->defaults.n) && !p->end_marker &&
	       !(p->clock_id && p->clock_id != CLOCK_ID_MONOTONIC);
}

struct open_slice {
	uint64_t track;
	bool coll;
};

static bool is_collective_kernel(const struct tr_str *name)
{
	char buf[64];
	size_t len = name->len;

	if (len < 4 || memcmp(name->s, "nccl", 4))
		return false;
	len = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
	memcpy(buf, name->s, len);
	buf[len] = 0;
	return strstr(buf, "Kernel") != NULL;
}

/* NCCL kernels on the GPU timeline: a slice begins and ends on its stream
 * track; the end times of the collective ones, in order. */
static void note_collective(struct input *in, const struct tr_event *e,
			    struct open_slice *open, int *nopen)
{
	if (e->type == TE_SLICE_BEGIN && *nopen < MAX_OPEN_SLICES) {
		open[*nopen].track = e->track;
		open[(*nopen)++].coll = e->has_name && is_collective_kernel(&e->name);
		return;
	}
	if (e->type != TE_SLICE_END)
		return;
	for (int i = *nopen - 1; i >= 0; i--) {
		if (open[i].track != e->track)
			continue;
		if (open[i].coll && in->ncoll == in->coll_cap) {
			int cap = in->coll_cap ? in->coll_cap * 2 : 256;
			uint64_t *c = realloc(in->coll_end, (size_t)cap * sizeof(*c));

			if (c)
				in->coll_end = c, in->coll_cap = cap;
		}
		if (open[i].coll && in->ncoll < in->coll_cap)
			in->coll_end[in->ncoll++] = e->ts;
		open[i] = open[--*nopen];
		return;
	}
}

/* First pass over input idx: its clock mapping, earliest timestamp,
 * (by_collectives) NCCL kernels and RPC events. 0, or -1 with one line
 * printed. */
static int scan_input(struct input *in, int idx, bool by_collectives, struct merge_rpc *rpc)
{
	struct open_slice open[MAX_OPEN_SLICES];
	struct tr_event *e = malloc(sizeof(*e));
	struct tr_track d;
	struct tr_packet p;
	uint64_t ord = 0;
	int nopen = 0, got;
	uint32_t cpu;

	if (!e)
		return -1;
	in->min_ts = UINT64_MAX;
	while ((got = tr_next(in->tr, &p)) > 0) {
		int64_t off;

		if (p.snapshot.n && tr_clock_offset(&p, &off)) {
			int64_t boot;

			if (!in->nsnapshots++) {
				in->offset = off;
				if (tr_clock_offset_boot(&p, &boot))
					in->boot_minus_mono = off - boot;
			}
			/* Both offsets lie in [-INT64_MAX, INT64_MAX]: wrap-free in unsigned. */
			in->drift = (int64_t)((uint64_t)off - (uint64_t)in->offset);
		}
		if (kept(&p) && p.has_ts && p.ts < in->min_ts)
			in->min_ts = p.ts;
		ord++;
		if (p.desc.n && tr_track(in->tr, &p, &d))
			merge_rpc_track(rpc, idx, &d);
		if (p.ftrace.n && merge_sched_cpu(p.ftrace.d, p.ftrace.n, &cpu) && cpu >= in->ncpus)
			in->ncpus = cpu + 1;
		if (p.sample.n && merge_sample_cpu(p.sample.d, p.sample.n, &cpu) && cpu >= in->ncpus)
			in->ncpus = cpu + 1;
		if (!p.event.n || !tr_event(in->tr, &p, e))
			continue;
		if (by_collectives)
			note_collective(in, e, open, &nopen);
		merge_rpc_event(rpc, idx, ord, e);
	}
	free(e);
	if (got < 0)
		return -1;
	tr_warn_if_cut(in->tr, "merge");
	if (!in->nsnapshots) {
		log_msg("merge: %s has no ClockSnapshot with MONOTONIC and "
			"REALTIME: it cannot be aligned (was it written by ptbpf?)\n", in->path);
		return -1;
	}
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* x, or the nearest int64 (differences of timestamps that no real trace
 * comes near). */
static int64_t clamp64(__int128 x)
{
	return x > INT64_MAX ? INT64_MAX : x < INT64_MIN ? INT64_MIN : (int64_t)x;
}

/* Shifts input `in` so that its k-th collective ends when the reference's
 * does (the median difference), trying small index offsets in case one
 * trace began a collective or two earlier; keeps the best (smallest median
 * residual). False if there are too few collectives to say. */
static bool refine(const struct input *ref, struct input *in)
{
	int64_t best_res = INT64_MAX, best_corr = 0;
	int64_t *d = malloc(sizeof(*d) * (size_t)(in->ncoll + ref->ncoll + 1));

	if (!d)
		return false;
	for (int shift = -3; shift <= 3; shift++) {
		int64_t corr;
		int n = 0;

		for (int k = 0; k < ref->ncoll; k++) {
			int j = k + shift;

			if (j < 0 || j >= in->ncoll)
				continue;
			d[n++] = clamp64(((__int128)ref->coll_end[k] + ref->offset) -
					 ((__int128)in->coll_end[j] + in->offset));
		}
		if (n < 3)
			continue;
		qsort(d, n, sizeof(*d), cmp_i64);
		corr = d[n / 2];
		for (int i = 0; i < n; i++)
			d[i] = clamp64((__int128)d[i] - corr < 0 ? -((__int128)d[i] - corr) :
				       (__int128)d[i] - corr);
		qsort(d, n, sizeof(*d), cmp_i64);
		if (d[n / 2] < best_res) {
			best_res = d[n / 2];
			best_corr = corr;
		}
	}
	free(d);
	if (best_res == INT64_MAX || __builtin_add_overflow(in->offset, best_corr, &in->offset))
		return false;
	in->refined = best_corr;
	in->residual = best_res;
	in->aligned = true;
	return true;
}

static void rewrite_process(const struct input *in, int idx, const uint8_t *d, size_t n,
			    struct pb *out, bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	while (pb_next_field(&p, d + n, &f, bad)) {
		if (f.num == F_PD_PID && f.wt == PB_VARINT) {
			pb_int(out, F_PD_PID, (int64_t)(int32_t)f.v + (int64_t)(idx + 1) * PID_STRIDE);
		} else if (f.num == F_PD_NAME && f.wt == PB_LEN) {
			char name[512];
			int len = snprintf(name, sizeof(name), "%s: %.*s", in->label,
					   (int)(f.len < 400 ? f.len : 400), (const char *)f.d);

			pb_bytes(out, F_PD_NAME, name, len < (int)sizeof(name) ? (size_t)len : sizeof(name) - 1);
		} else {
			pb_raw(out, f.raw, f.rawlen);
		}
	}
}

static void rewrite_thread(int idx, const uint8_t *d, size_t n, struct pb *out, bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	while (pb_next_field(&p, d + n, &f, bad)) {
		if ((f.num == F_THD_PID || f.num == F_THD_TID) && f.wt == PB_VARINT) {
			/* Unsigned: a sign-extended pid moves as the process's does. */
			pb_uint(out, f.num, f.v + (uint64_t)(idx + 1) * PID_STRIDE);
		} else {
			pb_raw(out, f.raw, f.rawlen);
		}
	}
}

static void rewrite_descriptor(const struct input *in, int idx, const uint8_t *d, size_t n,
			       struct pb *out, bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	while (pb_next_field(&p, d + n, &f, bad)) {
		if ((f.num == F_TD_UUID || f.num == F_TD_PARENT) && f.wt == PB_VARINT) {
			pb_uint(out, f.num, salted(in, f.v));
		} else if (f.num == F_TD_PROCESS && f.wt == PB_LEN) {
			size_t at = pb_begin(out, f.num);

			rewrite_process(in, idx, f.d, f.len, out, bad);
			pb_end(out, at);
		} else if (f.num == F_TD_THREAD && f.wt == PB_LEN) {
			size_t at = pb_begin(out, f.num);

			rewrite_thread(idx, f.d, f.len, out, bad);
			pb_end(out, at);
		} else {
			pb_raw(out, f.raw, f.rawlen);
		}
	}
}

/* A track event; ed (may be NULL): RPC flows and a name to give it. */
static void rewrite_event(const struct input *in, const uint8_t *d, size_t n, struct pb *out,
			  const struct merge_rpc_edit *ed, bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	if (ed && ed->name)
		pb_bytes(out, F_TE_NAME, ed->name, strlen(ed->name));
	if (ed && ed->flow)
		pb_fixed64(out, F_TE_FLOWS, ed->flow);
	if (ed && ed->term)
		pb_fixed64(out, F_TE_TERM_FLOWS, ed->term);
	while (pb_next_field(&p, d + n, &f, bad)) {
		if (ed && ed->name && (f.num == F_TE_NAME || f.num == F_TE_NAME_IID)) {
			continue;
		} else if (f.num == F_TE_TRACK && f.wt == PB_VARINT) {
			pb_uint(out, f.num, salted(in, f.v));
		} else if (((f.num == F_TE_FLOWS || f.num == F_TE_TERM_FLOWS) && f.wt == PB_FIXED64) ||
			   ((f.num == F_TE_FLOWS_V || f.num == F_TE_TERM_FLOWS_V) && f.wt == PB_VARINT)) {
			/* A short id (a small number) made odd first, as the long
			 * ones are: salting keeps them apart then. */
			uint64_t id = salted(in, f.wt == PB_VARINT ? f.v << 1 | 1 : f.v);

			pb_fixed64(out, f.num == F_TE_FLOWS || f.num == F_TE_FLOWS_V ? F_TE_FLOWS :
				   F_TE_TERM_FLOWS, id);
		} else {
			pb_raw(out, f.raw, f.rawlen);
		}
	}
}

/* A sequence's defaults: its track salted, its clock MONOTONIC (the
 * output's timestamps are in full). */
static void rewrite_defaults(const struct input *in, const uint8_t *d, size_t n,
			     struct pb *out, bool *bad)
{
	const uint8_t *p = d;
	struct field f, g;

	while (pb_next_field(&p, d + n, &f, bad)) {
		const uint8_t *t = f.d;

		if (f.num == F_DEF_CLOCK_ID && f.wt == PB_VARINT) {
			pb_uint(out, f.num, CLOCK_ID_MONOTONIC);
		} else if (f.num == F_DEF_TRACK_EVENT && f.wt == PB_LEN) {
			size_t at = pb_begin(out, f.num);

			while (pb_next_field(&t, f.d + f.len, &g, bad)) {
				if (g.num == F_TED_TRACK && g.wt == PB_VARINT)
					pb_uint(out, g.num, salted(in, g.v));
				else
					pb_raw(out, g.raw, g.rawlen);
			}
			pb_end(out, at);
		} else {
			pb_raw(out, f.raw, f.rawlen);
		}
	}
}

/* One kept packet of input idx, rewritten into pkt (emptied first); false
 * if it is to be dropped (malformed, or its timestamp out of range) or
 * memory ran out (then pkt->failed). */
static bool rewrite_packet(struct input *in, int idx, const struct tr_packet *tp,
			   const struct merge_rpc_edit *ed, struct pb *pkt)
{
	const uint8_t *p = tp->data, *end = tp->data + tp->len;
	struct field f;
	bool bad = false;

	pkt->len = 0;
	while (pb_next_field(&p, end, &f, &bad)) {
		uint64_t ts;

		if (f.num == F_PKT_TIMESTAMP && f.wt == PB_VARINT) {
			/* The reader's: in full where it was incremental. */
			if (!shift_ts(tp->ts_incremental ? tp->ts : f.v, in->offset, &ts)) {
				in->dropped++;
				return false;
			}
			pb_uint(pkt, f.num, ts);
		} else if (f.num == F_PKT_SEQ_ID && f.wt == PB_VARINT) {
			uint32_t seq = out_seq(in, (uint32_t)f.v);

			if (!seq)
				pkt->failed = true;
			pb_uint(pkt, f.num, seq);
		} else if (f.num == F_PKT_CLOCK_SNAPSHOT) {
			continue; /* a sequence's own clock: not needed in the output */
		} else if (f.num == F_PKT_DEFAULTS && f.wt == PB_LEN) {
			size_t at = pb_begin(pkt, f.num);

			rewrite_defaults(in, f.d, f.len, pkt, &bad);
			pb_end(pkt, at);
		} else if (f.num == F_PKT_TRACK_DESC && f.wt == PB_LEN) {
			size_t at = pb_begin(pkt, f.num);

			rewrite_descriptor(in, idx, f.d, f.len, pkt, &bad);
			pb_end(pkt, at);
		} else if (f.num == F_PKT_TRACK_EVENT && f.wt == PB_LEN) {
			size_t at = pb_begin(pkt, f.num);

			rewrite_event(in, f.d, f.len, pkt, ed, &bad);
			pb_end(pkt, at);
		} else if (f.num == F_PKT_FTRACE_EVENTS && f.wt == PB_LEN) {
			struct merge_sched_shift sh = {
				.ts_off = in->offset - in->boot_minus_mono,
				.pid_off = (int64_t)(idx + 1) * PID_STRIDE, .cpu_off = in->cpu_off };
			size_t at = pb_begin(pkt, f.num);

			if (!merge_sched_bundle(&sh, f.d, f.len, pkt)) {
				in->dropped++;
				return false;
			}
			pb_end(pkt, at);
		} else if (f.num == F_PKT_PERF_SAMPLE && f.wt == PB_LEN) {
			struct merge_sched_shift sh = {
				.pid_off = (int64_t)(idx + 1) * PID_STRIDE, .cpu_off = in->cpu_off };
			size_t at = pb_begin(pkt, f.num);

			if (!merge_perf_sample(&sh, f.d, f.len, pkt)) {
				in->dropped++;
				return false;
			}
			pb_end(pkt, at);
		} else {
			pb_raw(pkt, f.raw, f.rawlen);
		}
	}
	return !bad && !pkt->failed;
}

/* The output's one clock mapping: its timestamps are REALTIME, stamped
 * MONOTONIC (the inputs' sequence default), so all clocks read alike. */
static void put_identity_snapshot(struct pb *out, uint64_t ts, uint32_t seq)
{
	const int ids[] = { CLOCK_ID_BOOTTIME, CLOCK_ID_MONOTONIC, CLOCK_ID_REALTIME };
	size_t snap;

	pb_uint(out, F_PKT_TIMESTAMP, ts);
	pb_uint(out, F_PKT_CLOCK_ID, CLOCK_ID_BOOTTIME);
	pb_uint(out, F_PKT_SEQ_ID, seq);
	snap = pb_begin(out, F_PKT_CLOCK_SNAPSHOT);
	for (int i = 0; i < 3; i++) {
		size_t clock = pb_begin(out, F_CS_CLOCKS);

		pb_uint(out, F_CLK_ID, ids[i]);
		pb_uint(out, F_CLK_TS, ts);
		pb_end(out, clock);
	}
	pb_uint(out, F_CS_PRIMARY, CLOCK_ID_BOOTTIME);
	pb_end(out, snap);
}

/* Each input's CPUs keep tracks of their own, as its pids do, while
 * trace_processor's 1024 CPUs go round; else they share them (said). */
static void apart_cpus(struct input *in, int n)
{
	uint32_t stride = 0;

	for (int i = 0; i < n; i++)
		stride = in[i].ncpus > stride ? in[i].ncpus : stride;
	if (stride && n > 1 && (uint64_t)stride * (uint64_t)n > 1024) {
		log_msg("merge: the inputs' %u CPUs each are too many to keep apart: their CPU "
			"tracks are shared\n", stride);
		return;
	}
	for (int i = 0; i < n; i++)
		in[i].cpu_off = (uint32_t)i * stride;
}

static void set_label(struct input *in)
{
	char tmp[4096], *base;

	snprintf(tmp, sizeof(tmp), "%s", in->path);
	base = basename(tmp);
	if (strlen(base) > 8 && !strcmp(base + strlen(base) - 8, ".pftrace"))
		base[strlen(base) - 8] = 0;
	snprintf(in->label, sizeof(in->label), "%s", base);
}

/* Second pass: every input's kept packets, rewritten, into w. 0 or -1. */
static int write_inputs(struct input *in, int n, struct pf_writer *w, const struct merge_rpc *rpc)
{
	struct pb pkt = { 0 };
	int rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		struct tr_packet p;
		uint64_t ord = 0;
		int got;

		if (tr_rewind(in[i].tr)) {
			rc = -1;
			break;
		}
		while ((got = tr_next(in[i].tr, &p)) > 0)
			if (ord++, kept(&p) &&
			    rewrite_packet(&in[i], i, &p, merge_rpc_edit_of(rpc, i, ord), &pkt))
				pf_write_packet(w, pkt.buf, pkt.len);
		if (got < 0 || pkt.failed)
			rc = -1;
		tr_close(in[i].tr);
		in[i].tr = NULL;
	}
	pb_free(&pkt);
	return rc;
}

static void print_alignment(const struct input *in, int n, const char *out_path)
{
	uint64_t worst = 0;
	int64_t worst_res = -1;

	for (int i = 0; i < n; i++) {
		log_msg("merge: %s: pids +%d, REALTIME - MONOTONIC = %.6f s, "
			"drifted %+.1f us over its %d clock snapshots\n", in[i].label,
			(i + 1) * PID_STRIDE, in[i].offset / 1e9, in[i].drift / 1e3,
			in[i].nsnapshots);
		if (in[i].dropped)
			log_msg("merge: %s: %lu packets dropped: their timestamps "
				"moved out of range\n", in[i].label, (unsigned long)in[i].dropped);
		if (magnitude(in[i].drift) > worst)
			worst = magnitude(in[i].drift);
		if (in[i].aligned) {
			log_msg("merge: %s: moved %+.1f us to line up its NCCL "
				"kernels with %s's (%d and %d); they then end %.1f us apart "
				"(median)\n", in[i].label, in[i].refined / 1e3, in[0].label,
				in[i].ncoll, in[0].ncoll, in[i].residual / 1e3);
			if (in[i].residual > worst_res)
				worst_res = in[i].residual;
		}
	}
	if (worst_res >= 0)
		log_msg("merge: wrote %s (%d traces, aligned by their "
			"collectives); alignment uncertainty ±%.1f us\n", out_path, n,
			worst_res / 1e3 + worst / 1e3);
	else
		log_msg("merge: wrote %s (%d traces on REALTIME); alignment "
			"uncertainty within a host ±%.1f us, across hosts plus their REALTIME "
			"clocks' disagreement (NTP/PTP)\n", out_path, n, worst / 1e3 + 1.0);
}

/* RPC requests whose caller is in another input: joined to their calls,
 * once the inputs' clocks are known. */
static int join_rpc(const struct input *in, int n, struct merge_rpc *rpc)
{
	int64_t *offset = malloc(n * sizeof(*offset));
	size_t linked;

	if (!offset)
		return -1;
	for (int i = 0; i < n; i++)
		offset[i] = in[i].offset;
	linked = merge_rpc_match(rpc, offset);
	free(offset);
	if (linked)
		log_msg("merge: joined %lu RPC requests to their calls in other traces (flows, "
			"and the callee's slice named as the call)\n", (unsigned long)linked);
	if (merge_rpc_left_out(rpc))
		log_msg("merge: %lu RPC events past the limit were not joined\n",
			(unsigned long)merge_rpc_left_out(rpc));
	return 0;
}

/* Both the first pass over every input and what it tells: the clocks'
 * alignment, the RPC calls joined. 0, or -1 with one line printed. */
static int scan_inputs(struct input *in, const char *const *paths, int n, bool by_collectives,
		       struct merge_rpc *rpc)
{
	for (int i = 0; i < n; i++) {
		in[i].path = paths[i];
		in[i].salt = mix(0x6d65726765ULL + (uint64_t)i);
		set_label(&in[i]);
		if (!(in[i].tr = tr_open(paths[i], "merge")) ||
		    scan_input(&in[i], i, by_collectives, rpc))
			return -1;
		tr_park(in[i].tr);
	}
	for (int i = 1; by_collectives && i < n; i++)
		if (!refine(&in[0], &in[i]))
			log_msg("merge: %s and %s share too few NCCL kernels (%d, %d) "
				"to refine the alignment; REALTIME only\n", in[0].label, in[i].label,
				in[0].ncoll, in[i].ncoll);
	return join_rpc(in, n, rpc);
}

int merge_traces(const char *const *paths, int n, const char *out_path, bool by_collectives,
		 bool force)
{
	struct input *in = calloc(n > 0 ? n : 1, sizeof(*in));
	struct outfile out = { .fd = -1 };
	struct pf_writer *w = NULL;
	struct pb snap = { 0 };
	struct merge_rpc *rpc = NULL;
	uint64_t start = UINT64_MAX;
	int rc = 1, err;

	if (!in)
		return 1;
	if (n < 1 || n > MAX_INPUTS) {
		log_msg("merge: give 1 to %d traces\n", MAX_INPUTS);
		goto done;
	}
	if (!(rpc = merge_rpc_new()) || scan_inputs(in, paths, n, by_collectives, rpc))
		goto done;
	apart_cpus(in, n);
	for (int i = 0; i < n; i++) {
		uint64_t ts;

		if (in[i].min_ts != UINT64_MAX && shift_ts(in[i].min_ts, in[i].offset, &ts) &&
		    ts < start)
			start = ts;
	}
	if (outfile_open(&out, out_path, force, paths, n, "merge"))
		goto done;
	if (!(w = pf_writer_open_copy(out.fd))) {
		outfile_cannot_write("merge", out.tmp, errno);
		goto done;
	}
	put_identity_snapshot(&snap, start == UINT64_MAX ? 0 : start, 1);
	pf_write_packet(w, snap.buf, snap.len);
	if (snap.failed || write_inputs(in, n, w, rpc)) {
		log_msg("merge: out of memory or a read error; %s not written\n",
			out_path);
		goto done;
	}
	err = pf_writer_close(w);
	w = NULL;
	if (err) {
		log_msg("merge: writing %s failed: %s\n", out.tmp, strerror(-err));
		goto done;
	}
	if (outfile_commit(&out, "merge"))
		goto done;
	print_alignment(in, n, out_path);
	rc = 0;
done:
	if (w)
		pf_writer_close(w);
	outfile_discard(&out);
	for (int i = 0; i < n; i++) {
		tr_close(in[i].tr);
		free(in[i].coll_end);
		free(in[i].seq_in);
		free(in[i].seq_out);
	}
	free(in);
	pb_free(&snap);
	merge_rpc_free(rpc);
	return rc;
}
