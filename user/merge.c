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
 * over its trace: what the alignment cannot be better than.
 *
 * Only the fields ptbpf's writer (user/perfetto.c) uses are rewritten;
 * everything else is copied byte for byte.
 */
#define _GNU_SOURCE
#include "merge.h"
#include "pbread.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Field numbers (user/perfetto_trace.proto). */
enum {
	F_TRACE_PACKET = 1,
	F_PKT_CLOCK_SNAPSHOT = 6, F_PKT_TIMESTAMP = 8, F_PKT_SEQ_ID = 10,
	F_PKT_TRACK_EVENT = 11, F_PKT_CLOCK_ID = 58, F_PKT_TRACK_DESC = 60,
	F_CS_CLOCKS = 1, F_CLK_ID = 1, F_CLK_TS = 2, F_CS_PRIMARY = 2,
	F_TD_UUID = 1, F_TD_PROCESS = 3, F_TD_THREAD = 4, F_TD_PARENT = 5,
	F_PD_PID = 1, F_PD_NAME = 6, F_THD_PID = 1, F_THD_TID = 2,
	F_TE_TRACK = 11, F_TE_FLOWS = 47, F_TE_TERM_FLOWS = 48,
	F_PKT_INTERNED = 12, F_PKT_SEQ_FLAGS = 13, F_ID_NAMES = 2, F_ENTRY_IID = 1,
	F_ENTRY_NAME = 2, F_TE_TYPE = 9, F_TE_NAME_IID = 10, F_TE_NAME = 23,
};
enum { TE_SLICE_BEGIN = 1, TE_SLICE_END = 2 };
enum { CLOCK_REALTIME_ID = 1, CLOCK_MONOTONIC_ID = 3, CLOCK_BOOTTIME_ID = 6 };

#define PID_STRIDE (1 << 22) /* above Linux's largest pid_max */
#define MAX_INPUTS 256

struct buf {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		uint8_t *p;

		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put_varint(struct buf *b, uint64_t v)
{
	uint8_t t[10];
	int n = 0;

	do {
		t[n++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
	put(b, t, n);
}

static void put_tag(struct buf *b, uint32_t field, int wt)
{
	put_varint(b, (uint64_t)field << 3 | wt);
}

static void put_len(struct buf *b, uint32_t field, const void *d, size_t n)
{
	put_tag(b, field, WT_LEN);
	put_varint(b, n);
	put(b, d, n);
}

struct input {
	const char *path;
	char label[64];     /* file name without .pftrace */
	uint8_t *data;
	size_t size;
	uint64_t salt;
	int64_t offset;     /* REALTIME - MONOTONIC at its first snapshot */
	int64_t drift;      /* change of that offset up to its last snapshot */
	int nsnapshots;
	uint64_t *coll_end; /* NCCL kernels' end times (its MONOTONIC), in order */
	int ncoll;
	int64_t refined;    /* the collectives' correction, added to offset */
	int64_t residual;   /* median |difference| left after it, ns */
	bool aligned;       /* refined and residual are set */
};

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

/* The REALTIME - MONOTONIC offset of one ClockSnapshot, if it has both. */
static bool snapshot_offset(const uint8_t *d, size_t n, int64_t *off, bool *bad)
{
	const uint8_t *p = d, *end = d + n;
	uint64_t mono = 0, real = 0;
	bool has_mono = false, has_real = false;
	struct field f, g;

	while (next_field(&p, end, &f, bad)) {
		const uint8_t *q;
		uint64_t id = 0, ts = 0;

		if (f.num != F_CS_CLOCKS || f.wt != WT_LEN)
			continue;
		q = f.d;
		while (next_field(&q, f.d + f.len, &g, bad)) {
			if (g.num == F_CLK_ID && g.wt == WT_VARINT)
				id = g.v;
			else if (g.num == F_CLK_TS && g.wt == WT_VARINT)
				ts = g.v;
		}
		if (id == CLOCK_MONOTONIC_ID)
			mono = ts, has_mono = true;
		else if (id == CLOCK_REALTIME_ID)
			real = ts, has_real = true;
	}
	*off = (int64_t)(real - mono);
	return has_mono && has_real;
}

/* First pass: the clock mapping. */
static int scan_clocks(struct input *in, char *err, size_t errlen)
{
	const uint8_t *p = in->data, *end = in->data + in->size;
	struct field f, g;
	bool bad = false;

	while (next_field(&p, end, &f, &bad)) {
		const uint8_t *q;

		if (f.num != F_TRACE_PACKET || f.wt != WT_LEN)
			continue;
		q = f.d;
		while (next_field(&q, f.d + f.len, &g, &bad)) {
			int64_t off;

			if (g.num != F_PKT_CLOCK_SNAPSHOT || g.wt != WT_LEN ||
			    !snapshot_offset(g.d, g.len, &off, &bad))
				continue;
			if (!in->nsnapshots++)
				in->offset = off;
			in->drift = off - in->offset;
		}
	}
	if (bad) {
		snprintf(err, errlen, "%s is not a Perfetto trace (malformed protobuf)", in->path);
		return -EINVAL;
	}
	if (!in->nsnapshots) {
		snprintf(err, errlen, "%s has no ClockSnapshot with MONOTONIC and REALTIME: "
			 "it cannot be aligned (was it written by ptbpf?)", in->path);
		return -EINVAL;
	}
	return 0;
}

/* --- refining the alignment with NCCL collectives --- */

struct names { uint64_t iid; const uint8_t *name; size_t len; } ;

static bool is_collective_kernel(const uint8_t *name, size_t len)
{
	char buf[64];

	if (len < 4 || memcmp(name, "nccl", 4))
		return false;
	len = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
	memcpy(buf, name, len);
	buf[len] = 0;
	return strstr(buf, "Kernel") != NULL;
}

/* The end times of the NCCL kernels on the GPU timeline of one input: a
 * slice begins and ends on its stream track, named by interned iid (per
 * sequence, cleared when the sequence says so). */
static void scan_collectives(struct input *in, bool *bad)
{
	const uint8_t *p = in->data, *end = in->data + in->size;
	struct names *names = NULL;
	size_t nnames = 0, cap = 0;
	struct { uint64_t track; bool coll; } open[64];
	int nopen = 0, ccap = 0;
	struct field fl, g, h, k;

	while (next_field(&p, end, &fl, bad)) {
		const uint8_t *q = fl.d;
		uint64_t ts = 0, type = 0, track = 0, iid = 0;
		const uint8_t *te = NULL, *inline_name = NULL;
		size_t te_len = 0, inline_len = 0;

		if (fl.num != F_TRACE_PACKET || fl.wt != WT_LEN)
			continue;
		while (next_field(&q, fl.d + fl.len, &g, bad)) {
			if (g.num == F_PKT_SEQ_FLAGS && g.wt == WT_VARINT && (g.v & 1))
				nnames = 0;
			else if (g.num == F_PKT_TIMESTAMP && g.wt == WT_VARINT)
				ts = g.v;
			else if (g.num == F_PKT_TRACK_EVENT && g.wt == WT_LEN)
				te = g.d, te_len = g.len;
			else if (g.num == F_PKT_INTERNED && g.wt == WT_LEN) {
				const uint8_t *r = g.d;

				while (next_field(&r, g.d + g.len, &h, bad)) {
					const uint8_t *e2 = h.d;
					struct names n = { 0 };

					if (h.num != F_ID_NAMES || h.wt != WT_LEN)
						continue;
					while (next_field(&e2, h.d + h.len, &k, bad)) {
						if (k.num == F_ENTRY_IID && k.wt == WT_VARINT)
							n.iid = k.v;
						else if (k.num == F_ENTRY_NAME && k.wt == WT_LEN)
							n.name = k.d, n.len = k.len;
					}
					if (nnames == cap) {
						struct names *m = realloc(names, (cap = cap ? cap * 2 : 256) *
									  sizeof(*m));
						if (!m)
							goto out;
						names = m;
					}
					names[nnames++] = n;
				}
			}
		}
		if (!te)
			continue;
		q = te;
		while (next_field(&q, te + te_len, &g, bad)) {
			if (g.num == F_TE_TYPE && g.wt == WT_VARINT)
				type = g.v;
			else if (g.num == F_TE_TRACK && g.wt == WT_VARINT)
				track = g.v;
			else if (g.num == F_TE_NAME_IID && g.wt == WT_VARINT)
				iid = g.v;
			else if (g.num == F_TE_NAME && g.wt == WT_LEN)
				inline_name = g.d, inline_len = g.len;
		}
		if (type == TE_SLICE_BEGIN && nopen < 64) {
			bool coll = false;

			if (inline_name) {
				coll = is_collective_kernel(inline_name, inline_len);
			} else {
				for (size_t i = nnames; i-- > 0;) {
					if (names[i].iid == iid) {
						coll = is_collective_kernel(names[i].name, names[i].len);
						break;
					}
				}
			}
			open[nopen].track = track;
			open[nopen++].coll = coll;
		} else if (type == TE_SLICE_END) {
			for (int i = nopen - 1; i >= 0; i--) {
				if (open[i].track != track)
					continue;
				if (open[i].coll) {
					if (in->ncoll == ccap) {
						uint64_t *c = realloc(in->coll_end, (ccap = ccap ? ccap * 2 : 256) *
								      sizeof(*c));
						if (!c)
							goto out;
						in->coll_end = c;
					}
					in->coll_end[in->ncoll++] = ts;
				}
				open[i] = open[--nopen];
				break;
			}
		}
	}
out:
	free(names);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
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
		int n = 0;

		for (int k = 0; k < ref->ncoll; k++) {
			int j = k + shift;

			if (j < 0 || j >= in->ncoll)
				continue;
			d[n++] = ((int64_t)ref->coll_end[k] + ref->offset) -
				 ((int64_t)in->coll_end[j] + in->offset);
		}
		if (n < 3)
			continue;
		qsort(d, n, sizeof(*d), cmp_i64);
		int64_t corr = d[n / 2];

		for (int i = 0; i < n; i++)
			d[i] = llabs(d[i] - corr);
		qsort(d, n, sizeof(*d), cmp_i64);
		if (d[n / 2] < best_res) {
			best_res = d[n / 2];
			best_corr = corr;
		}
	}
	free(d);
	if (best_res == INT64_MAX)
		return false;
	in->refined = best_corr;
	in->residual = best_res;
	in->aligned = true;
	return true;
}

static void rewrite_process(const struct input *in, int idx, const uint8_t *d, size_t n,
			    struct buf *out, bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	while (next_field(&p, d + n, &f, bad)) {
		if (f.num == F_PD_PID && f.wt == WT_VARINT) {
			put_tag(out, F_PD_PID, WT_VARINT);
			put_varint(out, (uint64_t)(int64_t)((int32_t)f.v + (idx + 1) * PID_STRIDE));
		} else if (f.num == F_PD_NAME && f.wt == WT_LEN) {
			char name[512];
			int len = snprintf(name, sizeof(name), "%s: %.*s", in->label,
					   (int)(f.len < 400 ? f.len : 400), (const char *)f.d);

			put_len(out, F_PD_NAME, name, len < (int)sizeof(name) ? (size_t)len : sizeof(name) - 1);
		} else {
			put(out, f.raw, f.rawlen);
		}
	}
}

static void rewrite_thread(int idx, const uint8_t *d, size_t n, struct buf *out, bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	while (next_field(&p, d + n, &f, bad)) {
		if ((f.num == F_THD_PID || f.num == F_THD_TID) && f.wt == WT_VARINT) {
			put_tag(out, f.num, WT_VARINT);
			put_varint(out, (uint64_t)((int64_t)f.v + (int64_t)(idx + 1) * PID_STRIDE));
		} else {
			put(out, f.raw, f.rawlen);
		}
	}
}

/* A nested message rewritten by fn, written back as field num. */
static void put_rewritten(struct buf *out, uint32_t num, struct buf *tmp)
{
	put_len(out, num, tmp->p, tmp->n);
	if (tmp->oom)
		out->oom = true;
	tmp->n = 0;
}

static void rewrite_descriptor(const struct input *in, int idx, const uint8_t *d, size_t n,
			       struct buf *out, bool *bad)
{
	struct buf tmp = { 0 };
	const uint8_t *p = d;
	struct field f;

	while (next_field(&p, d + n, &f, bad)) {
		if ((f.num == F_TD_UUID || f.num == F_TD_PARENT) && f.wt == WT_VARINT) {
			put_tag(out, f.num, WT_VARINT);
			put_varint(out, salted(in, f.v));
		} else if (f.num == F_TD_PROCESS && f.wt == WT_LEN) {
			rewrite_process(in, idx, f.d, f.len, &tmp, bad);
			put_rewritten(out, f.num, &tmp);
		} else if (f.num == F_TD_THREAD && f.wt == WT_LEN) {
			rewrite_thread(idx, f.d, f.len, &tmp, bad);
			put_rewritten(out, f.num, &tmp);
		} else {
			put(out, f.raw, f.rawlen);
		}
	}
	free(tmp.p);
}

static void rewrite_event(const struct input *in, const uint8_t *d, size_t n, struct buf *out,
			  bool *bad)
{
	const uint8_t *p = d;
	struct field f;

	while (next_field(&p, d + n, &f, bad)) {
		if (f.num == F_TE_TRACK && f.wt == WT_VARINT) {
			put_tag(out, f.num, WT_VARINT);
			put_varint(out, salted(in, f.v));
		} else if ((f.num == F_TE_FLOWS || f.num == F_TE_TERM_FLOWS) && f.wt == WT_FIXED64) {
			uint64_t id = salted(in, f.v);

			put_tag(out, f.num, WT_FIXED64);
			put(out, &id, 8);
		} else {
			put(out, f.raw, f.rawlen);
		}
	}
}

/* One packet of input idx, rewritten into out; clock snapshots are dropped
 * (the output has its own). */
static void rewrite_packet(const struct input *in, int idx, const uint8_t *d, size_t n,
			   struct buf *out, bool *bad)
{
	struct buf pkt = { 0 }, tmp = { 0 };
	const uint8_t *p = d;
	bool explicit_clock = false;
	struct field f;

	while (next_field(&p, d + n, &f, bad))
		if ((f.num == F_PKT_CLOCK_SNAPSHOT) || (f.num == F_PKT_CLOCK_ID && f.v != CLOCK_MONOTONIC_ID))
			explicit_clock = true;
	if (explicit_clock) /* its snapshots, stamped in BOOTTIME */
		return;
	p = d;
	while (next_field(&p, d + n, &f, bad)) {
		if (f.num == F_PKT_TIMESTAMP && f.wt == WT_VARINT) {
			put_tag(&pkt, f.num, WT_VARINT);
			put_varint(&pkt, (uint64_t)((int64_t)f.v + in->offset));
		} else if (f.num == F_PKT_SEQ_ID && f.wt == WT_VARINT) {
			put_tag(&pkt, f.num, WT_VARINT);
			put_varint(&pkt, (uint64_t)idx + 1);
		} else if (f.num == F_PKT_TRACK_DESC && f.wt == WT_LEN) {
			rewrite_descriptor(in, idx, f.d, f.len, &tmp, bad);
			put_rewritten(&pkt, f.num, &tmp);
		} else if (f.num == F_PKT_TRACK_EVENT && f.wt == WT_LEN) {
			rewrite_event(in, f.d, f.len, &tmp, bad);
			put_rewritten(&pkt, f.num, &tmp);
		} else {
			put(&pkt, f.raw, f.rawlen);
		}
	}
	put_len(out, F_TRACE_PACKET, pkt.p, pkt.n);
	if (pkt.oom)
		out->oom = true;
	free(pkt.p);
	free(tmp.p);
}

/* The output's one clock mapping: its timestamps are REALTIME, stamped
 * MONOTONIC (the inputs' sequence default), so all clocks read alike. */
static void put_identity_snapshot(struct buf *out, uint64_t ts, uint32_t seq)
{
	struct buf pkt = { 0 }, snap = { 0 }, clk = { 0 };
	const int ids[] = { CLOCK_BOOTTIME_ID, CLOCK_MONOTONIC_ID, CLOCK_REALTIME_ID };

	put_tag(&pkt, F_PKT_TIMESTAMP, WT_VARINT);
	put_varint(&pkt, ts);
	put_tag(&pkt, F_PKT_CLOCK_ID, WT_VARINT);
	put_varint(&pkt, CLOCK_BOOTTIME_ID);
	put_tag(&pkt, F_PKT_SEQ_ID, WT_VARINT);
	put_varint(&pkt, seq);
	for (int i = 0; i < 3; i++) {
		put_tag(&clk, F_CLK_ID, WT_VARINT);
		put_varint(&clk, ids[i]);
		put_tag(&clk, F_CLK_TS, WT_VARINT);
		put_varint(&clk, ts);
		put_rewritten(&snap, F_CS_CLOCKS, &clk);
	}
	put_tag(&snap, F_CS_PRIMARY, WT_VARINT);
	put_varint(&snap, CLOCK_BOOTTIME_ID);
	put_len(&pkt, F_PKT_CLOCK_SNAPSHOT, snap.p, snap.n);
	put_len(out, F_TRACE_PACKET, pkt.p, pkt.n);
	free(pkt.p);
	free(snap.p);
	free(clk.p);
}

static int read_input(struct input *in, char *err, size_t errlen)
{
	FILE *f = fopen(in->path, "rb");
	long size;
	char *base, tmp[4096];

	if (!f) {
		snprintf(err, errlen, "%s: %s", in->path, strerror(errno));
		return -errno;
	}
	if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(in->data = malloc(size ? size : 1)) ||
	    fread(in->data, 1, size, f) != (size_t)size) {
		snprintf(err, errlen, "%s: cannot read it", in->path);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	in->size = size;
	snprintf(tmp, sizeof(tmp), "%s", in->path);
	base = basename(tmp);
	if (strlen(base) > 8 && !strcmp(base + strlen(base) - 8, ".pftrace"))
		base[strlen(base) - 8] = 0;
	snprintf(in->label, sizeof(in->label), "%s", base);
	return 0;
}

int merge_traces(char **paths, int n, const char *out_path, bool by_collectives)
{
	struct input *in = calloc(n > 0 ? n : 1, sizeof(*in));
	struct buf out = { 0 };
	char err[512];
	int64_t start = INT64_MAX;
	FILE *f = NULL;
	int rc = 1;

	if (!in)
		return 1;
	if (n < 1 || n > MAX_INPUTS) {
		fprintf(stderr, "ptbpf: merge: give 1 to %d traces\n", MAX_INPUTS);
		goto done;
	}
	for (int i = 0; i < n; i++) {
		in[i].path = paths[i];
		in[i].salt = mix(0x6d65726765ULL + (uint64_t)i);
		if (read_input(&in[i], err, sizeof(err)) || scan_clocks(&in[i], err, sizeof(err))) {
			fprintf(stderr, "ptbpf: merge: %s\n", err);
			goto done;
		}
	}
	if (by_collectives) {
		for (int i = 0; i < n; i++) {
			bool bad = false;

			scan_collectives(&in[i], &bad);
		}
		for (int i = 1; i < n; i++) {
			if (!refine(&in[0], &in[i])) {
				fprintf(stderr, "ptbpf: merge: %s and %s share too few NCCL kernels "
					"(%d, %d) to refine the alignment; REALTIME only\n",
					in[0].label, in[i].label, in[0].ncoll, in[i].ncoll);
				continue;
			}
			in[i].offset += in[i].refined;
		}
	}
	for (int i = 0; i < n; i++) {
		const uint8_t *p = in[i].data, *end = in[i].data + in[i].size;
		struct field fl;
		bool bad = false;

		while (next_field(&p, end, &fl, &bad)) {
			const uint8_t *q = fl.d;
			struct field g;

			if (fl.num != F_TRACE_PACKET || fl.wt != WT_LEN)
				continue;
			while (next_field(&q, fl.d + fl.len, &g, &bad))
				if (g.num == F_PKT_TIMESTAMP && (int64_t)g.v + in[i].offset < start)
					start = (int64_t)g.v + in[i].offset;
		}
	}
	put_identity_snapshot(&out, start == INT64_MAX ? 0 : (uint64_t)start, (uint32_t)n + 1);
	for (int i = 0; i < n; i++) {
		const uint8_t *p = in[i].data, *end = in[i].data + in[i].size;
		struct field fl;
		bool bad = false;

		while (next_field(&p, end, &fl, &bad))
			if (fl.num == F_TRACE_PACKET && fl.wt == WT_LEN)
				rewrite_packet(&in[i], i, fl.d, fl.len, &out, &bad);
	}
	if (out.oom) {
		fprintf(stderr, "ptbpf: merge: out of memory\n");
		goto done;
	}
	f = fopen(out_path, "wbx");
	if (!f) {
		fprintf(stderr, "ptbpf: merge: cannot create %s: %s\n", out_path,
			errno == EEXIST ? "it exists (not overwritten)" : strerror(errno));
		goto done;
	}
	if (fwrite(out.p, 1, out.n, f) != out.n || fclose(f)) {
		fprintf(stderr, "ptbpf: merge: writing %s failed: %s\n", out_path, strerror(errno));
		f = NULL;
		goto done;
	}
	f = NULL;
	for (int i = 0; i < n; i++)
		fprintf(stderr, "ptbpf: merge: %s: pids +%d, REALTIME - MONOTONIC = %.6f s, "
			"drifted %+.1f us over its %d clock snapshots\n", in[i].label,
			(i + 1) * PID_STRIDE, in[i].offset / 1e9, in[i].drift / 1e3,
			in[i].nsnapshots);
	{
		int64_t worst = 0, worst_res = -1;

		for (int i = 0; i < n; i++) {
			if (llabs(in[i].drift) > worst)
				worst = llabs(in[i].drift);
			if (in[i].aligned) {
				fprintf(stderr, "ptbpf: merge: %s: moved %+.1f us to line up its NCCL "
					"kernels with %s's (%d and %d); they then end %.1f us apart "
					"(median)\n", in[i].label, in[i].refined / 1e3, in[0].label,
					in[i].ncoll, in[0].ncoll, in[i].residual / 1e3);
				if (in[i].residual > worst_res)
					worst_res = in[i].residual;
			}
		}
		if (worst_res >= 0)
			fprintf(stderr, "ptbpf: merge: wrote %s (%d traces, aligned by their "
				"collectives); alignment uncertainty ±%.1f us\n", out_path, n,
				worst_res / 1e3 + worst / 1e3);
		else
			fprintf(stderr, "ptbpf: merge: wrote %s (%d traces on REALTIME); alignment "
				"uncertainty within a host ±%.1f us, across hosts plus their REALTIME "
				"clocks' disagreement (NTP/PTP)\n", out_path, n, worst / 1e3 + 1.0);
	}
	rc = 0;
done:
	if (f)
		fclose(f);
	for (int i = 0; i < n; i++) {
		free(in[i].data);
		free(in[i].coll_end);
	}
	free(in);
	free(out.p);
	return rc;
}
