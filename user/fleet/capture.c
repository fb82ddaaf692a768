// SPDX-License-Identifier: BSD-2-Clause
/*
 * POST /capture on the daemon's HTTP server, and the one-deep queue that
 * hands a trigger to the daemon's loop. A trigger that arrives while one
 * is pending joins it (their filters merged); one that arrives less than
 * --min-gap after the last triggered window started is refused with 429
 * and counted, since an alert storm must not become a window storm (each
 * window costs the job full tracing). Scheduled windows do not count: a
 * trigger that comes as one starts is the one that names the problem, and
 * it must not be lost to the clock. A trigger that selects no running
 * process is refused at once (404), and a window that traced nothing does
 * not count, nor use up the gap. Replies are plain text, one line;
 * Alertmanager retries only 5xx, so a refused trigger is not resent.
 */
#define _GNU_SOURCE
#include "fleet/capture.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "cli.h"
#include "fleet/http.h"
#include "fleet/select.h"
#include "lib/clock.h"
#include "lib/log.h"

#define MAX_PROCS 256
#define PROCS_FRESH_NS 1000000000ull /* the running processes, looked at again after */

enum outcome { OUT_ACCEPTED, OUT_MERGED, OUT_RATE_LIMITED, OUT_BAD, OUT_NOTHING, OUT_NO_MATCH,
	       NOUTCOMES };
static const char *const outcome_names[NOUTCOMES] = { "accepted", "merged", "rate_limited",
						       "bad_request", "nothing_firing",
						       "no_match" };

struct capture {
	pthread_mutex_t lock;
	const struct options *opt;
	uint64_t min_gap_s;
	bool pending;
	struct capture_req req;
	uint64_t last_window_s; /* the last triggered one's start, REALTIME s; 0: none */
	uint64_t gap_before;    /* last_window_s before the window under way started */
	uint64_t counts[CAPTURE_NSOURCES][NOUTCOMES];
	uint64_t windows[CAPTURE_NSOURCES];
	struct capture_req last; /* the last triggered window's */
	uint64_t last_at;
	/* The running processes a trigger may select (the HTTP thread's) */
	struct select_proc procs[MAX_PROCS];
	int nprocs;
	uint64_t procs_at;      /* CLOCK_MONOTONIC ns, 0: never */
};

static uint64_t realtime_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

struct capture *capture_new(const struct options *opt)
{
	struct capture *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->opt = opt;
	c->min_gap_s = opt->min_gap_s;
	return c;
}

void capture_free(struct capture *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Merges r's filter into the pending one: any request for every
 * process makes the window one for every process. */
static void merge_sel(struct capture_req *into, const struct capture_req *r)
{
	if (!into->nsel)
		return;
	if (!r->nsel) {
		into->nsel = 0;
		return;
	}
	for (int i = 0; i < r->nsel; i++) {
		int k;

		for (k = 0; k < into->nsel; k++)
			if (!memcmp(&into->sel[k], &r->sel[i], sizeof(r->sel[i])))
				break;
		if (k < into->nsel)
			continue;
		if (into->nsel == CAPTURE_MAX_SEL) {
			into->nsel = 0;
			return;
		}
		into->sel[into->nsel++] = r->sel[i];
	}
}

/* Queues r, or refuses it (the gap); with c->lock held. */
static enum outcome offer(struct capture *c, const struct capture_req *r, uint64_t *ago)
{
	uint64_t now = realtime_s();

	if (c->pending) {
		merge_sel(&c->req, r);
		if (!c->req.hang)
			c->req.hang = r->hang;
		return OUT_MERGED;
	}
	*ago = now - c->last_window_s;
	if (c->last_window_s && now - c->last_window_s < c->min_gap_s)
		return OUT_RATE_LIMITED;
	c->req = *r;
	c->pending = true;
	return OUT_ACCEPTED;
}

/* Refused by --min-gap: counted, and said (at most once a minute). */
static void say_rate_limited(struct capture *c, const struct capture_req *r, uint64_t ago,
			     char *line, size_t len)
{
	snprintf(line, len, "refused: the last triggered window started %lus ago, --min-gap is "
		 "%lus", (unsigned long)ago, (unsigned long)c->min_gap_s);
	if (r->source != CAPTURE_HTTP && r->source != CAPTURE_ALERTMANAGER) /* not said by http.c */
		log_limited(&http_refusals, "429", "trigger '%s' (%s) %s", r->reason,
			    capture_source_name(r->source), line);
}

/* Whether a running process matches r's filter (the processes looked at
 * once a second at most: a storm of triggers does not become a storm of
 * /proc reads). On the HTTP thread. */
static bool matches_a_process(struct capture *c, const struct capture_req *r)
{
	uint64_t now = clock_mono_ns();

	if (!c->procs_at || now - c->procs_at >= PROCS_FRESH_NS) {
		c->nprocs = select_scan(c->opt, c->procs, MAX_PROCS);
		c->procs_at = now;
	}
	for (int i = 0; i < c->nprocs; i++)
		if (select_matches(&c->procs[i], r))
			return true;
	return false;
}

/* What r selects, for a refusal that names it ("job=j1 rank=3 or job=j2"). */
static void describe_sel(const struct capture_req *r, char *b, size_t len)
{
	size_t o = 0;

	b[0] = 0;
	for (int i = 0; i < r->nsel && o < len; i++)
		o += (size_t)snprintf(b + o, len - o, "%s%s%s%s%s%s", i ? " or " : "",
				      r->sel[i].job[0] ? "job=" : "", r->sel[i].job,
				      r->sel[i].job[0] && r->sel[i].rank[0] ? " " : "",
				      r->sel[i].rank[0] ? "rank=" : "", r->sel[i].rank);
}

void capture_http(void *ctx, const struct http_req *req, struct http_reply *rep)
{
	struct capture *c = ctx;
	struct capture_req r;
	char err[256], line[512];
	enum outcome out;
	uint64_t ago = 0;
	int rc;

	rc = capture_parse(req->head->query[0] ? req->head->query : NULL, req->body, req->body_len,
			   &r, err, sizeof(err));
	if (!rc && !matches_a_process(c, &r))
		rc = 2;
	pthread_mutex_lock(&c->lock);
	out = rc < 0 ? OUT_BAD : rc == 1 ? OUT_NOTHING : rc == 2 ? OUT_NO_MATCH :
	      offer(c, &r, &ago);
	c->counts[rc < 0 ? CAPTURE_HTTP : r.source][out]++;
	if (out == OUT_RATE_LIMITED)
		say_rate_limited(c, &r, ago, line, sizeof(line));
	pthread_mutex_unlock(&c->lock);
	switch (out) {
	case OUT_BAD:
		http_refuse(rep, 400, "bad request: %s", err);
		return;
	case OUT_NOTHING:
		evbuffer_add_printf(rep->body, "no firing alert: nothing to capture\n");
		return;
	case OUT_NO_MATCH:
		describe_sel(&r, err, sizeof(err));
		http_refuse(rep, 404, "no running PyTorch process%s%s%s: nothing to capture "
			    "(--min-gap untouched)", err[0] ? " has " : "", err,
			    !c->opt->nmatch_env ? "" : err[0] ? " among those --match-env selects" :
			    " that --match-env selects");
		return;
	case OUT_RATE_LIMITED:
		http_refuse(rep, 429, "%s", line);
		return;
	default:
		rep->code = 202;
		evbuffer_add_printf(rep->body, "%s: a window starts shortly (%s)\n",
				    out == OUT_MERGED ? "joined the pending trigger" : "accepted",
				    r.reason);
	}
}

int capture_offer(struct capture *c, const struct capture_req *r)
{
	enum outcome out;
	uint64_t ago = 0;

	char line[256];

	pthread_mutex_lock(&c->lock);
	out = offer(c, r, &ago);
	c->counts[r->source][out]++;
	if (out == OUT_RATE_LIMITED)
		say_rate_limited(c, r, ago, line, sizeof(line));
	pthread_mutex_unlock(&c->lock);
	return out == OUT_RATE_LIMITED ? -EBUSY : 0;
}

bool capture_take(struct capture *c, struct capture_req *out)
{
	bool got;

	if (!c)
		return false;
	pthread_mutex_lock(&c->lock);
	got = c->pending;
	if (got)
		*out = c->req;
	c->pending = false;
	pthread_mutex_unlock(&c->lock);
	return got;
}

void capture_window_started(struct capture *c, const struct capture_req *r)
{
	if (!c || !r)
		return;
	pthread_mutex_lock(&c->lock);
	c->gap_before = c->last_window_s;
	c->last_window_s = realtime_s();
	pthread_mutex_unlock(&c->lock);
}

void capture_window_ended(struct capture *c, const struct capture_req *r, bool traced)
{
	if (!c || !r)
		return;
	pthread_mutex_lock(&c->lock);
	if (traced) {
		c->windows[r->source]++;
		c->last = *r;
		c->last_at = c->last_window_s;
	} else { /* no window: the gap runs from the one before */
		c->last_window_s = c->gap_before;
	}
	pthread_mutex_unlock(&c->lock);
}

static void esc(struct evbuffer *b, const char *s)
{
	for (; *s; s++)
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else
			evbuffer_add(b, s, 1);
}

void capture_render(struct capture *c, struct evbuffer *b)
{
	pthread_mutex_lock(&c->lock);
	evbuffer_add_printf(b, "# HELP ptbpf_triggers_total Capture triggers by source and what "
			    "became of them.\n# TYPE ptbpf_triggers_total counter\n");
	for (int s = 0; s < CAPTURE_NSOURCES; s++)
		for (int o = 0; o < NOUTCOMES; o++)
			evbuffer_add_printf(b, "ptbpf_triggers_total{source=\"%s\",outcome=\"%s\"} "
					    "%lu\n", capture_source_name(s), outcome_names[o],
					    (unsigned long)c->counts[s][o]);
	evbuffer_add_printf(b, "# HELP ptbpf_triggered_windows_total Windows a trigger opened.\n"
			    "# TYPE ptbpf_triggered_windows_total counter\n");
	for (int s = 0; s < CAPTURE_NSOURCES; s++)
		evbuffer_add_printf(b, "ptbpf_triggered_windows_total{source=\"%s\"} %lu\n",
				    capture_source_name(s), (unsigned long)c->windows[s]);
	if (c->last_at) {
		evbuffer_add_printf(b, "# HELP ptbpf_last_trigger_timestamp_seconds When the last "
				    "triggered window started, and why.\n"
				    "# TYPE ptbpf_last_trigger_timestamp_seconds gauge\n"
				    "ptbpf_last_trigger_timestamp_seconds{source=\"%s\",reason=\"",
				    capture_source_name(c->last.source));
		esc(b, c->last.reason);
		evbuffer_add_printf(b, "\"} %lu\n", (unsigned long)c->last_at);
	}
	pthread_mutex_unlock(&c->lock);
}
