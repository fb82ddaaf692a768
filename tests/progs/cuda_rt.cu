// SPDX-License-Identifier: BSD-2-Clause
/*
 * cuda_rt: a fixed sequence of CUDA runtime calls (libcudart.so.13, linked
 * dynamically) for ptbpf's GPU-call probes. Streams, pointers and the graph
 * are fake values: without a GPU every call fails, but each one still enters
 * libcudart, so the entry uprobes fire with arguments the test can check.
 * Usage: cuda_rt GO_FILE
 * Prints "ready", waits until GO_FILE exists, then prints each call's
 * return code and "done".
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

__global__ void ptbpf_rt_kernel(int *out)
{
	out[threadIdx.x] = blockIdx.x;
}

static void report(const char *call, cudaError_t rc)
{
	printf("%s %d\n", call, (int)rc);
}

int main(int argc, char **argv)
{
	cudaStream_t stream = (cudaStream_t)0x5a5a;
	int *out = NULL;
	void *args[] = { &out };
	cudaLaunchConfig_t cfg = {};
	struct stat st;

	if (argc != 2) {
		fprintf(stderr, "usage: cuda_rt GO_FILE\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (stat(argv[1], &st) != 0)
		usleep(10000);

	report("cudaLaunchKernel", cudaLaunchKernel((const void *)ptbpf_rt_kernel, dim3(3, 2, 1),
						    dim3(64, 1, 1), args, 128, stream));
	cfg.gridDim = dim3(5, 1, 1);
	cfg.blockDim = dim3(32, 2, 1);
	cfg.dynamicSmemBytes = 256;
	cfg.stream = (cudaStream_t)0x5b5b;
	report("cudaLaunchKernelExC", cudaLaunchKernelExC(&cfg, (const void *)ptbpf_rt_kernel, args));
	report("cudaMemcpyAsync", cudaMemcpyAsync((void *)0x1000, (const void *)0x2000, 4096,
						  cudaMemcpyHostToDevice, stream));
	report("cudaMemsetAsync", cudaMemsetAsync((void *)0x3000, 7, 1024, stream));
	report("cudaStreamSynchronize", cudaStreamSynchronize(stream));
	report("cudaDeviceSynchronize", cudaDeviceSynchronize());
	report("cudaGraphLaunch", cudaGraphLaunch((cudaGraphExec_t)0x6c6c, stream));
	printf("done\n");
	return 0;
}
