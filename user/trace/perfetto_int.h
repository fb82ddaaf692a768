/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Perfetto writer's insides, shared by user/trace/perfetto*.c only:
 * struct pf_writer, its limits, and what each file offers the others.
 *   perfetto.c        the writer's life (open, copy mode, close and its end
 *                     marker), clock snapshots and trace attributes
 *   perfetto_out.c    packets into Trace.packet records, the output buffer
 *                     and the file (flush, cut back to whole records)
 *   perfetto_seq.c    event sequences (a track's own, its incremental clock
 *                     and defaults) and the strings interned on them
 *   perfetto_track.c  track descriptors and their events (slices, instants,
 *                     counters, args, flows with short ids)
 *   perfetto_ftrace.c scheduler events as ftrace's (compact sched bundles),
 *                     the system's description
 *   perfetto_sample.c CPU samples as Perfetto's perf samples, their
 *                     callstacks interned on a sequence of their own
 * Under -std=c11 its strnlen and clock_gettime need _GNU_SOURCE defined
 * before it is included.
 */
#ifndef PTBPF_PERFETTO_INT_H
#define PTBPF_PERFETTO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/hash.h"
#include "trace/pbwrite.h"
#include "trace/perfetto.h"

/* The first sequence: descriptors, snapshots, attributes, and the events of
 * tracks past SEQ_MAX (in full). Event sequences are 2, 3, ... */
enum { SEQ_ID = 1, SEQ_MAX = 1 << 16 };

/* Room reserved before a packet for its record header (key + varint len). */
#define PREFIX_ROOM 11
/*
 * Worst case of one packet under the limits of perfetto.h: at most
 * 2 * PF_MAX_ARGS + PF_MAX_CMDLINE + 4 strings (each with keys, lengths and
 * nesting well under 32 bytes) plus both flow lists.
 */
#define PACKET_MAX ((2 * PF_MAX_ARGS + PF_MAX_CMDLINE + 4) * (PF_STR_MAX + 32) + \
		    2 * PF_MAX_FLOWS * 10 + 512)
/* Output buffer: whole records only (perfetto_out.c). */
#define OUT_CAP (256u << 10)
/* Flows open at once with a short id; ends seen before their start, kept
 * (the start keeps the caller's id then too). */
#define FLOW_SHORT_MAX (1u << 17)
#define FLOW_ORPHANS 4096

struct intern_str {
	char *str; /* its own copy */
	uint32_t len;
	uint32_t iid;
};

struct intern_table {
	struct hash_table h; /* fnv1a of the string -> struct intern_str */
	size_t bytes, max_bytes; /* of the copies of interned strings */
};

enum { TAB_NAME, TAB_CAT, TAB_ARG, TAB_STRVAL, TAB_COUNT };

/* An event sequence: one track's events. */
struct seq {
	uint64_t track;
	uint64_t last_ts; /* the incremental clock's value */
	uint32_t id;
	uint32_t behind;  /* events in a row older than last_ts */
	uint64_t defined_bytes; /* of the strings defined on it */
	uint64_t *defined[TAB_COUNT]; /* bitsets: iids this sequence has had */
	uint32_t ndefined[TAB_COUNT]; /* their sizes, in 64-bit words */
};

struct pf_writer {
	int fd;
	int err;
	bool loss_pending;
	bool copy;          /* pf_writer_open_copy: packets come encoded */
	uint64_t clipped;
	int64_t boot_minus_mono; /* of the first clock snapshot (perfetto_ftrace.c) */
	bool have_boot;
	/* perfetto_out.c */
	uint64_t bytes;     /* of whole records accepted (buffered or on disk) */
	uint64_t on_disk;   /* of them, written to the file */
	uint64_t first_buffered_ns; /* when out[] got its oldest byte, 0: empty */
	uint8_t *out;       /* whole records not yet written */
	size_t out_len, out_cap;
	off_t base;         /* the file offset the trace starts at */
	/* perfetto_seq.c */
	struct intern_table tabs[TAB_COUNT];
	struct hash_table seqs; /* mix64(track) -> struct seq */
	uint32_t nseqs;         /* sequence ids given out */
	struct seq main_seq; /* SEQ_ID (an appending writer's: past SEQ_MAX); the
			      * track sequences follow it */
	/* perfetto_sample.c (NULL until the first sample) */
	struct sample_seq *samples;
	/* perfetto_track.c */
	uint64_t uuid_base, uuid_seq;
	struct hash_table flows; /* open flows: mix64(caller's id) -> its short one */
	uint32_t flow_next;
	uint64_t orphans[FLOW_ORPHANS]; /* ends met before their start */
	uint32_t norphans;
	/* the packet being encoded */
	struct pb pb;
	uint8_t scratch[]; /* pb.buf: PREFIX_ROOM + PACKET_MAX bytes */
};

/* A string as it will be written: an iid, or inline when iid is 0. */
struct str_ref {
	const char *s; /* NULL: field omitted */
	size_t len;
	uint64_t iid;
	bool is_new; /* definition goes into this packet's InternedData */
};

static inline void set_error(struct pf_writer *w, int err)
{
	if (!w->err)
		w->err = err;
}

/* Length to write for s: at most PF_STR_MAX bytes, not splitting a UTF-8
 * sequence (protoc and the UI expect valid UTF-8 in string fields). */
static inline size_t str_clip(struct pf_writer *w, const char *s)
{
	size_t len = strnlen(s, PF_STR_MAX + 1);

	if (len <= PF_STR_MAX)
		return len;
	w->clipped++;
	len = PF_STR_MAX;
	while (len > 0 && ((uint8_t)s[len] & 0xC0) == 0x80)
		len--;
	return len;
}

static inline void pb_str(struct pf_writer *w, uint32_t field, const char *s)
{
	if (s)
		pb_bytes(&w->pb, field, s, str_clip(w, s));
}

/* splitmix64's finalizer: a bijection, so distinct inputs give distinct
 * uuids, while the random base keeps uuids of separate traces apart. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* perfetto_out.c: a packet is encoded into w->pb between these two. */
void pf_packet_begin_on(struct pf_writer *w, uint32_t seq, uint32_t flags);
void pf_packet_end(struct pf_writer *w);
void pf_flush_out(struct pf_writer *w);

/* perfetto_sample.c */
void sample_seq_free(struct pf_writer *w);

static inline void packet_begin(struct pf_writer *w, uint32_t flags)
{
	pf_packet_begin_on(w, w->main_seq.id, flags);
}

/* perfetto_seq.c */
/* iid of s (len bytes) in t, adding it if there is room; 0 when it cannot be
 * interned (table full, or out of memory): the caller writes it inline. */
uint64_t pf_intern(struct intern_table *t, const char *s, size_t len);
/* Frees t's strings and empties it (its limits stay). */
void pf_intern_table_free(struct intern_table *t);
void pf_seq_tables_init(struct pf_writer *w);
void pf_seq_tables_free(struct pf_writer *w);
struct seq *pf_seq_for(struct pf_writer *w, uint64_t track, uint64_t ts);
struct seq *pf_seq_restart(struct pf_writer *w, struct seq *q, uint64_t ts);
void pf_put_ts(struct pf_writer *w, struct seq *q, uint64_t ts);
void pf_ref_intern(struct pf_writer *w, struct seq *q, int tab, const char *s,
		struct str_ref *r);

/* How s (NULL: the field is left out) is written in a packet on q: its iid
 * in table tab, defined in the packet if q has not had it, else inline.
 * Inline here, as the NULLs (an end's name, a number's string value) are
 * most of the calls. */
static inline void ref_resolve(struct pf_writer *w, struct seq *q, int tab, const char *s,
			       struct str_ref *r)
{
	*r = (struct str_ref){ .s = s };
	if (s)
		pf_ref_intern(w, q, tab, s, r);
}

#endif
