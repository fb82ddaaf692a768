// SPDX-License-Identifier: BSD-2-Clause
/* The uprobe floor of the benchmark: an entry uprobe on every op function
 * whose program only counts (tests/bench/uprobe_floor.c). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__u64 hits;

SEC("uprobe.multi")
int count_hit(struct pt_regs *ctx)
{
	hits++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
