/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ptbpf's messages on stderr: each line starts "ptbpf: " (warnings
 * "ptbpf: warning: "), written here once. Callers end their lines with
 * "\n" themselves, so a line may be continued with log_more().
 * log_debug() prints only with -v.
 */
#ifndef PTBPF_LOG_H
#define PTBPF_LOG_H

#include <stdbool.h>

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

#endif /* PTBPF_LOG_H */
