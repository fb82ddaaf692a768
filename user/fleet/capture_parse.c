// SPDX-License-Identifier: BSD-2-Clause
/*
 * What a POST /capture asks for: a direct request (a reason and an
 * optional job/rank filter, in the query string or a JSON object) or
 * Prometheus Alertmanager's webhook payload as Alertmanager sends it
 * (version 4: {"status", "alerts": [{"status", "labels", "annotations"},
 * ...], ...}). An alert selects by the labels ptbpf's own metrics carry,
 * run_id and rank (Prometheus' `job` label is its scrape job, not the
 * training job); a rule that aggregates by run_id alone therefore opens
 * windows on every rank of that job. JSON is read with json-c.
 */
#define _GNU_SOURCE
#include "fleet/capture.h"

#include <stdio.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

const char *capture_source_name(enum capture_source s)
{
	static const char *const names[CAPTURE_NSOURCES] = { "http", "alertmanager", "signal",
							     "file", "slow_step", "hang" };

	return s < CAPTURE_NSOURCES ? names[s] : "?";
}

/* Copies s into a field, control characters as spaces: reasons end up
 * in log lines, trace attributes and metric labels. */
static void copy_text(char *dst, size_t size, const char *s)
{
	size_t i;

	for (i = 0; s && s[i] && i + 1 < size; i++)
		dst[i] = (unsigned char)s[i] < 0x20 ? ' ' : s[i];
	dst[i] = 0;
}

/* The string value of key in object o, or NULL (absent); *bad set when
 * it is there but not a string. */
static const char *str_of(struct json_object *o, const char *key, bool *bad)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
		return NULL;
	if (!json_object_is_type(v, json_type_string)) {
		*bad = true;
		return NULL;
	}
	return json_object_get_string(v);
}

/* Adds a job/rank pair to r's filter: 0, or -1 with one line in err (a
 * value no process can have: a trigger that could never match is no
 * trigger). */
static int add_sel(struct capture_req *r, const char *job, const char *rank, bool *all, char *err,
		   size_t errlen)
{
	struct capture_sel s = { 0 };

	if (rank && *rank && (strspn(rank, "0123456789") != strlen(rank) || strlen(rank) > 9)) {
		snprintf(err, errlen, "rank '%.32s' is not a rank (0, 1, 2, ...)", rank);
		return -1;
	}
	if (job && strlen(job) >= sizeof(s.job)) {
		snprintf(err, errlen, "job '%.32s...' is over %zu bytes: no job is named so", job,
			 sizeof(s.job) - 1);
		return -1;
	}
	if ((!job || !*job) && (!rank || !*rank)) {
		*all = true; /* one alert without a filter: every process */
		return 0;
	}
	copy_text(s.job, sizeof(s.job), job);
	copy_text(s.rank, sizeof(s.rank), rank);
	for (int i = 0; i < r->nsel; i++)
		if (!strcmp(r->sel[i].job, s.job) && !strcmp(r->sel[i].rank, s.rank))
			return 0;
	if (r->nsel == CAPTURE_MAX_SEL) {
		*all = true; /* more jobs than a window selects: all of them */
		return 0;
	}
	r->sel[r->nsel++] = s;
	return 0;
}

/* Alertmanager's payload: every firing alert adds its run_id/rank. */
static int parse_alerts(struct json_object *alerts, struct capture_req *r, char *err,
			size_t errlen)
{
	size_t n = json_object_array_length(alerts);
	int firing = 0;
	bool all = false, bad = false;

	r->source = CAPTURE_ALERTMANAGER;
	for (size_t i = 0; i < n; i++) {
		struct json_object *a = json_object_array_get_idx(alerts, i), *labels, *ann;
		const char *status, *name, *summary = NULL, *job, *rank;

		if (!json_object_is_type(a, json_type_object) ||
		    !json_object_object_get_ex(a, "labels", &labels) ||
		    !json_object_is_type(labels, json_type_object)) {
			snprintf(err, errlen, "alerts[%zu] is not an alert with labels", i);
			return -1;
		}
		status = str_of(a, "status", &bad);
		if (status && strcmp(status, "firing"))
			continue; /* resolved: nothing to capture */
		name = str_of(labels, "alertname", &bad);
		if (json_object_object_get_ex(a, "annotations", &ann) &&
		    json_object_is_type(ann, json_type_object))
			summary = str_of(ann, "summary", &bad);
		if (!firing++) {
			char reason[512];

			snprintf(reason, sizeof(reason), "%s%s%s", name ? name : "alert",
				 summary ? ": " : "", summary ? summary : "");
			copy_text(r->reason, sizeof(r->reason), reason);
		}
		job = str_of(labels, "run_id", &bad);
		rank = str_of(labels, "rank", &bad);
		if (bad) {
			snprintf(err, errlen, "alerts[%zu]: labels and annotations are strings", i);
			return -1;
		}
		if (add_sel(r, job, rank, &all, err, errlen))
			return -1;
	}
	if (all)
		r->nsel = 0;
	if (firing > 1) {
		size_t len = strlen(r->reason);

		snprintf(r->reason + len, sizeof(r->reason) - len, " (+%d more)", firing - 1);
	}
	return firing ? 0 : 1;
}

/* What a JSON value is, for a refusal that names it. */
static const char *json_kind(struct json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_null:
		return "JSON null";
	case json_type_boolean:
		return "a JSON boolean";
	case json_type_double:
	case json_type_int:
		return "a JSON number";
	case json_type_string:
		return "a JSON string";
	case json_type_array:
		return "a JSON array";
	default:
		return "a JSON object";
	}
}

/* The body as one JSON value, or NULL with one line in err. */
static struct json_object *json_value(const char *body, size_t len, char *err, size_t errlen)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;
	enum json_tokener_error e;
	size_t end;

	if (!tok)
		return snprintf(err, errlen, "out of memory"), NULL;
	o = json_tokener_parse_ex(tok, body, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (e == json_tokener_continue) { /* a number or a word ends only at the input's end */
		o = json_tokener_parse_ex(tok, "", 1);
		e = json_tokener_get_error(tok);
		end = len;
	}
	if (e != json_tokener_success)
		snprintf(err, errlen, "the body is not JSON: %s at byte %zu",
			 e == json_tokener_continue ? "it ends inside a value" :
			 json_tokener_error_desc(e), end);
	else if (end < len && strspn(body + end, " \t\r\n") < len - end)
		snprintf(err, errlen, "the body goes on after its JSON value");
	else if (!o || !json_object_is_type(o, json_type_object))
		snprintf(err, errlen, "the body is %s, not an object ({\"reason\", \"job\", "
			 "\"rank\"}, or Alertmanager's payload)", o ? json_kind(o) : "JSON null");
	else
		err[0] = 0;
	json_tokener_free(tok);
	if (err[0]) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static int parse_json(const char *body, size_t len, struct capture_req *r, char *err,
		      size_t errlen)
{
	struct json_object *o = json_value(body, len, err, errlen), *alerts;
	const char *reason, *job, *rank;
	bool bad = false, all = false;
	int rc = 0;

	if (!o)
		return -1;
	if (json_object_object_get_ex(o, "alerts", &alerts)) {
		if (json_object_is_type(alerts, json_type_array))
			rc = parse_alerts(alerts, r, err, errlen);
		else
			rc = -1, snprintf(err, errlen, "\"alerts\" is not an array");
	} else {
		reason = str_of(o, "reason", &bad);
		job = str_of(o, "job", &bad);
		rank = str_of(o, "rank", &bad);
		if (bad) {
			snprintf(err, errlen, "reason, job and rank are strings");
			rc = -1;
		} else {
			if (reason)
				copy_text(r->reason, sizeof(r->reason), reason);
			rc = add_sel(r, job, rank, &all, err, errlen);
		}
	}
	json_object_put(o);
	return rc;
}

static int parse_query(const char *query, struct capture_req *r, char *err, size_t errlen)
{
	struct evkeyvalq q = { 0 };
	struct evkeyval *kv;
	const char *job = NULL, *rank = NULL;
	bool all = false;
	int rc = 0;

	if (evhttp_parse_query_str(query, &q)) {
		snprintf(err, errlen, "the query string cannot be read");
		return -1;
	}
	TAILQ_FOREACH(kv, &q, next) {
		if (!strcmp(kv->key, "reason"))
			copy_text(r->reason, sizeof(r->reason), kv->value);
		else if (!strcmp(kv->key, "job"))
			job = kv->value;
		else if (!strcmp(kv->key, "rank"))
			rank = kv->value;
		else if (!rc)
			rc = -1, snprintf(err, errlen, "unknown parameter '%.64s' (reason, job, rank)",
					  kv->key);
	}
	if (!rc)
		rc = add_sel(r, job, rank, &all, err, errlen);
	evhttp_clear_headers(&q);
	return rc;
}

int capture_parse(const char *query, const char *body, size_t len, struct capture_req *r,
		  char *err, size_t errlen)
{
	size_t skip = 0;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->source = CAPTURE_HTTP;
	if (query && *query && parse_query(query, r, err, errlen))
		return -1;
	while (skip < len && strchr(" \t\r\n", body[skip]))
		skip++;
	if (skip < len)
		rc = parse_json(body + skip, len - skip, r, err, errlen);
	if (!rc && !r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "POST /capture");
	return rc;
}
