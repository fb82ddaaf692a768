/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The in-process agent's probe points (bpf/agent.bpf.c on the entry points
 * of user/agent/): attached when a target maps libptbpf-agent.so, and the
 * commands that switch it on and off. What its records become in the trace
 * is record/gpu_timeline.h.
 */
#ifndef PTBPF_AGENT_PROBES_H
#define PTBPF_AGENT_PROBES_H

#include <stdbool.h>
#include <stdint.h>
#include "ptbpf_events.h"

struct ptbpf_bpf;
struct target;

struct agent_probes;

struct agent_probes *agent_probes_new(struct ptbpf_bpf *ops_skel);
/* If t maps libptbpf-agent.so and is not attached yet: attaches its
 * probes, then switches it on (with its op recorder if ops). 1 if it did,
 * 0 if there is no agent, -errno. */
int agent_probes_scan(struct agent_probes *d, const struct target *t, bool ops);
/* This ptbpf loaded t's agent, or started a load whose end it could not
 * see: the agent is sent EXIT and unloaded at the end (one that loads
 * late too). */
void agent_probes_injected(struct agent_probes *d, const struct target *t);
/* If t maps an agent an earlier ptbpf switched off for good but left
 * mapped (interrupted, or t was stopped then), unloads it, saying so. 0 if
 * it did; -EBUSY if t's agent is not such a one; -errno. */
int agent_probes_unload_ended(const struct target *t);
/* 0 once pid's agent acted on its last command (its statuses are in the
 * ring buffer then), -EAGAIN before, -ESRCH if its image is gone,
 * -ENOENT if no command went to it. */
int agent_probes_acked(const struct agent_probes *d, int pid);
/* pid's agent thread when its last command was sent, or 0. */
int agent_probes_tid(const struct agent_probes *d, int pid);
/* The agents stay loaded at the end, switched OFF with these words (the
 * daemon's always-on step signal, OPS_WORD_STEPS), which every command
 * carries: they are neither sent EXIT nor unloaded. */
void agent_probes_keep(struct agent_probes *d, const char *words);
/* pid's agent's step counters (agent_steps_read); -ENOENT if no agent. */
struct ptbpf_agent_steps;
int agent_probes_steps(const struct agent_probes *d, int pid, struct ptbpf_agent_steps *out);
/* What agents switched on with ops record besides (OPS_WORD_* joined). */
void agent_probes_ops_words(struct agent_probes *d, const char *words);
/* Copies what t's op rings (at loc) hold into the ring buffer
 * (EV_OPS_CHUNK) when t calls _exit (then a last marker) or an exec
 * function, after their counters into the ops_rings map; a process killed
 * by a signal saves the counters only. 0 or -errno. */
int agent_probes_ops_exit(struct agent_probes *d, const struct target *t,
			   const struct ptbpf_ops_loc *loc);
/* The op rings' counters pid's _exit or exec probe saved (out->final_ts
 * not 0); -ENOENT if it saved none. */
int agent_probes_ops_final(const struct agent_probes *d, int pid, struct ptbpf_ops_loc *out);
/* Switches every agent off (EXIT for those a ptbpf loaded, also if never
 * switched on, unless kept): each flushes its last records, then
 * acknowledges. */
void agent_probes_switch_off(struct agent_probes *d);
/* Whether every agent switched off has acknowledged (or is gone, or its
 * process is stopped: it cannot answer). */
bool agent_probes_all_acked(const struct agent_probes *d);
/* Sends pid's agent OFF (it did not answer its ON in time). */
void agent_probes_off(struct agent_probes *d, int pid);
/* Whether any target's agent was switched on. */
bool agent_probes_any(const struct agent_probes *d);
/* pid's image is gone (exec): its agent's probes go, nothing more is sent. */
void agent_probes_gone(struct agent_probes *d, int pid);
/* Removes the probes, then unloads the agents that ended their thread;
 * one line for each that stays (stopped, no answer, unload failed). */
void agent_probes_free(struct agent_probes *d);
/* Its BPF object, for --bpf-stats (NULL: none). */
const struct bpf_object *agent_probes_obj(const struct agent_probes *d);

#endif /* PTBPF_AGENT_PROBES_H */
