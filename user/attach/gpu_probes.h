/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU API calls, attached: which functions of libcuda (driver), libcudart
 * (runtime), libamdhip64 (HIP) and libnccl ptbpf probes and how their
 * arguments are laid out (the API table); finding the libraries in a
 * process (also ones loaded after attach) and attaching to them. What each
 * call becomes in the trace is record/gpu_calls.h.
 */
#ifndef PTBPF_GPU_PROBES_H
#define PTBPF_GPU_PROBES_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "ptbpf_events.h"

enum gpu_lib { GPU_LIB_CUDA, GPU_LIB_CUDART, GPU_LIB_HIP, GPU_LIB_NCCL, GPU_LIB_COUNT };

/* How an API's arguments are laid out (SysV x86-64). */
enum gpu_layout {
	GL_LAUNCH_DRV,     /* (f, gx, gy, gz, bx, by, [bz, smem, stream] on the stack) */
	GL_LAUNCH_HIP_EXT, /* as GL_LAUNCH_DRV, with global sizes in place of grid */
	GL_LAUNCH_DRV_EX,  /* (const CUlaunchConfig *, f, ...) */
	GL_LAUNCH_RT,      /* (func, dim3 grid, dim3 block, args, [smem, stream]) */
	GL_LAUNCH_RT_EX,   /* (const cudaLaunchConfig_t *, func, args) */
	GL_GRAPH,          /* (graph exec, stream) */
	GL_COPY,           /* (dst, src, bytes[, stream]): direction in the name */
	GL_COPY_KIND,      /* (dst, src, bytes, kind[, stream]) */
	GL_SET,            /* (dst, value, count[, stream]) */
	GL_SYNC_STREAM,    /* (stream) */
	GL_SYNC_ALL,       /* () */
	GL_SYNC_EVENT,     /* (event) */
	GL_WAIT_EVENT,     /* (stream, event, ...) */
	GL_ALLOC,          /* (out ptr, bytes[, stream]) */
	GL_FREE,           /* (ptr[, stream]) */
	GL_GET_FUNCTION,   /* (out handle, module/library, name) */
	GL_KERNEL_FUNCTION,/* (out function, kernel) */
	GL_CAPTURE_BEGIN,  /* (stream, ...) */
	GL_CAPTURE_END,    /* (stream, out graph) */
	/* NCCL (nccl.h): */
	GL_NCCL_REDUCE_ALL,/* (send, recv, count, dtype, op, comm, [stream]): AllReduce,
			    * ReduceScatter (count per rank) */
	GL_NCCL_BCAST,     /* (send, recv, count, dtype, root, comm, [stream]) */
	GL_NCCL_REDUCE,    /* (send, recv, count, dtype, op, root, [comm, stream]) */
	GL_NCCL_GATHER,    /* (send, recv, sendcount, dtype, comm, stream): AllGather */
	GL_NCCL_P2P,       /* (buf, count, dtype, peer, comm, stream): Send, Recv */
	GL_NCCL_GROUP,     /* (): GroupStart, GroupEnd */
};

/* API flags. */
#define GPU_ASYNC      0x01 /* takes a stream after its other arguments */
#define GPU_LAUNCH     0x02 /* enqueues a kernel (or graph) */
#define GPU_ELEM2      0x08 /* GL_SET: 16-bit elements */
#define GPU_ELEM4      0x10 /* GL_SET: 32-bit elements */

struct gpu_api {
	const char *name;      /* the exported symbol */
	enum gpu_lib lib;
	enum gpu_layout layout;
	unsigned flags;
	const char *kind;      /* GL_COPY: "HtoD", "DtoH", "DtoD", "HtoH", "Default" */
};

extern const struct gpu_api gpu_apis[];
extern const unsigned gpu_napis;

struct ptbpf_bpf;
struct gpu_probes;

/* Opens and loads the GPU BPF object on the maps of the op object (one
 * ring buffer, one set of loss counters). NULL with errno on failure. */
struct gpu_probes *gpu_probes_new(struct ptbpf_bpf *ops_skel);
/* Attaches to the GPU libraries pid maps that are not attached yet (call
 * again to catch libraries loaded later); with nccl_only, to libnccl alone
 * (the agent records the CUDA calls). Returns how many libraries were
 * newly attached, or -errno; prints what it attached. */
int gpu_probes_scan(struct gpu_probes *g, int pid, bool nccl_only);
/* Removes pid's probes (its image exec'd away); a later scan attaches anew. */
void gpu_probes_forget_pid(struct gpu_probes *g, int pid);
void gpu_probes_free(struct gpu_probes *g);
/* Its BPF object, for --bpf-stats (NULL: none). */
const struct bpf_object *gpu_probes_obj(const struct gpu_probes *g);

#endif /* PTBPF_GPU_PROBES_H */
