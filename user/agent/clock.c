// SPDX-License-Identifier: BSD-2-Clause
/*
 * The op records' clock: CLOCK_MONOTONIC nanoseconds, as every other record
 * of ptbpf carries, but read from the TSC where it is invariant and the
 * kernel's clock is built on it. A clock_gettime() costs 27 ns on the CI VM
 * (kvm-clock: an ordered TSC read and the pvclock page) against 5-12 ns for
 * an rdtsc and a multiply, and an op takes two reads (BENCHMARKS.md, issue
 * 23).
 *
 * The agent's thread keeps the conversion, every PTBPF_AGENT_POLL_MS while
 * ops are recorded (agent_clock_tick): a (TSC, CLOCK_MONOTONIC) pair read
 * as tightly as it can, the rate over the last ~1.3 s of pairs, and a line
 * through the current value that reaches CLOCK_MONOTONIC again SLEW_NS
 * later (slewed, not stepped, unless it is off by more than CLOCK_STEP_NS).
 * The line holds for LINE_NS past its tick: a reader past that (the
 * agent's thread was late) takes clock_gettime(), so a late tick never
 * stretches an error. Readers take it under a sequence count. Until the
 * first pairs are 10 ms apart, and where the TSC is not to be trusted, the
 * reads are clock_gettime(). ptbpf reads how far the line was from
 * CLOCK_MONOTONIC at each tick (the ops descriptor) and says so.
 *
 * The reader's rdtsc is not ordered against the loads before it (as the
 * vDSO's lfence;rdtsc is): a stamp may be taken some tens of ns early.
 * Nothing joins records of different threads at that grain.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <cpuid.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

struct agent_clock agent_clock;

#define HIST 64                       /* pairs kept: 64 ticks, ~1.3 s */
#define MIN_BASELINE_NS 10000000ll    /* pairs this far apart give a rate */
#define MAX_BRACKET_NS 5000ll         /* a pair read slower than this is skipped */
#define CLOCK_STEP_NS 100000ll        /* off by more: set, not slewed */
#define SLEW_NS 20000000ll            /* an error is slewed away over this */
#define LINE_NS 60000000ll            /* a line holds this long past its tick */

static struct {
	uint64_t tsc[HIST];
	int64_t ns[HIST];
	int n, next;
	int64_t min_bracket;
} hist;

/* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every
 * power state (Linux's constant_tsc and nonstop_tsc); and the kernel keeps
 * its own clock on it (a kernel that found the TSC unsynchronised between
 * CPUs runs on hpet or acpi_pm). Unreadable (a container without /sys): no. */
static bool tsc_trusted(void)
{
	static const char *const ok[] = { "tsc\n", "kvm-clock\n", "hyperv_clocksource_tsc_page\n" };
	char cs[64] = "";
	unsigned a, b, c, d;
	FILE *f;

	if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8)))
		return false;
	f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (!f)
		return false;
	if (!fgets(cs, sizeof(cs), f))
		cs[0] = 0;
	fclose(f);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(cs, ok[i]))
			return true;
	return false;
}

int64_t agent_clock_pair(int64_t (*read)(void), int64_t *x, int64_t *ns)
{
	int64_t best = INT64_MAX;

	*x = *ns = 0;
	for (int i = 0; i < 3; i++) {
		int64_t a = agent_mono_ns(), t = read(), b = agent_mono_ns();

		if (b - a < best) {
			best = b - a;
			*x = t;
			*ns = a + (b - a) / 2;
		}
	}
	return best;
}

/* The TSC, read after what comes before it and before what follows. */
static int64_t tsc_ordered(void)
{
	int64_t t;

	_mm_lfence();
	t = (int64_t)__rdtsc();
	_mm_lfence();
	return t;
}

/* A (TSC, CLOCK_MONOTONIC) pair (agent_clock_pair); false if even the
 * tightest try was wide (preempted, or much wider than the tightest seen:
 * its midpoint would carry the noise into the line). */
static bool read_pair(uint64_t *tsc, int64_t *ns)
{
	int64_t x, best = agent_clock_pair(tsc_ordered, &x, ns);

	*tsc = (uint64_t)x;
	if (best >= MAX_BRACKET_NS)
		return false;
	if (!hist.min_bracket || best < hist.min_bracket)
		hist.min_bracket = best;
	return best <= 3 * hist.min_bracket || best <= 500;
}

/* ticks in ns nanoseconds at rate (ns per tick, 32.32) */
static uint64_t ticks_in(int64_t ns, uint64_t rate)
{
	return (uint64_t)(((unsigned __int128)ns << 32) / rate);
}

static void publish(uint64_t base_tsc, int64_t base_ns, uint64_t mult, uint64_t rate)
{
	struct agent_clock *c = &agent_clock;
	uint32_t seq = c->seq;

	__atomic_store_n(&c->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	c->base_tsc = base_tsc;
	c->base_ns = base_ns;
	c->mult = mult;
	c->limit_tsc = base_tsc + ticks_in(LINE_NS, rate);
	__atomic_store_n(&c->ready, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->seq, seq + 2, __ATOMIC_RELEASE);
}

void agent_clock_start(bool use_tsc)
{
	memset(&hist, 0, sizeof(hist));
	__atomic_store_n(&agent_clock.ready, 0, __ATOMIC_RELEASE);
	agent_clock.ticks = agent_clock.steps = 0;
	agent_clock.max_err_ns = 0;
	agent_clock.tsc = use_tsc && tsc_trusted();
}

void agent_clock_tick(void)
{
	struct agent_clock *c = &agent_clock;
	int oldest;
	uint64_t tsc, rate, aerr;
	int64_t ns, now, err, fix, cap;

	if (!c->tsc || !read_pair(&tsc, &ns))
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
	if (!rate)
		return;
	/* No line yet, or readers went past it (they took clock_gettime):
	 * start one at CLOCK_MONOTONIC. */
	if (!c->ready || tsc > c->limit_tsc) {
		publish(tsc, ns, rate, rate);
		return;
	}
	now = (int64_t)agent_clock_at(c->base_tsc, c->base_ns, c->mult, tsc);
	err = ns - now;
	aerr = (uint64_t)(err < 0 ? -err : err);
	c->ticks++;
	if (aerr > c->max_err_ns)
		c->max_err_ns = aerr;
	if (aerr > CLOCK_STEP_NS) {
		c->steps++;
		publish(tsc, ns, rate, rate);
		return;
	}
	/* From the value it has now, to CLOCK_MONOTONIC over SLEW_NS, at
	 * most 1000 ppm off the rate. */
	fix = (int64_t)((__int128)err * ((__int128)1 << 32) / (__int128)ticks_in(SLEW_NS, rate));
	cap = (int64_t)(rate / 1000);
	fix = fix > cap ? cap : fix < -cap ? -cap : fix;
	publish(tsc, now, (uint64_t)((int64_t)rate + fix), rate);
}
