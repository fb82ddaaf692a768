/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ptbpf's messages on stderr: each line starts "ptbpf: " (warnings
 * "ptbpf: warning: "), written here once. Callers end their lines with
 * "\n" themselves, so a line may be continued with log_more().
 * log_debug() prints only with -v.
 */
#ifndef PTBPF_LOG_H
#define PTBPF_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define LOG_FMT __attribute__((format(printf, 1, 2)))

void log_msg(const char *fmt, ...) LOG_FMT;
void log_warn(const char *fmt, ...) LOG_FMT;
void log_debug(const char *fmt, ...) LOG_FMT;
/* More of the line a log_*() call began, without a prefix. */
void log_more(const char *fmt, ...) LOG_FMT;
void log_set_verbose(bool verbose);
/* Holds this thread's lines back until log_release, which prints them
 * (drop false) or forgets them (drop true): what an attach said of a
 * process that turned out to be exiting is not said (live/targets.c). */
void log_hold(void);
void log_release(bool drop);
bool log_verbose(void);

/* A line that may come thousands of times a second (a refusal, an error
 * the daemon's port meets) is said at most once a minute: the ones not
 * said are counted by kind, and the next line said, or a flush, says how
 * many. */
#define LOG_LIMIT_KINDS 16
struct log_limit {
	pthread_mutex_t lock;
	const char *prefix, *what; /* "daemon: ", "refused" */
	uint64_t said_s;           /* when one was said (CLOCK_MONOTONIC s + 1), or 0 */
	uint64_t unsaid;
	struct {
		char kind[24];
		uint64_t n;
	} kinds[LOG_LIMIT_KINDS];
	int nkinds;
};
#define LOG_LIMIT_INIT(prefix, what) \
	{ PTHREAD_MUTEX_INITIALIZER, prefix, what, 0, 0, { { "", 0 } }, 0 }
/* Says "ptbpf: <prefix><line>" unless a line of l was said in the last
 * minute; then counts it under kind ("404", "EMFILE"). Thread-safe. */
void log_limited(struct log_limit *l, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Says how many of l's lines went unsaid, once the minute is over (or
 * at_exit: now). */
void log_limited_flush(struct log_limit *l, bool at_exit);

#endif /* PTBPF_LOG_H */
