/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU's own timeline, from the in-process agent (user/agent/agent.c): its
 * probes (bpf/agent.bpf.c) and what its records become in the trace: one
 * track per GPU and stream, kernel/memcpy/memset slices with device times,
 * and a flow from each launch (at its CUPTI correlation) to its kernel.
 */
#ifndef PTBPF_DEVICE_H
#define PTBPF_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include "record/gpu.h"
#include "trace/perfetto.h"
#include "ptbpf_events.h"

struct ptbpf_bpf;
struct target;

/* --- attaching (the agent must be mapped in the target) --- */
struct device_probes;

struct device_probes *device_probes_new(struct ptbpf_bpf *ops_skel);
/* If t maps libptbpf-agent.so and is not attached yet: attaches its
 * probes, then switches it on (with its op recorder if ops). 1 if it did,
 * 0 if there is no agent, -errno. */
int device_probes_scan(struct device_probes *d, const struct target *t, bool ops);
/* This ptbpf loaded pid's agent (it is sent EXIT and unloaded at the end). */
void device_probes_injected(struct device_probes *d, int pid);
/* 0 once pid's agent acted on its last command (its statuses are in the
 * ring buffer then), -EAGAIN before, -ESRCH if its image is gone,
 * -ENOENT if no command went to it. */
int device_probes_acked(const struct device_probes *d, int pid);
/* What agents switched on with ops record besides (OPS_WORD_* joined). */
void device_probes_ops_words(struct device_probes *d, const char *words);
/* Copies what t's op rings (at loc) hold into the ring buffer
 * (EV_OPS_CHUNK) when t calls _exit (then a last marker) or an exec
 * function. 0 or -errno. */
int device_probes_ops_exit(struct device_probes *d, const struct target *t,
			   const struct ptbpf_ops_loc *loc);
/* Switches every agent off (EXIT for those a ptbpf loaded): each flushes
 * its last records, then acknowledges. */
void device_probes_switch_off(struct device_probes *d);
/* Whether every agent switched off has acknowledged (or is gone). */
bool device_probes_all_acked(const struct device_probes *d);
/* Sends pid's agent OFF (it did not answer its ON in time). */
void device_probes_off(struct device_probes *d, int pid);
/* Whether any target's agent was switched on. */
bool device_probes_any(const struct device_probes *d);
/* pid's image is gone (exec): its agent's probes go, nothing more is sent. */
void device_probes_gone(struct device_probes *d, int pid);
/* Removes the probes, then unloads the agents that ended their thread. */
void device_probes_free(struct device_probes *d);

/* --- in the trace (called by join) --- */
struct device_state;

struct device_counts {
	uint64_t kernels, memcpys, memsets;
	uint64_t launch_flows;   /* correlations seen on launching threads */
	uint64_t cupti_dropped;  /* records CUPTI itself dropped */
};

struct device_state *device_state_new(struct pf_writer *w, gpu_process_track_fn fn, void *ctx);
void device_state_free(struct device_state *d);
/* On a launching thread (track), inside its launch slice. */
void device_correlate(struct device_state *d, uint64_t thread_track, const struct ptbpf_event *e);
void device_record(struct device_state *d, const struct ptbpf_agent_event *e);
void device_kernel_name(struct device_state *d, const struct ptbpf_long_name *n);
/* An agent's status: a struct ptbpf_long_name, or a named event (older
 * raw captures); size tells. */
void device_status(struct device_state *d, const struct ptbpf_named_event *e, size_t size);
/* The latest status code an agent of pid reported (enum ptbpf_agent_code). */
bool device_agent_status(const struct device_state *d, int pid, int *code);
/* Whether pid's agent records its CUDA calls (CUPTI callbacks into the op
 * rings): then the libcuda uprobes are not needed. */
bool device_agent_calls(const struct device_state *d, int pid);
/* Where pid's agent keeps its op rings' descriptor; 0 if not recording ops. */
uint64_t device_ops_desc(const struct device_state *d, int pid);
void device_dropped(struct device_state *d, const struct ptbpf_event *e);
const struct device_counts *device_counts(const struct device_state *d);
/* GPU time by process and kernel name (for metrics). */
#define DEVICE_MAX_KERNEL_STATS 1024
struct device_kernel_stat {
	int pid;
	const char *name;
	uint64_t count, ns;
};
int device_kernel_stats(const struct device_state *d, const struct device_kernel_stat **out);

#endif /* PTBPF_DEVICE_H */
