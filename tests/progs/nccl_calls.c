// SPDX-License-Identifier: BSD-2-Clause
/*
 * nccl_calls: a fixed sequence of NCCL calls with fake buffers, counts,
 * communicator and stream, against build/stubs/libnccl.so.2 (the rpath;
 * tests/progs/nccl_stub.c). Usage: nccl_calls GO_FILE. Prints "ready",
 * waits until GO_FILE exists, then prints each call's return code and
 * "done".
 */
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct ncclComm *ncclComm_t;
typedef void *cudaStream_t;
typedef int ncclResult_t;

ncclResult_t ncclAllReduce(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduceScatter(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclBroadcast(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduce(const void *, void *, size_t, int, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclAllGather(const void *, void *, size_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclSend(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclRecv(void *, size_t, int, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#define S ((const void *)0x1000)
#define R ((void *)0x2000)
#define COMM ((ncclComm_t)0xc0c0)
#define STREAM ((cudaStream_t)0x7a7a)
/* ncclDataType_t / ncclRedOp_t values (nccl.h) */
enum { INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 };
enum { SUM, PROD, MAX, MIN, AVG };

static void report(const char *call, ncclResult_t rc)
{
	printf("%s %d\n", call, rc);
}

int main(int argc, char **argv)
{
	struct stat st;

	if (argc != 2)
		return 2;
	printf("ready\n");
	fflush(stdout);
	while (stat(argv[1], &st))
		usleep(10000);
	report("ncclGroupStart", ncclGroupStart());
	report("ncclAllReduce", ncclAllReduce(S, R, 1024, FLOAT32, SUM, COMM, STREAM));
	report("ncclBroadcast", ncclBroadcast(S, R, 256, BFLOAT16, 1, COMM, STREAM));
	report("ncclReduce", ncclReduce(S, R, 512, FLOAT16, MAX, 0, COMM, STREAM));
	report("ncclAllGather", ncclAllGather(S, R, 128, INT64, COMM, STREAM));
	report("ncclReduceScatter", ncclReduceScatter(S, R, 64, FLOAT32, AVG, COMM, STREAM));
	report("ncclSend", ncclSend(S, 100, UINT8, 3, COMM, STREAM));
	report("ncclRecv", ncclRecv(R, 100, UINT8, 2, COMM, STREAM));
	report("ncclAllReduce", ncclAllReduce(S, R, 8, INT32, SUM, NULL, STREAM));
	report("ncclGroupEnd", ncclGroupEnd());
	printf("done\n");
	return 0;
}
