// SPDX-License-Identifier: BSD-2-Clause
/* ptbpf's messages. See log.h. */
#include "lib/clock.h"
#include "lib/log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HELD_MAX (1 << 20) /* past this, held lines go out as they come */

static bool verbose;

/* This thread's held lines (log_hold): another thread's lines (the
 * daemon's HTTP thread) go out as they come. */
static __thread struct {
	bool on;
	char *buf;
	size_t len, cap;
} held;

/* Appends to the held lines; false if they cannot take it. */
static bool hold_append(const char *prefix, const char *fmt, va_list ap)
{
	va_list again;
	size_t need;
	int n;

	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, again);
	va_end(again);
	need = held.len + (prefix ? strlen(prefix) : 0) + (n > 0 ? n : 0) + 1;
	if (n < 0 || need > HELD_MAX)
		return false;
	if (need > held.cap) {
		char *b = realloc(held.buf, need * 2 < HELD_MAX ? need * 2 : HELD_MAX);

		if (!b)
			return false;
		held.buf = b;
		held.cap = need * 2 < HELD_MAX ? need * 2 : HELD_MAX;
	}
	if (prefix)
		held.len += sprintf(held.buf + held.len, "%s", prefix);
	held.len += vsprintf(held.buf + held.len, fmt, ap);
	return true;
}

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	if (held.on && hold_append(prefix, fmt, ap))
		return;
	if (held.on) /* full: what was held goes first, in order */
		log_release(false), held.on = true;
	if (prefix)
		fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
}

void log_hold(void)
{
	held.on = true;
	held.len = 0;
}

void log_release(bool drop)
{
	if (!drop && held.len)
		fwrite(held.buf, 1, held.len, stderr);
	held.on = false;
	held.len = 0;
}

#define LOG_WITH(prefix)                  \
	do {                              \
		va_list ap;               \
		va_start(ap, fmt);        \
		vlog(prefix, fmt, ap);    \
		va_end(ap);               \
	} while (0)

void log_msg(const char *fmt, ...) { LOG_WITH("ptbpf: "); }
void log_warn(const char *fmt, ...) { LOG_WITH("ptbpf: warning: "); }
void log_more(const char *fmt, ...) { LOG_WITH(NULL); }

void log_debug(const char *fmt, ...)
{
	if (verbose)
		LOG_WITH("ptbpf: ");
}

void log_set_verbose(bool v)
{
	verbose = v;
}

bool log_verbose(void)
{
	return verbose;
}

#define LIMIT_S 60

static uint64_t mono_s(void)
{
	return clock_mono_ns() / 1000000000ull + 1; /* never 0: 0 is "never said" */
}

/* "N more <what> since the last such line (kind: n, ...)" into b; with
 * l->lock held. */
static void tally(const struct log_limit *l, char *b, size_t len)
{
	size_t o = (size_t)snprintf(b, len, "%lu more %s since the last such line (",
				    (unsigned long)l->unsaid, l->what);

	for (int i = 0; i < l->nkinds && o < len; i++)
		o += (size_t)snprintf(b + o, len - o, "%s%s: %lu", i ? ", " : "", l->kinds[i].kind,
				      (unsigned long)l->kinds[i].n);
	if (o < len)
		snprintf(b + o, len - o, ")");
}

static void forget(struct log_limit *l, uint64_t now)
{
	l->said_s = now;
	l->unsaid = 0;
	l->nkinds = 0;
}

void log_limited(struct log_limit *l, const char *kind, const char *fmt, ...)
{
	char line[1024], more[512] = "";
	uint64_t now = mono_s();
	va_list ap;
	int i;

	pthread_mutex_lock(&l->lock);
	if (l->said_s && now - l->said_s < LIMIT_S) {
		for (i = 0; i < l->nkinds && strcmp(l->kinds[i].kind, kind); i++)
			;
		if (i == l->nkinds && i < LOG_LIMIT_KINDS)
			snprintf(l->kinds[l->nkinds++].kind, sizeof(l->kinds[0].kind), "%s", kind);
		else if (i == l->nkinds) /* the table is full: the last kind takes the rest */
			snprintf(l->kinds[--i].kind, sizeof(l->kinds[0].kind), "other");
		l->kinds[i].n++;
		l->unsaid++;
		pthread_mutex_unlock(&l->lock);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (l->unsaid)
		tally(l, more, sizeof(more));
	/* One write: the line stays whole beside other threads' lines. */
	fprintf(stderr, "ptbpf: %s%s%s%s (said at most once a minute)\n", l->prefix, line,
		more[0] ? "; before it, " : "", more);
	forget(l, now);
	pthread_mutex_unlock(&l->lock);
}

void log_limited_flush(struct log_limit *l, bool at_exit)
{
	char more[512];
	uint64_t now = mono_s();

	pthread_mutex_lock(&l->lock);
	if (l->unsaid && (at_exit || now - l->said_s >= LIMIT_S)) {
		tally(l, more, sizeof(more));
		fprintf(stderr, "ptbpf: %s%s\n", l->prefix, more);
		forget(l, now);
	}
	pthread_mutex_unlock(&l->lock);
}
