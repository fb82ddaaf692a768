/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * metrics: ptbpf daemon's Prometheus endpoint (user/fleet/metrics.c). Per
 * process (pid, comm, rank, run_id: TORCHELASTIC_RUN_ID or SLURM_JOB_ID):
 * ops and launches in windows (counters), GPU time and kernels by kernel
 * name; the always-on step signal (a step-time histogram, steps,
 * DataLoader and optimizer time); and ptbpf's lost events, windows, CPU
 * time and memory.
 */
#ifndef PTBPF_METRICS_H
#define PTBPF_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct metrics;
struct join;
struct gpu_timeline;
struct target;
struct capture;

/* Listens on ADDR:PORT (its own thread), serving GET /metrics and, with
 * capture, POST /capture; NULL with one line in err. */
struct metrics *metrics_start(const char *listen, struct capture *capture, char *err,
			      size_t errlen);
void metrics_stop(struct metrics *m);
/* The always-on step signal's counters of t's process (step_signal.c),
 * or NULL: it has none any more (its series go). */
struct ptbpf_agent_steps;
void metrics_steps(struct metrics *m, const struct target *t, const struct ptbpf_agent_steps *st);
/* A capture window opens (probes attached) or closes. */
void metrics_window(struct metrics *m, bool open);
/* The open window's running totals (join's per-process and per-kernel
 * counts, the loss count). */
void metrics_update(struct metrics *m, const struct join *j, const struct gpu_timeline *gt,
		    const struct target *targets,
		    int ntargets, uint64_t lost);

#endif /* PTBPF_METRICS_H */
