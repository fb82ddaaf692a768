/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a trigger asks for (user/fleet/capture.c queues it, select.c finds
 * the processes it names): where it came from, why, and which processes,
 * as a job/rank filter.
 */
#ifndef PTBPF_TRIGGER_H
#define PTBPF_TRIGGER_H

#define CAPTURE_MAX_SEL 8

/* Where a trigger came from (the `source` label). */
enum capture_source {
	CAPTURE_HTTP,         /* POST /capture with a reason */
	CAPTURE_ALERTMANAGER, /* POST /capture with Alertmanager's webhook payload */
	CAPTURE_SIGNAL,       /* SIGUSR1 */
	CAPTURE_FILE,         /* the capture-now file */
	CAPTURE_SLOW_STEP,    /* the always-on layer saw a slow step (--slow-step) */
	CAPTURE_NSOURCES,
};

/* A job (TORCHELASTIC_RUN_ID, SLURM_JOB_ID or MASTER_ADDR:MASTER_PORT)
 * and a rank (RANK); an empty one matches any. */
struct capture_sel {
	char job[128];
	char rank[32];
};

struct capture_req {
	enum capture_source source;
	char reason[256];
	struct capture_sel sel[CAPTURE_MAX_SEL];
	int nsel; /* 0: every process (that --match-env selects) */
	int step_pid; /* a slow step's process (whose steps --steps counts), or 0 */
};

const char *capture_source_name(enum capture_source s);

#endif /* PTBPF_TRIGGER_H */
