// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf export --kineto OUT.json FILE.pftrace`: the trace as torch.profiler's
 * Kineto writes Chrome JSON (libkineto's output_json.cpp and CuptiActivity.cpp,
 * torch's profiler_kineto.cpp), streamed from the report's pass over the
 * trace (report_data.c) as slices end:
 *   - categories: ops and backward nodes are cpu_op, record_function
 *     regions and steps user_annotation; kernel, gpu_memcpy, gpu_memset,
 *     cuda_runtime, cuda_driver as they are;
 *   - args: an External id for each op and region (its slice's begin
 *     order), given to the CUDA calls it makes and their GPU activities;
 *     Record function id, Ev Idx, Sequence number and Fwd thread id;
 *     a runtime call's cbid; a kernel's grid, block, registers, shared
 *     memory and, with the device's properties, blocks and warps per SM and
 *     its estimated occupancy; a copy's or set's bytes and bandwidth;
 *   - flows: ac2g from each launch, copy and set to its GPU activity (by
 *     correlation), fwdbwd from the forward op that made an autograd node
 *     to the node's backward slice;
 *   - ProfilerStep#N on the thread that ran the optimizer step (Kineto's
 *     are on the thread calling prof.step()), and the first step, from the
 *     thread's first event to its first optimizer step, as
 *     ProfilerStep#0;
 *   - gpu_user_annotation: each record_function region (else the step)
 *     over the GPU activities launched in it, per stream;
 *   - metadata: deviceProperties, CUDA/CUPTI versions, distributedInfo
 *     (from RANK/WORLD_SIZE), baseTimeNanoseconds (ts + base = unix time),
 *     trace_id; written after the events (JSON keys have no order).
 * What the trace does not carry is left out, never made up.
 */
#define _GNU_SOURCE
#include "offline/export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/cuda_cbid.h"
#include "lib/files.h"
#include "lib/log.h"
#include "lib/names.h"
#include "offline/cuda_info.h"
#include "report/report_data.h"

#define MAX_FWD_OPS (1u << 16)  /* forward ops waiting for their backward node */
#define MAX_PENDING (1u << 17)  /* GPU activities waiting for their step, per process */

struct pending_gpu { /* a GPU activity launched outside any region, until its step is known */
	uint64_t launch_ts, start, end;
	int64_t dev, stream;
};

#define KEPT_STEPS 256 /* per process: the GPU's activities come late, but not that late */

struct kept_step {
	uint64_t start, end, id;
	uint32_t name;
};

struct xproc { /* per process */
	int64_t pid;
	struct kept_step steps[KEPT_STEPS]; /* the latest, a ring */
	uint64_t nsteps;
	int64_t opt_tid;      /* the thread of its last Optimizer.step */
	bool have_opt, step0; /* step0: ProfilerStep#0 waits for the trace's first step */
	uint64_t step0_start, step0_end;
	struct pending_gpu *pend;
	size_t npend, pend_cap;
};

struct gpu_ann { /* a gpu_user_annotation */
	uint64_t ext, start, end;
	uint32_t name;
	int64_t dev, stream;
};

struct fwd_op {
	uint64_t ts;
	int64_t pid, tid;
};

struct export {
	FILE *o;
	bool first;
	struct rd_map fwd;    /* forward flow id -> index + 1 into fwd_v */
	struct fwd_op *fwd_v;
	size_t nfwd, fwd_cap;
	uint64_t next_flow;   /* fwdbwd flow ids */
	struct rd_map anns;   /* hash(region id, device, stream) -> index + 1 into ann_v */
	struct gpu_ann *ann_v;
	size_t nann, ann_cap;
	struct xproc procs[RD_MAX_PROCS];
	int nprocs;
	uint64_t gpu_named;   /* devices whose GPU process was named (bit per device) */
	/* a "[memory]" instant */
	struct { bool on; size_t track; uint64_t ts; int64_t bytes, value; } mem;
	int64_t cupti_version, runtime_version, driver_version;
	uint32_t name_versions;
};

static void sep(struct export *x)
{
	fputs(x->first ? "\n  " : ",\n  ", x->o);
	x->first = false;
}

static struct xproc *xproc_of(struct export *x, int64_t pid)
{
	for (int i = 0; i < x->nprocs; i++)
		if (x->procs[i].pid == pid)
			return &x->procs[i];
	if (x->nprocs == RD_MAX_PROCS)
		return NULL;
	x->procs[x->nprocs] = (struct xproc){ .pid = pid };
	return &x->procs[x->nprocs++];
}

/* ---- metadata events ---- */

static void meta(struct export *x, const char *what, int64_t pid, int64_t tid, const char *key,
		 const char *value)
{
	sep(x);
	fprintf(x->o, "{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %ld, \"tid\": %ld, "
		"\"args\": {\"%s\": ", what, (long)pid, (long)tid, key);
	json_str(x->o, value);
	fputs("}}", x->o);
}

static void meta_int(struct export *x, const char *what, int64_t pid, int64_t tid,
		     const char *key, int64_t value)
{
	sep(x);
	fprintf(x->o, "{\"name\": \"%s\", \"ph\": \"M\", \"pid\": %ld, \"tid\": %ld, "
		"\"args\": {\"%s\": %ld}}", what, (long)pid, (long)tid, key, (long)value);
}

static void on_descriptor(struct report *r, struct rd_track *t, const struct tr_track *d)
{
	struct export *x = r->hooks->ctx;
	char name[512];
	size_t len = d->proc_name.len < sizeof(name) - 1 ? d->proc_name.len : sizeof(name) - 1;

	memcpy(name, d->proc_name.s, len);
	name[len] = 0;
	if (t->gpu && t->pid >= 0 && t->pid < 64) {
		if (!(x->gpu_named & (1ull << t->pid))) {
			snprintf(name, sizeof(name), "GPU %ld", (long)t->pid);
			meta(x, "process_name", t->pid, 0, "name", name);
			meta(x, "process_labels", t->pid, 0, "labels", name);
			meta_int(x, "process_sort_index", t->pid, 0, "sort_index", t->pid);
			x->gpu_named |= 1ull << t->pid;
		}
		snprintf(name, sizeof(name), "stream %ld", (long)t->tid);
		meta(x, "thread_name", t->pid, t->tid, "name", name);
		meta_int(x, "thread_sort_index", t->pid, t->tid, "sort_index", t->tid);
	} else if (len && d->kind == TR_TRACK_PROCESS) {
		meta(x, "process_name", t->pid, 0, "name", name);
		meta(x, "process_labels", t->pid, 0, "labels", "CPU");
	} else if (len && d->kind == TR_TRACK_THREAD) {
		meta(x, "thread_name", t->pid, t->tid, "name", name);
		meta_int(x, "thread_sort_index", t->pid, t->tid, "sort_index", t->tid);
	}
}

/* ---- memory ---- */

/* The waiting "[memory]" instant, with the reserved bytes now in force. */
static void memory_flush(struct report *r, struct export *x)
{
	const struct rd_track *t;
	int64_t reserved;

	if (!x->mem.on)
		return;
	x->mem.on = false;
	t = &r->track_v[x->mem.track];
	reserved = t->sibling ? r->track_v[t->sibling - 1].value : 0;
	sep(x);
	fprintf(x->o, "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", "
		"\"name\": \"[memory]\", \"pid\": %ld, \"tid\": 0, \"ts\": ", (long)t->pid);
	put_us(x->o, x->mem.ts);
	fprintf(x->o, ", \"args\": {\"Device Type\": %u, \"Device Id\": %u, \"Addr\": 0, "
		"\"Bytes\": %ld, \"Total Allocated\": %ld, \"Total Reserved\": %ld}}",
		t->dev_type, t->dev_id, (long)x->mem.bytes, (long)x->mem.value, (long)reserved);
}

/* An allocated-bytes change waits one event for the reserved counter its
 * writer puts right after it (memtrack.c), then becomes a "[memory]" instant. */
static void on_counter(struct report *r, struct rd_track *t, uint64_t ts, int64_t before,
		       bool first)
{
	struct export *x = r->hooks->ctx;
	size_t idx = (size_t)(t - r->track_v);

	if (t->mem == 2 && x->mem.on && t->sibling == x->mem.track + 1 && x->mem.ts == ts) {
		memory_flush(r, x); /* its reserved bytes came with it */
		return;
	}
	memory_flush(r, x);
	if (t->mem != 1 || first)
		return; /* the first value: what came before tracing, not one block */
	/* Wrapping, not overflowing, on values no allocator reports. */
	x->mem.on = true;
	x->mem.track = idx;
	x->mem.ts = ts;
	x->mem.bytes = (int64_t)((uint64_t)t->value - (uint64_t)before);
	x->mem.value = t->value;
}

/* ---- GPU user annotations ---- */

static void ann_extend(struct export *x, uint64_t ext, uint32_t name, int64_t dev,
		       int64_t stream, uint64_t start, uint64_t end)
{
	uint64_t key = hash_pair(hash_pair(ext, (uint64_t)dev), (uint64_t)stream);
	uint64_t *slot = rd_map_slot(&x->anns, key, true);
	struct gpu_ann *a;

	if (!slot)
		return;
	if (!*slot) {
		if (!rd_room((void **)&x->ann_v, &x->ann_cap, x->nann, sizeof(*x->ann_v)))
			return;
		x->ann_v[x->nann] = (struct gpu_ann){ .ext = ext, .name = name, .dev = dev,
						      .stream = stream, .start = start, .end = end };
		*slot = ++x->nann;
		return;
	}
	a = &x->ann_v[*slot - 1];
	a->start = start < a->start ? start : a->start;
	a->end = end > a->end ? end : a->end;
}

/* A GPU activity goes to the region it was launched in, else (once the
 * process's steps are known) to its step. */
static void gpu_region(struct export *x, const struct rd_launch *l, int64_t dev, int64_t stream,
		       uint64_t start, uint64_t end)
{
	struct xproc *p;

	if (l->ann_id) {
		ann_extend(x, l->ann_id, l->ann_name, dev, stream, start, end);
		return;
	}
	if (!(p = xproc_of(x, l->pid)))
		return;
	for (uint64_t i = p->nsteps; i > 0 && i + KEPT_STEPS > p->nsteps; i--) {
		const struct kept_step *k = &p->steps[(i - 1) % KEPT_STEPS];

		if (l->ts >= k->start && l->ts < k->end) {
			ann_extend(x, k->id, k->name, dev, stream, start, end);
			return;
		}
		if (l->ts >= k->end)
			break;
	}
	if (p->nsteps && l->ts < p->steps[(p->nsteps - 1) % KEPT_STEPS].end)
		return; /* before the steps kept, or between steps */
	if (p->npend == MAX_PENDING) { /* no step for a long time: the older half goes */
		memmove(p->pend, p->pend + MAX_PENDING / 2, MAX_PENDING / 2 * sizeof(*p->pend));
		p->npend = MAX_PENDING / 2;
	}
	if (!rd_room((void **)&p->pend, &p->pend_cap, p->npend, sizeof(*p->pend)))
		return;
	p->pend[p->npend++] = (struct pending_gpu){ .launch_ts = l->ts, .start = start,
						    .end = end, .dev = dev, .stream = stream };
}

/* ---- slices ---- */

/* Kineto's category of a ptbpf category. */
static const char *kineto_cat(const char *cat)
{
	if (!strcmp(cat, "backward") || !strcmp(cat, "backward_function"))
		return "cpu_op";
	if (!strcmp(cat, "step") || !strcmp(cat, "dataloader"))
		return "user_annotation";
	return cat;
}

/* The complete event's head, up to its args' opening brace. */
static void x_head(struct export *x, const char *cat, const char *name, int64_t pid,
		   int64_t tid, uint64_t ts, uint64_t end)
{
	sep(x);
	fputs("{\"ph\": \"X\", \"cat\": ", x->o);
	json_str(x->o, cat);
	fputs(", \"name\": ", x->o);
	json_str(x->o, name);
	fprintf(x->o, ", \"pid\": %ld, \"tid\": %ld, \"ts\": ", (long)pid, (long)tid);
	put_us(x->o, ts);
	fputs(", \"dur\": ", x->o);
	put_us(x->o, end > ts ? end - ts : 0);
	fputs(", \"args\": {", x->o);
}

static void flow(struct export *x, char ph, uint64_t id, const char *cat, int64_t pid,
		 int64_t tid, uint64_t ts)
{
	sep(x);
	fprintf(x->o, "{\"ph\": \"%c\", \"id\": %lu, \"pid\": %ld, \"tid\": %ld, \"ts\": ", ph,
		(unsigned long)id, (long)pid, (long)tid);
	put_us(x->o, ts);
	fprintf(x->o, ", \"cat\": \"%s\", \"name\": \"%s\"%s}", cat, cat,
		ph == 'f' ? ", \"bp\": \"e\"" : "");
}

/* A forward op that made an autograd node: kept until the node's backward
 * slice draws the fwdbwd flow from it. */
static void fwd_op(struct export *x, const struct rd_track *t, const struct rd_frame *f)
{
	uint64_t *slot;

	if (hash_count(&x->fwd.h) >= MAX_FWD_OPS) { /* nodes never run backward: start over */
		rd_map_free(&x->fwd);
		x->nfwd = 0;
	}
	if (!(slot = rd_map_slot(&x->fwd, f->flow_out, true)))
		return;
	if (!*slot) {
		if (!rd_room((void **)&x->fwd_v, &x->fwd_cap, x->nfwd, sizeof(*x->fwd_v))) {
			rd_map_del(&x->fwd, f->flow_out);
			return;
		}
		*slot = ++x->nfwd;
	}
	x->fwd_v[*slot - 1] = (struct fwd_op){ .ts = f->ts, .pid = t->pid, .tid = t->tid };
}

/* An op's or region's args: External id, Record function id, Ev Idx, the
 * sequence number and forward thread, input shapes; and the fwdbwd flow
 * into a backward slice. */
static void op_slice(struct report *r, struct export *x, const struct rd_track *t,
		     const struct rd_frame *f, uint64_t end, bool op)
{
	const int64_t *v = f->a.v;
	int64_t seq = v[A_SEQUENCE_NR] != RD_UNSET ? v[A_SEQUENCE_NR] : v[A_SEQ];
	int64_t fwd_tid = v[A_FWD_TID] != RD_UNSET ? v[A_FWD_TID] : 0;
	const struct fwd_op *from = NULL;
	uint64_t *slot, flow_id = 0;

	if (f->bwd_in && (slot = rd_map_slot(&x->fwd, f->bwd_in, false)) && *slot) {
		from = &x->fwd_v[*slot - 1];
		if (v[A_FWD_TID] == RD_UNSET)
			fwd_tid = from->tid;
	}
	fprintf(x->o, "\"External id\": %lu, \"Record function id\": %ld, \"Ev Idx\": %lu",
		(unsigned long)f->id, (long)(v[A_RF_ID] != RD_UNSET ? v[A_RF_ID] : 0),
		(unsigned long)(f->id ? f->id - 1 : 0));
	if (op && seq != RD_UNSET)
		fprintf(x->o, ", \"Fwd thread id\": %ld, \"Sequence number\": %ld", (long)fwd_tid,
			(long)seq);
	if (v[A_DIMS] != RD_UNSET && v[A_TYPES] != RD_UNSET) {
		fputs(", \"Input Dims\": ", x->o);
		json_raw(x->o, rd_str(r, (uint32_t)v[A_DIMS]), int_list);
		fputs(", \"Input type\": ", x->o);
		json_raw(x->o, rd_str(r, (uint32_t)v[A_TYPES]), export_plain_name);
	}
	fputs("}}", x->o);
	if (from) {
		flow_id = ++x->next_flow;
		flow(x, 's', flow_id, "fwdbwd", from->pid, from->tid, from->ts);
		flow(x, 'f', flow_id, "fwdbwd", t->pid, t->tid, f->ts);
		rd_map_del(&x->fwd, f->bwd_in);
	}
	if (op && f->flow_out && f->cat == r->cat_cpu && seq != RD_UNSET)
		fwd_op(x, t, f);
}

/* The innermost op open around a CUDA call: its External id, or 0. */
static uint64_t enclosing_op(const struct report *r, const struct rd_track *t)
{
	for (int i = t->depth - 1; i >= 0; i--) {
		uint32_t c = t->stack[i].cat;

		if (c == r->cat_cpu || c == r->cat_bwd || c == r->cat_bwdfn)
			return t->stack[i].id;
	}
	return 0;
}

static void api_slice(struct report *r, struct export *x, const struct rd_track *t,
		      const struct rd_frame *f)
{
	uint64_t ext = enclosing_op(r, t);
	int64_t cbid = f->a.v[A_CBID];
	const char *comma = "";

	if (cbid == RD_UNSET)
		cbid = cuda_cbid(rd_str(r, f->name), f->cat == r->cat_drv);
	if (ext)
		fprintf(x->o, "\"External id\": %lu", (unsigned long)ext), comma = ", ";
	if (cbid >= 0)
		fprintf(x->o, "%s\"cbid\": %ld", comma, (long)cbid), comma = ", ";
	if (f->a.v[A_CORRELATION] != RD_UNSET)
		fprintf(x->o, "%s\"correlation\": %ld", comma, (long)f->a.v[A_CORRELATION]);
	fputs("}}", x->o);
	/* Kineto links every CUDA call to the GPU by its correlation: launches,
	 * copies, sets and syncs start an ac2g flow; any other call ends one
	 * that nothing starts (as Kineto writes it). */
	if (f->a.v[A_CORRELATION] != RD_UNSET)
		flow(x, cuda_flow_start((int)cbid, f->cat == r->cat_drv) ? 's' : 'f',
		     (uint64_t)f->a.v[A_CORRELATION], "ac2g", t->pid, t->tid, f->ts);
}

/* The device's properties as the occupancy calculator takes them. */
static bool device_of(const struct report *r, int64_t id, struct cuda_device *d)
{
	for (int i = 0; i < r->ndevices; i++) {
		const struct rd_device *dev = &r->devices[i];

		if (dev->id != id)
			continue;
		memset(d, 0, sizeof(*d));
		for (int k = 0; k < dev->nprops; k++) {
			const struct tr_arg *a = &dev->props[k];
			const char *n = rd_str(r, a->name.id);
			int64_t v = a->type == TR_ARG_INT ? a->i : (int64_t)a->u;

#define PROP(key, field) if (!strcmp(n, key)) d->field = v
			PROP("computeMajor", major); PROP("computeMinor", minor);
			PROP("numSms", sms); PROP("maxThreadsPerBlock", max_threads_per_block);
			PROP("maxThreadsPerMultiprocessor", max_threads_per_sm);
			PROP("warpSize", warp_size); PROP("regsPerBlock", regs_per_block);
			PROP("regsPerMultiprocessor", regs_per_sm);
			PROP("sharedMemPerBlock", smem_per_block);
			PROP("sharedMemPerMultiprocessor", smem_per_sm);
			PROP("reservedSharedMemPerBlock", smem_reserved_per_block);
#undef PROP
		}
		/* cudaDeviceProp's reserve, where the trace does not give it */
		if (!d->smem_reserved_per_block && d->major >= 8)
			d->smem_reserved_per_block = 1024;
		return d->sms > 0;
	}
	return false;
}

/* ptbpf's own: a replayed kernel's CUDA graph and the op that captured it,
 * a Triton kernel's ATen ops and model nodes (Kineto has neither). */
static void graph_and_source_args(struct report *r, struct export *x, const int64_t *v)
{
	static const struct { enum rd_arg k; const char *name; bool str; } extra[] = {
		{ A_GRAPH_ID, "graph id", false }, { A_GRAPH_NODE, "graph node id", false },
		{ A_CAPTURED_BY, "captured by", true }, { A_CAPTURED_SEQ, "captured seq", false },
		{ A_ATEN_OPS, "aten ops", true }, { A_SOURCE_NODES, "source nodes", true },
	};

	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		if (v[extra[i].k] == RD_UNSET)
			continue;
		fprintf(x->o, "\"%s\": ", extra[i].name);
		if (extra[i].str)
			json_str(x->o, rd_str(r, (uint32_t)v[extra[i].k]));
		else
			fprintf(x->o, "%ld", (long)v[extra[i].k]);
		fputs(", ", x->o);
	}
}

static void kernel_args(struct report *r, struct export *x, const struct rd_track *t,
			const struct rd_frame *f)
{
	const int64_t *v = f->a.v;
	const uint32_t *g = f->a.grid, *b = f->a.block;
	struct cuda_device d;

	fputs("\"queued\": 0, ", x->o);
	if (v[A_REGISTERS] != RD_UNSET)
		fprintf(x->o, "\"registers per thread\": %ld, ", (long)v[A_REGISTERS]);
	if (v[A_SHARED_MEM] != RD_UNSET)
		fprintf(x->o, "\"shared memory\": %ld, ", (long)v[A_SHARED_MEM]);
	if (v[A_GRID] != RD_UNSET && v[A_BLOCK] != RD_UNSET && device_of(r, t->pid, &d)) {
		uint64_t blocks = (uint64_t)g[0] * g[1] * g[2];
		int threads = (int)((uint64_t)b[0] * b[1] * b[2]);
		double per_sm = (double)blocks / d.sms;
		int occ = cuda_occupancy_pct(&d, blocks, threads,
					     v[A_REGISTERS] != RD_UNSET ? (int)v[A_REGISTERS] : 0,
					     v[A_SHARED_MEM] != RD_UNSET ? v[A_SHARED_MEM] : 0);

		fprintf(x->o, "\"blocks per SM\": %.6g, \"warps per SM\": %.6g, ", per_sm,
			per_sm * threads / 32);
		if (occ >= 0)
			fprintf(x->o, "\"est. achieved occupancy %%\": %d, ", occ);
	}
	if (v[A_GRID] != RD_UNSET)
		fprintf(x->o, "\"grid\": [%u, %u, %u], ", g[0], g[1], g[2]);
	if (v[A_BLOCK] != RD_UNSET)
		fprintf(x->o, "\"block\": [%u, %u, %u], ", b[0], b[1], b[2]);
	graph_and_source_args(r, x, v);
}

/* "Memcpy HtoD (Pinned -> Device)", "Memset (Device)" where the trace says
 * which memory; else ptbpf's name. */
static const char *gpu_mem_name(struct report *r, const struct rd_frame *f, char *buf,
				size_t len)
{
	const int64_t *v = f->a.v;
	const char *name = rd_str(r, f->name);

	if (f->cat == r->cat_memset && v[A_MEMORY_KIND] != RD_UNSET) {
		snprintf(buf, len, "Memset (%s)", cuda_memory_kind(v[A_MEMORY_KIND]));
		return buf;
	}
	if (f->cat == r->cat_memcpy && v[A_SRC_KIND] != RD_UNSET && v[A_DST_KIND] != RD_UNSET) {
		char kind[16] = "Unknown";

		if (v[A_COPY_KIND] != RD_UNSET)
			snprintf(kind, sizeof(kind), "%s", cuda_memcpy_kind(v[A_COPY_KIND]));
		else if (!strncmp(name, "Memcpy ", 7))
			snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(name + 7, " "), name + 7);
		snprintf(buf, len, "Memcpy %s (%s -> %s)", kind, cuda_memory_kind(v[A_SRC_KIND]),
			 cuda_memory_kind(v[A_DST_KIND]));
		return buf;
	}
	return name;
}

static void gpu_slice(struct report *r, struct export *x, const struct rd_track *t,
		      const struct rd_frame *f, uint64_t end, const struct rd_launch *l)
{
	const int64_t *v = f->a.v;
	int64_t corr = v[A_CORRELATION] != RD_UNSET ? v[A_CORRELATION] : l ? l->corr : -1;
	char buf[128];

	x_head(x, rd_str(r, f->cat), f->cat == r->cat_kernel ? rd_str(r, f->name) :
	       gpu_mem_name(r, f, buf, sizeof(buf)), t->pid, t->tid, f->ts, end);
	if (l && l->op_id)
		fprintf(x->o, "\"External id\": %lu, ", (unsigned long)l->op_id);
	if (f->cat == r->cat_kernel)
		kernel_args(r, x, t, f);
	fprintf(x->o, "\"device\": %ld, ", (long)t->pid);
	if (t->context >= 0)
		fprintf(x->o, "\"context\": %ld, ", (long)t->context);
	fprintf(x->o, "\"stream\": %ld", (long)t->tid);
	if (corr >= 0)
		fprintf(x->o, ", \"correlation\": %ld", (long)corr);
	if (f->cat != r->cat_kernel && v[A_BYTES] != RD_UNSET) {
		fprintf(x->o, ", \"bytes\": %ld, \"memory bandwidth (GB/s)\": ", (long)v[A_BYTES]);
		if (end > f->ts) /* bytes per ns = GB/s */
			fprintf(x->o, "%.6g", (double)v[A_BYTES] / (double)(end - f->ts));
		else
			fputs("\"N/A\"", x->o);
	}
	fputs("}}", x->o);
	if (corr >= 0)
		flow(x, 'f', (uint64_t)corr, "ac2g", t->pid, t->tid, f->ts);
	if (l)
		gpu_region(x, l, t->pid, t->tid, f->ts, end);
}

/* ---- steps ---- */

static void step_event(struct report *r, struct export *x, struct xproc *p, const char *name,
		       int64_t tid, uint64_t start, uint64_t end)
{
	uint64_t id = ++r->next_id;
	uint32_t name_id = rd_str_id(r, name, strlen(name));
	size_t kept = 0;

	p->steps[p->nsteps++ % KEPT_STEPS] = (struct kept_step){ start, end, id, name_id };
	x_head(x, "user_annotation", name, p->pid, tid, start, end);
	fprintf(x->o, "\"External id\": %lu, \"Record function id\": 0, \"Ev Idx\": %lu}}",
		(unsigned long)id, (unsigned long)(id - 1));
	for (size_t i = 0; i < p->npend; i++) {
		const struct pending_gpu *g = &p->pend[i];

		if (g->launch_ts >= start && g->launch_ts < end)
			ann_extend(x, id, name_id, g->dev, g->stream, g->start, g->end);
		else if (g->launch_ts >= end)
			p->pend[kept++] = *g;
	}
	p->npend = kept;
}

static void step0_flush(struct report *r, struct export *x, struct xproc *p)
{
	if (!p->step0)
		return;
	p->step0 = false;
	step_event(r, x, p, "ProfilerStep#0", p->opt_tid, p->step0_start, p->step0_end);
}

/* A step of the trace's steps track: on the optimizer's thread. */
static void step_slice(struct report *r, struct export *x, const struct rd_track *t,
		       const struct rd_frame *f, uint64_t end)
{
	struct xproc *p = xproc_of(x, t->pid);
	const char *name = rd_str(r, f->name);

	if (!p)
		return;
	if (!strcmp(name, "ProfilerStep#0")) /* the trace has its own */
		p->step0 = false;
	step0_flush(r, x, p);
	step_event(r, x, p, name, p->have_opt ? p->opt_tid : t->tid, f->ts, end);
}

static void optimizer_step(struct export *x, const struct rd_track *t, uint64_t end)
{
	struct xproc *p = xproc_of(x, t->pid);

	if (!p)
		return;
	if (!p->have_opt) {
		p->step0 = true;
		p->step0_start = t->first_ts;
		p->step0_end = end;
	}
	p->have_opt = true;
	p->opt_tid = t->tid;
}

static void on_slice(struct report *r, struct rd_track *t, const struct rd_frame *f,
		     uint64_t end, const struct rd_launch *l)
{
	struct export *x = r->hooks->ctx;
	const char *cat = f->cat < r->ns ? rd_str(r, f->cat) : "";
	bool op = f->cat == r->cat_cpu || f->cat == r->cat_bwd || f->cat == r->cat_bwdfn;

	memory_flush(r, x);
	if (t->pid < 0) /* not a thread, process or GPU track: a counter */
		return;
	if (f->cat == r->cat_syscall || f->cat == r->cat_fault || f->cat == r->cat_sched ||
	    f->cat == r->cat_block || f->cat == r->cat_gpu_idle)
		return; /* the kernel view, ptbpf's analysis: Kineto has no such events */
	if (f->cat == r->cat_step && !t->thread) {
		step_slice(r, x, t, f, end);
		return;
	}
	if (t->gpu && (f->cat == r->cat_kernel || f->cat == r->cat_memcpy ||
		       f->cat == r->cat_memset)) {
		if (f->a.v[A_CONTEXT] != RD_UNSET) /* once per stream, and where it changes */
			t->context = f->a.v[A_CONTEXT];
		gpu_slice(r, x, t, f, end, l);
		return;
	}
	x_head(x, kineto_cat(cat), rd_str(r, f->name), t->pid, t->tid, f->ts, end);
	if (t->thread && (op || f->cat == r->cat_user || f->cat == r->cat_loader))
		op_slice(r, x, t, f, end, op);
	else if (f->cat == r->cat_rt || f->cat == r->cat_drv)
		api_slice(r, x, t, f);
	else
		fputs("}}", x->o);
	if (t->thread && f->cat == r->cat_user && !strncmp(rd_str(r, f->name), "Optimizer.step#", 15))
		optimizer_step(x, t, end);
}

static void on_instant(struct report *r, struct rd_track *t, const struct tr_event *e,
		       const struct rd_args *a, uint32_t name)
{
	struct export *x = r->hooks->ctx;

	memory_flush(r, x);
	/* A launch -> kernel flow's start, unless the CUDA call it is in (its
	 * slice carries the correlation) starts it. */
	if (name == r->name_corr && a->v[A_CORRELATION] != RD_UNSET &&
	    !(t->depth && t->stack[t->depth - 1].a.v[A_CORRELATION] == a->v[A_CORRELATION]))
		flow(x, 's', (uint64_t)a->v[A_CORRELATION], "ac2g", t->pid, t->tid, e->ts);
	if (name != x->name_versions)
		return;
	for (int i = 0; i < e->nargs; i++) {
		const struct tr_arg *g = &e->args[i];
		int64_t v = g->type == TR_ARG_INT ? g->i : (int64_t)g->u;

		if (g->type == TR_ARG_STR || g->type == TR_ARG_DOUBLE)
			continue;
#define VERSION(key, field) \
		if (g->name.len == strlen(key) && !memcmp(g->name.s, key, g->name.len)) x->field = v
		VERSION("cupti_version", cupti_version);
		VERSION("cuda_runtime_version", runtime_version);
		VERSION("cuda_driver_version", driver_version);
#undef VERSION
	}
}

/* ---- the file ---- */

static void finish(struct report *r, struct export *x, const char *trace_path, uint64_t size)
{
	FILE *o = x->o;
	uint64_t id[2];

	memory_flush(r, x);
	for (int i = 0; i < x->nprocs; i++)
		step0_flush(r, x, &x->procs[i]);
	for (size_t i = 0; i < x->nann; i++) { /* Kineto: 1 ns earlier, 2 ns longer */
		const struct gpu_ann *a = &x->ann_v[i];

		x_head(x, "gpu_user_annotation", rd_str(r, a->name), a->dev, a->stream,
		       a->start ? a->start - 1 : 0, a->end + 1);
		fprintf(o, "\"External id\": %lu}}", (unsigned long)a->ext);
	}
	sep(x);
	fputs("{\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", "
	      "\"tid\": \"\", \"ts\": ", o);
	put_us(o, r->last_ts);
	fputs("}\n  ]", o);
	device_properties(r, o);
	if (x->cupti_version)
		fprintf(o, ",\n  \"cupti_version\": %ld", (long)x->cupti_version);
	if (x->runtime_version)
		fprintf(o, ",\n  \"cuda_runtime_version\": %ld", (long)x->runtime_version);
	if (x->driver_version)
		fprintf(o, ",\n  \"cuda_driver_version\": %ld", (long)x->driver_version);
	distributed_info(r, o);
	/* One id per trace: its clock, first event and size. */
	id[0] = hash_pair((uint64_t)r->clock_offset, r->first_ts);
	id[1] = hash_pair(id[0], size ^ r->events);
	fprintf(o, ",\n  \"trace_id\": \"%016lX%016lX\"", (unsigned long)id[0], (unsigned long)id[1]);
	fputs(",\n  \"displayTimeUnit\": \"ms\"", o);
	if (r->has_clock)
		fprintf(o, ",\n  \"baseTimeNanoseconds\": %ld", (long)r->clock_offset);
	fputs(",\n  \"traceName\": ", o);
	json_str(o, trace_path);
	fputs("\n}\n", o);
}

static void export_free(struct export *x)
{
	rd_map_free(&x->fwd);
	rd_map_free(&x->anns);
	free(x->fwd_v);
	free(x->ann_v);
	for (int i = 0; i < x->nprocs; i++)
		free(x->procs[i].pend);
}

int export_kineto(const char *path, const char *out_path, bool force)
{
	struct report r = { 0 };
	struct export x = { .first = true };
	struct rd_hooks hooks = { on_descriptor, on_slice, on_instant, on_counter, &x };
	struct outfile out = { .fd = -1 };
	struct tr_reader *tr = NULL;
	int rc = 1;

	r.hooks = &hooks;
	tr = tr_open(path, "export");
	if (!tr || !rd_init(&r))
		goto out;
	x.name_versions = rd_str_id(&r, "cuda versions", 13);
	if (!(x.o = rd_output_open(&out, out_path, force, path, "export")))
		goto out;
	fputs("{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [", x.o);
	if (rd_read(&r, tr) < 0)
		goto out;
	tr_warn_if_cut(tr, "export");
	finish(&r, &x, path, tr_status(tr)->bytes);
	rc = rd_output_commit(&out, x.o, "export");
	x.o = NULL;
	if (!rc)
		log_msg("export: wrote %s (%lu track events)\n", out_path,
			(unsigned long)r.events);
out:
	if (x.o) /* failed half way */
		fclose(x.o);
	outfile_discard(&out);
	tr_close(tr);
	export_free(&x);
	rd_free(&r);
	return rc ? 1 : 0;
}
