/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What the kernel view (bpf/sched.bpf.c) shares with the CPU sampler
 * (bpf/samples.bpf.c): the traced processes' bitmap and each CPU's state.
 * Each object declares the maps; the loader makes the sampler's the kernel
 * view's (user/attach/sample_probes.c), so both read and write the same.
 */
#ifndef PTBPF_SCHED_SHARED_BPF_H
#define PTBPF_SCHED_SHARED_BPF_H

#include "ptbpf_sched.h"

/* The traced processes: bit tgid % 64 of word tgid / 64 (pids are below
 * 2^22), set and cleared by the loader. An array: its lookups are inlined,
 * so filtering out a switch of another process costs two loads. */
#define PROC_WORDS (1u << 16)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PROC_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} sched_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ptbpf_sched_cpu);
} cpus SEC(".maps");

static __always_inline bool is_traced(__u32 tgid)
{
	__u32 word = tgid / 64;
	__u64 *w = bpf_map_lookup_elem(&sched_procs, &word);

	return w && (*w >> (tgid % 64) & 1);
}

static __always_inline struct ptbpf_sched_cpu *this_cpu(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpus, &zero);
}

/* Task tid runs on this CPU, yet the CPU's latest switch put another task
 * on: the kernel did not report the switch that put tid on. It is taken
 * as put on at ts (0: not known), its replay not sent yet (SW_UNSEEN). */
static __always_inline void put_on_unseen(struct ptbpf_sched_cpu *c, __u32 tid, __u64 ts)
{
	c->last_prev = c->last_next;
	c->last_next = tid;
	c->last_ts = ts;
	c->last_state = 0;
	c->unseen = 1;
}

#endif /* PTBPF_SCHED_SHARED_BPF_H */
