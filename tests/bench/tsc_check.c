// SPDX-License-Identifier: BSD-2-Clause
/*
 * tsc_check: whether this machine's TSC can stand in for CLOCK_MONOTONIC,
 * as the agent's op clock (user/agent/clock.c) makes it, and what each way
 * of reading a clock costs here:
 *   - the cost per read of rdtsc, lfence+rdtsc, rdtscp, clock_gettime
 *     (10^7 reads, 5 repetitions);
 *   - whether CPUs agree: two threads on CPUs 0 and 1 hand a TSC value back
 *     and forth (ordered reads) and count the times the receiver's TSC is
 *     below the sender's;
 *   - how straight CLOCK_MONOTONIC is against the TSC: pairs every 20 ms
 *     for 10 s, the largest distance from one line through all, and the
 *     error of a 20 ms extrapolation from a ~1 s slope (what the agent's
 *     line does between its checks).
 *
 * usage: tsc_check
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

#define PAIRS 500
#define EXCHANGES 2000000

static uint64_t mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline uint64_t rd_ordered(void)
{
	uint64_t x;

	_mm_lfence();
	x = __rdtsc();
	_mm_lfence();
	return x;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static volatile uint64_t box;
static volatile int turn;
static long back[2];
static int64_t worst[2];

static void received(int me)
{
	int64_t d = (int64_t)(rd_ordered() - box);

	if (d < 0) {
		back[me]++;
		if (d < worst[me])
			worst[me] = d;
	}
	box = rd_ordered();
}

static void *other(void *arg)
{
	(void)arg;
	pin(1);
	for (int i = 0; i < EXCHANGES; i++) {
		while (turn != 1)
			;
		received(1);
		turn = 0;
	}
	return NULL;
}

static void costs(void)
{
	volatile uint64_t s = 0;
	unsigned aux;

	for (int r = 0; r < 5; r++) {
		uint64_t t0 = mono(), t1, t2, t3, t4;

		for (int i = 0; i < 10000000; i++)
			s += __rdtsc();
		t1 = mono();
		for (int i = 0; i < 10000000; i++) {
			_mm_lfence();
			s += __rdtsc();
		}
		t2 = mono();
		for (int i = 0; i < 10000000; i++)
			s += __rdtscp(&aux);
		t3 = mono();
		for (int i = 0; i < 10000000; i++)
			s += mono();
		t4 = mono();
		printf("ns per read: rdtsc %.1f, lfence+rdtsc %.1f, rdtscp %.1f, clock_gettime %.1f\n",
		       (t1 - t0) / 1e7, (t2 - t1) / 1e7, (t3 - t2) / 1e7, (t4 - t3) / 1e7);
	}
}

int main(void)
{
	static uint64_t tsc[PAIRS], ns[PAIRS];
	double rate, line = 0, sum = 0, most = 0;
	pthread_t t;

	costs();
	pin(0);
	box = rd_ordered();
	pthread_create(&t, NULL, other, NULL);
	for (int i = 0; i < EXCHANGES; i++) {
		turn = 1;
		while (turn != 0)
			;
		received(0);
	}
	pthread_join(t, NULL);
	printf("CPUs 0 and 1, %d exchanges each way: the TSC went back %ld times on CPU 1 "
	       "(worst %ld ticks), %ld on CPU 0 (worst %ld)\n", EXCHANGES, back[1],
	       (long)worst[1], back[0], (long)worst[0]);
	for (int n = 0; n < PAIRS; n++) {
		uint64_t best = ~0ull;

		for (int k = 0; k < 5; k++) {
			uint64_t a = mono(), x = rd_ordered(), b = mono();

			if (b - a < best) {
				best = b - a;
				tsc[n] = x;
				ns[n] = a + (b - a) / 2;
			}
		}
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
	rate = (double)(ns[PAIRS - 1] - ns[0]) / (double)(tsc[PAIRS - 1] - tsc[0]);
	for (int i = 1; i < PAIRS; i++) {
		double e = ns[0] + (tsc[i] - tsc[0]) * rate - ns[i];

		line = e < 0 ? (-e > line ? -e : line) : (e > line ? e : line);
	}
	for (int i = 50; i < PAIRS; i++) {
		double r = (double)(ns[i - 1] - ns[i - 50]) / (double)(tsc[i - 1] - tsc[i - 50]);
		double e = ns[i - 1] + (tsc[i] - tsc[i - 1]) * r - ns[i];

		e = e < 0 ? -e : e;
		sum += e;
		most = e > most ? e : most;
	}
	printf("TSC at %.3f MHz; CLOCK_MONOTONIC over 10 s within %.1f ns of one line; "
	       "20 ms from a 1 s slope: mean error %.1f ns, largest %.1f ns\n",
	       1e3 / rate, line, sum / (PAIRS - 50), most);
	return 0;
}
