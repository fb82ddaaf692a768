/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The reader yields to the job's threads (issue 43). While it waits for
 * records and reads them, ptbpf's main thread runs at SCHED_IDLE: the kernel
 * gives it only CPU that no normal thread wants, and never lets it preempt
 * one, so it takes no CPU from the job. It reads at its own policy instead
 * where it is behind: its last read brought much, or the watch woke it. The
 * watch is a thread at ptbpf's own policy, asleep until the rings' own
 * "much is waiting" signals (a BPF ring past its wake-up threshold, an
 * agent's op ring past a quarter full), so that a reader the job's threads
 * starve still reads before its rings fill. What stops the job (attaches)
 * and the rest of the bookkeeping run at ptbpf's own policy.
 *
 *     yield_watch_start(ring_fds, n);
 *     for (;;) {
 *             yield_read_begin(behind);
 *             got = read_everything();
 *             yield_read_end();
 *             behind = got > MANY;
 *             attach_new_processes();
 *     }
 *     yield_watch_stop();
 */
#ifndef PTBPF_YIELD_H
#define PTBPF_YIELD_H

#include <stdbool.h>
#include <stdint.h>

/* The watch over fds (epoll-able: BPF ring buffers), for the calling
 * thread (the reader): 0, or -errno (the reader then never yields). */
int yield_watch_start(const int *fds, int n);
void yield_watch_stop(void);
/* Around each read: at SCHED_IDLE unless behind (or woken by the watch
 * since the last read began); then at ptbpf's own policy again. */
void yield_read_begin(bool behind);
void yield_read_end(void);
/* Reads since the watch started, and those at ptbpf's own policy. */
void yield_counts(uint64_t *reads, uint64_t *own);

#endif /* PTBPF_YIELD_H */
