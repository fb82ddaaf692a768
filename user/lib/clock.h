/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The clocks, read here and nowhere else in ptbpf (the agent, a library of
 * its own, keeps its copy in agent/agent.h). Every time in a record, a
 * trace and a deadline is CLOCK_MONOTONIC nanoseconds: bpf_ktime_get_ns's
 * clock, which the kernel's records carry too.
 */
#ifndef PTBPF_LIB_CLOCK_H
#define PTBPF_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	return clock_gettime(id, &ts) ? 0 : (uint64_t)ts.tv_sec * 1000000000ull +
					      (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC nanoseconds, now. */
static inline uint64_t clock_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* Milliseconds since t0 (clock_mono_ns). */
static inline double clock_ms_since(uint64_t t0)
{
	return (double)(clock_mono_ns() - t0) / 1e6;
}

/* The same clock at a tick's precision, for a fraction of the cost. */
static inline uint64_t clock_mono_coarse_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_COARSE);
}

#endif
