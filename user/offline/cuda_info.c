// SPDX-License-Identifier: BSD-2-Clause
/* CUDA names, callback ids and occupancy for the Kineto export. See cuda_info.h. */
#include "offline/cuda_info.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

const char *cuda_memcpy_kind(int64_t kind)
{
	static const char *const names[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					     "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };

	return kind >= 0 && kind < (int64_t)(sizeof(names) / sizeof(names[0])) ? names[kind] :
									      "Unknown";
}

const char *cuda_memory_kind(int64_t kind)
{
	static const char *const names[] = { "Unknown", "Pageable", "Pinned", "Device", "Array",
					     "Managed", "Device Static", "Managed Static" };

	return kind >= 0 && kind < (int64_t)(sizeof(names) / sizeof(names[0])) ? names[kind] :
									      "Unknown";
}

/* CUPTI_RUNTIME_TRACE_CBID_* / CUPTI_DRIVER_TRACE_CBID_* (cupti_runtime_cbid.h,
 * cupti_driver_cbid.h; the values never change between CUDA versions). */
static const struct {
	const char *name;
	int cbid;
} runtime_cbids[] = {
	{ "cudaGetDeviceCount", 3 }, { "cudaGetLastError", 10 }, { "cudaPeekAtLastError", 11 },
	{ "cudaFuncGetAttributes", 15 }, { "cudaSetDevice", 16 }, { "cudaGetDevice", 17 },
	{ "cudaMalloc", 20 }, { "cudaFree", 22 }, { "cudaMallocHost", 25 }, { "cudaFreeHost", 26 },
	{ "cudaHostAlloc", 27 }, { "cudaMemGetInfo", 30 }, { "cudaMemcpy", 31 },
	{ "cudaMemcpy2D", 32 }, { "cudaMemcpyAsync", 41 }, { "cudaMemcpy2DAsync", 44 },
	{ "cudaMemset", 49 }, { "cudaMemsetAsync", 51 }, { "cudaStreamSynchronize", 131 },
	{ "cudaEventCreateWithFlags", 134 }, { "cudaEventRecord", 135 },
	{ "cudaEventDestroy", 136 }, { "cudaEventSynchronize", 137 }, { "cudaEventQuery", 138 },
	{ "cudaEventElapsedTime", 139 }, { "cudaStreamWaitEvent", 147 },
	{ "cudaPointerGetAttributes", 151 }, { "cudaMemcpyPeerAsync", 161 },
	{ "cudaDeviceSynchronize", 165 }, { "cudaDeviceGetAttribute", 200 },
	{ "cudaStreamGetPriority", 203 }, { "cudaLaunchKernel", 211 },
	{ "cudaLaunchKernel_ptsz", 214 }, { "cudaMemcpyAsync_ptsz", 225 },
	{ "cudaMemcpy2DAsync_ptsz", 228 }, { "cudaMemsetAsync_ptsz", 235 },
	{ "cudaStreamSynchronize_ptsz", 239 }, { "cudaEventRecord_ptsz", 242 },
	{ "cudaStreamWaitEvent_ptsz", 247 },
	{ "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 251 },
	{ "cudaLaunchCooperativeKernel", 269 }, { "cudaLaunchCooperativeKernel_ptsz", 270 },
	{ "cudaFuncSetAttribute", 273 }, { "cudaGraphLaunch", 311 },
	{ "cudaGraphLaunch_ptsz", 312 }, { "cudaStreamIsCapturing", 317 },
	{ "cudaStreamIsCapturing_ptsz", 318 }, { "cudaThreadExchangeStreamCaptureMode", 327 },
	{ "cudaEventRecordWithFlags", 370 }, { "cudaEventRecordWithFlags_ptsz", 371 },
	{ "cudaMallocAsync", 373 }, { "cudaMallocAsync_ptsz", 374 }, { "cudaFreeAsync", 375 },
	{ "cudaFreeAsync_ptsz", 376 }, { "cudaStreamGetCaptureInfo_v2", 409 },
	{ "cudaLaunchKernelExC", 430 }, { "cudaLaunchKernelExC_ptsz", 431 },
}, driver_cbids[] = {
	{ "cuLaunchKernel", 307 }, { "cuLaunchKernel_ptsz", 442 },
	{ "cuLaunchCooperativeKernel", 477 }, { "cuLaunchCooperativeKernel_ptsz", 478 },
	{ "cuGraphLaunch", 514 }, { "cuGraphLaunch_ptsz", 515 }, { "cuLaunchKernelEx", 652 },
	{ "cuLaunchKernelEx_ptsz", 653 },
};

int cuda_cbid(const char *name, bool driver)
{
	size_t n = driver ? sizeof(driver_cbids) / sizeof(driver_cbids[0]) :
			    sizeof(runtime_cbids) / sizeof(runtime_cbids[0]);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, driver ? driver_cbids[i].name : runtime_cbids[i].name))
			return driver ? driver_cbids[i].cbid : runtime_cbids[i].cbid;
	return -1;
}

bool cuda_flow_start(int cbid, bool driver)
{
	if (driver)
		return cbid == 307 || cbid == 652; /* cuLaunchKernel, cuLaunchKernelEx (Kineto) */
	return cbid == 211 || (cbid >= 31 && cbid <= 52) || cbid == 269 || cbid == 272 ||
	       cbid == 311 || cbid == 131 || cbid == 165 || cbid == 147 || cbid == 430;
}

static int div_up(int x, int y)
{
	return (x + y - 1) / y;
}

static int round_up(int x, int y)
{
	return y * div_up(x, y);
}

static int max_blocks_per_sm(const struct cuda_device *d)
{
	switch (d->major) {
	case 7: return d->minor == 5 ? 16 : 32;
	case 8: return d->minor == 0 ? 32 : d->minor == 9 ? 24 : 16;
	case 9: return 32;
	case 10: return d->minor == 1 ? 24 : 32;
	case 11: return d->minor == 0 ? 24 : 32;
	case 12: return 24;
	default: return 0;
	}
}

/* The shared memory carveout an SM is configured to that holds size
 * bytes (cudaOccAlignUpShmemSizeVoltaPlus); -1 if none does. */
static int64_t carveout(const struct cuda_device *d, int64_t size)
{
	static const int volta[] = { 0, 8, 16, 32, 64, 96 }, turing[] = { 32, 64 },
			 ga100[] = { 0, 8, 16, 32, 64, 100, 132, 164 },
			 ga10x[] = { 0, 8, 16, 32, 64, 100 },
			 hopper[] = { 0, 8, 16, 32, 64, 100, 132, 164, 196, 228 };
	const int *kb;
	size_t n;

#define USE(a) (kb = (a), n = sizeof(a) / sizeof((a)[0]))
	if (d->major == 7)
		d->minor == 5 ? USE(turing) : USE(volta);
	else if (d->major == 8)
		d->minor == 0 || d->minor == 7 ? USE(ga100) : USE(ga10x);
	else if (d->major >= 9 && d->major <= 11)
		USE(hopper);
	else
		USE(ga10x);
#undef USE
	for (size_t i = 0; i < n; i++)
		if (size <= kb[i] * 1024LL)
			return kb[i] * 1024LL;
	return -1;
}

int cuda_occupancy_pct(const struct cuda_device *d, uint64_t grid_blocks, int block_threads,
		       int regs_per_thread, int64_t smem_per_block)
{
	int warps, regs_warp, regs_cta, regs_assumed, lim_regs, lim_warps, lim_smem, lim;
	int64_t smem_cta, smem_sm;
	double blocks_per_sm;

	if (!d || d->major < 7 || d->sms <= 0 || d->warp_size <= 0 || d->warp_size > 1024 ||
	    block_threads <= 0 || d->max_threads_per_sm <= 0 || d->regs_per_sm <= 0 ||
	    d->max_threads_per_block <= 0 || regs_per_thread < 0 || smem_per_block < 0 ||
	    d->smem_reserved_per_block < 0 || d->smem_reserved_per_block > (1 << 20))
		return -1;
	if (block_threads > d->max_threads_per_block || regs_per_thread > 256 ||
	    smem_per_block > (1 << 30))
		return 0; /* it cannot run: no block fits */
	blocks_per_sm = (double)grid_blocks / d->sms;
	warps = div_up(block_threads, d->warp_size);
	/* registers: allocated per warp in units of 256, per sub-partition (4) */
	regs_warp = round_up(regs_per_thread * d->warp_size, 256);
	regs_cta = regs_warp * warps;
	regs_assumed = regs_warp * round_up(warps, 4);
	if (d->regs_per_block < regs_assumed || d->regs_per_block < regs_cta ||
	    regs_per_thread > 256)
		lim_regs = 0;
	else
		lim_regs = regs_warp ? (d->regs_per_sm / 4 / regs_warp) * 4 / warps : INT_MAX;
	lim_warps = block_threads > d->max_threads_per_block ? 0 :
		    d->max_threads_per_sm / d->warp_size / warps;
	/* shared memory: in units of 128 bytes, with the driver's reserve */
	smem_cta = round_up((int)(smem_per_block + d->smem_reserved_per_block), 128);
	if (smem_cta > d->smem_per_block + d->smem_reserved_per_block) {
		lim_smem = 0;
	} else {
		smem_sm = carveout(d, d->smem_per_sm);
		if (smem_sm < smem_cta)
			smem_sm = carveout(d, smem_cta);
		lim_smem = smem_sm < 0 ? 0 : smem_cta ? (int)(smem_sm / smem_cta) : INT_MAX;
	}
	lim = max_blocks_per_sm(d);
	lim = lim_regs < lim ? lim_regs : lim;
	lim = lim_warps < lim ? lim_warps : lim;
	lim = lim_smem < lim ? lim_smem : lim;
	if (lim < blocks_per_sm)
		blocks_per_sm = lim;
	return (int)(0.5 + blocks_per_sm * block_threads / d->max_threads_per_sm * 100.0);
}
