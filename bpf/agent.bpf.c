// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ptbpf's device-timeline side: uprobes on the ptbpf_agent_* functions of
 * the in-process agent (libptbpf-agent.so, user/agent.c). The agent calls
 * them with CUPTI's records (kernels, copies, sets, with CLOCK_MONOTONIC
 * device timestamps) and, on each launching thread, with the launch's
 * CUPTI correlation id: that call is what joins a kernel to its launch.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* CUPTI's kernel-name strings whose text was already sent, per process. */
struct name_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct name_key);
	__type(value, __u8);
} kernel_names SEC(".maps");

/* ptbpf_agent_correlate(u32 correlation_id, u32 cbid, u32 domain) */
SEC("uprobe")
int agent_correlate(struct pt_regs *ctx)
{
	struct ptbpf_event *e = reserve_sized(sizeof(*e), STAT_DROP_AGENT_FULL);

	if (!e)
		return 0;
	fill(e, EV_AGENT_CORR, SRC_AGENT, 0, 0);
	e->arg[0] = (__u32)PT_REGS_PARM1(ctx);
	e->arg[1] = (__u32)PT_REGS_PARM2(ctx);
	e->arg[2] = (__u32)PT_REGS_PARM3(ctx);
	submit(e);
	return 0;
}

static __always_inline void send_kernel_name(__u64 ptr)
{
	struct name_key k = { .tgid = bpf_get_current_pid_tgid() >> 32, .ptr = ptr };
	struct ptbpf_long_name *n;
	__u8 one = 1;

	if (!ptr || bpf_map_lookup_elem(&kernel_names, &k))
		return;
	n = reserve_sized(sizeof(*n), STAT_DROP_NAME_FULL);
	if (!n)
		return;
	fill(&n->ev, EV_LONG_NAME_KERNEL, SRC_AGENT, 0, ptr);
	if (bpf_probe_read_user_str(n->name, sizeof(n->name), (void *)ptr) < 0) {
		stat_inc(STAT_NAME_FAULT);
		n->name[0] = 0;
	} else {
		bpf_map_update_elem(&kernel_names, &k, &one, BPF_ANY);
	}
	submit(n);
}

/* ptbpf_agent_{kernel,memcpy,memset}(const struct ... *record): the cookie
 * says which, and where a kernel record keeps its name pointer. */
SEC("uprobe.multi")
int agent_record(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), rec = PT_REGS_PARM1(ctx), name = 0;
	__u32 name_off = AGENT_COOKIE_NAME_OFF(cookie);
	struct ptbpf_agent_event *e;

	if (name_off && !bpf_probe_read_user(&name, sizeof(name), (void *)(rec + name_off)))
		send_kernel_name(name);
	e = reserve_sized(sizeof(*e), STAT_DROP_AGENT_FULL);
	if (!e)
		return 0;
	fill(&e->ev, EV_AGENT_RECORD, SRC_AGENT, AGENT_COOKIE_KIND(cookie), 0);
	if (bpf_probe_read_user(e->raw, sizeof(e->raw), (void *)rec))
		__builtin_memset(e->raw, 0, sizeof(e->raw));
	submit(e);
	return 0;
}

/* ptbpf_agent_dropped(u64 since_last, u64 total): CUPTI's own losses. */
SEC("uprobe")
int agent_dropped(struct pt_regs *ctx)
{
	struct ptbpf_event *e = reserve_sized(sizeof(*e), STAT_DROP_AGENT_FULL);

	if (!e)
		return 0;
	fill(e, EV_AGENT_DROPPED, SRC_AGENT, 0, 0);
	e->arg[0] = PT_REGS_PARM1(ctx);
	e->arg[1] = PT_REGS_PARM2(ctx);
	submit(e);
	return 0;
}

/* ptbpf_agent_status(int code, const char *message) */
SEC("uprobe")
int agent_status(struct pt_regs *ctx)
{
	struct ptbpf_named_event *e = reserve_sized(sizeof(*e), STAT_DROP_NAME_FULL);

	if (!e)
		return 0;
	fill(&e->ev, EV_NAMED_AGENT_STATUS, SRC_AGENT, 0, 0);
	e->ev.arg[0] = (__s32)PT_REGS_PARM1(ctx);
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)PT_REGS_PARM2(ctx)) < 0)
		e->name[0] = 0;
	submit(e);
	return 0;
}
