/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a trigger asks for (user/fleet/capture.c queues it, select.c finds
 * the processes it names): where it came from, why, and which processes,
 * as a job/rank filter.
 */
#ifndef PTBPF_TRIGGER_H
#define PTBPF_TRIGGER_H

#include <stdbool.h>
#include <stdint.h>

#define CAPTURE_MAX_SEL 8
#define CAPTURE_HANG_RANKS 64
#define CAPTURE_COLL_NAME 32

/* Where a trigger came from (the `source` label). */
enum capture_source {
	CAPTURE_HTTP,         /* POST /capture with a reason */
	CAPTURE_ALERTMANAGER, /* POST /capture with Alertmanager's webhook payload */
	CAPTURE_SIGNAL,       /* SIGUSR1 */
	CAPTURE_FILE,         /* the capture-now file */
	CAPTURE_SLOW_STEP,    /* the always-on layer saw a slow step (--slow-step) */
	CAPTURE_HANG,         /* ... a hang: a step or collective past --hang's limit */
	CAPTURE_NSOURCES,
};

/* A job (TORCHELASTIC_RUN_ID, SLURM_JOB_ID or MASTER_ADDR:MASTER_PORT)
 * and a rank (RANK); an empty one matches any. */
struct capture_sel {
	char job[128];
	char rank[32];
};

/* What the always-on layer knew of one process of a hung job when it
 * asked for the capture (step_signal.c): its step signal's counters,
 * CLOCK_MONOTONIC ns. A process that exited is kept with what it showed
 * last. */
struct capture_hang_rank {
	int pid;
	char rank[16], comm[16];
	bool gone;              /* it exited (gone_ts: when the daemon saw it gone) */
	uint64_t gone_ts;
	uint64_t steps, step_start, median_ns; /* step_start: the step under way's, or 0 */
	uint64_t coll_entered, coll_left, coll_left_seq;
	uint64_t coll_enter_ts, coll_left_ts, coll_open_ts;
	char coll_name[CAPTURE_COLL_NAME], coll_left_name[CAPTURE_COLL_NAME];
};

/* A hang capture's ranks (every process of the job on this host), and
 * the one whose wait passed the limit. */
struct capture_hang {
	uint64_t ts;       /* when the limit was passed */
	int pid;           /* whose wait passed it */
	uint64_t limit_ns; /* the limit: max(K x its median step, the floor) */
	int n;
	struct capture_hang_rank r[CAPTURE_HANG_RANKS];
};

struct capture_req {
	enum capture_source source;
	char reason[256];
	struct capture_sel sel[CAPTURE_MAX_SEL];
	int nsel; /* 0: every process (that --match-env selects) */
	int step_pid; /* a slow step's process (whose steps --steps counts), or 0 */
	const struct capture_hang *hang; /* a hang's (the daemon's, until the next), or NULL */
};

const char *capture_source_name(enum capture_source s);

#endif /* PTBPF_TRIGGER_H */
