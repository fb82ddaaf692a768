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
 * of them were handed on.
 */
#include "reorder.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ptbpf_events.h"

struct held {
	uint64_t ts, n; /* n: arrival order, for equal timestamps */
	size_t off, size;
};

struct run {
	uint64_t key;       /* the stream: pid, tid, agent or BPF */
	struct held *ents;  /* [head, n): held, sorted */
	size_t head, n, cap;
	uint8_t *bytes;     /* the events, 8-byte aligned */
	size_t used, bcap;
	size_t gone;        /* bytes of events handed on, still in bytes */
};

struct reorder {
	struct run *runs;
	size_t nruns, cap;
	size_t last;        /* the run the last push went to */
	size_t *heap;       /* run indices, for a release's merge */
	size_t held;
	uint64_t arrivals;
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

int reorder_push(struct reorder *r, const void *data, size_t size)
{
	const struct ptbpf_event *e = data;
	size_t room = (size + 7) & ~(size_t)7, i;
	struct held h;
	struct run *u;

	if (size < sizeof(*e) || !(u = find_run(r, stream_key(e))) ||
	    grow((void **)&u->ents, &u->cap, u->n + 1, sizeof(*u->ents), 256) ||
	    grow((void **)&u->bytes, &u->bcap, u->used + room, 1, 16384))
		return -ENOMEM;
	memcpy(u->bytes + u->used, data, size);
	h = (struct held){ .ts = e->ts, .n = r->arrivals++, .off = u->used, .size = size };
	u->used += room;
	/* At the end, unless it is older than the run's last: then a few
	 * places back, never before what the run holds (older events handed
	 * on already stay before it, as any late event would). */
	for (i = u->n; i > u->head && before(&h, &u->ents[i - 1]); i--)
		u->ents[i] = u->ents[i - 1];
	u->ents[i] = h;
	u->n++;
	r->held++;
	return 0;
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

/* Once most of a run's bytes were handed on, the held ones move into a
 * fresh buffer (an emptied run just starts over). */
static void run_settle(struct run *u)
{
	uint8_t *fresh;
	size_t used = 0;

	if (u->head == u->n) {
		u->head = u->n = u->used = u->gone = 0;
		return;
	}
	if (u->gone * 2 < u->used || !(fresh = malloc(u->bcap)))
		return;
	memmove(u->ents, u->ents + u->head, (u->n - u->head) * sizeof(*u->ents));
	u->n -= u->head;
	u->head = 0;
	for (size_t k = 0; k < u->n; k++) {
		struct held *h = &u->ents[k];

		memcpy(fresh + used, u->bytes + h->off, h->size);
		h->off = used;
		used += (h->size + 7) & ~(size_t)7;
	}
	free(u->bytes);
	u->bytes = fresh;
	u->used = used;
	u->gone = 0;
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

		fn(ctx, u->bytes + h->off, h->size);
		u->gone += (h->size + 7) & ~(size_t)7;
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
