/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's data: one streaming pass over a trace (user/trace/trace_read.c)
 * that keeps, within bounded memory, what `ptbpf report` prints and
 * `report --html` draws (operators, kernels, steps, memory, Python call
 * sites, the trace's own attributes), and hands each finished slice,
 * instant and counter to hooks (the Kineto export, user/offline/export.c).
 *
 * Slices are paired per track (begin/end); a slice's arguments, from its
 * begin and its end, are read into struct rd_args. A GPU activity is tied
 * to the launch it came from through the trace's launch -> kernel flow:
 * the "cupti correlation" instant sits in the launching thread's open
 * frames, which give the kernel its ops (device time), the op that issued
 * it (its External id) and the record_function region around it.
 */
#ifndef PTBPF_REPORT_DATA_H
#define PTBPF_REPORT_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/hash.h"
#include "report/step_table.h"
#include "trace/trace_read.h"

#define RD_NONE UINT32_MAX     /* no string */
#define RD_UNSET INT64_MIN     /* an argument the slice does not have */
#define RD_MAX_ANCESTORS 8
#define RD_CURVE_POINTS 1024   /* memory curve points kept per counter */
#define RD_MAX_ATTRS 128
#define RD_MAX_PROCS 64
#define RD_MAX_DEVICE_PROPS 24
#define RD_MAX_DEVICES 16

/* u64 -> u64 on lib/hash; keys are any value (0 included); zeroed, a map
 * is empty, and a new entry's value is 0. */
struct rd_map {
	struct hash_table h; /* hash_u64(key) -> value */
};

uint64_t *rd_map_slot(struct rd_map *m, uint64_t key, bool add);
void rd_map_del(struct rd_map *m, uint64_t key);
void rd_map_free(struct rd_map *m);
/* Room for one more element of unit bytes after n in *p. */
bool rd_room(void **p, size_t *cap, size_t n, size_t unit);
/* The entry of a growable array that key names (m: key -> index + 1),
 * zeroed and *added when new; NULL when out of memory. */
void *rd_keyed(struct rd_map *m, uint64_t key, void **v, size_t *n, size_t *cap, size_t unit,
	       bool *added);

/* The slice arguments ptbpf writes that the report and the export read,
 * by the name ptbpf gives them (rd_arg_names in report_data.c). */
enum rd_arg {
	A_CORRELATION, A_ALLOC, A_DIMS, A_TYPES, A_STACK,
	A_GRID, A_BLOCK, A_REGISTERS, A_SHARED_MEM, A_BYTES, A_CONTEXT,
	A_SRC_KIND, A_DST_KIND, A_COPY_KIND, A_MEMORY_KIND, A_CBID,
	A_SEQ, A_SEQUENCE_NR, A_FWD_TID, A_RF_ID, A_QUEUED, A_DEVICE,
	A_FILE, A_BY, A_LOCK, A_TID, A_WOKEN_BY, A_WOKEN_TID, A_RETURN_NOT_REPORTED,
	A_BEGUN_BEFORE, A_UNFINISHED, A_CAPTURED_BY, A_CAPTURED_SEQ, A_GRAPH_ID,
	A_GRAPH_NODE, A_ATEN_OPS, A_SOURCE_NODES, A_INDUCTOR_GRAPH, A_INDUCTOR_MODULE,
	A_COUNT
};

struct rd_args {
	int64_t v[A_COUNT];   /* RD_UNSET if absent; strings (dims, types, the
			       * py_stack's call site): the report's string id */
	uint32_t grid[3], block[3];
};

/* (report_args.c) The arguments' names, by enum rd_arg. */
extern const char *const rd_arg_names[A_COUNT];

struct rd_frame {
	uint32_t name, cat;
	uint64_t ts, child;  /* child: time in the slices nested in it */
	uint64_t id;         /* thread tracks: 1, 2, ... in begin order */
	uint64_t flow_in;    /* the first flow the slice's begin terminates */
	uint64_t flow_out;   /* the first flow its begin or end starts */
	uint64_t bwd_in;     /* a "backward node" instant in it: the flow it ends */
	struct rd_args a;
};

struct rd_curve { /* a counter over time, at most RD_CURVE_POINTS points */
	uint64_t *ts;
	int64_t *v;
	size_t n;
	uint32_t stride;  /* values come in groups of stride, each kept as its min and max */
	uint32_t pending; /* values in the group so far */
	uint64_t lo_ts, hi_ts, last_ts;
	int64_t lo, hi, last;
};

struct rd_track {
	struct rd_frame *stack;
	int depth, overflow; /* overflow: begins past the kept depth */
	bool thread, gpu, process;
	uint64_t uuid;       /* its descriptor's */
	int64_t pid, tid;    /* threads; GPU stream tracks: device, stream */
	int64_t owner_tid;   /* a thread's child track ("blocked in"): the thread; else 0 */
	int64_t owner_pid;   /* GPU stream tracks: the process whose they are (<= 0: unknown) */
	uint64_t last_end;   /* GPU stream tracks: the latest end of its activities */
	int64_t context;     /* GPU stream tracks: the CUDA context its first activity
			      * names (the loader writes it once per stream); -1 */
	uint64_t first_ts;   /* its first event (0: none yet) */
	uint8_t mem;         /* 1: "... memory allocated" counter, 2: "... reserved" */
	uint8_t dev_type, dev_id; /* memory counters: c10::Device of "cuda:0 ..." */
	uint32_t name;       /* the track's name (RD_NONE: none) */
	int64_t peak;        /* counters: the largest value, and when */
	uint64_t peak_ts;
	int64_t value;       /* counters: the value in force */
	bool has_value;
	size_t sibling;      /* memory counters: the pair's other track, index + 1 */
	struct rd_curve curve; /* memory counters */
};

struct rd_op {
	uint32_t name, shapes; /* shapes: by-shape table only, else RD_NONE */
	uint64_t calls, total, self, dev_total, dev_self;
	uint64_t alloc;        /* bytes allocated in it (--memory traces) */
};

struct rd_optable {
	struct rd_map index;   /* key -> index + 1 */
	struct rd_op *v;
	size_t n, cap;
	bool by_shape;
};

struct rd_site { /* ops below a Python frame (traces with stacks) */
	uint32_t site;
	uint64_t calls, total;
};

/* A CUDA graph's replayed kernels, or a compiled graph's Triton kernels
 * (report_graphs.c), and the parts of their time by the op that captured
 * them (CUDA graphs) or the ATen ops they fuse (compiled graphs). */
#define RD_GRAPH_PARTS 6
struct rd_graph {
	int64_t key;           /* the graph id; compiled: its name's string id */
	int64_t pid;           /* the process (graph ids repeat across processes) */
	uint64_t kernels, ns;
	uint64_t ns_named;     /* under a capturing op; compiled: with ATen ops */
	struct { uint32_t name; uint64_t ns; } part[RD_GRAPH_PARTS];
	uint64_t other_ns;     /* parts past RD_GRAPH_PARTS */
};

struct rd_kernel {
	uint32_t name;
	uint64_t calls, total, min, max;
	uint32_t display; /* its short name (report.c) */
};

/* A launch, from its correlation instant until its GPU activity. */
struct rd_launch {
	/* op keys of the open ops, innermost first: by name, by shape */
	uint64_t ops[2][RD_MAX_ANCESTORS];
	int nops;
	int64_t corr;       /* the correlation number, or -1 */
	int64_t pid, tid;
	uint64_t ts;
	uint64_t op_id;     /* the innermost op's frame id, or 0 */
	uint64_t ann_id;    /* the innermost record_function region's frame id, or 0 */
	uint32_t ann_name;
};

struct rd_attr { /* a trace attribute (dev.ptbpf.*) */
	uint32_t key;
	bool is_str;
	int64_t i;
	uint32_t s;
};

struct rd_proc { /* a process of the trace */
	int64_t pid;
	uint32_t name;
	int64_t rank, local_rank, world_size; /* -1: not in its labels */
};

struct rd_device { /* a "device properties" instant */
	int64_t pid, id;
	struct tr_arg props[RD_MAX_DEVICE_PROPS]; /* strings: s.id is a report string id */
	int nprops;
};

struct report;

/* What the export does with the pass (all may be NULL). */
struct rd_hooks {
	void (*descriptor)(struct report *r, struct rd_track *t, const struct tr_track *d);
	/* A slice ended; l: a GPU activity's launch (NULL if none is known). */
	void (*slice)(struct report *r, struct rd_track *t, const struct rd_frame *f, uint64_t end,
		      const struct rd_launch *l);
	void (*instant)(struct report *r, struct rd_track *t, const struct tr_event *e,
			const struct rd_args *a, uint32_t name);
	/* A memory counter's new value (before: the one in force until then;
	 * first: the counter's first value). */
	void (*counter)(struct report *r, struct rd_track *t, uint64_t ts, int64_t before,
			bool first);
	void *ctx;
};

/* What reads the kernel view into the step tables (report_causes.c), in
 * every pass of the trace (hooks are the first pass's). */
struct rd_kernel_view {
	/* A slice ended; l: a GPU activity's launch (NULL if none is known,
	 * and in passes after the first). */
	void (*slice)(struct report *r, struct rd_track *t, const struct rd_frame *f,
		      uint64_t end, const struct rd_launch *l);
	/* A FtraceEventBundle. */
	void (*ftrace)(struct report *r, const uint8_t *d, size_t n);
	/* The trace is read again. */
	void (*pass)(struct report *r);
};

/* What reads CUDA graphs' and compiled graphs' kernels (report_graphs.c):
 * a kernel's end, in the first pass; free: at rd_free. */
struct rd_graph_view {
	void (*kernel)(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		       uint64_t dur);
	void (*free)(struct report *r);
};

/* What reads the job's ranks (report_ranks.c): a hang capture's summary
 * and the "waiting for" table. slice, instant, sample and cause: first
 * pass only; first_pass_done: once it ended, before any other pass. */
struct rd_rank_view {
	void (*slice)(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		      uint64_t end);
	void (*instant)(struct report *r, const struct rd_track *t, const struct tr_event *e,
			uint32_t name);
	void (*sample)(struct report *r, const struct tr_sample *s);
	/* a cause interval of a thread (report_causes.c's, by its string id) */
	void (*cause)(struct report *r, int64_t tid, uint32_t name, uint64_t start, uint64_t end);
	void (*first_pass_done)(struct report *r);
	void (*free)(struct report *r);
};

struct rk_data;

struct report {
	/* strings: interned, referred to by id */
	struct str_set *set;
	const char **s;
	size_t ns, s_cap;
	struct rd_map s_index;  /* pointer -> id + 1 */
	uint32_t *rids;         /* the reader's string ids -> id + 1 */
	size_t nrids;
	int pass;               /* 0: the pass that makes the tables; later: steps only */
	struct rd_map tracks;   /* uuid -> index + 1 into track_v */
	struct rd_track *track_v;
	size_t ntracks, track_cap;
	struct rd_optable ops, ops_shape; /* by name; by name and input shapes */
	/* torch.distributed.rpc: calls on their callers, their handling on the
	 * callees, and the ops run there as "CALL#remote_op: OP" (calls = count,
	 * total = inclusive host time) */
	struct rd_optable rpc_calls, rpc_handled, rpc_remote;
	bool want_shapes;       /* keep ops_shape */
	struct rd_samples *samples; /* CPU samples (report_samples.c); NULL: none */
	struct rd_map sites;    /* site id -> index + 1 into site_v */
	struct rd_site *site_v;
	size_t nsites, site_cap;
	struct rd_map cuda_graphs, compiled; /* key -> index + 1 into cg_v, cc_v */
	struct rd_graph *cg_v, *cc_v;
	size_t ncg, cg_cap, ncc, cc_cap;
	struct rd_map kernels;  /* name id -> index + 1 into k_v */
	struct rd_kernel *k_v;
	size_t nk, k_cap;
	struct rd_map launches; /* flow id -> index + 1 into launch_v, until its activity */
	struct rd_launch *launch_v;
	size_t nlaunch, launch_cap;
	size_t *launch_free;    /* launch_v slots whose activities came, to reuse */
	size_t nfree, free_cap;
	struct step_table *steps;
	/* GPU idle gaps (report_causes.c): each stream's gaps between two of
	 * its activities, as rows of a table of their own, split as steps
	 * are (the launching thread's causes in place of the step's) */
	struct step_table *gaps;
	/* Collectives' late arrivals (report_ranks.c): from the second-last
	 * rank's arrival to the last one's, on the last one's thread, split by
	 * that thread's causes as steps are */
	struct step_table *late;
	bool steps_done, gaps_done, late_done; /* their rows are made */
	const struct rd_rank_view *rview;
	struct rk_data *ranks;
	uint64_t ngaps, gaps_skipped; /* gaps seen; past RC_MAX_GAPS, not analysed */
	uint64_t events, first_ts, last_ts, next_id;
	bool has_clock;
	int64_t clock_offset;   /* REALTIME - MONOTONIC at the first ClockSnapshot */
	struct rd_attr attrs[RD_MAX_ATTRS];
	int nattrs;
	struct rd_proc procs[RD_MAX_PROCS];
	int nprocs;
	struct rd_device devices[RD_MAX_DEVICES];
	int ndevices;
	const struct rd_hooks *hooks;
	const struct rd_kernel_view *kview;
	const struct rd_graph_view *gview;
	uint32_t arg_base;      /* string ids arg_base .. + A_COUNT: the argument names */
	uint32_t cat_cpu, cat_kernel, cat_memcpy, cat_memset, cat_rt, cat_drv, cat_loader,
		 cat_step, cat_bwd, cat_bwdfn, cat_user, name_corr, name_bwd_node,
		 name_device_props, cat_rpc, cat_rpc_remote;
	/* The kernel view's slices (record/offcpu.c): what a thread blocked
	 * in, not work of the op around it (its self time keeps them, as
	 * torch.profiler's does), and not Kineto's. */
	uint32_t cat_syscall, cat_fault, cat_sched;
	uint32_t cat_block, cat_gpu_idle; /* block I/O; the GPU idle track (gap_track.c) */
	/* The kernel view's scheduler bundles (report_causes.c): how many, the
	 * last switch each CPU had in this pass, the traced threads (tid -> 1),
	 * and BOOTTIME - the events' clock. */
	uint64_t sched_bundles;
	struct rc_cpu *cpus;
	size_t ncpus;
	/* This pass: the kernel view's first switch, whether a CPU's records
	 * broke (a loss), and the traced threads seen in a switch (tid -> pass
	 * + 1). */
	uint64_t sched_first_ts;
	bool sched_broke;
	struct rd_map sched_seen;
	/* This pass: the threads found running when the view began, counted
	 * running from its first switch read so far (the CPUs' bundles come
	 * in no time order: an earlier one moves them back). */
	struct rc_claim *claims;
	size_t nclaims, claims_cap;
	/* Who woke a traced thread at the end of a blocking call (the calls'
	 * woken_by), for the GPU idle gaps' chains; past RC_MAX_WAKES, counted */
	struct rc_wake *wakes;
	size_t nwakes, wakes_cap;
	uint64_t wakes_dropped;
	struct rd_map thread_tids;
	int64_t boot_minus_mono;
	bool has_boot;
};

/* Sets r up (want_shapes and hooks may be set before or after); false
 * (said in one line) when out of memory. */
bool rd_init(struct report *r);
void rd_free(struct report *r);
/* One pass over the trace: 0, or -1 on a read error (printed). With a step
 * table (r->steps), its further passes too. Sorts the tables at the end. */
int rd_read(struct report *r, struct tr_reader *tr);

uint32_t rd_str_id(struct report *r, const char *s, size_t len);
/* The report's id of a string of the trace (interned ones by their reader
 * id, once). */
uint32_t rd_rid(struct report *r, const struct tr_str *s);
/* A counter's value into its curve; the curve's last points at the end. */
void rd_curve_add(struct rd_curve *c, uint64_t ts, int64_t v);
void rd_curve_finish(struct rd_curve *c);
/* A string by id; "" for RD_NONE or an id never given. */
const char *rd_str(const struct report *r, uint32_t id);
/* (report_args.c) A track event's arguments into a (those it does not
 * have left as they were); cleared; an end's joining its begin's. */
void rd_read_args(struct report *r, const struct tr_event *e, struct rd_args *a);
void rd_args_clear(struct rd_args *a);
void rd_args_merge(struct rd_args *to, const struct rd_args *from);
/* A "device properties" instant of t's process: the properties, kept as given. */
void rd_device_props(struct report *r, const struct rd_track *t, const struct tr_event *e,
		     const struct rd_args *a);

/* report_samples.c: one CPU sample of the trace into r's tables (false when
 * out of memory), and their memory freed. */
bool rd_samples_add(struct report *r, const struct tr_sample *s);
void rd_samples_free(struct report *r);

/* The ops that allocated, most bytes first (caller frees; NULL if none). */
const struct rd_op **rd_allocating_ops(const struct report *r, size_t *n);

struct outfile;
/* An output file under files.h's policy (written as OUT.partial), as a
 * stream; NULL with one line printed. */
FILE *rd_output_open(struct outfile *out, const char *path, bool force, const char *input,
		     const char *who);
/* Closes o and renames OUT.partial to OUT: 0, or -1 with one line printed. */
int rd_output_commit(struct outfile *out, FILE *o, const char *who);

/* Writes s as a JSON string ('<' escaped, for pages that embed it). */
void json_str(FILE *o, const char *s);

#endif /* PTBPF_REPORT_DATA_H */
