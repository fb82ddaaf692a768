// SPDX-License-Identifier: BSD-2-Clause
/* Timestamp order for two event sources. See reorder.h. */
#include "reorder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ptbpf_events.h"

struct held {
	uint64_t ts, n; /* n: arrival order, for equal timestamps */
	size_t off, size;
};

struct reorder {
	struct held *ents;
	size_t nents, cap;
	uint8_t *bytes; /* the events, 8-byte aligned */
	size_t used, bcap;
	uint64_t arrivals;
};

struct reorder *reorder_new(void)
{
	return calloc(1, sizeof(struct reorder));
}

void reorder_free(struct reorder *r)
{
	if (!r)
		return;
	free(r->ents);
	free(r->bytes);
	free(r);
}

static int grow(void **p, size_t *cap, size_t need, size_t unit)
{
	size_t n = *cap ? *cap : 1024;
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

int reorder_push(struct reorder *r, const void *data, size_t size)
{
	size_t room = (size + 7) & ~(size_t)7;

	if (size < sizeof(struct ptbpf_event) ||
	    grow((void **)&r->ents, &r->cap, r->nents + 1, sizeof(*r->ents)) ||
	    grow((void **)&r->bytes, &r->bcap, r->used + room, 1))
		return -ENOMEM;
	memcpy(r->bytes + r->used, data, size);
	r->ents[r->nents++] = (struct held){ .ts = ((const struct ptbpf_event *)data)->ts,
					     .n = r->arrivals++, .off = r->used, .size = size };
	r->used += room;
	return 0;
}

static int by_time(const void *a, const void *b)
{
	const struct held *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

void reorder_release(struct reorder *r, uint64_t upto, reorder_fn fn, void *ctx)
{
	size_t i, kept = 0, used = 0;

	if (!r->nents)
		return;
	qsort(r->ents, r->nents, sizeof(*r->ents), by_time);
	for (i = 0; i < r->nents && r->ents[i].ts <= upto; i++)
		fn(ctx, r->bytes + r->ents[i].off, r->ents[i].size);
	/* Keep the rest, copied into a fresh buffer (in time order, their
	 * old places interleave). */
	if (i < r->nents) {
		uint8_t *fresh;

		for (size_t k = i; k < r->nents; k++)
			used += (r->ents[k].size + 7) & ~(size_t)7;
		fresh = malloc(used > 4096 ? used : 4096);
		if (!fresh) { /* hand on the rest now rather than lose it */
			for (; i < r->nents; i++)
				fn(ctx, r->bytes + r->ents[i].off, r->ents[i].size);
			used = 0;
		}
		for (used = 0; fresh && i < r->nents; i++) {
			struct held h = r->ents[i];

			memcpy(fresh + used, r->bytes + h.off, h.size);
			h.off = used;
			used += (h.size + 7) & ~(size_t)7;
			r->ents[kept++] = h;
		}
		if (fresh) {
			free(r->bytes);
			r->bytes = fresh;
			r->bcap = used > 4096 ? used : 4096;
		}
	}
	r->nents = kept;
	r->used = used;
}

size_t reorder_held(const struct reorder *r)
{
	return r->nents;
}
