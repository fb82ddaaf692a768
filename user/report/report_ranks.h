/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `ptbpf report` of a capture of several ranks of a job (a daemon window
 * holds every rank of its host; `ptbpf merge` those of several hosts):
 * which rank the others wait for, and why.
 *
 *   - A hang capture (the daemon's --hang) begins with a hang summary: the
 *     "ptbpf hang" track holds what the daemon's step signal knew of each
 *     rank (the collectives it entered and left, its step under way, or
 *     that it exited); the ranks that never entered the collective the
 *     others wait in are named, each with the Python frame its thread is
 *     in (the attach's look at a blocked thread, else its CPU samples) and
 *     its state (the kernel view's causes), then the others' common wait.
 *   - The "waiting for" table: each collective (c10d's gloo:* / nccl:*
 *     regions, else its c10d:: ops) matched across the ranks, each rank's
 *     arrival, and per step the last rank to arrive, how long the others
 *     waited for it, and what its thread did meanwhile (the GPU idle
 *     table's causes, report_causes.c).
 */
#ifndef PTBPF_REPORT_RANKS_H
#define PTBPF_REPORT_RANKS_H

#include <stdio.h>

#include "report/report_data.h"

/* The hooks (struct report's rview). */
extern const struct rd_rank_view rk_rank_view;

/* The hang summary, if the trace is a hang capture. */
void rk_hang_text(const struct report *r);
/* `, "hang": {...}` (nothing if not a hang capture). */
void rk_hang_json(FILE *o, const struct report *r);
/* The "waiting for" table, if collectives of several ranks are in it
 * (text: at most top rows, then each late rank's totals). */
void rk_waiting_text(const struct report *r, int top);
/* `, "waiting_for": {...}` (nothing if none). */
void rk_waiting_json(FILE *o, const struct report *r);

#endif /* PTBPF_REPORT_RANKS_H */
