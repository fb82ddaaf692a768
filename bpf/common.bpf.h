/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What every ptbpf BPF object shares: the ring buffer, the loss counters and
 * the set of traced processes (the loader creates them once and hands the
 * same maps to each object), and the helpers that fill and submit records.
 */
#ifndef PTBPF_COMMON_BPF_H
#define PTBPF_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ptbpf_events.h"

/* Wake the loader only once this much data is waiting; it also drains the
 * ring every 100 ms, so small bursts are never stuck. */
const volatile __u64 wakeup_bytes = 256 * 1024;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Processes being traced (tgid -> 1): filters the sched tracepoints. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} traced SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline void submit(void *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

static __always_inline void fill(struct ptbpf_event *e, __u16 kind, __u8 source,
				 __u32 id, __u64 key)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	e->ts = bpf_ktime_get_ns();
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->kind = kind;
	e->source = source;
	e->pad = 0;
	e->id = id;
	e->key = key;
	e->arg[0] = e->arg[1] = e->arg[2] = 0;
}

/* Reserves size bytes, counting the attempt and, on failure, the cause. */
static __always_inline void *reserve_sized(__u64 size, __u32 drop_cause)
{
	void *e;

	stat_inc(STAT_SENT);
	e = bpf_ringbuf_reserve(&events, size, 0);
	if (!e)
		stat_inc(drop_cause);
	return e;
}

static __always_inline struct ptbpf_event *reserve(void)
{
	return reserve_sized(sizeof(struct ptbpf_event), STAT_DROP_RINGBUF_FULL);
}

static __always_inline int emit(__u16 kind, __u8 source, __u32 id, __u64 key)
{
	struct ptbpf_event *e = reserve();

	if (!e)
		return 0;
	fill(e, kind, source, id, key);
	submit(e);
	return 0;
}

#endif /* PTBPF_COMMON_BPF_H */
