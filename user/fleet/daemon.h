/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf daemon`: capture windows on a schedule or on demand, retention,
 * and the metrics endpoint (user/fleet/daemon.c). */
#ifndef PTBPF_DAEMON_H
#define PTBPF_DAEMON_H

#include <signal.h>
#include "cli.h"

struct metrics;

struct capture_req;

/* Traces every torch process (that opt's --match-env and the trigger's
 * filter select; trigger NULL for a scheduled window) into path for
 * opt->window_s seconds; the caller (main.c) owns the tracing. 1 if it
 * traced a process (a window: counted), 0 if none, -1 if it could not
 * start (said). */
typedef int (*daemon_window_fn)(const struct options *opt, const char *path, struct metrics *m,
				const struct capture_req *trigger);

/* Runs until *stop is set; 0, or 1 with one error line printed. */
int daemon_run(const struct options *opt, daemon_window_fn window, volatile sig_atomic_t *stop);

#endif /* PTBPF_DAEMON_H */
