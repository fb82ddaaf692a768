// SPDX-License-Identifier: BSD-2-Clause
/*
 * nccl_stub: a stand-in libnccl.so.2 for CI, which has no NCCL (Debian
 * ships none, and there is no GPU). It exports NCCL's collective entry
 * points with NCCL's signatures (nccl.h, 2.x) and does nothing but return
 * ncclInvalidUsage (5) for a null communicator, as NCCL does: what CI checks
 * is that ptbpf's uprobes on a library named libnccl.so.* decode each
 * call's arguments. The GPU machine's tests trace real NCCL.
 */
#include <stddef.h>

typedef struct ncclComm *ncclComm_t;
typedef void *cudaStream_t;
typedef int ncclResult_t, ncclDataType_t, ncclRedOp_t;

#define EXPORT __attribute__((visibility("default"), noinline))
#define RESULT(comm) ((comm) ? 0 : 5)

EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t,
				  ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t,
				      ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
				  ncclComm_t comm, cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t,
			       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t,
				  ncclComm_t comm, cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer,
			     ncclComm_t comm, cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
			     cudaStream_t st)
{
	return RESULT(comm);
}

EXPORT ncclResult_t ncclGroupStart(void)
{
	return 0;
}

EXPORT ncclResult_t ncclGroupEnd(void)
{
	return 0;
}
