/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Perfetto writer's event sequences and interned strings. Track events
 * go on a packet sequence of their track's own, as the Perfetto SDK writes
 * a thread's events. Its first packet sets the track as the sequence's
 * default (TrackEventDefaults) and its timestamps as an incremental clock
 * in MONOTONIC nanoseconds (a ClockSnapshot with clock 64 marked
 * incremental), so an event carries neither its track nor more than its
 * distance from the sequence's previous one (an event older than that is
 * stamped in full, in MONOTONIC). Names, categories, arg names and string
 * values are interned once per string, and defined on a sequence where it
 * first uses them (the iid is the string's, on every sequence). Everything
 * else (descriptors, clock snapshots, attributes) is on the first
 * sequence, stamped in full.
 */
#define _GNU_SOURCE /* for perfetto_int.h (strnlen, clock_gettime) */
#include "trace/perfetto_int.h"
#include "trace/pf_fields.h"

#include <stdlib.h>

#define INTERN_BYTES_MAX (8u << 20)
/* String values: interned while short and few, else written inline. */
#define STRVAL_MAX 32768
#define STRVAL_BYTES_MAX (2u << 20)

/* ---- intern tables ---- */

static uint64_t fnv1a(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

struct intern_key {
	const char *s;
	size_t len;
};

static bool intern_eq(const void *val, const void *key)
{
	const struct intern_str *e = val;
	const struct intern_key *k = key;

	return e->len == k->len && memcmp(e->str, k->s, k->len) == 0;
}

uint64_t pf_intern(struct intern_table *t, const char *s, size_t len)
{
	struct intern_key k = { s, len };
	uint64_t hash = fnv1a(s, len);
	struct intern_str *e = hash_get_eq(&t->h, hash, intern_eq, &k);
	char *copy;

	if (e)
		return e->iid;
	if (hash_full(&t->h) || t->bytes + len + 1 > t->max_bytes || !(copy = malloc(len + 1)))
		return 0;
	if (!(e = hash_add(&t->h, hash))) {
		free(copy);
		return 0;
	}
	memcpy(copy, s, len);
	copy[len] = '\0';
	*e = (struct intern_str){ .str = copy, .len = (uint32_t)len, .iid = hash_count(&t->h) };
	t->bytes += len + 1;
	return e->iid;
}

/* Marks iid of table tab as defined on q; true if it was not yet (its
 * definition goes into the packet). Without memory for the mark, true:
 * defined again, which is harmless. */
static bool seq_define(struct seq *q, int tab, uint64_t iid)
{
	uint32_t word = (uint32_t)(iid >> 6);
	uint64_t bit = 1ull << (iid & 63);

	if (word >= q->ndefined[tab]) {
		uint32_t n = q->ndefined[tab] ? 2 * q->ndefined[tab] : 4;
		uint64_t *g;

		while (n <= word)
			n *= 2;
		g = realloc(q->defined[tab], n * sizeof(*g));
		if (!g)
			return true;
		memset(g + q->ndefined[tab], 0, (n - q->ndefined[tab]) * sizeof(*g));
		q->defined[tab] = g;
		q->ndefined[tab] = n;
	}
	if (q->defined[tab][word] & bit)
		return false;
	q->defined[tab][word] |= bit;
	return true;
}

/* ref_resolve's work for a string s (not NULL): r->s is s, the rest 0. */
void pf_ref_intern(struct pf_writer *w, struct seq *q, int tab, const char *s,
		struct str_ref *r)
{
	r->len = str_clip(w, s);
	r->iid = pf_intern(&w->tabs[tab], s, r->len);
	r->is_new = r->iid && seq_define(q, tab, r->iid);
	if (r->is_new)
		q->defined_bytes += r->len + 4;
}

/* ---- event sequences ---- */

void pf_intern_table_free(struct intern_table *t)
{
	struct intern_str *e;

	for (uint32_t i = 0; (e = hash_next(&t->h, &i));)
		free(e->str);
	hash_free(&t->h);
	t->bytes = 0;
}

void pf_seq_tables_init(struct pf_writer *w)
{
	for (int i = 0; i < TAB_COUNT; i++) {
		hash_init(&w->tabs[i].h, i == TAB_STRVAL ? STRVAL_MAX : PF_INTERN_MAX,
			  sizeof(struct intern_str));
		w->tabs[i].max_bytes = i == TAB_STRVAL ? STRVAL_BYTES_MAX : INTERN_BYTES_MAX;
	}
	hash_init(&w->seqs, SEQ_MAX, sizeof(struct seq));
	w->main_seq.id = SEQ_ID;
}

static void seq_free(struct seq *q)
{
	for (int i = 0; i < TAB_COUNT; i++)
		free(q->defined[i]);
}

void pf_seq_tables_free(struct pf_writer *w)
{
	struct seq *q;

	for (struct intern_table *t = w->tabs; t < w->tabs + TAB_COUNT; t++)
		pf_intern_table_free(t);
	for (uint32_t i = 0; (q = hash_next(&w->seqs, &i));)
		seq_free(q);
	hash_free(&w->seqs);
	seq_free(&w->main_seq);
}

/* The sequence's first packet: its track and its clock. The snapshot ties
 * the incremental clock to MONOTONIC at ts, where it starts. */
static void seq_start(struct pf_writer *w, struct seq *q, uint64_t ts)
{
	size_t defaults, ted, snap, clock;

	pf_packet_begin_on(w, q->id, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_uint(&w->pb, F_PKT_FIRST_ON_SEQ, 1);
	pb_uint(&w->pb, F_PKT_TIMESTAMP, ts);
	pb_uint(&w->pb, F_PKT_CLOCK_ID, CLOCK_ID_MONOTONIC);
	defaults = pb_begin(&w->pb, F_PKT_DEFAULTS);
	pb_uint(&w->pb, F_DEF_CLOCK_ID, CLOCK_ID_SEQ_INCREMENTAL);
	ted = pb_begin(&w->pb, F_DEF_TRACK_EVENT);
	pb_uint(&w->pb, F_TED_TRACK, q->track);
	pb_end(&w->pb, ted);
	pb_end(&w->pb, defaults);
	snap = pb_begin(&w->pb, F_PKT_CLOCK_SNAPSHOT);
	clock = pb_begin(&w->pb, F_CS_CLOCKS);
	pb_uint(&w->pb, F_CLK_ID, CLOCK_ID_SEQ_INCREMENTAL);
	pb_uint(&w->pb, F_CLK_TS, ts);
	pb_uint(&w->pb, F_CLK_INCREMENTAL, 1);
	pb_end(&w->pb, clock);
	clock = pb_begin(&w->pb, F_CS_CLOCKS);
	pb_uint(&w->pb, F_CLK_ID, CLOCK_ID_MONOTONIC);
	pb_uint(&w->pb, F_CLK_TS, ts);
	pb_end(&w->pb, clock);
	pb_end(&w->pb, snap);
	pf_packet_end(w);
	q->last_ts = ts;
}

/* The sequence of track's events, started at ts if new; the first
 * sequence (events stamped in full, with their track) once SEQ_MAX
 * sequences exist or memory runs out. */
struct seq *pf_seq_for(struct pf_writer *w, uint64_t track, uint64_t ts)
{
	struct seq *q;

	if (!track)
		return &w->main_seq;
	if ((q = hash_get(&w->seqs, mix64(track))))
		return q;
	if (w->nseqs + SEQ_ID + 1 >= SEQ_MAX || !(q = hash_add(&w->seqs, mix64(track))))
		return &w->main_seq;
	q->track = track;
	q->id = w->main_seq.id + 1 + w->nseqs++;
	seq_start(w, q, ts);
	return q;
}

/* A track whose events went back in time for good (a GPU stream's records
 * from a later flush, older than the last ones): its events go on on a new
 * sequence, whose clock starts at ts (trace_processor takes no snapshot
 * that moves an incremental clock back). The old sequence is left. */
struct seq *pf_seq_restart(struct pf_writer *w, struct seq *q, uint64_t ts)
{
	if (w->nseqs + SEQ_ID + 1 >= SEQ_MAX)
		return q;
	seq_free(q);
	*q = (struct seq){ .track = q->track, .id = w->main_seq.id + 1 + w->nseqs++ };
	seq_start(w, q, ts);
	return q;
}

/* The packet's timestamp: its distance from the sequence's previous one,
 * or in full (MONOTONIC) on the first sequence and for an event older
 * than that. */
void pf_put_ts(struct pf_writer *w, struct seq *q, uint64_t ts)
{
	if (q == &w->main_seq) {
		pb_uint(&w->pb, F_PKT_TIMESTAMP, ts);
	} else if (ts >= q->last_ts) {
		pb_uint(&w->pb, F_PKT_TIMESTAMP, ts - q->last_ts);
		q->last_ts = ts;
	} else {
		pb_uint(&w->pb, F_PKT_TIMESTAMP, ts);
		pb_uint(&w->pb, F_PKT_CLOCK_ID, CLOCK_ID_MONOTONIC);
	}
}
