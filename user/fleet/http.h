/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The daemon's HTTP port (user/fleet/http.c; heads read by http_parse.c):
 * GET /metrics and POST /capture, on libevent's bufferevents (OpenSSL
 * ones for TLS), on its own thread. It holds against any client: a cap on
 * connections, in all and per address (over it: 503, counted); a whole
 * request within 10 s of the connection's start, a reply taken within
 * 10 s; the head at most 8 KiB, the URL 2 KiB, a body 1 MiB; TLS and basic
 * auth from a web config (web_config.c). Every answer is counted by path
 * and status, every refusal is one line and said on stderr at most once
 * a minute, with the count of those not said.
 *
 *   accept --cap--> read the head --parse, route, auth--> read the body
 *        \--> 503           \--> 4xx/5xx one line         \--> handler
 *                                            reply, close (Connection: close)
 */
#ifndef PTBPF_HTTP_H
#define PTBPF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/log.h"

#define HTTP_MAX_CONNS 64        /* open connections, in all (at most a quarter of
				  * RLIMIT_NOFILE); a quarter of that per client address */
#define HTTP_REQUEST_S 10        /* a whole request (TLS handshake included) within */
#define HTTP_REPLY_S 10          /* the reply taken within */
#define HTTP_MAX_HEAD 8192       /* request line and headers */
#define HTTP_MAX_HEADERS 64
#define HTTP_MAX_TARGET 2048     /* the URL */
#define HTTP_MAX_BODY (1 << 20)

enum http_method { HTTP_GET = 1, HTTP_HEAD = 2, HTTP_POST = 4, HTTP_OTHER = 8 };

/* A request head (http_parse_head). */
struct http_head {
	char method[16];
	unsigned method_bit;       /* enum http_method; HTTP_OTHER: known, never served */
	char path[HTTP_MAX_TARGET];
	char query[HTTP_MAX_TARGET];
	bool has_length, chunked, expect_continue;
	uint64_t length;
	char authorization[1024];
};

/* Parses a request head (n bytes, up to and with its blank line): 0 with
 * h filled, or the status that refuses it (400, 413, 414, 417, 431, 501,
 * 505) with one line in why. */
int http_parse_head(const char *head, size_t n, struct http_head *h, char *why, size_t whylen);

struct evbuffer;

struct http_server;

/* A whole request, as a handler gets it. */
struct http_req {
	const struct http_server *server;
	const struct http_head *head;
	const char *body;       /* NUL-terminated */
	size_t body_len;
	const char *peer;       /* the client's address */
	const char *user;       /* the basic-auth user, or NULL (no users configured) */
};

/* Its answer: the handler sets code (200 unless set) and writes the body
 * (text/plain unless type is set); a refusal through http_refuse. */
struct http_reply {
	int code;
	const char *type;
	struct evbuffer *body;
	char refusal[320];      /* the one line of a refusal ("" for none) */
};

/* A refusal: code, one line (the body, and what stderr says of it). */
void http_refuse(struct http_reply *rep, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

typedef void (*http_handler)(void *ctx, const struct http_req *req, struct http_reply *rep);

struct http_route {
	const char *path;      /* "/metrics" */
	unsigned methods;      /* HTTP_GET | HTTP_HEAD, or HTTP_POST (a body read) */
	bool trigger;          /* it makes the daemon act: without users (web config),
				* only loopback clients, unless --insecure-capture */
	http_handler fn;
	void *ctx;
};

struct web_config;

/* Listens on ADDR:PORT (its own thread) serving routes (kept by the
 * caller); wc: TLS and users, or NULL. NULL with one line in err. */
struct http_server *http_start(const char *listen, const struct http_route *routes, int n,
			       struct web_config *wc, bool insecure_capture, char *err,
			       size_t errlen);
void http_stop(struct http_server *h);
/* Whether it listens on a loopback address only. */
bool http_loopback_only(const struct http_server *h);
/* Its counters, in Prometheus' text format (from a handler: its thread). */
void http_render(const struct http_server *h, struct evbuffer *b);

/* The daemon's refusals (the port's, and a trigger's it refuses itself),
 * said at most once a minute. */
extern struct log_limit http_refusals;

#endif /* PTBPF_HTTP_H */
