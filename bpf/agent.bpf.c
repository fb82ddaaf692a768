// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ptbpf's device-timeline side: uprobes on the ptbpf_agent_* functions of
 * the in-process agent (libptbpf-agent.so, user/agent/agent.c). The agent calls
 * them with CUPTI's records (kernels, copies, sets, with CLOCK_MONOTONIC
 * device timestamps) and, on each launching thread, with the launch's
 * CUPTI correlation id: that call is what joins a kernel to its launch.
 */
#include "common.bpf.h"
#include "pystack.bpf.h"

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
SEC("uprobe.multi")
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
SEC("uprobe.multi")
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

/* ptbpf_agent_status(int code, const char *message, u64 value): rare, and
 * whole (a long name's room, not a named event's). */
SEC("uprobe.multi")
int agent_status(struct pt_regs *ctx)
{
	struct ptbpf_long_name *e = reserve_sized(sizeof(*e), STAT_DROP_NAME_FULL);

	if (!e)
		return 0;
	fill(&e->ev, EV_NAMED_AGENT_STATUS, SRC_AGENT, 0, 0);
	e->ev.arg[0] = (__s32)PT_REGS_PARM1(ctx);
	e->ev.arg[1] = PT_REGS_PARM3(ctx);
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)PT_REGS_PARM2(ctx)) < 0)
		e->name[0] = 0;
	submit(e);
	return 0;
}

/* ptbpf_agent_wake(): a thread records while its agent idled, when the
 * loader reads the op rings seldom: it is woken now, whatever is waiting.
 * Not a record of the job's: neither sent nor lost (a full ring wakes the
 * loader itself). */
SEC("uprobe.multi")
int agent_wake(struct pt_regs *ctx)
{
	struct ptbpf_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return 0;
	fill(e, EV_AGENT_WAKE, SRC_AGENT, 0, 0);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * The agent's op rings (user/agent/ops.c) live in the target's memory, and
 * ptbpf reads them every 20 ms; what they hold when the process exits
 * would go with its memory. A uprobe on libc's _exit (reached by exit()
 * and os._exit alike) copies every ring's counters into the process's
 * ops_rings entry and its unread bytes into the ring buffer first, from the
 * exiting thread, whose memory is still there; uprobes on the exec
 * functions do the same before an exec replaces it. With the counters,
 * what a stopped ptbpf could not read, or a full ring buffer could not
 * take, is still counted.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct ptbpf_ops_loc);
} ops_rings SEC(".maps");

struct rescue {
	__u64 pos, head, cap, slots, slot_bytes;
	__u32 tgid, nslots, slot, tid;
};

#define SLOT_HDR 128
#define SLOT_TAIL 64 /* struct ptbpf_ops_slot's tail */
#define DESC_NO_SLOT 32 /* struct ptbpf_ops_desc's no_slot, no_slot_begins */
#define HDR_DROPPED 2   /* struct ptbpf_ops_slot's dropped and written, in u64s */
#define HDR_WRITTEN 5

static __always_inline __u64 ring_addr(const struct rescue *r, __u32 slot)
{
	return r->slots + (__u64)slot * r->slot_bytes;
}

/* Ring i's counters into the map, unless a save that read them later (a
 * thread dying beside this one) is there already: they only grow, and
 * each record the thread makes grows written or dropped. */
static long save_counters(__u64 i, struct rescue *r)
{
	struct ptbpf_ops_loc *loc = bpf_map_lookup_elem(&ops_rings, &r->tgid);
	__u64 hdr[PTBPF_OPS_HDR_OUT / 8];

	if (!loc || i >= r->nslots || i >= PTBPF_OPS_RINGS)
		return 1;
	if (!bpf_probe_read_user(hdr, sizeof(hdr), (void *)ring_addr(r, i)) &&
	    hdr[HDR_WRITTEN] + hdr[HDR_DROPPED] >=
	    ((__u64 *)loc->hdr[i])[HDR_WRITTEN] + ((__u64 *)loc->hdr[i])[HDR_DROPPED])
		__builtin_memcpy(loc->hdr[i], hdr, sizeof(hdr));
	return 0;
}

/* The rings' and the descriptor's counters into loc (see ptbpf_ops_loc):
 * what a full ring buffer cannot refuse. Fills r for the copy. */
static void save_all(struct ptbpf_ops_loc *loc, struct rescue *r)
{
	__u64 no_slot[2];

	r->slots = loc->slots;
	r->slot_bytes = loc->slot_bytes;
	r->nslots = loc->nslots;
	r->cap = loc->slot_bytes - SLOT_HDR;
	if (!bpf_probe_read_user(no_slot, sizeof(no_slot), (void *)(loc->desc + DESC_NO_SLOT)) &&
	    no_slot[0] >= loc->no_slot[0])
		__builtin_memcpy(loc->no_slot, no_slot, sizeof(no_slot));
	bpf_loop(PTBPF_OPS_RINGS, save_counters, r, 0);
	loc->final_ts = bpf_ktime_get_ns();
}

/* Ring r->slot's unread span, [tail, head of the saved counters); 0 if
 * there is none to copy. */
static int next_ring(struct rescue *r)
{
	struct ptbpf_ops_loc *loc = bpf_map_lookup_elem(&ops_rings, &r->tgid);
	__u32 i = r->slot;
	__u64 tail;

	if (!loc || i >= PTBPF_OPS_RINGS ||
	    bpf_probe_read_user(&tail, sizeof(tail), (void *)(ring_addr(r, i) + SLOT_TAIL)))
		return 0;
	r->head = *(__u64 *)loc->hdr[i];
	r->tid = *(__u32 *)(loc->hdr[i] + 8);
	r->pos = r->head < tail || r->head - tail > r->cap ? r->head : tail;
	return 1;
}

/* One step: move to the next ring when this one is done, else copy one
 * chunk. Returns 1 to stop. */
static long rescue_step(__u64 i, struct rescue *r)
{
	struct ptbpf_ops_chunk *c;
	__u64 off, len, base;

	if (r->pos >= r->head) {
		if (r->slot >= r->nslots || r->slot >= PTBPF_OPS_RINGS)
			return 1;
		if (!next_ring(r))
			r->pos = r->head = 0;
		r->slot++;
		return 0;
	}
	off = r->pos % r->cap;
	len = r->head - r->pos;
	if (len > r->cap - off)
		len = r->cap - off;
	if (len > PTBPF_OPS_CHUNK)
		len = PTBPF_OPS_CHUNK;
	c = reserve_sized(sizeof(*c), STAT_DROP_OPS_EXIT);
	if (!c)
		return 1;
	fill(&c->ev, EV_OPS_CHUNK, SRC_AGENT, r->slot - 1, 0);
	c->ev.tid = r->tid;
	c->ev.arg[0] = r->pos;
	c->ev.arg[1] = len;
	base = ring_addr(r, r->slot - 1) + SLOT_HDR;
	if (bpf_probe_read_user(c->data, len & (PTBPF_OPS_CHUNK - 1) ? len & (PTBPF_OPS_CHUNK - 1) :
				PTBPF_OPS_CHUNK, (void *)(base + off)))
		c->ev.arg[1] = 0;
	bpf_ringbuf_submit(c, BPF_RB_FORCE_WAKEUP);
	r->pos += len;
	return 0;
}

SEC("uprobe.multi")
int ops_exit(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ptbpf_ops_loc *loc = bpf_map_lookup_elem(&ops_rings, &tgid);
	struct rescue r = { .tgid = tgid };
	struct ptbpf_ops_chunk *done;

	if (!loc || loc->slot_bytes <= SLOT_HDR)
		return 0;
	save_all(loc, &r);
	/* 64 rings of up to 4 MiB: 64 steps to visit, 1024 chunks each. */
	bpf_loop(64 * 1025, rescue_step, &r, 0);
	/* At an exec function (cookie 0) the process may go on (the exec can
	 * fail): a copy only. At _exit (cookie 1), a marker (id
	 * OPS_CHUNK_DONE, no bytes): everything was copied. */
	if (!bpf_get_attach_cookie(ctx))
		return 0;
	done = reserve_sized(sizeof(*done), STAT_DROP_OPS_EXIT);
	if (done) {
		fill(&done->ev, EV_OPS_CHUNK, SRC_AGENT, OPS_CHUNK_DONE, 0);
		bpf_ringbuf_submit(done, BPF_RB_FORCE_WAKEUP);
	}
	return 0;
}

/* Signals whose default action dumps core (sig_kernel_coredump): QUIT, ILL,
 * TRAP, ABRT, BUS, FPE, SEGV, XCPU, XFSZ, SYS. */
#define COREDUMP_SIGNALS (0xf8 | 1u << 8 | 1u << 11 | 1u << 24 | 1u << 25 | 1u << 31)
#define SIGNAL_GROUP_EXIT 0x4 /* signal_struct.flags: the process is dying */

/*
 * A process killed by a signal runs no _exit: each of its threads passes
 * here (signal_deliver, the thread's memory still there) on its way out,
 * and saves the rings' counters. Its rings' unread bytes go with it, but
 * are counted.
 */
SEC("tp_btf/signal_deliver")
int BPF_PROG(ops_signal, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ptbpf_ops_loc *loc = bpf_map_lookup_elem(&ops_rings, &tgid);
	struct task_struct *task = bpf_get_current_task_btf();
	struct rescue r = { .tgid = tgid };

	if (!loc || loc->slot_bytes <= SLOT_HDR)
		return 0;
	if (!(task->signal->flags & SIGNAL_GROUP_EXIT) &&
	    (ka->sa.sa_handler || sig < 0 || sig > 31 || !(COREDUMP_SIGNALS >> sig & 1)))
		return 0;
	save_all(loc, &r);
	return 0;
}

/* ptbpf_agent_pystack(u64 ts): the agent recorded an op or CUDA call at ts
 * on this thread and asks for its Python stack (--py-stacks; the agent
 * samples). */
SEC("uprobe.multi")
int agent_pystack(struct pt_regs *ctx)
{
	struct ptbpf_py_proc *p = py_wanted(bpf_get_current_pid_tgid() >> 32, false);

	if (p)
		py_stack_emit(p, PT_REGS_PARM1(ctx));
	return 0;
}
