// SPDX-License-Identifier: BSD-2-Clause
/*
 * cuda_drv: a fixed sequence of CUDA driver API calls (libcuda.so.1) for
 * ptbpf's GPU-call probes. It links the toolkit's stub libcuda, which the
 * Makefile also installs as build/stubs/libcuda.so.1 (the rpath), so it runs
 * without a driver: every call fails, but each one still enters libcuda, so
 * the entry uprobes fire with the fake handles, sizes and streams below.
 * cuda.h maps some names to versioned exports (cuMemcpyHtoDAsync ->
 * cuMemcpyHtoDAsync_v2, cuMemAlloc -> cuMemAlloc_v2, ...).
 * Usage: cuda_drv GO_FILE
 * Prints "ready", waits until GO_FILE exists, then prints each call's
 * return code and "done".
 * cuda_drv --loop [NS]: prints "ready", then launches until killed, one
 * launch every NS ns (default 0: back to back, a call always in flight).
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define KERNEL ((CUfunction)0x5eed)
#define STREAM ((CUstream)0x7a7a)
#define CAPTURE_STREAM ((CUstream)0x7c7c)

static void report(const char *call, CUresult rc)
{
	printf("%s %d\n", call, (int)rc);
}

int main(int argc, char **argv)
{
	CUfunction f = KERNEL;
	CUlaunchAttribute attrs[2] = {
		{ .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
		  .value.clusterDim = { .x = 2, .y = 1, .z = 1 } },
		{ .id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 3 },
	};
	CUlaunchConfig cfg = {
		.gridDimX = 6, .gridDimY = 1, .gridDimZ = 1,
		.blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
		.sharedMemBytes = 64, .hStream = (CUstream)0x7b7b,
		.attrs = attrs, .numAttrs = 2,
	};
	CUgraph graph = NULL;
	CUdeviceptr p = 0;
	struct stat st;

	if (argc >= 2 && !strcmp(argv[1], "--loop")) {
		long ns = argc > 2 ? atol(argv[2]) : 0;

		printf("ready\n");
		fflush(stdout);
		for (;;) {
			struct timespec t0, t;

			cuLaunchKernel(KERNEL, 4, 3, 2, 128, 1, 1, 512, STREAM, NULL, NULL);
			clock_gettime(CLOCK_MONOTONIC, &t0);
			do
				clock_gettime(CLOCK_MONOTONIC, &t);
			while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < ns);
		}
	}
	if (argc != 2) {
		fprintf(stderr, "usage: cuda_drv GO_FILE | --loop\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (stat(argv[1], &st) != 0)
		usleep(10000);

	report("cuModuleGetFunction", cuModuleGetFunction(&f, (CUmodule)0x1234, "ptbpf_named_kernel"));
	report("cuLaunchKernel", cuLaunchKernel(KERNEL, 4, 3, 2, 128, 1, 1, 512, STREAM, NULL, NULL));
	report("cuLaunchKernelEx", cuLaunchKernelEx(&cfg, KERNEL, NULL, NULL));
	report("cuLaunchCooperativeKernel",
	       cuLaunchCooperativeKernel(KERNEL, 2, 2, 2, 32, 1, 1, 0, STREAM, NULL));
	report("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync((CUdeviceptr)0x10000, (const void *)0x20000,
						      8192, STREAM));
	report("cuMemcpyDtoH", cuMemcpyDtoH((void *)0x30000, (CUdeviceptr)0x40000, 2048));
	report("cuMemsetD32Async", cuMemsetD32Async((CUdeviceptr)0x50000, 0xdead, 256, STREAM));
	report("cuStreamBeginCapture", cuStreamBeginCapture(CAPTURE_STREAM, CU_STREAM_CAPTURE_MODE_GLOBAL));
	report("cuLaunchKernel", cuLaunchKernel(KERNEL, 1, 1, 1, 1, 1, 1, 0, CAPTURE_STREAM, NULL, NULL));
	report("cuStreamEndCapture", cuStreamEndCapture(CAPTURE_STREAM, &graph));
	report("cuGraphLaunch", cuGraphLaunch((CUgraphExec)0x6d6d, STREAM));
	report("cuStreamSynchronize", cuStreamSynchronize(STREAM));
	report("cuCtxSynchronize", cuCtxSynchronize());
	report("cuMemAlloc", cuMemAlloc(&p, 1 << 20));
	report("cuMemFree", cuMemFree((CUdeviceptr)0x60000));
	printf("done\n");
	return 0;
}
