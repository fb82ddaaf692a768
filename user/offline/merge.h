/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf merge`: several ranks' and hosts' traces on one REALTIME timeline
 * (user/offline/merge.c). */
#ifndef PTBPF_MERGE_H
#define PTBPF_MERGE_H

#include <stdbool.h>

/* Merges n traces into out_path (written as every output is: files.h);
 * 0, or 1 with one error line printed. by_collectives: then also shifts
 * each trace so its NCCL kernels end with the first trace's (the k-th with
 * the k-th). */
int merge_traces(const char *const *paths, int n, const char *out_path, bool by_collectives,
		 bool force);

#endif /* PTBPF_MERGE_H */
