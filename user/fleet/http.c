// SPDX-License-Identifier: BSD-2-Clause
/*
 * The daemon's HTTP port: connections, their limits and deadlines, the
 * checks before a handler runs, one-line refusals and the counts of
 * everything. See http.h. libevent's evhttp (2.1, Debian 12's) was the
 * first server here, but it answers malformed and oversized requests with
 * its own HTML pages that no callback sees, has no cap on connections nor
 * a deadline for a whole request: ~20,000 idle connections exhausted the
 * daemon's descriptors, and 60 unfinished 10 MB headers took 420 MB. This
 * one is small because it serves two paths, HTTP/1.1 without keep-alive.
 */
#define _GNU_SOURCE
#include "fleet/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <openssl/ssl.h>

#include "fleet/web_config.h"

#define LINGER_S 2          /* unread input after a reply: read and dropped this long, */
#define LINGER_BYTES (1 << 20) /* or this much */
#define ACCEPT_PAUSE_MS 250 /* the listener rests after an accept error (EMFILE) */
#define TRIM_AFTER (256 << 10) /* input held by connections since the last trim */
#define MAX_ROUTES 4

struct log_limit http_refusals = LOG_LIMIT_INIT("daemon: ", "refused or timed out");
static struct log_limit port_errors = LOG_LIMIT_INIT("daemon: ", "such errors");

enum conn_state { C_HEAD, C_BODY, C_REPLY, C_LINGER };
enum outcome { O_SERVED, O_TOO_MANY, O_TOO_MANY_HERE, O_TIMED_OUT, O_CLOSED, O_TLS, NOUTCOMES };
static const char *const outcome_names[NOUTCOMES] = {
	"served", "refused_too_many", "refused_too_many_from_address", "timed_out",
	"closed_before_a_request", "tls_failed",
};
static const struct {
	int code;
	const char *reason;
} codes[] = {
	{ 200, "OK" }, { 202, "Accepted" }, { 400, "Bad Request" }, { 401, "Unauthorized" },
	{ 403, "Forbidden" }, { 404, "Not Found" }, { 405, "Method Not Allowed" },
	{ 413, "Content Too Large" }, { 414, "URI Too Long" },
	{ 417, "Expectation Failed" }, { 429, "Too Many Requests" },
	{ 431, "Request Header Fields Too Large" }, { 500, "Internal Server Error" },
	{ 501, "Not Implemented" }, { 503, "Service Unavailable" },
	{ 505, "HTTP Version Not Supported" },
};
#define NCODES (sizeof(codes) / sizeof(codes[0]))

struct conn {
	struct http_server *h;
	struct conn *prev, *next;
	struct bufferevent *bev;
	struct event *deadline;
	enum conn_state state;
	int slot;              /* its address's row in h->addrs */
	char peer[INET6_ADDRSTRLEN];
	char user[64];         /* the web config's user it authenticated as */
	bool loopback, unread;
	size_t searched, held; /* head bytes searched for its end; most input held */
	size_t dropped;        /* input read and dropped after the reply */
	struct http_head head;
	int route;             /* index into h->routes, or -1 */
};

struct http_server {
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *resume, *tick;
	pthread_t thread;
	bool running, loopback_only, insecure_capture;
	const struct http_route *routes;
	int nroutes;
	struct web_config *wc;
	struct conn *conns;
	int open, max_conns, max_per_address;
	struct { /* open connections by client address */
		unsigned char addr[16];
		int len, n;
	} addrs[HTTP_MAX_CONNS];
	uint64_t answers[MAX_ROUTES + 1][NCODES]; /* by route ("other" last) and code */
	uint64_t outcomes[NOUTCOMES], accept_errors;
	size_t held;
};

static int code_index(int code)
{
	for (size_t i = 0; i < NCODES; i++)
		if (codes[i].code == code)
			return (int)i;
	return code == 500 ? 0 : code_index(500); /* a code this table lacks: this port's fault */
}

static void addr_of(const struct sockaddr *sa, unsigned char *out, int *len, bool *loopback)
{
	if (sa->sa_family == AF_INET) {
		const struct in_addr *a = &((const struct sockaddr_in *)sa)->sin_addr;

		memcpy(out, a, 4);
		*len = 4;
		*loopback = out[0] == 127;
		return;
	}
	const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

	memcpy(out, a6, 16);
	*len = 16;
	*loopback = IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && out[12] == 127);
}

/* The row of addr in h->addrs (a free one if it has none): -1 if full. */
static int addr_slot(struct http_server *h, const unsigned char *addr, int len)
{
	int free_row = -1;

	for (int i = 0; i < HTTP_MAX_CONNS; i++) {
		if (h->addrs[i].n && h->addrs[i].len == len && !memcmp(h->addrs[i].addr, addr, len))
			return i;
		if (!h->addrs[i].n && free_row < 0)
			free_row = i;
	}
	if (free_row >= 0) {
		memcpy(h->addrs[free_row].addr, addr, len);
		h->addrs[free_row].len = len;
	}
	return free_row;
}

/* Over a cap: a 503 line, sent as is (the request is not read), and the
 * socket closed. */
static void refuse_connection(struct http_server *h, evutil_socket_t fd, const char *peer,
			      enum outcome o, const char *why)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
			 "text/plain; charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n"
			 "Retry-After: %d\r\n\r\n%s\n", strlen(why) + 1, HTTP_REQUEST_S, why);

	if (!web_config_tls(h->wc)) /* a TLS client reads nothing before its handshake */
		send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	evutil_closesocket(fd);
	h->outcomes[o]++;
	log_limited(&http_refusals, "503", "refused a connection from %s: 503 %s", peer, why);
}

static void conn_close(struct conn *c, enum outcome o)
{
	struct http_server *h = c->h;

	h->outcomes[o]++;
	h->addrs[c->slot].n--;
	h->open--;
	h->held += c->held;
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	bufferevent_free(c->bev);
	event_free(c->deadline);
	free(c);
	/* Bodies and heads a burst of clients sent were malloc'd on this
	 * thread's arena: once they are all gone, give their pages back. */
	if (!h->open && h->held > TRIM_AFTER) {
		malloc_trim(0);
		h->held = 0;
	}
}

static void arm(struct conn *c, int seconds)
{
	struct timeval tv = { seconds, 0 };

	evtimer_add(c->deadline, &tv);
}

/* The answer: status line, headers, the body (an evbuffer, else text)
 * unless HEAD; then the connection ends (on_write). */
static void reply(struct conn *c, int code, const char *type, const char *headers,
		  struct evbuffer *body, const char *text)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	int ci = code_index(code);

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\n%s\r\n", codes[ci].code, codes[ci].reason,
			    type ? type : "text/plain; charset=utf-8",
			    body ? evbuffer_get_length(body) : strlen(text), headers ? headers : "");
	if (c->head.method_bit != HTTP_HEAD && body)
		evbuffer_add_buffer(out, body);
	else if (c->head.method_bit != HTTP_HEAD)
		evbuffer_add(out, text, strlen(text));
	c->h->answers[c->route < 0 ? c->h->nroutes : c->route][ci]++;
	if (c->state == C_HEAD || (c->state == C_BODY && c->head.length))
		c->unread = true; /* its body (or more) was never read */
	c->state = C_REPLY;
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	arm(c, HTTP_REPLY_S);
}

/* A refusal: one line, counted, and said (at most once a minute). */
static void refuse(struct conn *c, int code, const char *headers, const char *fmt, ...)
{
	char line[320], kind[8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	snprintf(kind, sizeof(kind), "%d", code);
	log_limited(&http_refusals, kind, "refused %s %s from %s: %d %s",
		    c->head.method[0] ? c->head.method : "a request", c->head.path, c->peer, code,
		    line);
	strcat(line, "\n");
	reply(c, code, NULL, headers, NULL, line);
}

void http_refuse(struct http_reply *rep, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rep->refusal, sizeof(rep->refusal), fmt, ap);
	va_end(ap);
	rep->code = code;
}

/* The request is whole: its handler answers. */
static void serve(struct conn *c)
{
	const struct http_route *r = &c->h->routes[c->route];
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct http_reply rep = { .code = 200, .body = evbuffer_new() };
	char *body;

	body = rep.body ? malloc(c->head.length + 1) : NULL;
	if (!body) {
		if (rep.body)
			evbuffer_free(rep.body);
		refuse(c, 500, NULL, "out of memory");
		return;
	}
	evbuffer_remove(in, body, c->head.length);
	body[c->head.length] = 0;
	c->state = C_REPLY; /* all of it read */
	r->fn(r->ctx, &(struct http_req){ .server = c->h, .head = &c->head, .body = body,
					  .body_len = c->head.length, .peer = c->peer,
					  .user = c->user[0] ? c->user : NULL }, &rep);
	free(body);
	if (rep.refusal[0])
		refuse(c, rep.code, NULL, "%s", rep.refusal);
	else
		reply(c, rep.code, rep.type, NULL, rep.body, NULL);
	evbuffer_free(rep.body);
}

/* Who may ask: the users of the web config (all paths), and, without
 * users, a trigger only from loopback unless --insecure-capture. */
static bool authorized(struct conn *c, const struct http_route *r)
{
	if (web_config_has_users(c->h->wc)) {
		switch (web_config_check(c->h->wc, c->head.authorization, c->user, sizeof(c->user))) {
		case WEB_AUTH_OK:
			return true;
		case WEB_AUTH_BUSY:
			refuse(c, 429, "Retry-After: 1\r\n", "too many new credentials to check "
			       "(bcrypt) this second; try again");
			return false;
		default:
			refuse(c, 401, "WWW-Authenticate: Basic realm=\"ptbpf\"\r\n",
			       "%s needs a user of the daemon's web config (basic auth)", r->path);
			return false;
		}
	}
	if (r->trigger && !c->loopback && !c->h->insecure_capture) {
		refuse(c, 403, NULL, "%s takes triggers from loopback clients only: the daemon has no "
		       "basic_auth_users (--web-config) and no --insecure-capture", r->path);
		return false;
	}
	return true;
}

/* The head is read: route, method, who asks, the body's length. */
static void admit(struct conn *c)
{
	const struct http_route *r = NULL;

	for (int i = 0; i < c->h->nroutes && !r; i++)
		if (!strcmp(c->head.path, c->h->routes[i].path))
			r = &c->h->routes[c->route = i];
	if (!r) {
		refuse(c, 404, NULL, "ptbpf serves GET /metrics and POST /capture");
		return;
	}
	if (!(c->head.method_bit & r->methods)) {
		refuse(c, 405, r->methods & HTTP_POST ? "Allow: POST\r\n" : "Allow: GET, HEAD\r\n",
		       "only %s %s is served", r->methods & HTTP_POST ? "POST" : "GET", r->path);
		return;
	}
	if (!authorized(c, r))
		return;
	if (!(r->methods & HTTP_POST)) {
		c->head.length = 0; /* a GET's body is not read */
		serve(c);
		return;
	}
	/* Neither Content-Length nor Transfer-Encoding: no body (RFC 9112). */
	if (c->head.chunked)
		refuse(c, 501, NULL, "a chunked body is not read: send it with Content-Length");
	else if (c->head.length > HTTP_MAX_BODY)
		refuse(c, 413, NULL, "the body is over %d bytes", HTTP_MAX_BODY);
	if (c->state != C_HEAD)
		return;
	if (c->head.expect_continue)
		evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
	c->state = C_BODY;
	bufferevent_setwatermark(c->bev, EV_READ, c->head.length, HTTP_MAX_BODY + 1);
	if (evbuffer_get_length(bufferevent_get_input(c->bev)) >= c->head.length)
		serve(c);
}

/* Looks for the head's end in what came so far. */
static void read_head(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t len = evbuffer_get_length(in);
	struct evbuffer_ptr from, end;
	char why[320];
	int rc;

	evbuffer_ptr_set(in, &from, c->searched, EVBUFFER_PTR_SET);
	end = evbuffer_search(in, "\r\n\r\n", 4, &from);
	if (end.pos < 0) {
		c->searched = len > 3 ? len - 3 : 0;
		if (len > HTTP_MAX_HEAD)
			refuse(c, 431, NULL, "the request head is over %d bytes", HTTP_MAX_HEAD);
		return;
	}
	len = (size_t)end.pos + 4;
	rc = http_parse_head((const char *)evbuffer_pullup(in, (ssize_t)len), len, &c->head, why,
			     sizeof(why));
	evbuffer_drain(in, len);
	if (rc)
		refuse(c, rc, NULL, "%s", why);
	else
		admit(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (evbuffer_get_length(in) > c->held)
		c->held = evbuffer_get_length(in);
	if (c->state == C_HEAD)
		read_head(c);
	else if (c->state == C_BODY && evbuffer_get_length(in) >= c->head.length)
		serve(c);
	else if (c->state >= C_REPLY && (c->dropped += evbuffer_get_length(in)) > LINGER_BYTES)
		conn_close(c, O_SERVED); /* a client that sends on and on gets a reset */
	else if (c->state >= C_REPLY)
		evbuffer_drain(in, evbuffer_get_length(in));
}

/* The reply is out: the connection ends, after a while of reading what
 * the client still sends (closed with it unread, the kernel would reset
 * the connection, and the client might lose the reply). */
static void on_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->state != C_REPLY)
		return;
	if (!c->unread && !evbuffer_get_length(bufferevent_get_input(bev))) {
		conn_close(c, O_SERVED);
		return;
	}
	c->state = C_LINGER;
	evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
	arm(c, LINGER_S);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	if (c->state >= C_REPLY)
		conn_close(c, O_SERVED);
	else if (web_config_tls(c->h->wc) && bufferevent_get_openssl_error(bev))
		conn_close(c, O_TLS);
	else
		conn_close(c, O_CLOSED);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->state < C_REPLY)
		log_limited(&http_refusals, "timeout", "closed a connection from %s: no whole "
			    "request within %d s", c->peer, HTTP_REQUEST_S);
	conn_close(c, c->state == C_LINGER ? O_SERVED : O_TIMED_OUT);
}

/* A new connection, within the caps: its bufferevent (TLS, if so
 * configured), its deadline. */
static void conn_open(struct http_server *h, evutil_socket_t fd, int slot, const char *peer,
		      bool loopback)
{
	struct conn *c = calloc(1, sizeof(*c));
	SSL *ssl = NULL;

	if (c && web_config_tls(h->wc) && !(ssl = SSL_new(web_config_tls(h->wc))))
		c->bev = NULL;
	else if (c && ssl)
		c->bev = bufferevent_openssl_socket_new(h->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
							BEV_OPT_CLOSE_ON_FREE);
	else if (c)
		c->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c && c->bev)
		c->deadline = evtimer_new(h->base, on_deadline, c);
	if (!c || !c->bev || !c->deadline) {
		if (c && c->bev)
			bufferevent_free(c->bev);
		else
			evutil_closesocket(fd);
		free(c);
		h->outcomes[O_CLOSED]++;
		log_limited(&port_errors, "ENOMEM", "cannot take a connection: out of memory");
		return;
	}
	if (ssl) /* a client that closes without TLS's close_notify has still said all */
		bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	c->h = h;
	c->slot = slot;
	c->route = -1;
	c->loopback = loopback;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	h->addrs[slot].n++;
	h->open++;
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0, HTTP_MAX_HEAD + 1);
	bufferevent_enable(c->bev, EV_READ);
	arm(c, HTTP_REQUEST_S);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		      void *arg)
{
	struct http_server *h = arg;
	unsigned char addr[16];
	char peer[INET6_ADDRSTRLEN] = "?", why[160];
	bool loopback;
	int len, slot;

	addr_of(sa, addr, &len, &loopback);
	inet_ntop(sa->sa_family, addr, peer, sizeof(peer));
	if (h->open >= h->max_conns) {
		snprintf(why, sizeof(why), "the daemon has %d connections open, its most",
			 h->max_conns);
		refuse_connection(h, fd, peer, O_TOO_MANY, why);
		return;
	}
	slot = addr_slot(h, addr, len);
	if (slot < 0 || h->addrs[slot].n >= h->max_per_address) {
		snprintf(why, sizeof(why), "%s has %d connections open, the most one address has",
			 peer, h->max_per_address);
		refuse_connection(h, fd, peer, O_TOO_MANY_HERE, why);
		return;
	}
	conn_open(h, fd, slot, peer, loopback);
}

/* accept(2) failed (out of descriptors: EMFILE, ENFILE; or memory): the
 * listener rests a moment instead of spinning on the pending connection,
 * and that is said at most once a minute. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
	struct http_server *h = arg;
	int e = EVUTIL_SOCKET_ERROR();
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };

	h->accept_errors++;
	log_limited(&port_errors, strerrorname_np(e) ?: "accept", "the metrics port cannot accept "
		    "a connection: %s; it pauses %d ms", strerror(e), ACCEPT_PAUSE_MS);
	evconnlistener_disable(l);
	evtimer_add(h->resume, &tv);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct http_server *h = arg;

	evconnlistener_enable(h->listener);
}

/* Every few seconds: what went unsaid for a minute is said. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	log_limited_flush(&http_refusals, false);
	log_limited_flush(&port_errors, false);
}

/* libevent's own warnings (it writes them to stderr by default, once per
 * failed accept: 2.7 million lines in 10 s under a flood). */
static void on_libevent_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_limited(&port_errors, "libevent", "libevent: %s", msg);
}

static void *run(void *arg)
{
	struct http_server *h = arg;

	event_base_dispatch(h->base);
	return NULL;
}

/* Binds ADDR:PORT ("[v6]:PORT" too): 0, or -1 with one line in err. */
static int bind_listener(struct http_server *h, const char *listen, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	const char *colon = strrchr(listen, ':');
	char host[256];
	size_t n = colon ? (size_t)(colon - listen) : 0;
	unsigned char addr[16];
	int len, rc;

	if (n && listen[0] == '[' && listen[n - 1] == ']')
		listen++, n -= 2;
	if (!colon || !n || n >= sizeof(host) || !colon[1] || strspn(colon + 1, "0123456789") !=
	    strlen(colon + 1)) {
		snprintf(err, errlen, "--metrics-listen '%s': give ADDR:PORT, e.g. 127.0.0.1:9464",
			 listen);
		return -1;
	}
	memcpy(host, listen, n);
	host[n] = 0;
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (!rc)
		h->listener = evconnlistener_new_bind(h->base, on_accept, h, LEV_OPT_CLOSE_ON_FREE |
						      LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 128,
						      ai->ai_addr, (int)ai->ai_addrlen);
	if (!h->listener)
		snprintf(err, errlen, "--metrics-listen %s:%s: cannot listen there: %s", host,
			 colon + 1, rc ? gai_strerror(rc) : strerror(errno));
	else
		addr_of(ai->ai_addr, addr, &len, &h->loopback_only);
	if (ai)
		freeaddrinfo(ai);
	return h->listener ? 0 : -1;
}

struct http_server *http_start(const char *listen, const struct http_route *routes, int n,
			       struct web_config *wc, bool insecure_capture, char *err,
			       size_t errlen)
{
	struct http_server *h = calloc(1, sizeof(*h));
	struct timeval tick = { 5, 0 };
	struct rlimit nofile;

	if (!h || n > MAX_ROUTES) {
		snprintf(err, errlen, "metrics: out of memory");
		free(h);
		return NULL;
	}
	/* The port takes a quarter of the descriptors at most: windows need
	 * the rest (BPF objects, links, the targets' files). */
	h->max_conns = getrlimit(RLIMIT_NOFILE, &nofile) || nofile.rlim_cur / 4 > HTTP_MAX_CONNS ?
		       HTTP_MAX_CONNS : (int)(nofile.rlim_cur / 4) ?: 1;
	h->max_per_address = h->max_conns / 4 ?: 1;
	h->routes = routes;
	h->nroutes = n;
	h->wc = wc;
	h->insecure_capture = insecure_capture;
	event_set_log_callback(on_libevent_log);
	evthread_use_pthreads(); /* so that http_stop can break the loop */
	h->base = event_base_new();
	if (!h->base || bind_listener(h, listen, err, errlen)) {
		http_stop(h);
		return NULL;
	}
	evconnlistener_set_error_cb(h->listener, on_accept_error);
	h->resume = evtimer_new(h->base, on_resume, h);
	h->tick = event_new(h->base, -1, EV_PERSIST, on_tick, NULL);
	if (!h->resume || !h->tick || event_add(h->tick, &tick) ||
	    pthread_create(&h->thread, NULL, run, h)) {
		snprintf(err, errlen, "metrics: cannot start its thread");
		http_stop(h);
		return NULL;
	}
	h->running = true;
	return h;
}

void http_stop(struct http_server *h)
{
	if (!h)
		return;
	if (h->running) {
		event_base_loopbreak(h->base);
		pthread_join(h->thread, NULL);
	}
	while (h->conns)
		conn_close(h->conns, O_CLOSED);
	if (h->listener)
		evconnlistener_free(h->listener);
	if (h->resume)
		event_free(h->resume);
	if (h->tick)
		event_free(h->tick);
	if (h->base)
		event_base_free(h->base);
	log_limited_flush(&http_refusals, true);
	log_limited_flush(&port_errors, true);
	free(h);
}

bool http_loopback_only(const struct http_server *h)
{
	return h->loopback_only;
}

void http_render(const struct http_server *h, struct evbuffer *b)
{
	evbuffer_add_printf(b, "# HELP ptbpf_http_requests_total Answers of the daemon's port, by "
			    "path and status code.\n# TYPE ptbpf_http_requests_total counter\n");
	for (int r = 0; r <= h->nroutes; r++)
		for (size_t k = 0; k < NCODES; k++)
			if (h->answers[r][k])
				evbuffer_add_printf(b, "ptbpf_http_requests_total{path=\"%s\","
						    "code=\"%d\"} %lu\n", r < h->nroutes ?
						    h->routes[r].path : "other", codes[k].code,
						    (unsigned long)h->answers[r][k]);
	evbuffer_add_printf(b, "# HELP ptbpf_http_connections_total Connections to the daemon's "
			    "port, by what became of them.\n"
			    "# TYPE ptbpf_http_connections_total counter\n");
	for (int o = 0; o < NOUTCOMES; o++)
		evbuffer_add_printf(b, "ptbpf_http_connections_total{outcome=\"%s\"} %lu\n",
				    outcome_names[o], (unsigned long)h->outcomes[o]);
	evbuffer_add_printf(b, "# HELP ptbpf_http_connections_open Connections open now.\n"
			    "# TYPE ptbpf_http_connections_open gauge\n"
			    "ptbpf_http_connections_open %d\n"
			    "# HELP ptbpf_http_accept_errors_total accept(2) failures (out of "
			    "descriptors or memory).\n# TYPE ptbpf_http_accept_errors_total counter\n"
			    "ptbpf_http_accept_errors_total %lu\n", h->open,
			    (unsigned long)h->accept_errors);
}
