/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU's own timeline, from the in-process agent (user/agent.c): its
 * probes (bpf/agent.bpf.c) and what its records become in the trace: one
 * track per GPU and stream, kernel/memcpy/memset slices with device times,
 * and a flow from each launch (at its CUPTI correlation) to its kernel.
 */
#ifndef PTBPF_DEVICE_H
#define PTBPF_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include "gpu.h"
#include "perfetto.h"
#include "ptbpf_events.h"

struct ptbpf_bpf;
struct target;

/* --- attaching (the agent must be mapped in the target) --- */
struct device_probes;

struct device_probes *device_probes_new(struct ptbpf_bpf *ops_skel);
/* If t maps libptbpf-agent.so and is not attached yet: attaches, then
 * switches the agent on (with its op recorder if ops). 1 if it did, 0 if
 * there is no agent, -errno. */
int device_probes_scan(struct device_probes *d, const struct target *t, bool ops);
/* What agents switched on with ops record besides (OPS_WORD_* joined). */
void device_probes_ops_words(struct device_probes *d, const char *words);
/* Copies what t's op rings (at loc) hold when t calls _exit into the ring
 * buffer (EV_OPS_CHUNK). 0 or -errno. */
int device_probes_ops_exit(struct device_probes *d, const struct target *t,
			   const struct ptbpf_ops_loc *loc);
/* Keeps the agents of the attached targets on (call about once a second:
 * an agent whose switch goes stale for 5 s retracts itself). */
void device_probes_heartbeat(struct device_probes *d, const struct target *targets, int n);
/* Switches every agent off: each flushes its last records within ~0.5 s. */
void device_probes_switch_off(struct device_probes *d, const struct target *targets, int n);
/* Whether any target's agent was switched on. */
bool device_probes_any(const struct device_probes *d);
/* Switches every agent off, then removes the probes. */
void device_probes_free(struct device_probes *d, const struct target *targets, int n);

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
void device_status(struct device_state *d, const struct ptbpf_named_event *e);
/* The latest status code an agent of pid reported (enum ptbpf_agent_code). */
bool device_agent_status(const struct device_state *d, int pid, int *code);
/* Whether pid's agent has CUPTI on (the GPU timeline). */
bool device_gpu_active(const struct device_state *d, int pid);
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
