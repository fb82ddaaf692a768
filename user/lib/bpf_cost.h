/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --bpf-stats: what ptbpf's own BPF programs cost, by the kernel's count
 * (BPF_ENABLE_STATS: every run of every program on the host is timed and
 * counted while any holder keeps the statistics on; two clock reads a run).
 */
#ifndef PTBPF_BPF_COST_H
#define PTBPF_BPF_COST_H

#include <stdint.h>

struct bpf_object;

struct bpf_cost {
	uint64_t runs; /* times the programs ran */
	uint64_t ns;   /* their run time in all */
};

/* Switches the kernel's statistics on while the returned fd is open;
 * -errno if it cannot. */
int bpf_cost_enable(void);
/* Adds the runs and run time of every loaded program of obj (NULL: none). */
void bpf_cost_add(struct bpf_cost *c, const struct bpf_object *obj);

#endif
