/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one trace reader of report, export and merge: a Perfetto trace read
 * packet by packet from a regular file through a bounded buffer (memory:
 * the largest packet, at most TR_PACKET_MAX, and the interned strings;
 * never the file), strings interned per packet sequence, and the packets'
 * track descriptors and track events decoded.
 *
 * How the trace ended is kept (tr_status): complete (its last packet is
 * the writer's end marker), cut (its writer was killed, or its disk filled:
 * the packets before the cut are read, a cut last one is dropped), or
 * damaged (bytes that are no packet record: read up to them). A file that
 * does not start with a whole packet is not a trace: tr_open refuses it.
 */
#ifndef PTBPF_TRACE_READ_H
#define PTBPF_TRACE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/pf_fields.h"

#define TR_PACKET_MAX (16u << 20) /* ptbpf writes packets of at most ~540 KB */
#define TR_MAX_ARGS 32
#define TR_MAX_FLOWS 16
#define TR_MAX_LABELS 16
#define TR_INLINE UINT32_MAX      /* tr_str.id of a string written in the packet */

struct tr_reader;

struct tr_span {
	const uint8_t *d;
	size_t n; /* 0: absent */
};

/* A string: interned ones have an id (0, 1, ... in the order the reader
 * met them; one per sequence and iid), for the caller's own tables. */
struct tr_str {
	const char *s; /* not NUL-terminated */
	uint32_t len;
	uint32_t id;
};

/*
 * Sequence defaults are applied: a timestamp in the sequence's incremental
 * clock (ptbpf's writer puts each track's events on a sequence of their
 * own, stamped by their distance from the one before) is given in full, in
 * MONOTONIC, and an event without a track is on its sequence's track.
 */
struct tr_packet {
	const uint8_t *data; /* the TracePacket's bytes, valid until the next tr_next */
	size_t len;
	uint64_t offset;     /* of its record in the file */
	uint32_t seq;        /* trusted_packet_sequence_id */
	uint32_t flags;      /* sequence_flags */
	uint64_t ts;         /* in full (see above) */
	bool has_ts;
	bool ts_incremental; /* ts was given in the sequence's incremental clock */
	uint32_t clock_id;   /* 0: none given (an incremental one: MONOTONIC) */
	uint64_t track;      /* the sequence's default track, 0 if none */
	struct tr_span event, desc, interned, snapshot, attrs, defaults;
	struct tr_span ftrace; /* a FtraceEventBundle (the kernel view's scheduler
				* events; its timestamps are BOOTTIME) */
	struct tr_span sample; /* a PerfSample (a CPU sample) */
	bool end_marker;     /* the writer's end marker (pf_fields.h) */
};

enum tr_arg_type { TR_ARG_INT, TR_ARG_UINT, TR_ARG_DOUBLE, TR_ARG_STR, TR_ARG_BOOL,
		   TR_ARG_PTR, TR_ARG_OTHER };

struct tr_arg {
	struct tr_str name;
	enum tr_arg_type type;
	union {
		int64_t i;
		uint64_t u; /* UINT, BOOL, PTR */
		double d;
		struct tr_str s;
	};
};

struct tr_event {
	int type;          /* TE_SLICE_BEGIN, ... (pf_fields.h) */
	uint64_t track;
	uint64_t ts;
	uint32_t seq;
	bool has_name, has_cat;
	struct tr_str name, cat; /* the first category of several */
	struct tr_arg args[TR_MAX_ARGS];  /* past TR_MAX_ARGS, left out */
	int nargs;
	uint64_t flows[TR_MAX_FLOWS], term[TR_MAX_FLOWS]; /* past TR_MAX_FLOWS, left out */
	int nflows, nterm;
	bool has_counter;
	int64_t counter;
};

enum tr_track_kind { TR_TRACK_CHILD, TR_TRACK_PROCESS, TR_TRACK_THREAD, TR_TRACK_COUNTER };

struct tr_track {
	uint64_t uuid, parent;
	enum tr_track_kind kind;
	int64_t pid, tid;        /* -1 when not given */
	struct tr_str name;      /* TrackDescriptor.name, len 0 if none */
	struct tr_str proc_name; /* process_name or thread_name, len 0 if none */
	struct tr_str labels[TR_MAX_LABELS]; /* process_labels ("RANK=3", ...) */
	int nlabels;
};

/* A trace attribute (TraceAttributes: ptbpf's dev.ptbpf.* keys). */
struct tr_attr {
	struct tr_str key;
	bool is_str;
	int64_t i;
	struct tr_str s;
};

struct tr_status {
	uint64_t size;      /* of the file when opened */
	uint64_t bytes;     /* read as whole packets */
	uint64_t packets;
	bool complete;      /* ended with the writer's end marker */
	bool cut;           /* a last packet cut short */
	bool damaged;       /* bytes that are no packet record */
	uint64_t dropped;   /* bytes not read (the cut packet, or from the damage on) */
	uint64_t undecodable; /* whole packets whose contents are malformed (skipped) */
	uint64_t unresolved;  /* interned ids used but never defined, or not kept */
};

/* Opens path (a regular file) and checks that it starts with a whole
 * packet; NULL with one line printed ("ptbpf: WHO: ..."). */
struct tr_reader *tr_open(const char *path, const char *who);
void tr_close(struct tr_reader *r);
/* The next packet (its interned data applied): 1; 0 at the end (see
 * tr_status); -1 on a read error (printed). */
int tr_next(struct tr_reader *r, struct tr_packet *p);
/* From the start again, up to where the first pass ended (a file still
 * being written is read to the same point each pass). 0 or -1 (printed). */
int tr_rewind(struct tr_reader *r);
/* Frees the buffer and the interned strings until tr_rewind (a reader
 * waiting for its next pass, e.g. one of merge's many inputs). */
void tr_park(struct tr_reader *r);
/* How the first pass ended. */
const struct tr_status *tr_status(const struct tr_reader *r);
/* "complete, 1200 packets (3.4 MB)" or "cut after ...: ...": for report's
 * header and for warnings. */
void tr_describe(const struct tr_reader *r, char *buf, size_t len);
/* For a cut or damaged trace, one line saying so (to stderr); else nothing. */
void tr_warn_if_cut(const struct tr_reader *r, const char *who);

/* A CPU sample (a PerfSample packet, trace/perfetto_sample.c), with the
 * innermost frames of its callstack that say where its time went: the
 * leaf Python frame ("file(line): name", in mapping "[python]") and the
 * leaf native frame (its function, "" if unnamed, and its file). */
struct tr_sample {
	uint64_t ts;
	uint32_t cpu;
	int64_t pid, tid;
	int nframes;
	bool has_py, has_native;
	struct tr_str py_leaf;
	struct tr_str native_leaf, native_file;
};

/* The packet's CPU sample: false when it has none or it is malformed. */
bool tr_sample(struct tr_reader *r, const struct tr_packet *p, struct tr_sample *s);

/* The packet's track event / track descriptor: false when it has none or
 * it is malformed (then counted as undecodable). */
bool tr_event(struct tr_reader *r, const struct tr_packet *p, struct tr_event *e);
bool tr_track(struct tr_reader *r, const struct tr_packet *p, struct tr_track *t);
/* The packet's trace attributes, at most max of them: their count (0 if
 * malformed: then counted as undecodable). */
int tr_attrs(struct tr_reader *r, const struct tr_packet *p, struct tr_attr *out, int max);
/* The REALTIME - MONOTONIC offset of the packet's ClockSnapshot, if it has
 * both clocks and they are within int64 of each other. */
bool tr_clock_offset(const struct tr_packet *p, int64_t *off);
/* The same for BOOTTIME: REALTIME - BOOTTIME. */
bool tr_clock_offset_boot(const struct tr_packet *p, int64_t *off);

/* `ptbpf merge` moves input k's pids and tids up by (k + 1) * this: above
 * Linux's largest pid_max, so a merged pid tells its input and its own pid. */
#define PTBPF_PID_STRIDE (1 << 22)

#endif /* PTBPF_TRACE_READ_H */
