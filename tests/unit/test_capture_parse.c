/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of what a POST /capture asks for (user/fleet/capture_parse.c):
 * direct requests in the query string and in JSON, Alertmanager's webhook
 * payload (firing and resolved alerts, several jobs, an alert without
 * run_id/rank, more jobs than a window selects), and bad bodies.
 */
#include "fleet/capture.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static int parse(const char *query, const char *body, struct capture_req *r, char *err)
{
	return capture_parse(query, body, strlen(body), r, err, 256);
}

static void direct(void)
{
	struct capture_req r;
	char err[256];

	CHECK(parse("reason=slow+allreduce&job=j1&rank=3", "", &r, err) == 0, "query", 0);
	CHECK(r.source == CAPTURE_HTTP && !strcmp(r.reason, "slow allreduce"), "query reason", 0);
	CHECK(r.nsel == 1 && !strcmp(r.sel[0].job, "j1") && !strcmp(r.sel[0].rank, "3"),
	      "query filter", r.nsel);
	CHECK(parse(NULL, " {\"reason\": \"a\\nb\", \"rank\": \"0\"}\n", &r, err) == 0, "json", 0);
	CHECK(!strcmp(r.reason, "a b") && r.nsel == 1 && !r.sel[0].job[0], "json fields", 0);
	CHECK(parse(NULL, "", &r, err) == 0 && r.nsel == 0 && !strcmp(r.reason, "POST /capture"),
	      "empty: every process", r.nsel);
	CHECK(parse("when=now", "", &r, err) < 0 && strstr(err, "unknown parameter 'when'"),
	      "unknown parameter", 0);
	CHECK(parse(NULL, "{\"rank\": 3}", &r, err) < 0, "a number for rank", 0);
	CHECK(parse(NULL, "{} {}", &r, err) < 0 && strstr(err, "goes on after its JSON value"),
	      "two values", 0);
	CHECK(parse(NULL, "[1]", &r, err) < 0 && strstr(err, "is a JSON array, not an object"),
	      "array", 0);
	CHECK(parse(NULL, "{\"reason\":", &r, err) < 0 && strstr(err, "is not JSON"), "cut", 0);
	/* JSON that ends only at the input's end: named, not "continue". */
	CHECK(parse(NULL, "null", &r, err) < 0 && strstr(err, "the body is JSON null, not an "
							 "object"), err, 0);
	CHECK(parse(NULL, "123", &r, err) < 0 && strstr(err, "the body is a JSON number, not an "
							"object"), err, 0);
	/* A value no process can have. */
	CHECK(parse("rank=abc", "", &r, err) < 0 && strstr(err, "rank 'abc' is not a rank"), err, 0);
	CHECK(parse("rank=-1", "", &r, err) < 0 && strstr(err, "rank '-1' is not a rank"), err, 0);
	CHECK(parse(NULL, "{\"rank\": \"1e3\"}", &r, err) < 0, "rank 1e3", 0);
}

static void alertmanager(void)
{
	struct capture_req r;
	char err[256], body[8192];
	int n = 0;

	CHECK(parse(NULL, "{\"version\":\"4\",\"status\":\"firing\",\"alerts\":["
		    "{\"status\":\"firing\",\"labels\":{\"alertname\":\"PtbpfSlowStep\","
		    "\"run_id\":\"j1\",\"job\":\"ptbpf\"},\"annotations\":{\"summary\":\"slow\"}},"
		    "{\"status\":\"resolved\",\"labels\":{\"run_id\":\"j9\"}},"
		    "{\"status\":\"firing\",\"labels\":{\"alertname\":\"X\",\"run_id\":\"j2\","
		    "\"rank\":\"1\"}},"
		    "{\"status\":\"firing\",\"labels\":{\"alertname\":\"X\",\"run_id\":\"j1\"}}]}",
		    &r, err) == 0, "payload", 0);
	CHECK(r.source == CAPTURE_ALERTMANAGER, "source", r.source);
	CHECK(!strcmp(r.reason, "PtbpfSlowStep: slow (+2 more)"), "reason", 0);
	CHECK(r.nsel == 2 && !strcmp(r.sel[0].job, "j1") && !r.sel[0].rank[0] &&
	      !strcmp(r.sel[1].job, "j2") && !strcmp(r.sel[1].rank, "1"), "filters", r.nsel);
	CHECK(parse(NULL, "{\"alerts\":[{\"status\":\"resolved\",\"labels\":{}}]}", &r, err) == 1,
	      "resolved only: nothing", 0);
	CHECK(parse(NULL, "{\"alerts\":[{\"status\":\"firing\",\"labels\":{\"run_id\":\"j1\"}},"
		    "{\"status\":\"firing\",\"labels\":{\"alertname\":\"Y\"}}]}", &r, err) == 0 &&
	      r.nsel == 0, "an alert without a filter: every process", r.nsel);
	n = snprintf(body, sizeof(body), "{\"alerts\":[");
	for (int i = 0; i < CAPTURE_MAX_SEL + 1; i++)
		n += snprintf(body + n, sizeof(body) - n, "%s{\"labels\":{\"run_id\":\"j%d\"}}",
			      i ? "," : "", i);
	snprintf(body + n, sizeof(body) - n, "]}");
	CHECK(parse(NULL, body, &r, err) == 0 && r.nsel == 0, "too many jobs: every process",
	      r.nsel);
	CHECK(parse(NULL, "{\"alerts\":{}}", &r, err) < 0 && strstr(err, "not an array"),
	      "alerts not an array", 0);
	CHECK(parse(NULL, "{\"alerts\":[{\"status\":\"firing\"}]}", &r, err) < 0 &&
	      strstr(err, "alerts[0]"), "alert without labels", 0);
	CHECK(parse(NULL, "{\"alerts\":[{\"labels\":{\"run_id\":1}}]}", &r, err) < 0,
	      "a number for run_id", 0);
	CHECK(parse(NULL, "{\"alerts\":[{\"labels\":{\"rank\":\"x1\"}}]}", &r, err) < 0 &&
	      strstr(err, "rank 'x1' is not a rank"), "an alert's rank x1", 0);
}

int main(void)
{
	direct();
	alertmanager();
	return check_summary("test_capture_parse");
}
