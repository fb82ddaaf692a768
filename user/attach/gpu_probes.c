// SPDX-License-Identifier: BSD-2-Clause
/* The GPU API table and attaching to the libraries. See gpu_probes.h. */
#define _GNU_SOURCE
#include "attach/gpu_probes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "lib/log.h"
#include "lib/elfsym.h"
#include "attach/links.h"
#include "attach/probes.h"
#include "attach/target.h"
#include "ptbpf.skel.h"
#include "gpu.skel.h"

#define D GPU_LIB_CUDA
#define R GPU_LIB_CUDART
#define H GPU_LIB_HIP
#define N GPU_LIB_NCCL
#define A GPU_ASYNC
#define LAUNCH GPU_LAUNCH

/* libcuda sees every launch (cuBLAS, cuDNN, NCCL and Triton carry a static
 * cudart); libcudart adds the runtime's view for torch's own kernels. */
const struct gpu_api gpu_apis[] = {
	{ "cuLaunchKernel", D, GL_LAUNCH_DRV, LAUNCH, NULL },
	{ "cuLaunchKernel_ptsz", D, GL_LAUNCH_DRV, LAUNCH, NULL },
	{ "cuLaunchKernelEx", D, GL_LAUNCH_DRV_EX, LAUNCH, NULL },
	{ "cuLaunchKernelEx_ptsz", D, GL_LAUNCH_DRV_EX, LAUNCH, NULL },
	{ "cuLaunchCooperativeKernel", D, GL_LAUNCH_DRV, LAUNCH, NULL },
	{ "cuLaunchCooperativeKernel_ptsz", D, GL_LAUNCH_DRV, LAUNCH, NULL },
	{ "cuGraphLaunch", D, GL_GRAPH, LAUNCH, NULL },
	{ "cuGraphLaunch_ptsz", D, GL_GRAPH, LAUNCH, NULL },
	{ "cuMemcpy", D, GL_COPY, 0, "Default" },
	{ "cuMemcpyAsync", D, GL_COPY, A, "Default" },
	{ "cuMemcpyAsync_ptsz", D, GL_COPY, A, "Default" },
	{ "cuMemcpyHtoD_v2", D, GL_COPY, 0, "HtoD" },
	{ "cuMemcpyDtoH_v2", D, GL_COPY, 0, "DtoH" },
	{ "cuMemcpyDtoD_v2", D, GL_COPY, 0, "DtoD" },
	{ "cuMemcpyHtoDAsync_v2", D, GL_COPY, A, "HtoD" },
	{ "cuMemcpyDtoHAsync_v2", D, GL_COPY, A, "DtoH" },
	{ "cuMemcpyDtoDAsync_v2", D, GL_COPY, A, "DtoD" },
	{ "cuMemcpyHtoDAsync_v2_ptsz", D, GL_COPY, A, "HtoD" },
	{ "cuMemcpyDtoHAsync_v2_ptsz", D, GL_COPY, A, "DtoH" },
	{ "cuMemcpyDtoDAsync_v2_ptsz", D, GL_COPY, A, "DtoD" },
	{ "cuMemsetD8_v2", D, GL_SET, 0, NULL },
	{ "cuMemsetD16_v2", D, GL_SET, GPU_ELEM2, NULL },
	{ "cuMemsetD32_v2", D, GL_SET, GPU_ELEM4, NULL },
	{ "cuMemsetD8Async", D, GL_SET, A, NULL },
	{ "cuMemsetD16Async", D, GL_SET, A | GPU_ELEM2, NULL },
	{ "cuMemsetD32Async", D, GL_SET, A | GPU_ELEM4, NULL },
	{ "cuMemsetD8Async_ptsz", D, GL_SET, A, NULL },
	{ "cuMemsetD32Async_ptsz", D, GL_SET, A | GPU_ELEM4, NULL },
	{ "cuStreamSynchronize", D, GL_SYNC_STREAM, 0, NULL },
	{ "cuStreamSynchronize_ptsz", D, GL_SYNC_STREAM, 0, NULL },
	{ "cuCtxSynchronize", D, GL_SYNC_ALL, 0, NULL },
	{ "cuEventSynchronize", D, GL_SYNC_EVENT, 0, NULL },
	{ "cuStreamWaitEvent", D, GL_WAIT_EVENT, 0, NULL },
	{ "cuStreamWaitEvent_ptsz", D, GL_WAIT_EVENT, 0, NULL },
	{ "cuMemAlloc_v2", D, GL_ALLOC, 0, NULL },
	{ "cuMemAllocAsync", D, GL_ALLOC, A, NULL },
	{ "cuMemAllocAsync_ptsz", D, GL_ALLOC, A, NULL },
	{ "cuMemFree_v2", D, GL_FREE, 0, NULL },
	{ "cuMemFreeAsync", D, GL_FREE, A, NULL },
	{ "cuMemFreeAsync_ptsz", D, GL_FREE, A, NULL },
	{ "cuModuleGetFunction", D, GL_GET_FUNCTION, 0, NULL },
	{ "cuLibraryGetKernel", D, GL_GET_FUNCTION, 0, NULL },
	{ "cuKernelGetFunction", D, GL_KERNEL_FUNCTION, 0, NULL },
	{ "cuStreamBeginCapture", D, GL_CAPTURE_BEGIN, 0, NULL },
	{ "cuStreamBeginCapture_v2", D, GL_CAPTURE_BEGIN, 0, NULL },
	{ "cuStreamBeginCapture_ptsz", D, GL_CAPTURE_BEGIN, 0, NULL },
	{ "cuStreamBeginCapture_v2_ptsz", D, GL_CAPTURE_BEGIN, 0, NULL },
	{ "cuStreamEndCapture", D, GL_CAPTURE_END, 0, NULL },
	{ "cuStreamEndCapture_ptsz", D, GL_CAPTURE_END, 0, NULL },
	{ "cudaLaunchKernel", R, GL_LAUNCH_RT, LAUNCH, NULL },
	{ "cudaLaunchKernel_ptsz", R, GL_LAUNCH_RT, LAUNCH, NULL },
	{ "cudaLaunchKernelExC", R, GL_LAUNCH_RT_EX, LAUNCH, NULL },
	{ "cudaLaunchKernelExC_ptsz", R, GL_LAUNCH_RT_EX, LAUNCH, NULL },
	{ "cudaLaunchCooperativeKernel", R, GL_LAUNCH_RT, LAUNCH, NULL },
	{ "cudaGraphLaunch", R, GL_GRAPH, LAUNCH, NULL },
	{ "cudaGraphLaunch_ptsz", R, GL_GRAPH, LAUNCH, NULL },
	{ "cudaMemcpy", R, GL_COPY_KIND, 0, NULL },
	{ "cudaMemcpyAsync", R, GL_COPY_KIND, A, NULL },
	{ "cudaMemcpyAsync_ptsz", R, GL_COPY_KIND, A, NULL },
	{ "cudaMemset", R, GL_SET, 0, NULL },
	{ "cudaMemsetAsync", R, GL_SET, A, NULL },
	{ "cudaMemsetAsync_ptsz", R, GL_SET, A, NULL },
	{ "cudaStreamSynchronize", R, GL_SYNC_STREAM, 0, NULL },
	{ "cudaStreamSynchronize_ptsz", R, GL_SYNC_STREAM, 0, NULL },
	{ "cudaDeviceSynchronize", R, GL_SYNC_ALL, 0, NULL },
	{ "cudaEventSynchronize", R, GL_SYNC_EVENT, 0, NULL },
	{ "cudaStreamWaitEvent", R, GL_WAIT_EVENT, 0, NULL },
	{ "cudaStreamWaitEvent_ptsz", R, GL_WAIT_EVENT, 0, NULL },
	{ "cudaStreamBeginCapture", R, GL_CAPTURE_BEGIN, 0, NULL },
	{ "cudaStreamEndCapture", R, GL_CAPTURE_END, 0, NULL },
	{ "hipLaunchKernel", H, GL_LAUNCH_RT, LAUNCH, NULL },
	{ "hipModuleLaunchKernel", H, GL_LAUNCH_DRV, LAUNCH, NULL },
	{ "hipExtModuleLaunchKernel", H, GL_LAUNCH_HIP_EXT, LAUNCH, NULL },
	{ "hipExtLaunchKernel", H, GL_LAUNCH_RT, LAUNCH, NULL },
	{ "hipLaunchCooperativeKernel", H, GL_LAUNCH_RT, LAUNCH, NULL },
	{ "hipGraphLaunch", H, GL_GRAPH, LAUNCH, NULL },
	{ "hipMemcpy", H, GL_COPY_KIND, 0, NULL },
	{ "hipMemcpyAsync", H, GL_COPY_KIND, A, NULL },
	{ "hipMemcpyHtoD", H, GL_COPY, 0, "HtoD" },
	{ "hipMemcpyDtoH", H, GL_COPY, 0, "DtoH" },
	{ "hipMemcpyDtoD", H, GL_COPY, 0, "DtoD" },
	{ "hipMemcpyHtoDAsync", H, GL_COPY, A, "HtoD" },
	{ "hipMemcpyDtoHAsync", H, GL_COPY, A, "DtoH" },
	{ "hipMemcpyDtoDAsync", H, GL_COPY, A, "DtoD" },
	{ "hipMemset", H, GL_SET, 0, NULL },
	{ "hipMemsetAsync", H, GL_SET, A, NULL },
	{ "hipMemsetD8", H, GL_SET, 0, NULL },
	{ "hipMemsetD32", H, GL_SET, GPU_ELEM4, NULL },
	{ "hipMemsetD8Async", H, GL_SET, A, NULL },
	{ "hipMemsetD32Async", H, GL_SET, A | GPU_ELEM4, NULL },
	{ "hipStreamSynchronize", H, GL_SYNC_STREAM, 0, NULL },
	{ "hipDeviceSynchronize", H, GL_SYNC_ALL, 0, NULL },
	{ "hipModuleGetFunction", H, GL_GET_FUNCTION, 0, NULL },
	/* NCCL's collectives as the process calls them (its kernels go
	 * through libcuda and the agent like any other). */
	{ "ncclAllReduce", N, GL_NCCL_REDUCE_ALL, 0, NULL },
	{ "ncclReduceScatter", N, GL_NCCL_REDUCE_ALL, 0, NULL },
	{ "ncclBroadcast", N, GL_NCCL_BCAST, 0, NULL },
	{ "ncclReduce", N, GL_NCCL_REDUCE, 0, NULL },
	{ "ncclAllGather", N, GL_NCCL_GATHER, 0, NULL },
	{ "ncclSend", N, GL_NCCL_P2P, 0, NULL },
	{ "ncclRecv", N, GL_NCCL_P2P, 0, NULL },
	{ "ncclGroupStart", N, GL_NCCL_GROUP, 0, NULL },
	{ "ncclGroupEnd", N, GL_NCCL_GROUP, 0, NULL },
};
const unsigned gpu_napis = sizeof(gpu_apis) / sizeof(gpu_apis[0]);

static const char *const lib_prefix[GPU_LIB_COUNT] = {
	[GPU_LIB_CUDA] = "libcuda.so", [GPU_LIB_CUDART] = "libcudart.so",
	[GPU_LIB_HIP] = "libamdhip64.so", [GPU_LIB_NCCL] = "libnccl.so",
};

struct attached {
	int pid;
	uint64_t dev, ino;
};

struct gpu_probes {
	struct gpu_bpf *skel;
	struct link_set links;
	struct attached *done; /* (pid, library inode) pairs attached */
	int ndone;
};

struct gpu_probes *gpu_probes_new(struct ptbpf_bpf *ops)
{
	struct gpu_probes *g = calloc(1, sizeof(*g));
	uint64_t again = 0;
	int err;

	if (!g)
		return NULL;
	do {
		gpu_bpf__destroy(g->skel);
		g->skel = gpu_bpf__open();
		if (!g->skel)
			goto fail;
		g->skel->rodata->wakeup_bytes = ops->rodata->wakeup_bytes;
		if (!(err = probes_share_maps(ops, g->skel->obj)))
			err = gpu_bpf__load(g->skel);
	} while (probes_load_again(err, &again));
	if (err) {
		errno = -err;
		goto fail;
	}
	return g;
fail:
	gpu_probes_free(g);
	return NULL;
}

static uint64_t cookie_of(unsigned api)
{
	uint64_t c = api;

	switch (gpu_apis[api].layout) {
	case GL_LAUNCH_DRV_EX:
	case GL_LAUNCH_RT_EX:
		c |= GPU_COOKIE_CONFIG;
		break;
	case GL_GET_FUNCTION:
		c |= GPU_COOKIE_NAME_RDX | GPU_COOKIE_OUT_RDI;
		break;
	case GL_ALLOC:
	case GL_KERNEL_FUNCTION:
		c |= GPU_COOKIE_OUT_RDI;
		break;
	default:
		break;
	}
	return c;
}

/* Entry probes and uretprobes on every API of lib that the file exports. */
static int attach_lib(struct gpu_probes *g, int pid, enum gpu_lib lib,
		      const struct target_lib *tl)
{
	unsigned long offs[sizeof(gpu_apis) / sizeof(gpu_apis[0])];
	__u64 cookies[sizeof(gpu_apis) / sizeof(gpu_apis[0])];
	struct elf_file *ef;
	struct elf_func f;
	char why[256];
	size_t n = 0;
	int err;

	ef = elf_file_open_exported(tl->fd, why, sizeof(why));
	if (!ef) {
		log_msg("pid %d: cannot read %s: %s\n", pid, tl->path, why);
		return -EINVAL;
	}
	for (unsigned i = 0; i < gpu_napis; i++) {
		if (gpu_apis[i].lib != lib || elf_file_find_func(ef, gpu_apis[i].name, &f))
			continue;
		offs[n] = f.file_off;
		cookies[n++] = cookie_of(i);
	}
	elf_file_close(ef);
	if (!n)
		return 0;
	{
		LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = offs, .cookies = cookies, .cnt = n);
		LIBBPF_OPTS(bpf_uprobe_multi_opts, r, .offsets = offs, .cookies = cookies, .cnt = n,
			    .retprobe = true);

		struct gpu_bpf *sk = g->skel;

		/* Returns first, and gone last: a call must never begin
		 * without its end. */
		err = link_set_uprobes(&g->links, pid, sk->progs.gpu_return, tl->attach_path, &r,
				       true);
		if (!err)
			err = link_set_uprobes(&g->links, pid, sk->progs.gpu_entry, tl->attach_path,
					       &o, false);
	}
	if (err) {
		log_msg("pid %d: attaching to %s failed: %s\n", pid, tl->path,
			strerror(-err));
		return err;
	}
	log_msg("pid %d: %zu GPU API probes on %s\n", pid, n, tl->path);
	return 1;
}

static bool already(const struct gpu_probes *g, int pid, const struct target_lib *tl)
{
	for (int i = 0; i < g->ndone; i++)
		if (g->done[i].pid == pid && g->done[i].dev == tl->dev && g->done[i].ino == tl->ino)
			return true;
	return false;
}

int gpu_probes_scan(struct gpu_probes *g, int pid, bool nccl_only)
{
	int added = 0;

	for (int lib = 0; lib < GPU_LIB_COUNT; lib++) {
		struct target_lib tl;
		struct attached *d;
		int ret;

		if ((nccl_only && lib != GPU_LIB_NCCL) || target_find_lib(pid, lib_prefix[lib], &tl))
			continue;
		if (already(g, pid, &tl)) {
			close(tl.fd);
			continue;
		}
		ret = attach_lib(g, pid, lib, &tl);
		close(tl.fd);
		d = realloc(g->done, (g->ndone + 1) * sizeof(*d));
		if (!d)
			return -ENOMEM;
		g->done = d;
		/* Failed attaches are remembered too: they are not retried. */
		g->done[g->ndone++] = (struct attached){ pid, tl.dev, tl.ino };
		if (ret < 0)
			return ret;
		added += ret;
	}
	return added;
}

void gpu_probes_forget_pid(struct gpu_probes *g, int pid)
{
	int kept = 0;

	link_set_destroy_pid(&g->links, pid);
	for (int i = 0; i < g->ndone; i++)
		if (g->done[i].pid != pid)
			g->done[kept++] = g->done[i];
	g->ndone = kept;
}

const struct bpf_object *gpu_probes_obj(const struct gpu_probes *g)
{
	return g ? g->skel->obj : NULL;
}

void gpu_probes_free(struct gpu_probes *g)
{
	if (!g)
		return;
	link_set_destroy(&g->links);
	free(g->done);
	gpu_bpf__destroy(g->skel);
	free(g);
}
