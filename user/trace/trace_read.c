// SPDX-License-Identifier: BSD-2-Clause
/* The streaming trace reader of report, export and merge: packet records,
 * interned strings, sequence defaults. See trace_read.h; the decoding of
 * what a packet holds is in trace_decode.c. */
#define _GNU_SOURCE
#include "trace/trace_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/files.h"
#include "lib/hash.h"
#include "trace/pbread.h"
#include "trace/trace_read_int.h"

#define BUF_MIN (256u << 10)
#define RECORD_HEAD_MAX 11 /* tag + a 10-byte length varint */
/* Interned strings kept at most (a real trace has thousands). */
#define INTERN_MAX (1u << 20)
#define INTERN_BYTES_MAX (32u << 20)
/* Sequences whose state is kept at most (ptbpf's writer makes 65536). */
#define SEQS_MAX (1u << 20)

struct intern_entry {
	uint64_t iid;
	uint32_t seq;
	uint8_t table;  /* F_ID_NAMES, F_ID_CATEGORIES, ... (InternedData's field) */
	struct tr_str str; /* its own copy */
};

struct interns {
	struct hash_table h; /* intern_hash(sequence, table, iid) -> struct intern_entry */
	uint64_t bytes;
	uint32_t next_id;
};

/* A sequence's defaults and incremental clock (ClockSnapshot clocks 64-127
 * marked incremental, tied to MONOTONIC in the same snapshot). */
struct seq_state {
	uint32_t seq;
	uint32_t clock;     /* TracePacketDefaults.timestamp_clock_id */
	uint64_t track;     /* TrackEventDefaults.track_uuid */
	uint32_t incr;      /* the incremental clock's id, 0 if none */
	uint64_t incr_now;  /* its value */
	int64_t incr_mono;  /* MONOTONIC - its value */
};

enum end_how { END_CLEAN, END_CUT, END_DAMAGED };

struct tr_reader {
	int fd;
	char path[4096];
	char who[32];
	uint8_t *buf;
	size_t cap, pos, end;  /* buf[pos..end) is not read yet */
	uint64_t offset;       /* file offset of buf[pos] */
	uint64_t limit;        /* later passes stop here (0: no limit) */
	bool eof, stopped, last_was_marker;
	int pass;
	struct tr_status st;
	struct interns in;
	struct hash_table seqs; /* hash_u64(seq) -> struct seq_state */
};

static const struct tr_str unknown = { "?", 1, TR_INLINE };

/* ---- interned strings ---- */

static uint64_t intern_hash(uint32_t seq, uint8_t table, uint64_t iid)
{
	return hash_pair(hash_u64(iid), (uint64_t)seq << 8 | table);
}

static bool intern_eq(const void *val, const void *key)
{
	const struct intern_entry *e = val, *k = key;

	return e->iid == k->iid && e->seq == k->seq && e->table == k->table;
}

static struct intern_entry *intern_find(struct interns *t, uint32_t seq, uint8_t table,
					uint64_t iid)
{
	struct intern_entry k = { .iid = iid, .seq = seq, .table = table };

	return hash_get_eq(&t->h, intern_hash(seq, table, iid), intern_eq, &k);
}

static void intern_add(struct tr_reader *r, uint32_t seq, uint8_t table, uint64_t iid,
		       const uint8_t *s, size_t len)
{
	struct interns *t = &r->in;
	struct intern_entry *e;
	char *copy;

	if (hash_full(&t->h) || t->bytes + len > INTERN_BYTES_MAX || t->next_id == TR_INLINE ||
	    !(copy = malloc(len ? len : 1)))
		return; /* not kept: uses of it count as unresolved */
	memcpy(copy, s, len);
	e = intern_find(t, seq, table, iid);
	if (e) {
		t->bytes -= e->str.len;
		free((char *)e->str.s);
	} else if (!(e = hash_add(&t->h, intern_hash(seq, table, iid)))) {
		free(copy);
		return;
	}
	*e = (struct intern_entry){ .iid = iid, .seq = seq, .table = table,
				    .str = { copy, (uint32_t)len, t->next_id++ } };
	t->bytes += len;
}

struct seq_of {
	struct interns *t;
	uint32_t seq;
};

static bool intern_of_seq(void *val, void *arg)
{
	struct intern_entry *e = val;
	struct seq_of *of = arg;

	if (e->seq != of->seq)
		return false;
	of->t->bytes -= e->str.len;
	free((char *)e->str.s);
	return true;
}

/* SEQ_INCREMENTAL_STATE_CLEARED: the sequence's strings are forgotten. */
static void intern_clear_seq(struct interns *t, uint32_t seq)
{
	struct seq_of of = { t, seq };

	hash_drop_if(&t->h, intern_of_seq, &of);
}

/* Ids go on growing: one never names two strings. */
static void intern_free(struct interns *t)
{
	struct intern_entry *e;

	for (uint32_t i = 0; (e = hash_next(&t->h, &i));)
		free((char *)e->str.s);
	hash_free(&t->h);
	t->bytes = 0;
}

bool tr_lookup_quiet(struct tr_reader *r, uint32_t seq, uint8_t table, uint64_t iid,
		     struct tr_str *out)
{
	struct intern_entry *e = intern_find(&r->in, seq, table, iid);

	if (e)
		*out = e->str;
	return e != NULL;
}

void tr_lookup(struct tr_reader *r, uint32_t seq, uint8_t table, uint64_t iid,
	       struct tr_str *out)
{
	struct intern_entry *e = intern_find(&r->in, seq, table, iid);

	if (e) {
		*out = e->str;
		return;
	}
	*out = unknown;
	if (!r->pass)
		r->st.unresolved++;
}

/* Tables whose entries are InternedString{iid, str}. */
static bool string_table(uint32_t num)
{
	return num == F_ID_NAMES || num == F_ID_CATEGORIES || num == F_ID_ARG_NAMES ||
	       num == F_ID_STRING_VALUES || num == F_ID_FUNCTION_NAMES ||
	       num == F_ID_MAPPING_PATHS;
}

/* Tables whose entries are kept whole, as their message's bytes (decoded
 * where used: trace_sample.c). */
static bool message_table(uint32_t num)
{
	return num == F_ID_FRAMES || num == F_ID_CALLSTACKS || num == F_ID_MAPPINGS;
}

/* InternedData: event names, categories, arg names and string values; the
 * callstack tables of CPU samples (other tables are not used by ptbpf).
 * False if malformed. */
static bool apply_interned(struct tr_reader *r, uint32_t seq, struct tr_span d)
{
	const uint8_t *p = d.d;
	struct field f, g;
	bool bad = false;

	while (pb_next_field(&p, d.d + d.n, &f, &bad)) {
		const uint8_t *q = f.d, *name = NULL;
		size_t len = 0;
		uint64_t iid = 0;

		if (f.wt != PB_LEN || (!string_table(f.num) && !message_table(f.num)))
			continue;
		while (pb_next_field(&q, f.d + f.len, &g, &bad)) {
			if (g.num == F_ENTRY_IID && g.wt == PB_VARINT)
				iid = g.v;
			else if (g.num == F_ENTRY_NAME && g.wt == PB_LEN)
				name = g.d, len = g.len;
		}
		if (message_table(f.num))
			name = f.d, len = f.len;
		if (name && !bad)
			intern_add(r, seq, (uint8_t)f.num, iid, name, len);
	}
	return !bad;
}

/* ---- records ---- */

/* At least `need` bytes at buf[pos], unless the file (or the pass's limit)
 * ends first. -1 on a read error (printed). */
static int fill(struct tr_reader *r, size_t need)
{
	if (r->end - r->pos >= need || r->eof)
		return 0;
	if (r->end > r->pos)
		memmove(r->buf, r->buf + r->pos, r->end - r->pos);
	r->end -= r->pos;
	r->pos = 0;
	if (need > r->cap) {
		size_t cap = r->cap ? r->cap : BUF_MIN;
		uint8_t *g;

		while (cap < need)
			cap *= 2;
		g = realloc(r->buf, cap);
		if (!g) {
			log_msg("%s: out of memory reading %s\n", r->who, r->path);
			return -1;
		}
		r->buf = g;
		r->cap = cap;
	}
	while (r->end < need) {
		uint64_t at = r->offset + r->end; /* file offset of buf[end] */
		size_t want = r->cap - r->end;
		ssize_t n;

		if (r->limit && at + want > r->limit)
			want = r->limit - at;
		n = want ? read(r->fd, r->buf + r->end, want) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_msg("%s: reading %s failed: %s\n", r->who, r->path,
				strerror(errno));
			return -1;
		}
		if (n == 0) {
			r->eof = true;
			break;
		}
		r->end += (size_t)n;
	}
	return 0;
}

/* A record's head at h (avail bytes): its length in *len and the head's
 * size; 0 if cut short, -1 if it is no packet record. */
static int record_head(const uint8_t *h, size_t avail, uint64_t *len)
{
	int n;

	if (h[0] != PF_PACKET_TAG)
		return -1;
	n = pb_varint_get(h + 1, avail - 1, len);
	if (n <= 0)
		return n;
	return *len <= TR_PACKET_MAX ? n + 1 : -1;
}

/* TraceAttributes holding the end marker whose value is the packet's own
 * offset. */
static bool is_end_marker(struct tr_span attrs, uint64_t offset)
{
	const uint8_t *p = attrs.d;
	struct field f, g;
	bool bad = false;

	while (pb_next_field(&p, attrs.d + attrs.n, &f, &bad)) {
		const uint8_t *q = f.d;
		bool key = false, value = false;

		if (f.num != F_TA_ATTR || f.wt != PB_LEN)
			continue;
		while (pb_next_field(&q, f.d + f.len, &g, &bad)) {
			if (g.num == F_ATTR_KEY && g.wt == PB_LEN)
				key = g.len == strlen(PF_END_MARKER_KEY) &&
				      !memcmp(g.d, PF_END_MARKER_KEY, g.len);
			else if (g.num == F_ATTR_LONG && g.wt == PB_VARINT)
				value = g.v == offset;
		}
		if (key && value && !bad)
			return true;
	}
	return false;
}

/* The packet's own fields; false if malformed. */
static bool parse_packet(const uint8_t *d, size_t n, uint64_t offset, struct tr_packet *p)
{
	const uint8_t *q = d;
	struct field f;
	bool bad = false;

	memset(p, 0, sizeof(*p));
	p->data = d;
	p->len = n;
	p->offset = offset;
	while (pb_next_field(&q, d + n, &f, &bad)) {
		struct tr_span s = { f.d, f.len };

		if (f.wt == PB_VARINT) {
			switch (f.num) {
			case F_PKT_SEQ_ID: p->seq = (uint32_t)f.v; break;
			case F_PKT_SEQ_FLAGS: p->flags = (uint32_t)f.v; break;
			case F_PKT_TIMESTAMP: p->ts = f.v, p->has_ts = true; break;
			case F_PKT_CLOCK_ID: p->clock_id = (uint32_t)f.v; break;
			}
		} else if (f.wt == PB_LEN) {
			switch (f.num) {
			case F_PKT_TRACK_EVENT: p->event = s; break;
			case F_PKT_TRACK_DESC: p->desc = s; break;
			case F_PKT_INTERNED: p->interned = s; break;
			case F_PKT_CLOCK_SNAPSHOT: p->snapshot = s; break;
			case F_PKT_TRACE_ATTRS: p->attrs = s; break;
			case F_PKT_DEFAULTS: p->defaults = s; break;
			case F_PKT_FTRACE_EVENTS: p->ftrace = s; break;
			case F_PKT_PERF_SAMPLE: p->sample = s; break;
			}
		}
	}
	if (!bad && p->attrs.n)
		p->end_marker = is_end_marker(p->attrs, offset);
	return !bad;
}

static int stop(struct tr_reader *r, enum end_how how)
{
	if (!r->pass && !r->stopped) {
		struct stat st;
		uint64_t now = fstat(r->fd, &st) ? r->st.size : (uint64_t)st.st_size;

		r->st.complete = how == END_CLEAN && r->last_was_marker;
		r->st.cut = how == END_CUT;
		r->st.damaged = how == END_DAMAGED;
		r->st.dropped = now > r->offset ? now - r->offset : 0;
	}
	r->stopped = true;
	return 0;
}

/* ---- sequence defaults ---- */

/* The sequence's state, new if it has none; NULL past SEQS_MAX. */
static struct seq_state *seq_state(struct tr_reader *r, uint32_t seq)
{
	struct seq_state *q = hash_get(&r->seqs, hash_u64(seq));

	if (!q && (q = hash_add(&r->seqs, hash_u64(seq))))
		q->seq = seq;
	return q;
}

static void seqs_free(struct tr_reader *r)
{
	hash_free(&r->seqs);
}

static void apply_defaults(struct seq_state *q, struct tr_span d, bool *bad)
{
	const uint8_t *p = d.d;
	struct field f, g;

	while (pb_next_field(&p, d.d + d.n, &f, bad)) {
		const uint8_t *t = f.d;

		if (f.num == F_DEF_CLOCK_ID && f.wt == PB_VARINT)
			q->clock = (uint32_t)f.v;
		else if (f.num == F_DEF_TRACK_EVENT && f.wt == PB_LEN)
			while (pb_next_field(&t, f.d + f.len, &g, bad))
				if (g.num == F_TED_TRACK && g.wt == PB_VARINT)
					q->track = g.v;
	}
}

/* A sequence's own incremental clock and its MONOTONIC time. */
static void apply_snapshot(struct seq_state *q, struct tr_span d, bool *bad)
{
	const uint8_t *p = d.d;
	uint64_t incr_ts = 0, mono = 0;
	uint32_t incr = 0;
	bool has_mono = false;
	struct field f, g;

	while (pb_next_field(&p, d.d + d.n, &f, bad)) {
		const uint8_t *c = f.d;
		uint64_t id = 0, ts = 0, is_incr = 0;

		if (f.num != F_CS_CLOCKS || f.wt != PB_LEN)
			continue;
		while (pb_next_field(&c, f.d + f.len, &g, bad)) {
			if (g.num == F_CLK_ID && g.wt == PB_VARINT)
				id = g.v;
			else if (g.num == F_CLK_TS && g.wt == PB_VARINT)
				ts = g.v;
			else if (g.num == F_CLK_INCREMENTAL && g.wt == PB_VARINT)
				is_incr = g.v;
		}
		if (is_incr && id >= 64 && id < 128)
			incr = (uint32_t)id, incr_ts = ts;
		else if (id == CLOCK_ID_MONOTONIC)
			mono = ts, has_mono = true;
	}
	if (incr && has_mono) {
		q->incr = incr;
		q->incr_now = incr_ts;
		q->incr_mono = (int64_t)(mono - incr_ts);
	}
}

/* The packet's sequence state updated by it, and applied to it. */
static void apply_sequence(struct tr_reader *r, struct tr_packet *p)
{
	struct seq_state *q = seq_state(r, p->seq);
	bool bad = false;
	uint32_t clock;

	if (!q)
		return;
	if (p->flags & SEQ_INCREMENTAL_STATE_CLEARED)
		*q = (struct seq_state){ .seq = p->seq };
	if (p->defaults.n)
		apply_defaults(q, p->defaults, &bad);
	if (p->snapshot.n)
		apply_snapshot(q, p->snapshot, &bad);
	if (bad)
		r->st.undecodable += !r->pass;
	p->track = q->track;
	clock = p->clock_id ? p->clock_id : q->clock;
	if (p->has_ts && q->incr && clock == q->incr) {
		q->incr_now += p->ts;
		p->ts = q->incr_now + (uint64_t)q->incr_mono;
		p->ts_incremental = true;
		p->clock_id = 0;
	}
}

int tr_next(struct tr_reader *r, struct tr_packet *p)
{
	while (!r->stopped) {
		uint64_t len;
		int head;

		if (fill(r, RECORD_HEAD_MAX))
			return -1;
		if (r->end == r->pos)
			return stop(r, END_CLEAN);
		head = record_head(r->buf + r->pos, r->end - r->pos, &len);
		if (head < 0)
			return stop(r, END_DAMAGED);
		if (!head)
			return stop(r, END_CUT);
		if (fill(r, (size_t)head + len))
			return -1;
		if (r->end - r->pos < (size_t)head + len)
			return stop(r, END_CUT);
		if (!parse_packet(r->buf + r->pos + head, len, r->offset, p)) {
			r->st.undecodable += !r->pass;
			r->pos += (size_t)head + len;
			r->offset += (size_t)head + len;
			continue;
		}
		r->pos += (size_t)head + len;
		r->offset += (size_t)head + len;
		if (!r->pass) {
			r->st.packets++;
			r->st.bytes = r->offset;
		}
		r->last_was_marker = p->end_marker;
		if (p->flags & SEQ_INCREMENTAL_STATE_CLEARED)
			intern_clear_seq(&r->in, p->seq);
		if (p->interned.n && !apply_interned(r, p->seq, p->interned))
			r->st.undecodable += !r->pass;
		apply_sequence(r, p);
		return 1;
	}
	return 0;
}

struct tr_reader *tr_open(const char *path, const char *who)
{
	struct tr_reader *r = calloc(1, sizeof(*r));
	struct tr_packet p;
	struct stat st;
	uint64_t len;
	int head;

	if (!r)
		return NULL;
	hash_init(&r->in.h, INTERN_MAX, sizeof(struct intern_entry));
	hash_init(&r->seqs, SEQS_MAX, sizeof(struct seq_state));
	snprintf(r->path, sizeof(r->path), "%s", path);
	snprintf(r->who, sizeof(r->who), "%s", who);
	r->fd = infile_open(path, who);
	if (r->fd < 0 || fstat(r->fd, &st) || fill(r, RECORD_HEAD_MAX))
		goto fail;
	r->st.size = (uint64_t)st.st_size;
	if (r->end == 0) {
		log_msg("%s: %s is empty: not a trace\n", who, path);
		goto fail;
	}
	head = record_head(r->buf, r->end, &len);
	if (head > 0 && fill(r, (size_t)head + len))
		goto fail;
	if (head <= 0 || r->end < (size_t)head + len ||
	    !parse_packet(r->buf + head, len, 0, &p)) {
		log_msg("%s: %s is not a Perfetto trace (it does not start with a "
			"whole trace packet)\n", who, path);
		goto fail;
	}
	return r;
fail:
	tr_close(r);
	return NULL;
}

void tr_close(struct tr_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	intern_free(&r->in);
	seqs_free(r);
	free(r->buf);
	free(r);
}

int tr_rewind(struct tr_reader *r)
{
	if (lseek(r->fd, 0, SEEK_SET)) {
		log_msg("%s: cannot read %s again: %s\n", r->who, r->path,
			strerror(errno));
		return -1;
	}
	r->limit = r->st.bytes;
	r->pass++;
	r->pos = r->end = 0;
	r->offset = 0;
	r->eof = r->stopped = false;
	intern_free(&r->in);
	seqs_free(r);
	return 0;
}

void tr_park(struct tr_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = r->pos = r->end = 0;
	intern_free(&r->in);
	seqs_free(r);
}

const struct tr_status *tr_status(const struct tr_reader *r)
{
	return &r->st;
}

void tr_describe(const struct tr_reader *r, char *buf, size_t len)
{
	const struct tr_status *s = &r->st;
	int n;

	if (s->complete)
		n = snprintf(buf, len, "complete, %lu packets (%.1f MB)", (unsigned long)s->packets,
			     s->bytes / 1e6);
	else if (s->damaged)
		n = snprintf(buf, len, "damaged at byte %lu (not a packet there): read the %lu "
			     "packets (%.1f MB) before it, not the %lu bytes from it on",
			     (unsigned long)s->bytes, (unsigned long)s->packets, s->bytes / 1e6,
			     (unsigned long)s->dropped);
	else if (s->cut)
		n = snprintf(buf, len, "cut: read %lu whole packets (%.1f MB) and dropped a last "
			     "one cut short (%lu bytes): its writer was stopped while writing (killed, "
			     "or its disk filled)", (unsigned long)s->packets, s->bytes / 1e6,
			     (unsigned long)s->dropped);
	else
		n = snprintf(buf, len, "cut: read %lu whole packets (%.1f MB), but no end marker: "
			     "its writer did not finish (killed, or its disk filled), or is not ptbpf",
			     (unsigned long)s->packets, s->bytes / 1e6);
	if (s->undecodable && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "; %lu malformed packets skipped",
			 (unsigned long)s->undecodable);
}

void tr_warn_if_cut(const struct tr_reader *r, const char *who)
{
	char what[512];

	if (r->st.complete && !r->st.undecodable)
		return;
	tr_describe(r, what, sizeof(what));
	log_msg("%s: warning: %s is %s\n", who, r->path, what);
}

void tr_count_undecodable(struct tr_reader *r)
{
	r->st.undecodable += !r->pass;
}
