// SPDX-License-Identifier: BSD-2-Clause
/*
 * hip_calls: a fixed sequence of HIP runtime calls (libamdhip64) for
 * ptbpf's GPU-call probes. Without an AMD GPU every call fails, but each one
 * still enters libamdhip64, so the entry uprobes fire with the fake handles,
 * sizes and streams below.
 * Usage: hip_calls GO_FILE
 * Prints "ready", waits until GO_FILE exists, then prints each call's
 * return code and "done".
 */
#include <hip/hip_runtime_api.h>

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define KERNEL ((hipFunction_t)0x5eed)
#define STREAM ((hipStream_t)0x7a7a)

static void report(const char *call, hipError_t rc)
{
	printf("%s %d\n", call, (int)rc);
}

int main(int argc, char **argv)
{
	hipFunction_t f = KERNEL;
	dim3 grid = { 3, 2, 1 }, block = { 64, 1, 1 };
	struct stat st;

	if (argc != 2) {
		fprintf(stderr, "usage: hip_calls GO_FILE\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (stat(argv[1], &st) != 0)
		usleep(10000);

	report("hipModuleGetFunction", hipModuleGetFunction(&f, (hipModule_t)0x1234, "ptbpf_hip_kernel"));
	report("hipModuleLaunchKernel",
	       hipModuleLaunchKernel(KERNEL, 4, 3, 2, 128, 1, 1, 512, STREAM, NULL, NULL));
	report("hipLaunchKernel", hipLaunchKernel((const void *)0x4444, grid, block, NULL, 128, STREAM));
	report("hipMemcpyAsync", hipMemcpyAsync((void *)0x1000, (const void *)0x2000, 4096,
						hipMemcpyHostToDevice, STREAM));
	report("hipMemsetAsync", hipMemsetAsync((void *)0x3000, 7, 1024, STREAM));
	report("hipStreamSynchronize", hipStreamSynchronize(STREAM));
	report("hipDeviceSynchronize", hipDeviceSynchronize());
	report("hipGraphLaunch", hipGraphLaunch((hipGraphExec_t)0x6c6c, STREAM));
	printf("done\n");
	return 0;
}
