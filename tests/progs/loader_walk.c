// SPDX-License-Identifier: BSD-2-Clause
/*
 * loader_walk_slowly(): one dl_iterate_phdr walk whose callback spins 20 us
 * per object, so that the calling thread holds the dynamic linker's write
 * lock for milliseconds (as an unwinder's or a profiler's walk does), and a
 * concurrent dlopen waits for it mid-load. For tests/workloads/dlopen_loop.py.
 */
#define _GNU_SOURCE
#include <link.h>
#include <stddef.h>
#include <time.h>

static long ns_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + t.tv_nsec - t0->tv_nsec;
}

static int spin(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct timespec t0;

	(void)info, (void)size, (void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ns_since(&t0) < 20000)
		;
	return 0;
}

void loader_walk_slowly(void)
{
	dl_iterate_phdr(spin, NULL);
}
