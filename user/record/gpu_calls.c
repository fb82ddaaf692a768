// SPDX-License-Identifier: BSD-2-Clause
/* GPU call records -> slice names and arguments. See gpu_calls.h. */
#define _GNU_SOURCE
#include "record/gpu_calls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/names.h"

#define MAX_STREAMS 4096

/* Work enqueued on a stream since it was last synchronized. */
struct stream {
	int pid;
	uint64_t handle, track, pending;
	bool capturing;
};

struct gpu_state {
	struct pf_writer *w;
	gpu_process_track_fn process_track;
	void *ctx;
	struct str_set *strings;
	struct str_map *kernel_names; /* (pid, handle) hash -> name */
	struct str_map *lookups;      /* (tid, sp) hash -> name being looked up */
	struct stream *streams;
	int nstreams;
	uint64_t *calls;              /* by API */
};

struct gpu_state *gpu_state_new(struct pf_writer *w, gpu_process_track_fn fn, void *ctx)
{
	struct gpu_state *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->w = w;
	g->process_track = fn;
	g->ctx = ctx;
	g->strings = str_set_new(1 << 16);
	g->kernel_names = str_map_new(1 << 18);
	g->lookups = str_map_new(1 << 12);
	g->streams = calloc(MAX_STREAMS, sizeof(*g->streams));
	g->calls = calloc(gpu_napis, sizeof(*g->calls));
	if (!g->strings || !g->kernel_names || !g->lookups || !g->streams || !g->calls) {
		gpu_state_free(g);
		return NULL;
	}
	return g;
}

void gpu_state_free(struct gpu_state *g)
{
	if (!g)
		return;
	str_set_free(g->strings);
	str_map_free(g->kernel_names);
	str_map_free(g->lookups);
	free(g->streams);
	free(g->calls);
	free(g);
}

uint64_t gpu_calls_of(const struct gpu_state *g, unsigned api)
{
	return api < gpu_napis ? g->calls[api] : 0;
}

void gpu_note_name(struct gpu_state *g, const struct ptbpf_named_event *e)
{
	char name[PTBPF_NAME_LEN + 1];

	memcpy(name, e->name, PTBPF_NAME_LEN);
	name[PTBPF_NAME_LEN] = 0;
	str_map_put(g->lookups, hash_pair(e->ev.tid, e->ev.key), demangle_intern(g->strings, name));
}

static struct stream *stream_of(struct gpu_state *g, int pid, uint64_t handle)
{
	char name[64];
	int i;

	for (i = 0; i < g->nstreams; i++)
		if (g->streams[i].pid == pid && g->streams[i].handle == handle)
			return &g->streams[i];
	if (g->nstreams == MAX_STREAMS)
		return NULL;
	g->streams[i] = (struct stream){ .pid = pid, .handle = handle };
	snprintf(name, sizeof(name), "stream %#lx: enqueued, not synchronized",
		 (unsigned long)handle);
	g->streams[i].track = pf_track_counter(g->w, g->process_track(g->ctx, pid), name,
					       PF_UNIT_COUNT);
	g->nstreams++;
	return &g->streams[i];
}

static void stream_count(struct gpu_state *g, struct stream *s, uint64_t ts, int64_t delta)
{
	if (!s)
		return;
	s->pending = delta < 0 ? 0 : s->pending + delta;
	pf_counter(g->w, s->track, ts, (int64_t)s->pending);
}

/* A synchronize of every stream of the process. */
static void sync_all(struct gpu_state *g, int pid, uint64_t ts)
{
	for (int i = 0; i < g->nstreams; i++)
		if (g->streams[i].pid == pid && g->streams[i].pending)
			stream_count(g, &g->streams[i], ts, -1);
}

static void arg_u(struct gpu_slice *s, const char *name, uint64_t v)
{
	if (s->nargs < GPU_MAX_ARGS)
		s->args[s->nargs++] = (struct pf_arg){ .name = name, .type = PF_ARG_UINT, .u = v };
}

static void arg_ptr(struct gpu_slice *s, const char *name, uint64_t v)
{
	if (s->nargs < GPU_MAX_ARGS)
		s->args[s->nargs++] = (struct pf_arg){ .name = name, .type = PF_ARG_PTR, .ptr = v };
}

static void arg_str(struct gpu_slice *s, const char *name, const char *v)
{
	if (s->nargs < GPU_MAX_ARGS)
		s->args[s->nargs++] = (struct pf_arg){ .name = name, .type = PF_ARG_STR, .s = v };
}

static void arg_bool(struct gpu_slice *s, const char *name)
{
	if (s->nargs < GPU_MAX_ARGS)
		s->args[s->nargs++] = (struct pf_arg){ .name = name, .type = PF_ARG_BOOL, .b = true };
}

/* "x,y,z" into the slice's next string buffer. */
static const char *dim3_str(struct gpu_slice *s, int slot, uint32_t x, uint32_t y, uint32_t z)
{
	snprintf(s->buf[slot], sizeof(s->buf[slot]), "%u,%u,%u", x, y, z);
	return s->buf[slot];
}

struct launch {
	uint64_t handle, stream, smem;
	uint32_t grid[3], block[3];
};

/* Reads a launch's geometry from wherever its API puts it. */
static void decode_launch(const struct gpu_api *api, const struct ptbpf_gpu_call *c,
			  struct launch *l)
{
	const uint64_t *r = c->reg, *st = c->stack;
	const uint32_t *cf = c->config;

	switch (api->layout) {
	case GL_LAUNCH_DRV:
	case GL_LAUNCH_HIP_EXT:
		*l = (struct launch){ r[0], st[2], (uint32_t)st[1],
				      { r[1], r[2], r[3] }, { r[4], r[5], (uint32_t)st[0] } };
		if (api->layout == GL_LAUNCH_HIP_EXT) /* global sizes: grid = global / block */
			for (int i = 0; i < 3; i++)
				l->grid[i] = l->block[i] ? l->grid[i] / l->block[i] : 0;
		break;
	case GL_LAUNCH_DRV_EX: /* CUlaunchConfig: 7 x u32, pad, hStream @32 */
		*l = (struct launch){ r[1], cf[8] | (uint64_t)cf[9] << 32, cf[6],
				      { cf[0], cf[1], cf[2] }, { cf[3], cf[4], cf[5] } };
		break;
	case GL_LAUNCH_RT: /* dim3 by value: {x,y} in one register, z in the next */
		*l = (struct launch){ r[0], st[1], st[0],
				      { (uint32_t)r[1], r[1] >> 32, (uint32_t)r[2] },
				      { (uint32_t)r[3], r[3] >> 32, (uint32_t)r[4] } };
		break;
	case GL_LAUNCH_RT_EX: /* cudaLaunchConfig_t: dim3, dim3, size_t smem @24, stream @32 */
		*l = (struct launch){ r[1], cf[8] | (uint64_t)cf[9] << 32,
				      cf[6] | (uint64_t)cf[7] << 32,
				      { cf[0], cf[1], cf[2] }, { cf[3], cf[4], cf[5] } };
		break;
	default:
		memset(l, 0, sizeof(*l));
	}
}

/* The Ex launches' attributes that change how a kernel runs (ids are the
 * same for CUlaunchAttributeID and cudaLaunchAttributeID). */
static void launch_attr_args(const struct ptbpf_gpu_call *c, struct gpu_slice *s)
{
	for (int i = 0; i < 4 && c->attr[i][0]; i++) {
		const uint32_t *a = c->attr[i];

		if (a[0] == 4) /* CLUSTER_DIMENSION */
			arg_str(s, "cluster", dim3_str(s, 3, a[1], a[2], a[3]));
		else if (a[0] == 2) /* COOPERATIVE */
			arg_u(s, "cooperative", a[1]);
		else if (a[0] == 8) /* PRIORITY */
			arg_u(s, "priority", a[1]);
		else if (s->nargs < GPU_MAX_ARGS) {
			snprintf(s->buf[4 + (i & 1)], sizeof(s->buf[4]), "launch_attr_%u", a[0]);
			arg_u(s, s->buf[4 + (i & 1)], a[1]);
		}
	}
}

static void launch_args(struct gpu_state *g, const struct gpu_api *api,
			const struct ptbpf_gpu_call *c, struct gpu_slice *s)
{
	const char *name;
	struct launch l;
	struct stream *st;

	if (api->layout == GL_GRAPH) {
		arg_ptr(s, "graph_exec", c->reg[0]);
		arg_ptr(s, "stream", c->reg[1]);
		st = stream_of(g, c->ev.pid, c->reg[1]);
	} else {
		decode_launch(api, c, &l);
		name = str_map_get(g->kernel_names, hash_pair(c->ev.pid, l.handle));
		if (!name) {
			snprintf(s->buf[0], sizeof(s->buf[0]), "%#lx", (unsigned long)l.handle);
			name = s->buf[0];
		}
		arg_str(s, "kernel", name);
		arg_str(s, "grid", dim3_str(s, 1, l.grid[0], l.grid[1], l.grid[2]));
		arg_str(s, "block", dim3_str(s, 2, l.block[0], l.block[1], l.block[2]));
		arg_u(s, "shared_mem", l.smem);
		arg_ptr(s, "stream", l.stream);
		st = stream_of(g, c->ev.pid, l.stream);
		if (api->layout == GL_LAUNCH_DRV_EX || api->layout == GL_LAUNCH_RT_EX)
			launch_attr_args(c, s);
	}
	if (st && st->capturing)
		arg_bool(s, "captured");
	else
		stream_count(g, st, c->ev.ts, 1);
}

static const char *copy_kind(uint64_t k)
{
	static const char *const kinds[] = { "HtoH", "HtoD", "DtoH", "DtoD", "Default" };

	return k < 5 ? kinds[k] : "unknown";
}

static void data_args(struct gpu_state *g, const struct gpu_api *api,
		      const struct ptbpf_gpu_call *c, struct gpu_slice *s)
{
	const uint64_t *r = c->reg;
	int stream_reg = api->layout == GL_COPY_KIND ? 4 : 3;
	uint64_t elem = api->flags & GPU_ELEM4 ? 4 : api->flags & GPU_ELEM2 ? 2 : 1;

	if (api->layout == GL_SET) {
		arg_u(s, "bytes", r[2] * elem);
		arg_u(s, "value", r[1]);
		arg_ptr(s, "dst", r[0]);
	} else {
		arg_u(s, "bytes", r[2]);
		arg_str(s, "kind", api->layout == GL_COPY_KIND ? copy_kind(r[3]) : api->kind);
		arg_ptr(s, "dst", r[0]);
		arg_ptr(s, "src", r[1]);
	}
	if (api->flags & GPU_ASYNC) {
		struct stream *st = stream_of(g, c->ev.pid, r[stream_reg]);

		arg_ptr(s, "stream", r[stream_reg]);
		if (st && st->capturing)
			arg_bool(s, "captured");
		else
			stream_count(g, st, c->ev.ts, 1);
	} else {
		sync_all(g, c->ev.pid, c->ev.ts); /* synchronous copies wait for the device */
	}
}

static void other_args(struct gpu_state *g, const struct gpu_api *api,
		       const struct ptbpf_gpu_call *c, struct gpu_slice *s)
{
	const uint64_t *r = c->reg;
	struct stream *st;

	switch (api->layout) {
	case GL_SYNC_STREAM:
		arg_ptr(s, "stream", r[0]);
		break;
	case GL_SYNC_EVENT:
		arg_ptr(s, "event", r[0]);
		break;
	case GL_WAIT_EVENT:
		arg_ptr(s, "stream", r[0]);
		arg_ptr(s, "event", r[1]);
		break;
	case GL_ALLOC:
		arg_u(s, "bytes", r[1]);
		if (api->flags & GPU_ASYNC)
			arg_ptr(s, "stream", r[2]);
		break;
	case GL_FREE:
		arg_ptr(s, "ptr", r[0]);
		if (api->flags & GPU_ASYNC)
			arg_ptr(s, "stream", r[1]);
		break;
	case GL_GET_FUNCTION: {
		const char *name = str_map_get(g->lookups, hash_pair(c->ev.tid, c->ev.key));

		arg_str(s, "name", name ? name : "?");
		break;
	}
	case GL_KERNEL_FUNCTION: {
		/* The function handle it returns gets the kernel's name. */
		const char *name = str_map_get(g->kernel_names, hash_pair(c->ev.pid, r[1]));

		arg_ptr(s, "kernel", r[1]);
		if (name)
			str_map_put(g->lookups, hash_pair(c->ev.tid, c->ev.key), name);
		break;
	}
	case GL_CAPTURE_BEGIN:
	case GL_CAPTURE_END:
		arg_ptr(s, "stream", r[0]);
		st = stream_of(g, c->ev.pid, r[0]);
		if (st)
			st->capturing = api->layout == GL_CAPTURE_BEGIN;
		break;
	default:
		break;
	}
}

static const char *const lib_category[GPU_LIB_COUNT] = {
	[GPU_LIB_CUDA] = "cuda_driver", [GPU_LIB_CUDART] = "cuda_runtime", [GPU_LIB_HIP] = "hip",
	[GPU_LIB_NCCL] = "nccl",
};

/* ncclDataType_t -> name and bytes per element. */
static const struct { const char *name; unsigned size; } nccl_types[] = {
	{ "int8", 1 }, { "uint8", 1 }, { "int32", 4 }, { "uint32", 4 }, { "int64", 8 },
	{ "uint64", 8 }, { "float16", 2 }, { "float32", 4 }, { "float64", 8 },
	{ "bfloat16", 2 }, { "float8e4m3", 1 }, { "float8e5m2", 1 },
};
static const char *const nccl_ops[] = { "sum", "prod", "max", "min", "avg" };

/* A collective: elements, type, bytes (per rank: what this rank sends or,
 * for a reduce-scatter, receives), reduction, root/peer, communicator and
 * stream. */
static void nccl_args(const struct gpu_api *api, const struct ptbpf_gpu_call *c,
		      struct gpu_slice *s)
{
	const uint64_t *r = c->reg;
	uint64_t count = r[2], dtype = r[3], comm = 0, stream = 0;
	int op = -1;
	int64_t root = -1, peer = -1;

	switch (api->layout) {
	case GL_NCCL_REDUCE_ALL:
		op = (int)r[4], comm = r[5], stream = c->stack[0];
		break;
	case GL_NCCL_BCAST:
		root = (int32_t)r[4], comm = r[5], stream = c->stack[0];
		break;
	case GL_NCCL_REDUCE:
		op = (int)r[4], root = (int32_t)r[5], comm = c->stack[0], stream = c->stack[1];
		break;
	case GL_NCCL_GATHER:
		comm = r[4], stream = r[5];
		break;
	case GL_NCCL_P2P:
		count = r[1], dtype = (uint32_t)r[2], peer = (int32_t)r[3], comm = r[4],
		stream = r[5];
		break;
	default:
		return;
	}
	dtype = (uint32_t)dtype;
	arg_u(s, "count", count);
	if (dtype < sizeof(nccl_types) / sizeof(nccl_types[0])) {
		arg_str(s, "dtype", nccl_types[dtype].name);
		arg_u(s, "bytes", count * nccl_types[dtype].size);
	} else {
		arg_u(s, "dtype", dtype);
	}
	if (op >= 0)
		arg_str(s, "op", (unsigned)op < sizeof(nccl_ops) / sizeof(nccl_ops[0]) ?
			nccl_ops[op] : "premul_sum");
	if (root >= 0)
		arg_u(s, "root", (uint64_t)root);
	if (peer >= 0)
		arg_u(s, "peer", (uint64_t)peer);
	arg_ptr(s, "comm", comm);
	arg_ptr(s, "stream", stream);
}

void gpu_call_begin(struct gpu_state *g, const struct ptbpf_gpu_call *c, bool in_op,
		    struct gpu_slice *s)
{
	unsigned idx = c->ev.id & GPU_COOKIE_API_MASK;
	const struct gpu_api *api;

	memset(s, 0, offsetof(struct gpu_slice, buf));
	if (idx >= gpu_napis) {
		s->name = "gpu call ?";
		s->category = "gpu";
		return;
	}
	api = &gpu_apis[idx];
	g->calls[idx]++;
	s->name = api->name;
	s->category = lib_category[api->lib];
	s->launch = api->flags & GPU_LAUNCH;
	if (s->launch)
		launch_args(g, api, c, s);
	else if (api->layout == GL_COPY || api->layout == GL_COPY_KIND || api->layout == GL_SET)
		data_args(g, api, c, s);
	else if (api->lib == GPU_LIB_NCCL)
		nccl_args(api, c, s);
	else
		other_args(g, api, c, s);
	if (api->layout == GL_SYNC_STREAM)
		stream_count(g, stream_of(g, c->ev.pid, c->reg[0]), c->ev.ts, -1);
	else if (api->layout == GL_SYNC_ALL)
		sync_all(g, c->ev.pid, c->ev.ts);
	if (s->launch && !in_op)
		arg_bool(s, "outside_op");
}

void gpu_call_end(struct gpu_state *g, const struct ptbpf_event *ret, struct gpu_slice *s)
{
	unsigned idx = ret->id & GPU_COOKIE_API_MASK;
	const struct gpu_api *api = idx < gpu_napis ? &gpu_apis[idx] : NULL;
	uint64_t rc = ret->arg[0], out = ret->arg[1];

	memset(s, 0, offsetof(struct gpu_slice, buf));
	s->args[s->nargs++] = (struct pf_arg){ .name = "rc", .type = PF_ARG_INT,
					       .i = (int32_t)rc };
	if (!api || rc != 0)
		return;
	if (api->layout == GL_ALLOC) {
		arg_ptr(s, "ptr", out);
	} else if (api->layout == GL_GET_FUNCTION || api->layout == GL_KERNEL_FUNCTION) {
		uint64_t k = hash_pair(ret->tid, ret->key);
		const char *name = str_map_get(g->lookups, k);

		arg_ptr(s, "handle", out);
		if (name)
			str_map_put(g->kernel_names, hash_pair(ret->pid, out), name);
	}
}
