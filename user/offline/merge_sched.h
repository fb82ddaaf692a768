/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `ptbpf merge`: an input's scheduler bundles (the kernel view: compact
 * sched FtraceEventBundles, trace/perfetto_ftrace.c) moved into the merged
 * trace as the rest of the input is: their timestamps (BOOTTIME) onto the
 * output's REALTIME, their pids into the input's range, their CPUs apart
 * from other inputs' (each input's machine keeps CPU tracks of its own).
 */
#ifndef PTBPF_MERGE_SCHED_H
#define PTBPF_MERGE_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/pbwrite.h"

struct merge_sched_shift {
	int64_t ts_off;   /* added to every (absolute) timestamp */
	int64_t pid_off;  /* added to every pid but 0 (the idle task) */
	uint32_t cpu_off; /* added to the CPU */
};

/* The CPU of bundle d[0..n); false if it has none (or is malformed). */
bool merge_sched_cpu(const uint8_t *d, size_t n, uint32_t *cpu);
/* Bundle d[0..n) moved by sh, into out; false if it is malformed or a
 * timestamp would leave 0..INT64_MAX (the packet is dropped then). */
bool merge_sched_bundle(const struct merge_sched_shift *sh, const uint8_t *d, size_t n,
			struct pb *out);

/* The CPU of PerfSample d[0..n); false if it has none. */
bool merge_sample_cpu(const uint8_t *d, size_t n, uint32_t *cpu);
/* PerfSample d[0..n) moved by sh (pids, CPU), into out; false if malformed. */
bool merge_perf_sample(const struct merge_sched_shift *sh, const uint8_t *d, size_t n,
		       struct pb *out);

#endif /* PTBPF_MERGE_SCHED_H */
