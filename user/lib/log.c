// SPDX-License-Identifier: BSD-2-Clause
/* ptbpf's messages. See log.h. */
#include "lib/log.h"

#include <stdarg.h>
#include <stdio.h>

static bool verbose;

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	if (prefix)
		fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
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
