// SPDX-License-Identifier: BSD-2-Clause
/*
 * An HTTP/1.x request head, read whole (the request line and its header
 * lines, up to and with the blank line), as strictly as the daemon's port
 * needs: what it uses is read, anything it cannot read is refused with the
 * status that says why. No allocation: the head is at most HTTP_MAX_HEAD
 * bytes (http.c stops reading there). See http.h.
 */
#define _GNU_SOURCE
#include "fleet/http.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *name;
	unsigned bit;
} methods[] = {
	{ "GET", HTTP_GET }, { "HEAD", HTTP_HEAD }, { "POST", HTTP_POST },
	{ "PUT", HTTP_OTHER }, { "DELETE", HTTP_OTHER }, { "OPTIONS", HTTP_OTHER },
	{ "PATCH", HTTP_OTHER }, { "TRACE", HTTP_OTHER }, { "CONNECT", HTTP_OTHER },
};

static int refuse(char *why, size_t len, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return code;
}

/* The request line: METHOD SP TARGET SP HTTP/1.x. */
static int request_line(const char *s, size_t n, struct http_head *h, char *why, size_t wl)
{
	const char *sp1 = memchr(s, ' ', n), *sp2;
	size_t mlen, tlen;

	if (!sp1 || !(sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s))))
		return refuse(why, wl, 400, "the request line is not METHOD TARGET HTTP/1.1");
	mlen = (size_t)(sp1 - s);
	tlen = (size_t)(sp2 - sp1 - 1);
	if (!mlen || mlen >= sizeof(h->method))
		return refuse(why, wl, 501, "no such method");
	for (size_t i = 0; i < mlen; i++)
		if (!isupper((unsigned char)s[i]))
			return refuse(why, wl, 400, "the method is not a word in capitals");
	memcpy(h->method, s, mlen);
	h->method[mlen] = 0;
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(h->method, methods[i].name))
			h->method_bit = methods[i].bit;
	if (!h->method_bit)
		return refuse(why, wl, 501, "method %s is not one HTTP has", h->method);
	if (tlen >= HTTP_MAX_TARGET)
		return refuse(why, wl, 414, "the URL is over %d bytes", HTTP_MAX_TARGET - 1);
	if (!tlen || sp1[1] != '/')
		return refuse(why, wl, 400, "the URL is not a path (/metrics, /capture?...)");
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)sp1[1 + i] <= ' ' || sp1[1 + i] == 0x7f)
			return refuse(why, wl, 400, "the URL has a control character or a space");
	memcpy(h->path, sp1 + 1, tlen);
	h->path[tlen] = 0;
	char *q = strchr(h->path, '?');

	if (q) {
		snprintf(h->query, sizeof(h->query), "%s", q + 1);
		*q = 0;
	}
	n -= (size_t)(sp2 + 1 - s);
	if (n != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1'))
		return refuse(why, wl, n == 8 && !memcmp(sp2 + 1, "HTTP/", 5) ? 505 : 400,
			      "the version is not HTTP/1.0 or HTTP/1.1");
	return 0;
}

/* One header line "Name: value"; the ones the port uses are kept. */
static int header(const char *s, size_t n, struct http_head *h, char *why, size_t wl)
{
	const char *colon = memchr(s, ':', n), *v;
	size_t name, vlen;

	if (*s == ' ' || *s == '\t')
		return refuse(why, wl, 400, "a header line is folded onto the one before");
	if (!colon || colon == s)
		return refuse(why, wl, 400, "a header line is not Name: value");
	name = (size_t)(colon - s);
	for (size_t i = 0; i < name; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return refuse(why, wl, 400, "a header name has a space or a control character");
	for (v = colon + 1; v < s + n && (*v == ' ' || *v == '\t'); v++)
		;
	for (vlen = (size_t)(s + n - v); vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'); vlen--)
		;
#define IS(hname) (name == strlen(hname) && !strncasecmp(s, hname, name))
	if (IS("Content-Length")) {
		uint64_t len = 0;

		if (!vlen || vlen > 15)
			return refuse(why, wl, vlen > 15 ? 413 : 400, "Content-Length is %s",
				      vlen ? "over 1 MiB" : "empty");
		for (size_t i = 0; i < vlen; i++) {
			if (!isdigit((unsigned char)v[i]))
				return refuse(why, wl, 400, "Content-Length is not a number");
			len = len * 10 + (uint64_t)(v[i] - '0');
		}
		if (h->has_length && h->length != len)
			return refuse(why, wl, 400, "two Content-Length headers that differ");
		h->has_length = true;
		h->length = len;
	} else if (IS("Transfer-Encoding")) {
		h->chunked = true;
	} else if (IS("Expect")) {
		if (vlen != 12 || strncasecmp(v, "100-continue", 12))
			return refuse(why, wl, 417, "only Expect: 100-continue is met");
		h->expect_continue = true;
	} else if (IS("Authorization")) {
		if (vlen >= sizeof(h->authorization))
			return refuse(why, wl, 431, "the Authorization header is over %zu bytes",
				      sizeof(h->authorization) - 1);
		memcpy(h->authorization, v, vlen);
		h->authorization[vlen] = 0;
	}
#undef IS
	return 0;
}

int http_parse_head(const char *s, size_t n, struct http_head *h, char *why, size_t wl)
{
	int nheaders = 0, rc;

	memset(h, 0, sizeof(*h));
	why[0] = 0;
	if (n > HTTP_MAX_HEAD)
		return refuse(why, wl, 431, "the request head is over %d bytes", HTTP_MAX_HEAD);
	while (n) {
		const char *eol = memchr(s, '\n', n);
		size_t len;

		if (!eol || eol == s || eol[-1] != '\r' || memchr(s, 0, (size_t)(eol - s)))
			return refuse(why, wl, 400, "a line of the request head does not end in CRLF");
		len = (size_t)(eol - s) - 1;
		if (!len) /* the blank line */
			return h->method_bit ? 0 : refuse(why, wl, 400, "no request line");
		if (!h->method_bit)
			rc = request_line(s, len, h, why, wl);
		else if (++nheaders > HTTP_MAX_HEADERS)
			rc = refuse(why, wl, 431, "over %d header lines", HTTP_MAX_HEADERS);
		else
			rc = header(s, len, h, why, wl);
		if (rc)
			return rc;
		n -= len + 2;
		s = eol + 1;
	}
	return refuse(why, wl, 400, "the request head does not end with a blank line");
}
