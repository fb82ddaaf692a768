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
struct web_config;

/* Listens on ADDR:PORT (fleet/http.c: its own thread), serving GET
 * /metrics and, with capture, POST /capture; wc: TLS and users (or
 * NULL); insecure_capture: /capture from any client without users. NULL
 * with one line in err. */
struct metrics *metrics_start(const char *listen, struct capture *capture, struct web_config *wc,
			      bool insecure_capture, char *err, size_t errlen);
void metrics_stop(struct metrics *m);
/* Whether its port listens on a loopback address only. */
bool metrics_loopback_only(const struct metrics *m);
/* The always-on step signal's counters of t's process (step_signal.c),
 * or NULL: it has none any more (its series go). */
struct ptbpf_agent_steps;
void metrics_steps(struct metrics *m, const struct target *t, const struct ptbpf_agent_steps *st);
/* A capture window opens (probes attached) or closes; a window is
 * counted as it closes, if it traced a process. */
void metrics_window(struct metrics *m, bool open, bool traced);
/* The open window's running totals (join's per-process and per-kernel
 * counts, the loss count). */
void metrics_update(struct metrics *m, const struct join *j, const struct gpu_timeline *gt,
		    const struct target *targets,
		    int ntargets, uint64_t lost);

#endif /* PTBPF_METRICS_H */
