/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The daemon's always-on layer (user/fleet/step_signal.c): between capture
 * windows, the agent stays loaded in every selected torch process with
 * only its step signal on (include/ptbpf_agent.h, ptbpf_agent_steps); the
 * daemon reads each process's counters every tick, publishes them as
 * metrics, and asks for a window when a step is slow (--slow-step).
 */
#ifndef PTBPF_STEP_SIGNAL_H
#define PTBPF_STEP_SIGNAL_H

#include "cli.h"

struct step_signal;
struct capture;
struct metrics;

/* The words the always-on layer sends its agents (OPS_WORD_STEPS, and
 * OPS_WORD_GRAPHS with --keep-graphs); windows send them back at their end. */
const char *step_signal_words(const struct options *opt);
/* NULL with a line said if it cannot be had (no memory). */
struct step_signal *step_signal_new(const struct options *opt, struct capture *c,
				    struct metrics *m);
/* Every tick of the daemon's loop, between windows: finds new processes
 * (every 2 s), renews each agent's lease, reads its counters into the
 * metrics, drops the processes that exited, offers slow steps to c. */
void step_signal_tick(struct step_signal *s);
/* Switches every step signal off; the agents this or another ptbpf loaded
 * are unloaded (as at a window's end), the processes' own stay, off. */
void step_signal_free(struct step_signal *s);

#endif /* PTBPF_STEP_SIGNAL_H */
