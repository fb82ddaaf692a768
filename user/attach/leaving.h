/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What stays in the traced processes should ptbpf leave this instant (a
 * second Ctrl-C, main.c): kept as one line, formatted again whenever it
 * changes, so that the signal handler only has to write(2) it.
 */
#ifndef PTBPF_LEAVING_H
#define PTBPF_LEAVING_H

#include <stdbool.h>

enum leaving_agent {
	LEAVING_NONE,      /* nothing of ptbpf's (none, unloaded, process gone) */
	LEAVING_LOADING,   /* ptbpf is loading its agent: the call may have run */
	LEAVING_DORMANT,   /* mapped, never switched on */
	LEAVING_ON,        /* switched on: off once ptbpf's probe is gone */
	LEAVING_OFF,       /* told to switch off */
	LEAVING_STEPS,     /* only its step signal on (the daemon's always-on
			    * layer): off once ptbpf is gone or silent */
	LEAVING_UNLOADING, /* being unloaded */
};

/* pid's agent is now in state st; later_unloads: a ptbpf that attaches
 * later unloads it when stopped (a ptbpf loaded it), else it is the
 * process's own (started with it). */
void leaving_agent(int pid, enum leaving_agent st, bool later_unloads);
enum leaving_agent leaving_agent_state(int pid);
/* Forgets the processes that have exited (a daemon's earlier windows'). */
void leaving_prune(void);
/* The trace's file while it is unfinished (its .partial name); "" once
 * it is complete or removed. started: tracing has started (a process's
 * "tracing pid" was said), so it is a trace and stays; until then it
 * holds no trace of anything said, and leaving removes it. */
void leaving_trace(const char *partial, bool started);
/* The run's outcome is settled: its trace written (and said) or not, with
 * exit status rc; what is left is only the teardown, so leaving now exits
 * with rc. A new trace (leaving_trace with started false) unsettles it. */
void leaving_settled(int rc);
/* Writes the line (async-signal-safe): "ptbpf: second interrupt: leaving
 * now; " and what stays; removes the trace file that never started. The
 * exit status to leave with: 128 + sig, or the settled outcome's. */
int leaving_say(int sig);

#endif /* PTBPF_LEAVING_H */
