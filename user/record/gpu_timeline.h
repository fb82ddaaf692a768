/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU's own timeline in the trace, from the in-process agent's records
 * (CUPTI activity): one track per GPU and stream, kernel/memcpy/memset
 * slices with device times, and a flow from each launch (at its CUPTI
 * correlation) to its kernel; and each agent's statuses. Called by join.
 */
#ifndef PTBPF_GPU_TIMELINE_H
#define PTBPF_GPU_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include "record/gpu_calls.h"
#include "trace/perfetto.h"
#include "ptbpf_events.h"

struct gpu_timeline;
struct ptbpf_agent_graph_node;

struct gpu_timeline_counts {
	uint64_t kernels, memcpys, memsets;
	uint64_t launch_flows;   /* correlations seen on launching threads */
	uint64_t cupti_dropped;  /* records CUPTI itself dropped */
	/* CUDA graphs: nodes made while traced (and those past the map's
	 * room), replayed kernels, those joined to their capture, and those
	 * of graphs captured before ptbpf attached (and how many graphs). */
	uint64_t graph_nodes, graph_nodes_not_kept;
	uint64_t graph_kernels, graph_kernels_joined, graph_kernels_before, graphs_before;
	uint64_t graph_kernels_no_op; /* joined, but captured outside any op */
	/* nodes the daemon's always-on layer kept, and kernels joined by them */
	uint64_t graph_nodes_kept, graph_kernels_kept;
	uint64_t overlapping_not_laned; /* overlapping others on every lane of their stream */
};

struct gpu_timeline *gpu_timeline_new(struct pf_writer *w, gpu_process_track_fn fn, void *ctx);
void gpu_timeline_free(struct gpu_timeline *d);
/* On a launching thread (track), inside its launch slice; the correlation
 * written too where that slice has none. */
void gpu_timeline_correlate(struct gpu_timeline *d, uint64_t thread_track, int pid, uint64_t ts,
			    uint64_t correlation, bool write_correlation);
void gpu_timeline_record(struct gpu_timeline *d, const struct ptbpf_agent_event *e);
/* A CUDA graph node made (op: the innermost op or region open on the
 * making thread then, interned, or NULL; seq: its sequence number or
 * UINT64_MAX) or cloned (op and seq unused). A replayed kernel of the node,
 * or of a clone of it, names that op (join_agent.c). */
void gpu_timeline_graph_node(struct gpu_timeline *d, int pid,
			     const struct ptbpf_agent_graph_node *g, const char *op, uint64_t seq);
/* A node of the capture map the daemon's always-on layer kept (an
 * AGENT_REC_GRAPH_KEPT record: struct ptbpf_agent_graph_kept). */
void gpu_timeline_graph_kept(struct gpu_timeline *d, const struct ptbpf_agent_event *e);
void gpu_timeline_kernel_name(struct gpu_timeline *d, const struct ptbpf_long_name *n);
/* Its Triton kernels' sources (record/inductor.h): raw captures keep them. */
struct inductor *gpu_timeline_inductor(const struct gpu_timeline *d);
/* An agent's status: a struct ptbpf_long_name, or a named event (older
 * raw captures); size tells. */
void gpu_timeline_status(struct gpu_timeline *d, const struct ptbpf_named_event *e, size_t size);
/* The latest status code an agent of pid reported (enum ptbpf_agent_code). */
bool gpu_timeline_agent_status(const struct gpu_timeline *d, int pid, int *code);
/* Whether pid's agent records its CUDA calls (CUPTI callbacks into the op
 * rings): then the libcuda uprobes are not needed. */
bool gpu_timeline_agent_calls(const struct gpu_timeline *d, int pid);
/* Where pid's agent keeps its op rings' descriptor; 0 if not recording ops. */
uint64_t gpu_timeline_ops_desc(const struct gpu_timeline *d, int pid);
void gpu_timeline_dropped(struct gpu_timeline *d, const struct ptbpf_event *e);
const struct gpu_timeline_counts *gpu_timeline_counts(const struct gpu_timeline *d);
/* GPU time by process and kernel name (for metrics). */
#define GPU_MAX_KERNEL_STATS 1024
struct gpu_kernel_stat {
	int pid;
	const char *name;
	uint64_t count, ns;
};
int gpu_timeline_kernel_stats(const struct gpu_timeline *d, const struct gpu_kernel_stat **out);

#endif /* PTBPF_DEVICE_H */
