// SPDX-License-Identifier: BSD-2-Clause
/* ptbpf's messages. See log.h. */
#include "lib/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
