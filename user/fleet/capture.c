// SPDX-License-Identifier: BSD-2-Clause
/*
 * POST /capture on the daemon's HTTP server, and the one-deep queue that
 * hands a trigger to the daemon's loop. A trigger that arrives while one
 * is pending joins it (their filters merged); one that arrives less than
 * --min-gap after the last triggered window started is refused with 429
 * and counted, since an alert storm must not become a window storm (each
 * window costs the job full tracing). Scheduled windows do not count: a
 * trigger that comes as one starts is the one that names the problem, and
 * it must not be lost to the clock. Replies are plain text, one line;
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
#include <event2/http.h>

#include "lib/log.h"

enum outcome { OUT_ACCEPTED, OUT_MERGED, OUT_RATE_LIMITED, OUT_BAD, OUT_NOTHING, NOUTCOMES };
static const char *const outcome_names[NOUTCOMES] = { "accepted", "merged", "rate_limited",
						       "bad_request", "nothing_firing" };

struct capture {
	pthread_mutex_t lock;
	uint64_t min_gap_s;
	bool pending;
	struct capture_req req;
	uint64_t last_window_s; /* the last triggered one's start, REALTIME s; 0: none */
	uint64_t counts[CAPTURE_NSOURCES][NOUTCOMES];
	uint64_t windows[CAPTURE_NSOURCES];
	uint64_t refused_quiet; /* refusals not logged since the last line */
	uint64_t last_log_s;
	struct capture_req last; /* the last triggered window's */
	uint64_t last_at;
};

static uint64_t realtime_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

struct capture *capture_new(uint64_t min_gap_s)
{
	struct capture *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->min_gap_s = min_gap_s;
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
		return OUT_MERGED;
	}
	*ago = now - c->last_window_s;
	if (c->last_window_s && now - c->last_window_s < c->min_gap_s)
		return OUT_RATE_LIMITED;
	c->req = *r;
	c->pending = true;
	return OUT_ACCEPTED;
}

/* A refusal is said on stderr at most once a minute, with the count. */
static void log_refused(struct capture *c, const struct capture_req *r, uint64_t ago)
{
	uint64_t now = realtime_s();

	c->refused_quiet++;
	if (c->last_log_s && now - c->last_log_s < 60)
		return;
	log_msg("daemon: trigger '%s' (%s) refused: the last triggered window started %lus ago, "
		"--min-gap is %lus; %lu refused since the last such line, this one included\n",
		r->reason, capture_source_name(r->source),
		(unsigned long)ago, (unsigned long)c->min_gap_s, (unsigned long)c->refused_quiet);
	c->refused_quiet = 0;
	c->last_log_s = now;
}

static void reply(struct evhttp_request *req, int code, const char *why, const char *line)
{
	struct evbuffer *b = evbuffer_new();

	if (!b) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	evbuffer_add_printf(b, "%s\n", line);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; charset=utf-8");
	evhttp_send_reply(req, code, why, b);
	evbuffer_free(b);
}

/* The request's body, NUL-terminated (freed by the caller). */
static char *body_of(struct evhttp_request *req, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	char *body;

	*len = evbuffer_get_length(in);
	body = malloc(*len + 1);
	if (!body)
		return NULL;
	evbuffer_copyout(in, body, *len);
	body[*len] = 0;
	return body;
}

void capture_http(struct capture *c, struct evhttp_request *req)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct capture_req r;
	char err[256], line[512];
	enum outcome out;
	uint64_t ago = 0;
	size_t len;
	char *body;
	int rc;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		reply(req, 405, "Method Not Allowed", "POST /capture asks for a window");
		return;
	}
	body = body_of(req, &len);
	if (!body) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	rc = capture_parse(query, body, len, &r, err, sizeof(err));
	free(body);
	pthread_mutex_lock(&c->lock);
	out = rc < 0 ? OUT_BAD : rc > 0 ? OUT_NOTHING : offer(c, &r, &ago);
	c->counts[rc < 0 ? CAPTURE_HTTP : r.source][out]++;
	if (out == OUT_RATE_LIMITED)
		log_refused(c, &r, ago);
	pthread_mutex_unlock(&c->lock);
	switch (out) {
	case OUT_BAD:
		snprintf(line, sizeof(line), "bad request: %s", err);
		reply(req, HTTP_BADREQUEST, "Bad Request", line);
		return;
	case OUT_NOTHING:
		reply(req, HTTP_OK, "OK", "no firing alert: nothing to capture");
		return;
	case OUT_RATE_LIMITED:
		snprintf(line, sizeof(line), "refused: the last triggered window started %lus ago, "
			 "--min-gap is %lus", (unsigned long)ago, (unsigned long)c->min_gap_s);
		reply(req, 429, "Too Many Requests", line);
		return;
	default:
		snprintf(line, sizeof(line), "%s: a window starts shortly (%s)",
			 out == OUT_MERGED ? "joined the pending trigger" : "accepted", r.reason);
		reply(req, 202, "Accepted", line);
	}
}

int capture_offer(struct capture *c, const struct capture_req *r)
{
	enum outcome out;
	uint64_t ago = 0;

	pthread_mutex_lock(&c->lock);
	out = offer(c, r, &ago);
	c->counts[r->source][out]++;
	if (out == OUT_RATE_LIMITED)
		log_refused(c, r, ago);
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
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	if (r) {
		c->last_window_s = realtime_s();
		c->windows[r->source]++;
		c->last = *r;
		c->last_at = c->last_window_s;
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
