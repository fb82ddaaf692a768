// SPDX-License-Identifier: BSD-2-Clause
/*
 * merge: torch.distributed.rpc calls joined across traces (see
 * merge_rpc.h). A caller's trace has each call as a slice of category
 * "rpc" (message_id, destination, payload_bytes) with a "rpc send request"
 * and a "rpc response" instant in it; a callee's has each request it took
 * up as a slice of category "rpc_remote" (message_id, payload_bytes, its
 * worker) and a "rpc send response" instant. A request whose caller was
 * traced in the same session already has its flows and its name; one
 * whose caller is in another input is paired here with the call of that
 * message id and size, sent to its worker, last before it (in REALTIME).
 */
#define _GNU_SOURCE
#include "offline/merge_rpc.h"

#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"

#define MAX_ENDS (1u << 20)
#define MAX_TRACKS (1u << 16)
#define MAX_STR 256
#define SLACK_NS 1000000 /* a request's handling may seem to start this much
			  * before its send (clocks mapped through REALTIME) */

enum end_kind { END_CALL, END_HANDLE };

struct rpc_end {
	uint8_t kind;
	int input;
	int64_t id, pid;
	uint64_t ts, bytes;
	uint64_t ord;            /* its BEGIN's packet */
	uint64_t ord_out, ord_in; /* CALL: its send and response instants; HANDLE: its
				   * response instant (ord_out); 0: none */
	char *name, *worker;     /* CALL: name, destination; HANDLE: -, its worker */
	struct rpc_end *peer;
	size_t next;             /* CALL: the next of its (id, size), index + 1 */
};

struct merge_rpc {
	struct rpc_end *ends;
	size_t n, cap;
	uint64_t left_out;
	struct hash_table open;   /* (input, track) -> index + 1 of the CALL open on a lane */
	struct hash_table pids;   /* (input, track) -> pid of a thread track */
	struct hash_table edits;  /* (input, ordinal) -> struct merge_rpc_edit */
	uint64_t flows;
};

struct merge_rpc *merge_rpc_new(void)
{
	struct merge_rpc *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	hash_init(&m->open, MAX_TRACKS, sizeof(uint64_t));
	hash_init(&m->pids, MAX_TRACKS, sizeof(int64_t));
	hash_init(&m->edits, 4 * MAX_ENDS, sizeof(struct merge_rpc_edit));
	return m;
}

void merge_rpc_free(struct merge_rpc *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->ends[i].name);
		free(m->ends[i].worker);
	}
	free(m->ends);
	hash_free(&m->open);
	hash_free(&m->pids);
	hash_free(&m->edits);
	free(m);
}

static uint64_t key2(int input, uint64_t v)
{
	return hash_pair((uint64_t)input + 1, v);
}

static char *dup_str(const struct tr_str *s)
{
	size_t n = s->len < MAX_STR ? s->len : MAX_STR;

	return strndup(s->s, n);
}

static bool str_eq(const struct tr_str *s, const char *lit)
{
	return s->len == strlen(lit) && !memcmp(s->s, lit, s->len);
}

static const struct tr_arg *arg(const struct tr_event *e, const char *name)
{
	for (int i = 0; i < e->nargs; i++)
		if (str_eq(&e->args[i].name, name))
			return &e->args[i];
	return NULL;
}

static int64_t arg_int(const struct tr_event *e, const char *name)
{
	const struct tr_arg *a = arg(e, name);

	if (!a)
		return -1;
	return a->type == TR_ARG_INT ? a->i : a->type == TR_ARG_UINT ? (int64_t)a->u : -1;
}

void merge_rpc_track(struct merge_rpc *m, int input, const struct tr_track *t)
{
	int64_t *pid;

	if (t->kind == TR_TRACK_THREAD && (pid = hash_add(&m->pids, key2(input, t->uuid))))
		*pid = t->pid;
}

static struct rpc_end *new_end(struct merge_rpc *m)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 256;
		struct rpc_end *v = m->n < MAX_ENDS ? realloc(m->ends, cap * sizeof(*v)) : NULL;

		if (!v) {
			m->left_out++;
			return NULL;
		}
		m->ends = v;
		m->cap = cap;
	}
	memset(&m->ends[m->n], 0, sizeof(m->ends[0]));
	return &m->ends[m->n++];
}

/* A begin of a call (on a lane) or of a request's handling. */
static void note_begin(struct merge_rpc *m, int input, uint64_t ord, const struct tr_event *e,
		       bool call)
{
	const struct tr_arg *w = arg(e, call ? "destination" : "worker");
	struct rpc_end *x;
	int64_t *pid;
	uint64_t *open;

	if (!call && e->nterm) /* joined in its own session */
		return;
	if (!(x = new_end(m)))
		return;
	*x = (struct rpc_end){ .kind = call ? END_CALL : END_HANDLE, .input = input,
		.id = arg_int(e, "message_id"), .ts = e->ts, .ord = ord,
		.bytes = (uint64_t)arg_int(e, "payload_bytes"),
		.worker = w && w->type == TR_ARG_STR ? dup_str(&w->s) : NULL,
		.name = call && e->has_name ? dup_str(&e->name) : NULL, .pid = -1 };
	if (!call && (pid = hash_get(&m->pids, key2(input, e->track))))
		x->pid = *pid;
	if (call && ((open = hash_get(&m->open, key2(input, e->track))) ||
		     (open = hash_add(&m->open, key2(input, e->track)))))
		*open = m->n;
}

/* An instant of a call (its send, its response: on its lane, in it) or a
 * response sent by a callee (the latest handling of its id there). */
static void note_instant(struct merge_rpc *m, int input, uint64_t ord, const struct tr_event *e)
{
	int64_t id = arg_int(e, "message_id"), *pid;
	uint64_t *open;

	if (str_eq(&e->name, "rpc send response")) {
		pid = hash_get(&m->pids, key2(input, e->track));
		for (size_t i = m->n; pid && i-- > 0;) {
			struct rpc_end *x = &m->ends[i];

			if (x->kind == END_HANDLE && x->input == input && x->pid == *pid && x->id == id) {
				if (!x->ord_out)
					x->ord_out = ord;
				return;
			}
		}
		return;
	}
	open = hash_get(&m->open, key2(input, e->track));
	if (!open || !*open || m->ends[*open - 1].id != id)
		return;
	if (str_eq(&e->name, "rpc send request"))
		m->ends[*open - 1].ord_out = ord;
	else if (str_eq(&e->name, "rpc response"))
		m->ends[*open - 1].ord_in = ord;
}

void merge_rpc_event(struct merge_rpc *m, int input, uint64_t ord, const struct tr_event *e)
{
	bool call;

	if (!e->has_cat || !e->has_name)
		return;
	call = str_eq(&e->cat, "rpc");
	if (!call && !str_eq(&e->cat, "rpc_remote"))
		return;
	if (e->type == TE_SLICE_BEGIN)
		note_begin(m, input, ord, e, call);
	else if (e->type == TE_INSTANT)
		note_instant(m, input, ord, e);
}

static struct merge_rpc_edit *edit(struct merge_rpc *m, int input, uint64_t ord)
{
	uint64_t k = key2(input, ord);
	struct merge_rpc_edit *d = hash_get(&m->edits, k);

	return d ? d : hash_add(&m->edits, k);
}

/* Call c and handling h are one request: flows both ways, h named as c. */
static void link(struct merge_rpc *m, struct rpc_end *c, struct rpc_end *h)
{
	uint64_t req = hash_u64(0x6d657267652d7270ULL ^ ++m->flows) | 1, resp = hash_u64(req) | 1;
	struct merge_rpc_edit *d;

	c->peer = h;
	h->peer = c;
	if (c->ord_out && (d = edit(m, c->input, c->ord_out)))
		d->flow = req;
	if ((d = edit(m, h->input, h->ord))) {
		d->term = req;
		d->name = c->name;
	}
	if (h->ord_out && c->ord_in) {
		if ((d = edit(m, h->input, h->ord_out)))
			d->flow = resp;
		if ((d = edit(m, c->input, c->ord_in)))
			d->term = resp;
	}
}

/* The call that handling h answers: of its id and size, sent to its
 * worker from another input, unanswered, the last sent before it. */
static struct rpc_end *call_of(struct merge_rpc *m, struct hash_table *by_key,
			       const struct rpc_end *h, const int64_t *offset)
{
	__int128 th = (__int128)h->ts + offset[h->input], tbest = 0;
	uint64_t *head = hash_get(by_key, hash_pair((uint64_t)h->id, h->bytes));
	struct rpc_end *best = NULL;

	for (size_t k = head ? *head : 0; k; k = m->ends[k - 1].next) {
		struct rpc_end *c = &m->ends[k - 1];
		__int128 tc = (__int128)c->ts + offset[c->input];

		if (c->peer || c->input == h->input || c->id != h->id || c->bytes != h->bytes ||
		    tc > th + SLACK_NS || (h->worker && c->worker && strcmp(h->worker, c->worker)))
			continue;
		if (!best || tc > tbest) {
			best = c;
			tbest = tc;
		}
	}
	return best;
}

size_t merge_rpc_match(struct merge_rpc *m, const int64_t *offset)
{
	struct hash_table by_key; /* (id, size) -> the first CALL of them, index + 1 */
	size_t linked = 0;

	hash_init(&by_key, MAX_ENDS, sizeof(uint64_t));
	for (size_t i = m->n; i-- > 0;) {
		struct rpc_end *c = &m->ends[i];
		uint64_t k = hash_pair((uint64_t)c->id, c->bytes), *head;

		if (c->kind != END_CALL)
			continue;
		if ((head = hash_get(&by_key, k))) {
			c->next = *head;
			*head = i + 1;
		} else if ((head = hash_add(&by_key, k))) {
			*head = i + 1;
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		struct rpc_end *h = &m->ends[i], *c;

		if (h->kind == END_HANDLE && (c = call_of(m, &by_key, h, offset))) {
			link(m, c, h);
			linked++;
		}
	}
	hash_free(&by_key);
	return linked;
}

const struct merge_rpc_edit *merge_rpc_edit_of(const struct merge_rpc *m, int input, uint64_t ord)
{
	return m->edits.n ? hash_get(&m->edits, key2(input, ord)) : NULL;
}

uint64_t merge_rpc_left_out(const struct merge_rpc *m)
{
	return m->left_out;
}
