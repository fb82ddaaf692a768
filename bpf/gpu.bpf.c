// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ptbpf's GPU side: entry uprobes and uretprobes on the C APIs of libcuda,
 * libcudart and libamdhip64 (uretprobes are safe on C code; never on C++).
 * An entry records the raw arguments; user/record/gpu_calls.c knows per API what they
 * mean. The return records the result and, for calls that hand back a
 * handle or pointer through an out-argument, the value written there.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Out-pointers of calls in flight, by thread and entry stack pointer. */
struct call_key {
	__u32 tid;
	__u32 pad;
	__u64 sp;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct call_key);
	__type(value, __u64);
} out_ptrs SEC(".maps");

static __always_inline void send_name(__u32 cookie, __u64 sp, __u64 str)
{
	struct ptbpf_named_event *e = reserve_sized(sizeof(*e), STAT_DROP_NAME_FULL);

	if (!e)
		return;
	fill(&e->ev, EV_NAMED_GPU_NAME, SRC_ENTRY_PROBE, cookie, sp);
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)str) < 0) {
		stat_inc(STAT_NAME_FAULT);
		e->name[0] = 0;
	}
	submit(e);
}

SEC("uprobe.multi")
int gpu_entry(struct pt_regs *ctx)
{
	__u32 cookie = bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx);
	struct ptbpf_gpu_call *c;

	if (cookie & GPU_COOKIE_NAME_RDX)
		send_name(cookie, sp, PT_REGS_PARM3(ctx));
	if (cookie & GPU_COOKIE_OUT_RDI) {
		struct call_key k = { .tid = (__u32)bpf_get_current_pid_tgid(), .sp = sp };
		__u64 out = PT_REGS_PARM1(ctx);

		bpf_map_update_elem(&out_ptrs, &k, &out, BPF_ANY);
	}
	c = reserve_sized(sizeof(*c), STAT_DROP_GPU_FULL);
	if (!c)
		return 0;
	fill(&c->ev, EV_GPU_CALL, SRC_ENTRY_PROBE, cookie, sp);
	c->reg[0] = PT_REGS_PARM1(ctx);
	c->reg[1] = PT_REGS_PARM2(ctx);
	c->reg[2] = PT_REGS_PARM3(ctx);
	c->reg[3] = PT_REGS_PARM4(ctx);
	c->reg[4] = PT_REGS_PARM5(ctx);
	c->reg[5] = PT_REGS_PARM6(ctx);
	if (bpf_probe_read_user(c->stack, sizeof(c->stack), (void *)(sp + 8)))
		__builtin_memset(c->stack, 0, sizeof(c->stack));
	__builtin_memset(c->attr, 0, sizeof(c->attr));
	if (!(cookie & GPU_COOKIE_CONFIG) ||
	    bpf_probe_read_user(c->config, sizeof(c->config), (void *)c->reg[0])) {
		__builtin_memset(c->config, 0, sizeof(c->config));
	} else {
		__u64 attrs = c->config[10] | (__u64)c->config[11] << 32;

		for (int i = 0; i < 4; i++) {
			if (i >= c->config[12] ||
			    bpf_probe_read_user(&c->attr[i][0], 4, (void *)(attrs + 72 * i)) ||
			    bpf_probe_read_user(&c->attr[i][1], 12, (void *)(attrs + 72 * i + 8)))
				break;
		}
	}
	submit(c);
	return 0;
}

/* At a uretprobe the return address has been popped: entry sp = sp - 8. */
SEC("uretprobe.multi")
int gpu_return(struct pt_regs *ctx)
{
	__u32 cookie = bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx) - 8;
	struct ptbpf_event *e = reserve();

	if (!e)
		return 0;
	fill(e, EV_GPU_RET, SRC_RET_PROBE, cookie, sp);
	e->arg[0] = PT_REGS_RC(ctx);
	if (cookie & GPU_COOKIE_OUT_RDI) {
		struct call_key k = { .tid = e->tid, .sp = sp };
		__u64 *out = bpf_map_lookup_elem(&out_ptrs, &k);

		if (out) {
			bpf_probe_read_user(&e->arg[1], sizeof(e->arg[1]), (void *)*out);
			bpf_map_delete_elem(&out_ptrs, &k);
		}
	}
	submit(e);
	return 0;
}
