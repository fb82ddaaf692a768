// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ptbpf's op side: uprobes on libtorch and libstdc++, sched tracepoints.
 * Each program turns one hit into one fixed-size record in the ring buffer.
 * Nothing is matched here; the loader pairs begins with ends (user/record/join.c).
 * Every record a program tries to emit is counted in `stats`, and every one
 * that does not fit is counted by cause, so loss is never silent.
 */
#include "common.bpf.h"
#include "pystack.bpf.h"
#include "rpc.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* RecordScope::USER_SCOPE (record_function regions), 7 in 1.13 and 2.x. */
const volatile __u32 user_scope = 7;

/* Autograd Node classes (by vtable) whose name was already sent. */
struct node_key {
	__u32 tgid;
	__u32 pad;
	__u64 vptr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct node_key);
	__type(value, __u8);
} node_types SEC(".maps");

/* A record_function name seen at enter_new, waiting for the RecordFunction
 * constructor on the same thread to tell which object it is. */
struct pending_user {
	__u64 ts;
	char name[PTBPF_NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
	__type(value, struct pending_user);
} pending_user SEC(".maps");

/* Open record_function regions: RecordFunction* -> tid. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} open_user SEC(".maps");

/* Entry of at::_ops::<op>::call; the cookie is the op's index. */
/* --py-stacks with ops from these probes: each op (or one in N) also
 * sends the thread's Python stack. */
const volatile bool py_stacks = false;

SEC("uprobe.multi")
int op_entry(struct pt_regs *ctx)
{
	struct ptbpf_event *e = reserve();
	struct ptbpf_py_proc *p;
	__u64 ts;

	if (!e)
		return 0;
	fill(e, EV_OP_BEGIN, SRC_ENTRY_PROBE, bpf_get_attach_cookie(ctx), PT_REGS_SP(ctx));
	ts = e->ts;
	submit(e);
	if (py_stacks && (p = py_wanted(bpf_get_current_pid_tgid() >> 32, true)))
		py_stack_emit(p, ts);
	return 0;
}

/* A ret (or tail jmp) of an op function: RSP is back at its entry value. */
SEC("uprobe.multi")
int op_exit(struct pt_regs *ctx)
{
	return emit(EV_OP_END, SRC_RET_PROBE, bpf_get_attach_cookie(ctx),
		    PT_REGS_SP(ctx));
}

/* __cxa_begin_catch: a catch block is being entered in the frame that
 * called it. Every traced frame whose entry SP is at or below this SP was
 * unwound by the exception and will never reach its ret. */
SEC("uprobe.multi")
int unwind_catch(struct pt_regs *ctx)
{
	return emit(EV_UNWIND, SRC_CATCH_PROBE, 0, PT_REGS_SP(ctx));
}

/* Engine::evaluate_function(shared_ptr<GraphTask>&, Node*, ...): Node* in
 * RDX; sequence_nr_ at +24, thread_id_ (forward thread, logical) at +48. */
/* The first time a process runs a Node class, send its name: vptr[-1] is
 * the typeinfo, whose second word is the mangled class name. */
static __always_inline void send_node_type(__u64 vptr)
{
	struct node_key k = { .tgid = bpf_get_current_pid_tgid() >> 32, .vptr = vptr };
	struct ptbpf_named_event *e;
	__u64 ti = 0, name = 0;
	__u8 one = 1;

	if (bpf_map_lookup_elem(&node_types, &k))
		return;
	e = reserve_sized(sizeof(*e), STAT_DROP_NAME_FULL);
	if (!e)
		return;
	fill(&e->ev, EV_NAMED_NODE_TYPE, SRC_ENTRY_PROBE, 0, vptr);
	if (bpf_probe_read_user(&ti, sizeof(ti), (void *)(vptr - 8)) ||
	    bpf_probe_read_user(&name, sizeof(name), (void *)(ti + 8)) ||
	    bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)name) < 0) {
		stat_inc(STAT_NAME_FAULT);
		e->name[0] = 0;
	} else {
		bpf_map_update_elem(&node_types, &k, &one, BPF_ANY);
	}
	submit(e);
}

/* Engine::evaluate_function(shared_ptr<GraphTask>&, Node*, ...): Node* in
 * RDX; sequence_nr_ at +24, thread_id_ (forward thread, logical) at +48. */
SEC("uprobe.multi")
int bwd_entry(struct pt_regs *ctx)
{
	__u64 node = PT_REGS_PARM3(ctx), vptr = 0;
	struct ptbpf_event *e;

	bpf_probe_read_user(&vptr, sizeof(vptr), (void *)node);
	send_node_type(vptr);
	e = reserve();
	if (!e)
		return 0;
	fill(e, EV_BWD_BEGIN, SRC_ENTRY_PROBE, 0, PT_REGS_SP(ctx));
	e->arg[0] = vptr;
	bpf_probe_read_user(&e->arg[1], sizeof(__u64), (void *)(node + 24));
	bpf_probe_read_user(&e->arg[2], sizeof(__u64), (void *)(node + 48));
	submit(e);
	return 0;
}

SEC("uprobe.multi")
int bwd_exit(struct pt_regs *ctx)
{
	return emit(EV_BWD_END, SRC_RET_PROBE, 0, PT_REGS_SP(ctx));
}

/* The ret of at::sequence_number::get_and_increment(): RAX is the sequence
 * number a new autograd Node takes, on the thread running the forward op. */
SEC("uprobe.multi")
int seq_ret(struct pt_regs *ctx)
{
	struct ptbpf_event *e = reserve();

	if (!e)
		return 0;
	fill(e, EV_SEQ, SRC_RET_PROBE, 0, 0);
	e->arg[0] = PT_REGS_RC(ctx);
	submit(e);
	return 0;
}

/* record_function_enter_new(const std::string &name, ...) returns by sret,
 * so the name is the second argument (RSI): {char *p; size_t len; ...}. */
SEC("uprobe.multi")
int user_enter(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 str = PT_REGS_PARM2(ctx), p = 0;
	struct pending_user *pu;
	static const struct pending_user zero;

	if (bpf_map_update_elem(&pending_user, &tid, &zero, BPF_ANY))
		return 0;
	pu = bpf_map_lookup_elem(&pending_user, &tid);
	if (!pu)
		return 0;
	pu->ts = bpf_ktime_get_ns();
	if (bpf_probe_read_user(&p, sizeof(p), (void *)str) ||
	    bpf_probe_read_user_str(pu->name, sizeof(pu->name), (void *)p) < 0) {
		stat_inc(STAT_NAME_FAULT);
		pu->name[0] = '?';
		pu->name[1] = 0;
	}
	return 0;
}

/* RecordFunction::RecordFunction(RecordScope): `this` in RDI, scope in ESI.
 * The USER_SCOPE object built inside enter_new is the region's identity. */
SEC("uprobe.multi")
int user_ctor(struct pt_regs *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 self = PT_REGS_PARM1(ctx);
	struct ptbpf_named_event *e;
	struct pending_user *pu;

	if ((__u32)PT_REGS_PARM2(ctx) != user_scope)
		return 0;
	pu = bpf_map_lookup_elem(&pending_user, &tid);
	if (!pu)
		return 0;
	if (bpf_map_update_elem(&open_user, &self, &tid, BPF_ANY))
		stat_inc(STAT_USER_PENDING_FULL);
	e = reserve_sized(sizeof(*e), STAT_DROP_NAME_FULL);
	if (!e) {
		bpf_map_delete_elem(&pending_user, &tid);
		return 0;
	}
	fill(&e->ev, EV_NAMED_USER_BEGIN, SRC_CTOR_PROBE, 0, self);
	e->ev.ts = pu->ts;
	__builtin_memcpy(e->name, pu->name, sizeof(e->name));
	bpf_map_delete_elem(&pending_user, &tid);
	submit(e);
	return 0;
}

/* RecordFunction::end(), probed on its first emulated instruction; `this`
 * is still in RDI. end() runs twice per region (exit and destructor): the
 * first one closes it. */
SEC("uprobe.multi")
int user_end(struct pt_regs *ctx)
{
	__u64 self = PT_REGS_PARM1(ctx);

	if (!bpf_map_lookup_elem(&open_user, &self))
		return 0;
	bpf_map_delete_elem(&open_user, &self);
	return emit(EV_USER_END, SRC_END_PROBE, 0, self);
}

/* A BTF tracepoint: needs no tracefs mount. `live` has already been
 * decremented when it fires, so 0 means the whole process is gone. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(thread_exit, struct task_struct *task)
{
	__u32 tgid = task->tgid;
	struct ptbpf_event *e;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	e = reserve();
	if (!e)
		return 0;
	if (task->signal->live.counter == 0) {
		fill(e, EV_PROC_EXIT, SRC_TRACEPOINT, 0, 0);
		e->arg[0] = task->exit_code;
	} else {
		fill(e, EV_THREAD_EXIT, SRC_TRACEPOINT, 0, 0);
	}
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid;
	struct ptbpf_event *e;

	if (child->pid != child->tgid || !bpf_map_lookup_elem(&traced, &ptgid))
		return 0;
	e = reserve();
	if (!e)
		return 0;
	fill(e, EV_FORK, SRC_TRACEPOINT, 0, 0);
	e->arg[0] = child->tgid;
	submit(e);
	return 0;
}

/*
 * GPU (and profiled CPU) memory: c10::reportMemoryUsageToProfiler(void *ptr,
 * int64_t bytes, size_t allocated, size_t reserved, c10::Device device),
 * which PyTorch's CUDA caching allocator calls on every block it hands out
 * (bytes > 0) and takes back (bytes < 0), with its own running totals for
 * the device. Device is two int8s (type, index) passed in R8. An entry
 * probe sees it all; nothing runs at return.
 */
SEC("uprobe.multi")
int mem_report(struct pt_regs *ctx)
{
	struct ptbpf_event *e = reserve();

	if (!e)
		return 0;
	fill(e, EV_MEM, SRC_ENTRY_PROBE, (__u32)(PT_REGS_PARM5(ctx) & 0xffff), PT_REGS_PARM1(ctx));
	e->arg[0] = PT_REGS_PARM2(ctx);
	e->arg[1] = PT_REGS_PARM3(ctx);
	e->arg[2] = PT_REGS_PARM4(ctx);
	submit(e);
	return 0;
}
