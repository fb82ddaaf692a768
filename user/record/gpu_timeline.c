// SPDX-License-Identifier: BSD-2-Clause
/* The GPU's own timeline in the trace, from the agent's records. See gpu_timeline.h. */
#define _GNU_SOURCE
#include "record/gpu_timeline.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/log.h"
#include "lib/text.h"
#include "lib/names.h"
#include "record/inductor.h"
#include "ptbpf_agent.h"

#define MAX_STREAM_TRACKS 4096
#define MAX_LANES 8    /* tracks per stream for activities that overlap */
#define LANE_RECENT 16 /* activities a track remembers, to tell an overlap */
#define MAX_GRAPH_NODES (1u << 22) /* a capture map's nodes (320 MB of slots when full) */
#define MAX_GRAPHS_BEFORE 65536     /* graphs captured before the attach, counted */


struct stream_track {
	int pid;
	uint32_t device, stream;
	uint32_t lane;    /* 0: the stream's own track; else one beside it */
	uint64_t track;
	uint64_t recent[LANE_RECENT][2]; /* the latest activities on it: start, end */
	uint32_t nrecent;
	uint32_t context; /* the CUDA context last written on it */
	bool has_context;
};

/* A CUDA graph node and its capture: the op open on the thread that made
 * it, and the call (a launch into the capturing stream) that did. */
struct graph_node {
	uint64_t node_id;
	int pid;
	uint32_t corr;
	uint64_t seq;
	const char *op; /* NULL: made outside any op */
	bool kept;      /* from the map the daemon's always-on layer kept */
	bool made;      /* told as made (counted), not as a clone */
	bool before;    /* a clone of a node made before ptbpf saw it: no capture */
};

struct gpu_timeline {
	struct pf_writer *w;
	struct hash_table nodes;     /* hash (pid, node id) -> struct graph_node */
	struct hash_table before;    /* exact (pid, graph id): kernels of no capture seen */
	gpu_process_track_fn process_track;
	void *ctx;
	struct str_set *strings;
	struct str_map *names; /* (pid, CUPTI name pointer) -> demangled name */
	struct inductor *inductor; /* Triton kernels' sources */
	struct stream_track *tracks;
	int ntracks;
	struct gpu_timeline_counts counts;
	struct {
		int pid, code;
		uint64_t ops_desc;
		bool calls;   /* its op rings get the CUDA calls */
		bool no_corr; /* no CUDA call callbacks since it was switched on */
	} status[64]; /* each agent's latest */
	struct gpu_kernel_stat kstats[GPU_MAX_KERNEL_STATS]; /* (pid, name): time */
	int nkstats;
	int nstatus;
};

/* Launch -> kernel flows: the id both ends compute from the correlation. */
static uint64_t corr_flow(int pid, uint32_t corr)
{
	return hash_pair((uint64_t)pid, corr ^ 0x4b45524eULL) | 1;
}

struct gpu_timeline *gpu_timeline_new(struct pf_writer *w, gpu_process_track_fn fn, void *ctx)
{
	struct gpu_timeline *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->w = w;
	d->process_track = fn;
	d->ctx = ctx;
	d->strings = str_set_new(1 << 16);
	d->names = str_map_new(1 << 16);
	d->tracks = calloc(MAX_STREAM_TRACKS, sizeof(*d->tracks));
	hash_init(&d->nodes, MAX_GRAPH_NODES, sizeof(struct graph_node));
	hash_init(&d->before, MAX_GRAPHS_BEFORE, 0);
	d->inductor = inductor_new();
	if (!d->strings || !d->names || !d->tracks || !d->inductor) {
		gpu_timeline_free(d);
		return NULL;
	}
	return d;
}

void gpu_timeline_free(struct gpu_timeline *d)
{
	if (!d)
		return;
	str_set_free(d->strings);
	str_map_free(d->names);
	inductor_free(d->inductor);
	free(d->tracks);
	hash_free(&d->nodes);
	hash_free(&d->before);
	free(d);
}

const struct gpu_timeline_counts *gpu_timeline_counts(const struct gpu_timeline *d)
{
	return &d->counts;
}

/*
 * The start of the launch -> kernel flow, in the CUDA call's slice. The
 * correlation is written here only where the call's slice has none (a call
 * from ptbpf's own uprobes); a call the agent recorded carries it on its
 * slice already (record/join_agent.c), and readers take it from there.
 */
void gpu_timeline_correlate(struct gpu_timeline *d, uint64_t thread_track, int pid, uint64_t ts,
			    uint64_t correlation, bool write_correlation)
{
	uint64_t flow = corr_flow(pid, (uint32_t)correlation);
	struct pf_arg corr = { .name = "correlation", .type = PF_ARG_UINT, .u = correlation };

	d->counts.launch_flows++;
	pf_instant(d->w, &(struct pf_event){ .track = thread_track, .ts = ts,
		   .name = "cupti correlation", .category = "join_launch_flow",
		   .args = write_correlation ? &corr : NULL, .nargs = write_correlation,
		   .flows = &flow, .nflows = 1 });
}

void gpu_timeline_kernel_name(struct gpu_timeline *d, const struct ptbpf_long_name *n)
{
	char raw[PTBPF_LONG_NAME_LEN + 1];

	memcpy(raw, n->name, PTBPF_LONG_NAME_LEN);
	raw[PTBPF_LONG_NAME_LEN] = 0;
	if (!raw[0])
		return;
	str_map_put(d->names, hash_pair(n->ev.pid, n->ev.key), demangle_intern(d->strings, raw));
	inductor_name(d->inductor, (int)n->ev.pid, raw);
}

struct inductor *gpu_timeline_inductor(const struct gpu_timeline *d)
{
	return d->inductor;
}

/* "GPU 0 / stream 7" under a "GPU 0" track under the process; lane n > 0:
 * "GPU 0 / stream 7 (overlapping n)" beside it. */
static struct stream_track *stream_track(struct gpu_timeline *d, int pid, uint32_t dev,
					 uint32_t stream, uint32_t lane)
{
	uint64_t gpu_track = 0;
	char name[64];
	int i;

	for (i = 0; i < d->ntracks; i++) {
		struct stream_track *t = &d->tracks[i];

		if (t->pid == pid && t->device == dev && t->stream == stream && t->lane == lane)
			return t;
	}
	if (d->ntracks == MAX_STREAM_TRACKS)
		return NULL;
	/* One "GPU n" parent per (pid, device): stream 0xffffffff stands for it. */
	if (stream != UINT32_MAX) {
		struct stream_track *g = stream_track(d, pid, dev, UINT32_MAX, 0);

		if (!g)
			return NULL;
		gpu_track = g->track;
		snprintf(name, sizeof(name), lane ? "GPU %u / stream %u (overlapping %u)" :
			 "GPU %u / stream %u", dev, stream, lane);
	} else {
		gpu_track = d->process_track(d->ctx, pid);
		snprintf(name, sizeof(name), "GPU %u", dev);
	}
	i = d->ntracks++;
	d->tracks[i] = (struct stream_track){ .pid = pid, .device = dev, .stream = stream,
					      .lane = lane,
					      .track = pf_track_child(d->w, gpu_track, name) };
	return &d->tracks[i];
}

/* Whether start..end overlaps an activity t remembers (CUPTI's buffers
 * come out of time order: the latest end alone would not tell). */
static bool overlaps(const struct stream_track *t, uint64_t start, uint64_t end)
{
	uint32_t n = t->nrecent < LANE_RECENT ? t->nrecent : LANE_RECENT;

	for (uint32_t i = 0; i < n; i++)
		if (start < t->recent[i][1] && t->recent[i][0] < end)
			return true;
	return false;
}

/* The track an activity from start to end goes on: its stream's, unless
 * it overlaps an activity there. A CUDA graph's parallel branches run at
 * once while CUPTI names one stream for all of them (a replayed backward's
 * weight and bias gradients, on the H200): those go on lanes beside the
 * stream's track, the first one free, so that no slice on a track
 * overlaps another. */
static struct stream_track *activity_track(struct gpu_timeline *d, int pid, uint32_t dev,
					   uint32_t stream, uint64_t start, uint64_t end)
{
	struct stream_track *t = NULL;
	bool busy = true;
	uint64_t *r;

	for (uint32_t lane = 0; lane < MAX_LANES && busy; lane++) {
		struct stream_track *l = stream_track(d, pid, dev, stream, lane);

		if (!l) /* no room for another track: the last lane there is */
			break;
		t = l;
		busy = overlaps(t, start, end);
	}
	if (!t)
		return NULL;
	if (busy) /* every lane: the last one, counted */
		d->counts.overlapping_not_laned++;
	r = t->recent[t->nrecent++ % LANE_RECENT];
	r[0] = start;
	r[1] = end > start ? end : start;
	return t;
}

/* A GPU activity on its stream's track, at the end of its launch's flow.
 * Each fact once: its correlation is written only where that flow was not
 * started (the launch was not seen): else the launch's slice, at the
 * flow's start, has it. Its CUDA context is written on the stream's first
 * activity and again only where it changes (a stream belongs to one
 * context): readers carry it along the track. */
#define DEVICE_MAX_ARGS 16

static void device_slice(struct gpu_timeline *d, int pid, uint32_t dev, uint32_t stream,
			 uint64_t start, uint64_t end, const char *name, const char *cat,
			 uint32_t corr, uint32_t context, const struct pf_arg *args, int nargs)
{
	struct stream_track *t = activity_track(d, pid, dev, stream, start, end);
	uint64_t flow = corr ? corr_flow(pid, corr) : 0;
	struct pf_arg all[DEVICE_MAX_ARGS];

	if (!t) /* callers' args: DEVICE_MAX_ARGS - 2 at most */
		return;
	memcpy(all, args, nargs * sizeof(*args));
	if (corr && !pf_flow_started(d->w, flow))
		all[nargs++] = (struct pf_arg){ .name = "correlation", .type = PF_ARG_UINT, .u = corr };
	if (!t->has_context || context != t->context) {
		all[nargs++] = (struct pf_arg){ .name = "context", .type = PF_ARG_UINT, .u = context };
		t->context = context;
		t->has_context = true;
	}
	pf_slice_begin(d->w, &(struct pf_event){ .track = t->track, .ts = start, .name = name,
		       .category = cat, .args = all, .nargs = nargs, .term_flows = &flow,
		       .nterm = flow ? 1 : 0 });
	pf_slice_end(d->w, &(struct pf_event){ .track = t->track, .ts = end > start ? end : start });
}

/* GPU time by (process, kernel name), for metrics; kernels past the
 * table's size are summed under "(other)". Names are interned. */
static void kernel_stat(struct gpu_timeline *d, int pid, const char *name, uint64_t ns)
{
	struct gpu_kernel_stat *k;
	int i;

	for (i = 0; i < d->nkstats; i++)
		if (d->kstats[i].pid == pid && d->kstats[i].name == name)
			break;
	if (i == d->nkstats) {
		if (d->nkstats == GPU_MAX_KERNEL_STATS - 1) {
			name = "(other)";
			for (i = 0; i < d->nkstats; i++)
				if (d->kstats[i].pid == pid && !strcmp(d->kstats[i].name, name))
					break;
		}
		if (i == d->nkstats) {
			if (d->nkstats == GPU_MAX_KERNEL_STATS)
				return;
			d->kstats[d->nkstats++] = (struct gpu_kernel_stat){ .pid = pid,
									       .name = name };
		}
	}
	k = &d->kstats[i];
	k->count++;
	k->ns += ns;
}

int gpu_timeline_kernel_stats(const struct gpu_timeline *d, const struct gpu_kernel_stat **out)
{
	*out = d->kstats;
	return d->nkstats;
}

struct node_key {
	int pid;
	uint64_t id;
};

static bool node_eq(const void *val, const void *key)
{
	const struct graph_node *n = val;
	const struct node_key *k = key;

	return n->pid == k->pid && n->node_id == k->id;
}

static struct graph_node *graph_node_of(struct gpu_timeline *d, int pid, uint64_t id)
{
	struct node_key k = { pid, id };

	return hash_get_eq(&d->nodes, hash_pair((uint64_t)pid, id), node_eq, &k);
}

static void count_made(struct gpu_timeline *d, const struct graph_node *n, int by)
{
	if (!n->made)
		return;
	if (n->kept)
		d->counts.graph_nodes_kept += (uint64_t)(int64_t)by;
	else
		d->counts.graph_nodes += (uint64_t)(int64_t)by;
}

/*
 * A node made or cloned. CUPTI 13 tells each node of a graph being
 * instantiated as made (inside the instantiating call, under whatever op
 * is open then) and then as cloned from the captured node: the clone's
 * record wins (a copy of a node ptbpf never saw made: no capture at all),
 * and the copy is not counted as a node made.
 */
static void node_made(struct gpu_timeline *d, int pid, const struct ptbpf_agent_graph_node *g,
		      const char *op, uint64_t seq, bool kept)
{
	struct graph_node n = { .node_id = g->node_id, .pid = pid, .corr = g->correlation_id,
				.seq = seq, .op = op, .kept = kept, .made = true }, *from, *to;

	if (g->kind == GRAPH_NODE_CLONED) { /* the clone is captured where its original was */
		if ((from = graph_node_of(d, pid, g->original_id)))
			n = *from;
		else
			n = (struct graph_node){ .pid = pid, .kept = kept, .before = true };
		n.node_id = g->node_id;
		n.made = false;
	} else if (g->kind != GRAPH_NODE_CREATED) {
		return;
	}
	if ((to = graph_node_of(d, pid, g->node_id))) { /* an id told again */
		/* the kept map's never replaces what the window saw, nor a
		 * node made a clone's record */
		if ((kept && !to->kept) || (n.made && !to->made))
			return;
		count_made(d, to, -1);
		*to = n;
		count_made(d, to, 1);
		return;
	}
	if (n.before) /* nothing to join: its kernels count as captured before */
		return;
	if (!(to = hash_add(&d->nodes, hash_pair((uint64_t)pid, g->node_id)))) {
		d->counts.graph_nodes_not_kept++;
		return;
	}
	*to = n;
	count_made(d, to, 1);
}

void gpu_timeline_graph_node(struct gpu_timeline *d, int pid,
			     const struct ptbpf_agent_graph_node *g, const char *op, uint64_t seq)
{
	node_made(d, pid, g, op, seq, false);
}

/* A node of the map the daemon's always-on layer kept (the agent's
 * graphs.c), sent at the window's start: made before it, with its op. */
void gpu_timeline_graph_kept(struct gpu_timeline *d, const struct ptbpf_agent_event *e)
{
	struct ptbpf_agent_graph_kept k;

	memcpy(&k, e->raw, sizeof(k));
	k.op[sizeof(k.op) - 1] = 0;
	node_made(d, (int)e->ev.pid, &k.node, k.op[0] ? str_set_intern(d->strings, k.op) : NULL,
		  k.seq >= 0 ? (uint64_t)k.seq : UINT64_MAX, true);
}

/* A replayed kernel's capture, as args: the op open when its node was
 * made, its sequence number, and the capture's call; else counted, with
 * its graph, as captured before ptbpf attached. */
static int graph_args(struct gpu_timeline *d, int pid, const struct ptbpf_agent_kernel *k,
		      struct pf_arg *args)
{
	const struct graph_node *n = graph_node_of(d, pid, k->graph_node_id);
	int nargs = 0;

	d->counts.graph_kernels++;
	if (!n || n->before) {
		uint64_t g = hash_u64((uint64_t)(uint32_t)pid << 32 | k->graph_id);

		d->counts.graph_kernels_before++;
		if (!hash_get(&d->before, g) && hash_add(&d->before, g))
			d->counts.graphs_before++;
		return 0;
	}
	d->counts.graph_kernels_joined++;
	d->counts.graph_kernels_no_op += !n->op;
	d->counts.graph_kernels_kept += n->kept;
	if (n->op)
		args[nargs++] = (struct pf_arg){ .name = "captured_by", .type = PF_ARG_STR,
						 .s = n->op };
	if (n->seq != UINT64_MAX)
		args[nargs++] = (struct pf_arg){ .name = "captured_seq", .type = PF_ARG_UINT,
						 .u = n->seq };
	if (n->corr) /* made inside a traced call */
		args[nargs++] = (struct pf_arg){ .name = "capture_correlation",
						 .type = PF_ARG_UINT, .u = n->corr };
	if (n->kept)
		args[nargs++] = (struct pf_arg){ .name = "capture_kept", .type = PF_ARG_BOOL,
						 .u = 1 };
	return nargs;
}

/* A Triton kernel of torch.compile: the ATen ops and model nodes it fuses,
 * and the module Inductor wrote it in (inductor.h). */
static int triton_args(struct gpu_timeline *d, int pid, const char *name, struct pf_arg *args)
{
	const struct inductor_kernel *k = name ? inductor_get(d->inductor, pid, name) : NULL;
	int nargs = 0;

	if (!k)
		return 0;
	if (k->aten)
		args[nargs++] = (struct pf_arg){ .name = "aten_ops", .type = PF_ARG_STR, .s = k->aten };
	if (k->nodes)
		args[nargs++] = (struct pf_arg){ .name = "source_nodes", .type = PF_ARG_STR,
						 .s = k->nodes };
	if (k->module)
		args[nargs++] = (struct pf_arg){ .name = "inductor_module", .type = PF_ARG_STR,
						 .s = k->module };
	if (k->graph)
		args[nargs++] = (struct pf_arg){ .name = "inductor_graph", .type = PF_ARG_STR,
						 .s = k->graph };
	return nargs;
}

/* A kernel: its launch geometry, registers, shared memory (static plus
 * dynamic, as Kineto gives it; the dynamic part only where there is one),
 * and its graph where it ran in one, with the op that captured it. */
static void kernel_record(struct gpu_timeline *d, int pid, const struct ptbpf_agent_kernel *k)
{
	const char *name = str_map_get(d->names, hash_pair(pid, (uint64_t)(uintptr_t)k->name));
	char grid[40], block[40];
	struct pf_arg args[DEVICE_MAX_ARGS - 2] = {
		{ .name = "grid", .type = PF_ARG_STR, .s = grid },
		{ .name = "block", .type = PF_ARG_STR, .s = block },
		{ .name = "registers", .type = PF_ARG_UINT, .u = k->registers_per_thread },
		{ .name = "shared_mem", .type = PF_ARG_UINT,
		  .u = (uint64_t)k->static_shared_memory + (uint64_t)k->dynamic_shared_memory },
	};
	int nargs = 4;

	if (k->dynamic_shared_memory)
		args[nargs++] = (struct pf_arg){ .name = "dynamic_shared_mem", .type = PF_ARG_UINT,
						 .u = (uint64_t)k->dynamic_shared_memory };
	if (k->graph_id) {
		args[nargs++] = (struct pf_arg){ .name = "graph_id", .type = PF_ARG_UINT,
						 .u = k->graph_id };
		args[nargs++] = (struct pf_arg){ .name = "graph_node", .type = PF_ARG_UINT,
						 .u = k->graph_node_id };
		nargs += graph_args(d, pid, k, args + nargs);
	}
	nargs += triton_args(d, pid, name, args + nargs);
	snprintf(grid, sizeof(grid), "%d,%d,%d", k->grid_x, k->grid_y, k->grid_z);
	snprintf(block, sizeof(block), "%d,%d,%d", k->block_x, k->block_y, k->block_z);
	d->counts.kernels++;
	kernel_stat(d, pid, name ? name : "kernel", k->end > k->start ? k->end - k->start : 0);
	device_slice(d, pid, k->device_id, k->stream_id, k->start, k->end, name ? name : "kernel",
		     "kernel", k->correlation_id, k->context_id, args, nargs);
}

/* Kineto's names for copies and sets (CUpti_ActivityMemcpyKind,
 * CUpti_ActivityMemoryKind), so that the trace reads as torch.profiler's:
 * the slice's name is where the trace keeps the kinds. */
static const char *copy_kind(uint8_t k)
{
	static const char *const s[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					 "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };

	return k < sizeof(s) / sizeof(s[0]) ? s[k] : "Unknown";
}

static const char *memory_kind(uint8_t k)
{
	static const char *const s[] = { "Unknown", "Pageable", "Pinned", "Device", "Array",
					 "Managed", "Device Static", "Managed Static" };

	return k < sizeof(s) / sizeof(s[0]) ? s[k] : "Unknown";
}

void gpu_timeline_record(struct gpu_timeline *d, const struct ptbpf_agent_event *e)
{
	int pid = e->ev.pid;
	char name[64];

	if (e->ev.id == AGENT_REC_KERNEL) {
		struct ptbpf_agent_kernel k;

		memcpy(&k, e->raw, sizeof(k));
		kernel_record(d, pid, &k);
	} else if (e->ev.id == AGENT_REC_MEMCPY) {
		struct ptbpf_agent_memcpy m;
		struct pf_arg args[1];

		memcpy(&m, e->raw, sizeof(m));
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", copy_kind(m.copy_kind),
			 memory_kind(m.src_kind), memory_kind(m.dst_kind));
		args[0] = (struct pf_arg){ .name = "bytes", .type = PF_ARG_UINT, .u = m.bytes };
		d->counts.memcpys++;
		device_slice(d, pid, m.device_id, m.stream_id, m.start, m.end,
			     str_set_intern(d->strings, name), "gpu_memcpy", m.correlation_id,
			     m.context_id, args, 1);
	} else if (e->ev.id == AGENT_REC_MEMSET) {
		struct ptbpf_agent_memset m;
		struct pf_arg args[2];

		memcpy(&m, e->raw, sizeof(m));
		snprintf(name, sizeof(name), "Memset (%s)", memory_kind((uint8_t)m.memory_kind));
		args[0] = (struct pf_arg){ .name = "bytes", .type = PF_ARG_UINT, .u = m.bytes };
		args[1] = (struct pf_arg){ .name = "value", .type = PF_ARG_UINT, .u = m.value };
		d->counts.memsets++;
		device_slice(d, pid, m.device_id, m.stream_id, m.start, m.end,
			     str_set_intern(d->strings, name), "gpu_memset", m.correlation_id,
			     m.context_id, args, 2);
	}
}

bool gpu_timeline_agent_status(const struct gpu_timeline *d, int pid, int *code)
{
	for (int i = 0; i < d->nstatus; i++) {
		if (d->status[i].pid == pid) {
			*code = d->status[i].code;
			return true;
		}
	}
	return false;
}

bool gpu_timeline_agent_calls(const struct gpu_timeline *d, int pid)
{
	for (int i = 0; i < d->nstatus; i++)
		if (d->status[i].pid == pid)
			return d->status[i].calls;
	return false;
}

uint64_t gpu_timeline_ops_desc(const struct gpu_timeline *d, int pid)
{
	for (int i = 0; i < d->nstatus; i++)
		if (d->status[i].pid == pid)
			return d->status[i].ops_desc;
	return 0;
}

/* "WHAT: key=value ... [name=REST]" (PTBPF_AGENT_DEVICE, _VERSIONS) as an
 * instant named WHAT on the process track, numbers as numbers: what the
 * Kineto export writes as deviceProperties and CUDA versions. */
static void facts_instant(struct gpu_timeline *d, int pid, uint64_t ts, char *msg)
{
	struct pf_arg args[24];
	char *colon = strstr(msg, ": "), *p, *eq, *end;
	int nargs = 0;

	if (!colon)
		return;
	*colon = 0;
	for (p = colon + 2; *p && nargs < (int)(sizeof(args) / sizeof(args[0])); p = end) {
		eq = strchr(p, '=');
		if (!eq)
			break;
		*eq = 0;
		if (!strcmp(p, "name")) { /* the rest of the line */
			args[nargs++] = (struct pf_arg){ .name = p, .type = PF_ARG_STR, .s = eq + 1 };
			break;
		}
		end = strchr(eq + 1, ' ');
		if (end)
			*end++ = 0;
		else
			end = eq + 1 + strlen(eq + 1);
		args[nargs++] = (struct pf_arg){ .name = p, .type = PF_ARG_INT,
						 .i = strtoll(eq + 1, NULL, 10) };
	}
	pf_instant(d->w, &(struct pf_event){ .track = d->process_track(d->ctx, pid), .ts = ts,
		   .name = str_set_intern(d->strings, msg), .category = "ptbpf",
		   .args = args, .nargs = nargs });
}

void gpu_timeline_status(struct gpu_timeline *d, const struct ptbpf_named_event *e, size_t size)
{
	size_t len = size >= sizeof(struct ptbpf_long_name) ? PTBPF_LONG_NAME_LEN : PTBPF_NAME_LEN;
	char msg[PTBPF_LONG_NAME_LEN * 4];
	int code = (int)e->ev.arg[0], i;

	text_escape(msg, sizeof(msg), e->name, len);
	if (code == PTBPF_AGENT_DEVICE || code == PTBPF_AGENT_VERSIONS) {
		facts_instant(d, e->ev.pid, e->ev.ts, msg);
		return;
	}
	log_msg("pid %u: agent: %s (%d)\n", e->ev.pid, msg, code);
	for (i = 0; i < d->nstatus && d->status[i].pid != (int)e->ev.pid; i++)
		;
	if (i == (int)(sizeof(d->status) / sizeof(d->status[0])))
		return;
	d->nstatus += i == d->nstatus;
	d->status[i].pid = e->ev.pid;
	d->status[i].code = code;
	if (code == PTBPF_AGENT_DORMANT)
		d->status[i].calls = d->status[i].no_corr = false;
	if (code == PTBPF_AGENT_NO_CORRELATION)
		d->status[i].calls = false, d->status[i].no_corr = true;
	if (code == PTBPF_AGENT_OPS_ON) {
		d->status[i].ops_desc = e->ev.arg[1];
		d->status[i].calls = !d->status[i].no_corr;
	} else if (code == PTBPF_AGENT_DORMANT || code == PTBPF_AGENT_ERR_OPS) {
		d->status[i].ops_desc = 0;
	}
	/* What changes the trace's content is marked in it. */
	if (code == PTBPF_AGENT_GPU_PAUSED || code == PTBPF_AGENT_GPU_RESUMED ||
	    code == PTBPF_AGENT_NO_CORRELATION || code == PTBPF_AGENT_REGIONS ||
	    code == PTBPF_AGENT_GRAPHS)
		pf_instant(d->w, &(struct pf_event){ .track = d->process_track(d->ctx, e->ev.pid),
			   .ts = e->ev.ts, .name = msg, .category = "ptbpf" });
}

void gpu_timeline_dropped(struct gpu_timeline *d, const struct ptbpf_event *e)
{
	d->counts.cupti_dropped += e->arg[0];
}
