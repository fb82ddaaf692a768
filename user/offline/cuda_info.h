/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the Kineto export needs to know about CUDA, as Kineto itself writes
 * it: CUPTI's memcpy and memory kinds by name, and a kernel's estimated
 * achieved occupancy from the device's properties (CUDA's occupancy
 * calculator). The callback ids of CUDA calls: lib/cuda_cbid.h.
 */
#ifndef PTBPF_CUDA_INFO_H
#define PTBPF_CUDA_INFO_H

#include <stdbool.h>
#include <stdint.h>

/* CUpti_ActivityMemcpyKind as Kineto names it ("HtoD"); "Unknown" past the table. */
const char *cuda_memcpy_kind(int64_t kind);
/* CUpti_ActivityMemoryKind as Kineto names it ("Pinned", "Device"). */
const char *cuda_memory_kind(int64_t kind);
struct cuda_device {
	int major, minor;                 /* compute capability */
	int sms;                          /* multiprocessors */
	int max_threads_per_block, max_threads_per_sm, warp_size;
	int regs_per_block, regs_per_sm;
	int64_t smem_per_block, smem_per_sm, smem_reserved_per_block;
};

/*
 * Kineto's "est. achieved occupancy %": the kernel's blocks per SM (grid
 * blocks over SMs), capped by how many blocks of it fit on an SM (its
 * threads, registers, shared memory), times its threads, over the SM's
 * threads, rounded to a whole percent; -1 if the device is not known.
 * A port of cudaOccMaxActiveBlocksPerMultiprocessor (CUDA 13.0's
 * cuda_occupancy.h) for compute capability 7.0 and later, in the default
 * launch state, as Kineto calls it.
 */
int cuda_occupancy_pct(const struct cuda_device *d, uint64_t grid_blocks, int block_threads,
		       int regs_per_thread, int64_t smem_per_block);

#endif /* PTBPF_CUDA_INFO_H */
