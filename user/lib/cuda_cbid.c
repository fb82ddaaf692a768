// SPDX-License-Identifier: BSD-2-Clause
/* CUPTI's callback ids of the CUDA calls ptbpf records. See cuda_cbid.h. */
#include "lib/cuda_cbid.h"

#include <stdlib.h>
#include <string.h>

/* CUPTI_RUNTIME_TRACE_CBID_* / CUPTI_DRIVER_TRACE_CBID_* (cupti_runtime_cbid.h,
 * cupti_driver_cbid.h; the values never change between CUDA versions). */
struct cbid_name {
	const char *name;
	int cbid;
};

static struct cbid_name runtime_cbids[] = {
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

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct cbid_name *)a)->name, ((const struct cbid_name *)b)->name);
}

/* The loader asks for every CUDA call it writes: a binary search (the
 * tables sorted at the first call; ptbpf's readers and writer are single
 * threads). */
int cuda_cbid(const char *name, bool driver)
{
	static bool sorted;
	struct cbid_name key = { name, 0 }, *tab = driver ? driver_cbids : runtime_cbids, *hit;
	size_t n = driver ? sizeof(driver_cbids) / sizeof(driver_cbids[0]) :
			    sizeof(runtime_cbids) / sizeof(runtime_cbids[0]);

	if (!sorted) {
		qsort(runtime_cbids, sizeof(runtime_cbids) / sizeof(runtime_cbids[0]),
		      sizeof(runtime_cbids[0]), by_name);
		qsort(driver_cbids, sizeof(driver_cbids) / sizeof(driver_cbids[0]),
		      sizeof(driver_cbids[0]), by_name);
		sorted = true;
	}
	hit = bsearch(&key, tab, n, sizeof(*tab), by_name);
	return hit ? hit->cbid : -1;
}

bool cuda_flow_start(int cbid, bool driver)
{
	if (driver)
		return cbid == 307 || cbid == 652; /* cuLaunchKernel, cuLaunchKernelEx (Kineto) */
	return cbid == 211 || (cbid >= 31 && cbid <= 52) || cbid == 269 || cbid == 272 ||
	       cbid == 311 || cbid == 131 || cbid == 165 || cbid == 147 || cbid == 430;
}
