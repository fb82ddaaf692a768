/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the daemon port's request heads (user/fleet/http_parse.c):
 * what is read (method, path, query, Content-Length, Expect, Authorization)
 * and the status each head it cannot take gets, with its one line.
 */
#include "fleet/http.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static int parse(const char *head, struct http_head *h, char *why)
{
	return http_parse_head(head, strlen(head), h, why, 320);
}

static void read_whole(void)
{
	struct http_head h;
	char why[320];

	CHECK(parse("POST /capture?job=j1&rank=3 HTTP/1.1\r\nHost: x\r\ncontent-length:  12 \r\n"
		    "Expect: 100-continue\r\nAuthorization: Basic YTpi\r\n\r\n", &h, why) == 0, why, 0);
	CHECK(h.method_bit == HTTP_POST && !strcmp(h.path, "/capture") &&
	      !strcmp(h.query, "job=j1&rank=3"), h.path, 0);
	CHECK(h.has_length && h.length == 12 && h.expect_continue && !h.chunked, "length", h.length);
	CHECK(!strcmp(h.authorization, "Basic YTpi"), h.authorization, 0);
	CHECK(parse("HEAD /metrics HTTP/1.0\r\n\r\n", &h, why) == 0 && h.method_bit == HTTP_HEAD &&
	      !h.query[0], why, 0);
	CHECK(parse("DELETE /metrics HTTP/1.1\r\n\r\n", &h, why) == 0 && h.method_bit == HTTP_OTHER,
	      "a method HTTP has: served or 405 by the port", 0);
}

static void refused(void)
{
	static const struct {
		const char *head;
		int code;
		const char *why;
	} cases[] = {
		{ "GARBAGE\r\n\r\n", 400, "not METHOD TARGET" },
		{ "BREW /metrics HTTP/1.1\r\n\r\n", 501, "BREW is not one HTTP has" },
		{ "get /metrics HTTP/1.1\r\n\r\n", 400, "capitals" },
		{ "GET /metrics HTTP/2.0\r\n\r\n", 505, "HTTP/1.0 or HTTP/1.1" },
		{ "GET metrics HTTP/1.1\r\n\r\n", 400, "not a path" },
		{ "GET /metrics HTTP/1.1\n\n", 400, "CRLF" },
		{ "GET /metrics HTTP/1.1\r\n folded\r\n\r\n", 400, "folded" },
		{ "GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n", 400, "Name: value" },
		{ "POST /capture HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400, "not a number" },
		{ "POST /capture HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
		  "differ" },
		{ "POST /capture HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n", 413,
		  "over 1 MiB" },
		{ "POST /capture HTTP/1.1\r\nExpect: something\r\n\r\n", 417, "100-continue" },
		{ "GET /metrics HTTP/1.1\r\nHost: x\r\n", 400, "blank line" },
	};
	struct http_head h;
	char why[320], big[HTTP_MAX_HEAD + 64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(parse(cases[i].head, &h, why) == cases[i].code && strstr(why, cases[i].why),
		      why, i);
	snprintf(big, sizeof(big), "GET /%0*d HTTP/1.1\r\n\r\n", HTTP_MAX_TARGET, 0);
	CHECK(parse(big, &h, why) == 414, why, 0);
	snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: %0*d\r\n\r\n", HTTP_MAX_HEAD, 0);
	CHECK(parse(big, &h, why) == 431, why, 0);
	int n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
		n += snprintf(big + n, sizeof(big) - n, "X%d: y\r\n", i);
	snprintf(big + n, sizeof(big) - n, "\r\n");
	CHECK(parse(big, &h, why) == 431 && strstr(why, "header lines"), why, 0);
}

int main(void)
{
	read_whole();
	refused();
	return check_summary("test_http_parse");
}
