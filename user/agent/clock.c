// SPDX-License-Identifier: BSD-2-Clause
/*
 * The op records' clock: CLOCK_MONOTONIC nanoseconds, as every other record
 * of ptbpf carries, but read from the TSC where the CPU's TSC is invariant.
 * A clock_gettime() costs 27 ns on the CI VM (kvm-clock: an ordered TSC
 * read and the pvclock page) against 5-12 ns for an rdtsc and a multiply,
 * and an op takes two reads (BENCHMARKS.md, issue 23).
 *
 * The agent's thread keeps the conversion, every PTBPF_AGENT_POLL_MS while
 * ops are recorded (agent_clock_tick): a (TSC, CLOCK_MONOTONIC) pair read
 * as tightly as it can, the rate over the last ~1.3 s of pairs, and a line
 * through the current value that reaches CLOCK_MONOTONIC again by the next
 * tick (slewed, never stepped, unless it is off by more than
 * CLOCK_STEP_NS). Readers take it under a sequence count. Until the first
 * two pairs are 10 ms apart, and on CPUs without an invariant TSC, the
 * reads are clock_gettime(). ptbpf reads how far the line was from
 * CLOCK_MONOTONIC at each tick (the ops descriptor) and says so.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <cpuid.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

struct agent_clock agent_clock;

#define HIST 64                       /* pairs kept: 64 ticks, ~1.3 s */
#define MIN_BASELINE_NS 10000000ll    /* pairs this far apart give a rate */
#define MAX_BRACKET_NS 20000ll        /* a pair read slower than this is skipped */
#define CLOCK_STEP_NS 100000ll        /* off by more: set, not slewed */

static struct {
	uint64_t tsc[HIST];
	int64_t ns[HIST];
	int n, next;
	uint64_t last_tsc;
	bool tsc_ok;
} hist;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every
 * power state (Linux's constant_tsc and nonstop_tsc). */
static bool tsc_invariant(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
}

/* A (TSC, CLOCK_MONOTONIC) pair: the TSC read between two clock reads, the
 * tightest of three tries; false if every try took too long (preempted). */
static bool read_pair(uint64_t *tsc, int64_t *ns)
{
	int64_t best = MAX_BRACKET_NS;

	for (int i = 0; i < 3; i++) {
		int64_t a = mono_ns();
		uint64_t t;
		int64_t b;

		_mm_lfence();
		t = __rdtsc();
		_mm_lfence();
		b = mono_ns();
		if (b - a < best) {
			best = b - a;
			*tsc = t;
			*ns = a + (b - a) / 2;
		}
	}
	return best < MAX_BRACKET_NS;
}

static void publish(uint64_t base_tsc, int64_t base_ns, uint64_t mult)
{
	struct agent_clock *c = &agent_clock;
	uint32_t seq = c->seq;

	__atomic_store_n(&c->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	c->base_tsc = base_tsc;
	c->base_ns = base_ns;
	c->mult = mult;
	__atomic_store_n(&c->ready, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->seq, seq + 2, __ATOMIC_RELEASE);
}

void agent_clock_start(bool use_tsc)
{
	memset(&hist, 0, sizeof(hist));
	__atomic_store_n(&agent_clock.ready, 0, __ATOMIC_RELEASE);
	agent_clock.ticks = agent_clock.steps = 0;
	agent_clock.max_err_ns = 0;
	hist.tsc_ok = use_tsc && tsc_invariant();
	agent_clock.tsc = hist.tsc_ok;
}

void agent_clock_tick(void)
{
	struct agent_clock *c = &agent_clock;
	int oldest;
	uint64_t tsc, mult, rate;
	int64_t ns, now, err;

	if (!hist.tsc_ok || !read_pair(&tsc, &ns))
		return;
	hist.tsc[hist.next] = tsc;
	hist.ns[hist.next] = ns;
	hist.next = (hist.next + 1) % HIST;
	if (hist.n < HIST)
		hist.n++;
	oldest = hist.n < HIST ? 0 : hist.next;
	if (ns - hist.ns[oldest] < MIN_BASELINE_NS || tsc <= hist.tsc[oldest])
		return;
	/* ns per tick, 32.32 fixed point */
	rate = (uint64_t)(((unsigned __int128)(ns - hist.ns[oldest]) << 32) /
			  (tsc - hist.tsc[oldest]));
	if (!c->ready) {
		publish(tsc, ns, rate);
		hist.last_tsc = tsc;
		return;
	}
	now = (int64_t)agent_clock_at(c->base_tsc, c->base_ns, c->mult, tsc);
	err = ns - now;
	c->ticks++;
	if ((uint64_t)(err < 0 ? -err : err) > c->max_err_ns)
		c->max_err_ns = (uint64_t)(err < 0 ? -err : err);
	if (err > CLOCK_STEP_NS || err < -CLOCK_STEP_NS) {
		c->steps++;
		publish(tsc, ns, rate);
	} else {
		/* From the value it has now, to CLOCK_MONOTONIC by the next
		 * tick (about as far off as the last one). */
		uint64_t span = tsc - hist.last_tsc;
		int64_t fix = (int64_t)(((__int128)err << 32) / (__int128)(span ? span : 1));

		mult = fix < 0 && (uint64_t)-fix > rate / 2 ? rate / 2 : rate + (uint64_t)fix;
		publish(tsc, now, mult);
	}
	hist.last_tsc = tsc;
}
