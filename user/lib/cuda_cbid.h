/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CUPTI's callback ids (cbid) of the CUDA calls ptbpf records, by name: the
 * loader writes a call's cbid only where this table does not give it, and
 * the Kineto export takes it from here then, as Kineto itself writes it.
 */
#ifndef PTBPF_CUDA_CBID_H
#define PTBPF_CUDA_CBID_H

#include <stdbool.h>

/* The CUPTI callback id of a CUDA runtime (driver: false) or driver call
 * by the name ptbpf records ("cudaLaunchKernel", "cuLaunchKernel_ptsz"),
 * or -1 if it is not in ptbpf's table. */
int cuda_cbid(const char *name, bool driver);

/* Whether Kineto starts an ac2g flow at a CUDA call of this cbid
 * (RuntimeActivity::flowStart, DriverActivity::flowStart). */
bool cuda_flow_start(int cbid, bool driver);

#endif /* PTBPF_CUDA_CBID_H */
