/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel view's BPF programs (bpf/sched.bpf.c): loaded beside the op
 * programs, filtering on a bitmap of the processes being traced, attached to
 * the scheduler, system call and page fault tracepoints for the whole
 * capture, detached before the last read. Their records come through a
 * ring of their own (include/ptbpf_sched.h).
 */
#ifndef PTBPF_SCHED_PROBES_H
#define PTBPF_SCHED_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptbpf_sched.h"

struct sched_probes;

/* Loads and attaches them; ring_bytes: their ring's size (a power of
 * two). They record nothing until a process is watched. NULL with one
 * line in err. */
struct sched_probes *sched_probes_new(uint32_t ring_bytes, char *err, size_t errlen);
/* Starts (on) or stops recording process pid's threads; 0 or -errno. */
int sched_probes_watch(struct sched_probes *p, int pid, bool on);
/* The bitmap of traced processes (bit pid % 64 of word pid / 64) in map m,
 * shared by the CPU sampler (sample_probes.c); 0 or -errno. */
struct bpf_map;
int sched_procs_bitmap_watch(const struct bpf_map *m, int pid, bool on);
/* That bitmap's map fd, for the sampler to share. */
int sched_probes_procs_fd(const struct sched_probes *p);
/* Each CPU's state (struct ptbpf_sched_cpu), which CPU samples update. */
int sched_probes_cpus_fd(const struct sched_probes *p);
/* After detach: the replays of unreported switches that CPU samples found
 * and no later record sent (the thread still ran when tracing stopped),
 * each made as BPF would have sent it and given to fn; how many. */
int sched_probes_pending(const struct sched_probes *p,
			 int (*fn)(void *ctx, void *data, size_t size), void *ctx);
/* The ring's map fd (for ring_buffer__add). */
int sched_probes_ring_fd(const struct sched_probes *p);
/* What did not attach (a tracepoint this kernel lacks), "" if nothing. */
const char *sched_probes_missing(const struct sched_probes *p);
/* Removes every program from its tracepoint: nothing runs after this. */
void sched_probes_detach(struct sched_probes *p);
/* Attaches them again after sched_probes_detach (the benchmark's switched
 * kernel view, tests/bench/sched_floor.c), the system call programs only
 * if syscalls (without them: what they cost); 0, or -1 with one line in
 * err and none attached. The programs' state (each CPU's last switch, each
 * thread's open call) is kept from before the detach, so the records after
 * it cost what the view costs but do not make a trace. */
int sched_probes_attach(struct sched_probes *p, bool syscalls, char *err, size_t errlen);
/* The programs' counters summed over CPUs (enum ptbpf_sched_stat). */
void sched_probes_stats(const struct sched_probes *p, uint64_t out[SCHED_STAT_MAX]);
/* Of those, the records that did not reach the ring (every SCHED_DROP_*). */
uint64_t sched_probes_lost(const uint64_t st[SCHED_STAT_MAX]);
/* Block I/O requests of the traced processes started and not done (at the
 * end: never drawn, so counted). */
uint64_t sched_probes_block_in_flight(const struct sched_probes *p);
/* Runs the kernel skipped because another of the program's runs was
 * active on that CPU (a wakeup from an interrupt inside a wakeup): lost
 * before any record was made. */
uint64_t sched_probes_missed(const struct sched_probes *p);
void sched_probes_free(struct sched_probes *p);
/* Its BPF object, for --bpf-stats (NULL: none). */
const struct bpf_object *sched_probes_obj(const struct sched_probes *p);

#endif /* PTBPF_SCHED_PROBES_H */
