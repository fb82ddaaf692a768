/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the loader's reorder stage (user/record/reorder.c): threads whose
 * events come in their own time order, a stream that comes out of order
 * (GPU records), pushed in bursts of one stream at a time as the loader's
 * reads bring them, with events of several sizes, released up to moving
 * horizons. What comes out must be each event once, whole, in (ts,
 * arrival) order among those released together, and nothing may be held
 * back that was due; named events (held shorter) come out as pushed, the
 * unused end of the name zeroed. Prints the time per event (not checked).
 */
#include "record/reorder.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptbpf_events.h"

#include "check.h"

#define NTHREADS 6
#define NEVENTS 300000

struct out {
	uint64_t last_ts, last_n, released, bytes;
	uint64_t upto, prev_upto;
	uint8_t *seen;
	bool bad_order;
};

/* An event: a plain one (a few bytes past the header) or a named one (the
 * name "n<serial>" and up to 24 bytes past the name's room). */
union ev {
	struct ptbpf_event e;
	struct ptbpf_named_event ne;
	uint8_t bytes[sizeof(struct ptbpf_named_event) + 64];
};

static void fill(union ev *v, uint64_t serial, size_t size)
{
	size_t from = v->e.kind == EV_NAMED_RF_BEGIN ? sizeof(v->ne) : sizeof(v->e);

	if (v->e.kind == EV_NAMED_RF_BEGIN)
		snprintf(v->ne.name, sizeof(v->ne.name), "n%llu", (unsigned long long)serial);
	for (size_t i = from; i < size; i++)
		v->bytes[i] = (uint8_t)(serial + i);
}

static int take(void *ctx, void *data, size_t size)
{
	struct out *o = ctx;
	const struct ptbpf_event *e = data;
	uint64_t serial = e->arg[0];
	union ev want;

	CHECK(size >= sizeof(*e) && size <= sizeof(want), "size", serial);
	CHECK(serial < NEVENTS && !o->seen[serial], "each event once", serial);
	if (serial < NEVENTS)
		o->seen[serial] = 1;
	/* the event's bytes arrived whole: arg[1] = size, arg[2] = ~serial */
	CHECK(e->arg[1] == size && e->arg[2] == ~serial, "header", serial);
	if (size <= sizeof(want)) {
		memset(&want, 0, sizeof(want));
		memcpy(&want.e, e, sizeof(*e));
		fill(&want, serial, size);
		CHECK(!memcmp(&want, data, size), "bytes", serial);
	}
	CHECK(e->ts <= o->upto, "released before its time", serial);
	/* Within one release, time order (an event older than what an
	 * earlier release handed on comes first in the next one). */
	if (e->ts < o->last_ts)
		o->bad_order = true;
	o->last_ts = e->ts;
	o->released++;
	o->bytes += size;
	return 0;
}

static uint64_t rnd(uint64_t n)
{
	return (uint64_t)random() % n;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void)
{
	for (unsigned seed = 1; seed <= 3; seed++) {
		struct reorder *r = reorder_new();
		struct out o = { .seen = calloc(NEVENTS, 1) };
		uint64_t clock_ts[NTHREADS + 1] = { 0 }, t = 1000, serial = 0;
		double t0 = now(), spent;

		srandom(seed);
		while (serial < NEVENTS) {
			/* One read: a burst per stream, up to t (stream NTHREADS is
			 * the GPU one: its times jump back and forth). */
			t += 1 + rnd(2000);
			for (int s = 0; s <= NTHREADS && serial < NEVENTS; s++) {
				int burst = (int)rnd(200);

				for (int k = 0; k < burst && serial < NEVENTS; k++) {
					union ev v;
					bool is_named = rnd(3) == 0;
					size_t size = is_named ? sizeof(v.ne) + rnd(25) : sizeof(v.e) + rnd(65);

					memset(&v, 0, sizeof(v));
					v.e.kind = is_named ? EV_NAMED_RF_BEGIN : EV_RF_END;
					if (s == NTHREADS)
						v.e.ts = t > 5000 ? t - rnd(5000) : t;
					else
						v.e.ts = clock_ts[s] += rnd(3);
					v.e.pid = 100;
					v.e.tid = 100 + s;
					v.e.source = s % 2 ? SRC_AGENT : SRC_ENTRY_PROBE;
					v.e.arg[0] = serial;
					v.e.arg[1] = size;
					v.e.arg[2] = ~serial;
					fill(&v, serial, size);
					serial++;
					CHECK(reorder_push(r, &v, size) == 0, "push", serial);
				}
				if (clock_ts[s] + 50 < t)
					clock_ts[s] = t - rnd(50);
			}
			o.prev_upto = o.upto;
			o.upto = t > 3000 ? t - 3000 : 0;
			if (o.upto < o.prev_upto)
				o.upto = o.prev_upto;
			o.last_ts = 0;
			reorder_release(r, o.upto, take, &o);
			CHECK(!o.bad_order, "time order within a release", o.released);
		}
		o.prev_upto = o.upto;
		o.upto = UINT64_MAX;
		o.last_ts = 0;
		reorder_release(r, UINT64_MAX, take, &o);
		spent = now() - t0;
		CHECK(o.released == NEVENTS, "every event released", o.released);
		CHECK(reorder_held(r) == 0, "nothing held", reorder_held(r));
		CHECK(!o.bad_order, "time order", 0);
		printf("seed %u: %llu events, %.0f ns each (push + release)\n", seed,
		       (unsigned long long)o.released, spent / NEVENTS * 1e9);
		reorder_free(r);
		free(o.seen);
	}
	return check_summary("test_reorder");
}
