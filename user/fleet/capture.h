/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Triggered windows (user/fleet/capture.c, capture_parse.c): what asked
 * for a window and why, which processes it is for, and the queue between
 * the HTTP thread (POST /capture) and the daemon's loop, with the
 * minimum gap that keeps a trigger storm from turning into a window
 * storm.
 */
#ifndef PTBPF_CAPTURE_H
#define PTBPF_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* A POST /capture request: its query string (NULL if none) and body.
 * Either a direct request (query `reason=..&job=..&rank=..`, or a JSON
 * object with those keys) or Alertmanager's webhook payload (an object
 * with "alerts": each firing alert's labels run_id and rank select, its
 * alertname and summary give the reason). 0 with r filled; 1 when an
 * Alertmanager payload has no firing alert (nothing to do); -1 with one
 * line in err. */
int capture_parse(const char *query, const char *body, size_t len, struct capture_req *r,
		  char *err, size_t errlen);

struct capture;
struct evhttp_request;
struct evbuffer;

struct capture *capture_new(uint64_t min_gap_s);
void capture_free(struct capture *c);
/* Serves POST /capture (the metrics thread). */
void capture_http(struct capture *c, struct evhttp_request *req);
/* Offers a trigger from the daemon itself (a slow step), counted as
 * POST /capture's are: 0 (a window starts, or it joined the pending one),
 * or -EBUSY (refused: --min-gap). */
int capture_offer(struct capture *c, const struct capture_req *r);
/* The pending trigger, taken (the daemon's loop); false if none. */
bool capture_take(struct capture *c, struct capture_req *out);
/* A window starts now, triggered by r (NULL: on schedule, which the
 * minimum gap leaves out); the gap counts from a triggered one's start. */
void capture_window_started(struct capture *c, const struct capture_req *r);
/* The trigger counters, in Prometheus' text format. */
void capture_render(struct capture *c, struct evbuffer *b);

#endif /* PTBPF_CAPTURE_H */
