/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf merge`: several ranks' and hosts' traces on one REALTIME timeline
 * (user/merge.c). */
#ifndef PTBPF_MERGE_H
#define PTBPF_MERGE_H

/* Merges n traces into out_path (never overwritten); 0, or 1 with one
 * error line printed. */
int merge_traces(char **paths, int n, const char *out_path);

#endif /* PTBPF_MERGE_H */
