// SPDX-License-Identifier: BSD-2-Clause
/*
 * Timestamp order for two event sources. See reorder.h.
 *
 * Events arrive nearly sorted: each thread's events come in the order the
 * thread made them (one agent ring per thread; a thread's BPF records in
 * the order its probes fired), and only the streams interleave. So events
 * are held per stream, a run sorted by (ts, arrival) that an arrival joins
 * at its end (or, rarely, a few places before it: the GPU records of the
 * CUPTI thread come in completion order), and a release merges the runs'
 * heads. Each event is copied in once and handed on from where it lies; a
 * run's bytes are compacted (at most once per event on average) when most
 * of them were handed on. A named event is held without the unused end of
 * its name (usually 90 of its 152 bytes) and handed on whole again.
 */
#include "record/reorder.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ptbpf_events.h"

struct held {
	uint64_t ts, n;  /* n: arrival order, for equal timestamps */
	uint32_t off;    /* in its run's bytes */
	uint32_t size;   /* the event's, as pushed */
	uint32_t stored; /* bytes held: size, or less for a named event */
	uint32_t name;   /* a named event's name bytes held (NUL included); 0: whole */
};

struct run {
	uint64_t key;       /* the stream: pid, tid, agent or BPF */
	struct held *ents;  /* [head, n): held, sorted */
	size_t head, n, cap;
	uint8_t *bytes;     /* the events, 8-byte aligned */
	size_t used, bcap;
	size_t gone;        /* bytes of events handed on, still in bytes */
	bool out_of_place;  /* an event went before an earlier one: its bytes
			     * are out of order */
};

struct reorder {
	struct run *runs;
	size_t nruns, cap;
	size_t last;        /* the run the last push went to */
	size_t *heap;       /* run indices, for a release's merge */
	size_t held;
	uint64_t arrivals;
	uint8_t *whole;     /* a named event made whole again */
	size_t whole_cap;
};

struct reorder *reorder_new(void)
{
	return calloc(1, sizeof(struct reorder));
}

static void run_free(struct run *u)
{
	free(u->ents);
	free(u->bytes);
}

void reorder_free(struct reorder *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nruns; i++)
		run_free(&r->runs[i]);
	free(r->runs);
	free(r->heap);
	free(r->whole);
	free(r);
}

static int grow(void **p, size_t *cap, size_t need, size_t unit, size_t first)
{
	size_t n = *cap ? *cap : first;
	void *q;

	while (n < need)
		n *= 2;
	if (n == *cap)
		return 0;
	q = realloc(*p, n * unit);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static uint64_t stream_key(const struct ptbpf_event *e)
{
	return (uint64_t)(e->source == SRC_AGENT) << 63 | (uint64_t)e->pid << 32 | e->tid;
}

static struct run *find_run(struct reorder *r, uint64_t key)
{
	struct run *u;

	if (r->last < r->nruns && r->runs[r->last].key == key)
		return &r->runs[r->last];
	for (size_t i = 0; i < r->nruns; i++) {
		if (r->runs[i].key == key) {
			r->last = i;
			return &r->runs[i];
		}
	}
	if (r->nruns == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		struct run *runs = realloc(r->runs, cap * sizeof(*runs));
		size_t *heap;

		if (!runs)
			return NULL;
		r->runs = runs;
		heap = realloc(r->heap, cap * sizeof(*heap));
		if (!heap)
			return NULL;
		r->heap = heap;
		r->cap = cap;
	}
	u = &r->runs[r->nruns];
	memset(u, 0, sizeof(*u));
	u->key = key;
	r->last = r->nruns++;
	return u;
}

static bool before(const struct held *a, const struct held *b)
{
	return a->ts < b->ts || (a->ts == b->ts && a->n < b->n);
}

static bool named(uint16_t kind)
{
	return kind == EV_NAMED_RF_BEGIN || kind == EV_NAMED_USER_BEGIN ||
	       kind == EV_NAMED_NODE_TYPE || kind == EV_NAMED_GPU_NAME;
}

int reorder_push(struct reorder *r, const void *data, size_t size)
{
	const struct ptbpf_named_event *ne = data;
	const struct ptbpf_event *e = data;
	size_t name = 0, stored = size, room, i;
	struct held h;
	struct run *u;

	if (size < sizeof(*e) || size > UINT32_MAX)
		return -ENOMEM;
	if (named(e->kind) && size >= sizeof(*ne)) {
		name = strnlen(ne->name, PTBPF_NAME_LEN - 1) + 1;
		stored = sizeof(*e) + name + (size - sizeof(*ne));
	}
	room = (stored + 7) & ~(size_t)7;
	if (!(u = find_run(r, stream_key(e))) ||
	    grow((void **)&u->ents, &u->cap, u->n + 1, sizeof(*u->ents), 256) ||
	    grow((void **)&u->bytes, &u->bcap, u->used + room, 1, 16384) ||
	    u->used + room > UINT32_MAX)
		return -ENOMEM;
	if (name) { /* the header, the name, then what follows the name's room */
		memcpy(u->bytes + u->used, e, sizeof(*e));
		memcpy(u->bytes + u->used + sizeof(*e), ne->name, name - 1);
		u->bytes[u->used + sizeof(*e) + name - 1] = '\0';
		memcpy(u->bytes + u->used + sizeof(*e) + name, ne + 1, size - sizeof(*ne));
	} else {
		memcpy(u->bytes + u->used, data, size);
	}
	h = (struct held){ .ts = e->ts, .n = r->arrivals++, .off = (uint32_t)u->used,
			   .size = (uint32_t)size, .stored = (uint32_t)stored, .name = (uint32_t)name };
	u->used += room;
	/* At the end, unless it is older than the run's last: then a few
	 * places back, never before what the run holds (older events handed
	 * on already stay before it, as any late event would). */
	for (i = u->n; i > u->head && before(&h, &u->ents[i - 1]); i--)
		u->ents[i] = u->ents[i - 1];
	u->out_of_place |= i < u->n;
	u->ents[i] = h;
	u->n++;
	r->held++;
	return 0;
}

/* The event as it was pushed: in place, or made whole in r->whole. */
static const void *whole_event(struct reorder *r, const struct run *u, const struct held *h)
{
	const uint8_t *at = u->bytes + h->off;
	const size_t head = sizeof(struct ptbpf_event), room = sizeof(struct ptbpf_named_event);
	uint8_t *w;

	if (!h->name)
		return at;
	if (grow((void **)&r->whole, &r->whole_cap, h->size, 1, 1024))
		return NULL;
	w = r->whole;
	memcpy(w, at, head + h->name);
	memset(w + head + h->name, 0, room - head - h->name);
	memcpy(w + room, at + head + h->name, h->size - room);
	return w;
}

/* ---- the merge: a min-heap of runs by their next event ---- */

static const struct held *head_of(const struct reorder *r, size_t run)
{
	const struct run *u = &r->runs[run];

	return &u->ents[u->head];
}

static void sift_down(struct reorder *r, size_t *heap, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i, t;

		if (l < n && before(head_of(r, heap[l]), head_of(r, heap[m])))
			m = l;
		if (l + 1 < n && before(head_of(r, heap[l + 1]), head_of(r, heap[m])))
			m = l + 1;
		if (m == i)
			return;
		t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

/* Once most of a run's bytes were handed on, the held ones move to the
 * front (an emptied run just starts over). */
static void run_settle(struct run *u)
{
	size_t used = 0, from;
	uint8_t *fresh;

	if (u->head == u->n) {
		u->head = u->n = u->used = u->gone = 0;
		u->out_of_place = false;
		return;
	}
	if (u->gone * 2 < u->used)
		return;
	memmove(u->ents, u->ents + u->head, (u->n - u->head) * sizeof(*u->ents));
	u->n -= u->head;
	u->head = 0;
	u->gone = 0;
	if (!u->out_of_place) { /* bytes in the entries' order: one move */
		from = u->ents[0].off;
		memmove(u->bytes, u->bytes + from, u->used - from);
		for (size_t k = 0; k < u->n; k++)
			u->ents[k].off -= (uint32_t)from;
		u->used -= from;
		return;
	}
	if (!(fresh = malloc(u->bcap)))
		return; /* (then gone undercounts: a later settle moves them) */
	for (size_t k = 0; k < u->n; k++) {
		struct held *h = &u->ents[k];

		memcpy(fresh + used, u->bytes + h->off, h->stored);
		h->off = (uint32_t)used;
		used += (h->stored + 7) & ~(size_t)7;
	}
	free(u->bytes);
	u->bytes = fresh;
	u->used = used;
	u->out_of_place = false;
}

void reorder_release(struct reorder *r, uint64_t upto, reorder_fn fn, void *ctx)
{
	size_t n = 0, kept = 0;

	for (size_t i = 0; i < r->nruns; i++)
		if (r->runs[i].head < r->runs[i].n && head_of(r, i)->ts <= upto)
			r->heap[n++] = i;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(r, r->heap, n, i);
	while (n) {
		struct run *u = &r->runs[r->heap[0]];
		const struct held *h = &u->ents[u->head];
		const void *e = whole_event(r, u, h);

		if (e)
			fn(ctx, (void *)e, h->size);
		u->gone += (h->stored + 7) & ~(size_t)7;
		u->head++;
		r->held--;
		if (u->head == u->n || head_of(r, r->heap[0])->ts > upto)
			r->heap[0] = r->heap[--n];
		sift_down(r, r->heap, n, 0);
	}
	for (size_t i = 0; i < r->nruns; i++) {
		struct run *u = &r->runs[i];

		run_settle(u);
		if (!u->n) {
			run_free(u);
			continue;
		}
		r->runs[kept++] = *u;
	}
	r->nruns = kept;
	r->last = 0;
}

size_t reorder_held(const struct reorder *r)
{
	return r->held;
}
