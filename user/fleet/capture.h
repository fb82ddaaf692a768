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

#include "fleet/trigger.h"

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
struct evbuffer;
struct http_req;
struct http_reply;
struct options;

/* The queue, with opt's --min-gap and --match-env (opt kept). */
struct capture *capture_new(const struct options *opt);
void capture_free(struct capture *c);
/* Serves POST /capture (http.h's handler, on its thread; ctx: the
 * capture): 202, 200 (no firing alert), or refused: 400 (the request
 * cannot mean a process), 404 (no running process matches), 429
 * (--min-gap). */
void capture_http(void *ctx, const struct http_req *req, struct http_reply *rep);
/* Offers a trigger from the daemon itself (a slow step), counted as
 * POST /capture's are: 0 (a window starts, or it joined the pending one),
 * or -EBUSY (refused: --min-gap). */
int capture_offer(struct capture *c, const struct capture_req *r);
/* The pending trigger, taken (the daemon's loop); false if none. */
bool capture_take(struct capture *c, struct capture_req *out);
/* A window starts now, triggered by r (NULL: on schedule, which the
 * minimum gap leaves out); the gap counts from a triggered one's start. */
void capture_window_started(struct capture *c, const struct capture_req *r);
/* It ended; traced: it traced a process (else it is no window: not
 * counted, and the gap runs from the triggered window before it). */
void capture_window_ended(struct capture *c, const struct capture_req *r, bool traced);
/* The trigger counters, in Prometheus' text format. */
void capture_render(struct capture *c, struct evbuffer *b);

#endif /* PTBPF_CAPTURE_H */
