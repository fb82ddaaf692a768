// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The kernel view: when the traced processes' threads run, wait for a CPU
 * or sleep, who woke them, and what they blocked in (a system call and its
 * first arguments, a page fault), and the stretches they spent on CPU in
 * page faults. BTF tracepoints (no tracefs, no kprobes) on sched_switch,
 * sched_waking, sched_wakeup_new, sys_enter, sys_exit, page_fault_user and
 * rss_stat, each filtered here to the traced processes (the
 * loader's bitmap, sched_procs), into a ring of their own
 * (include/ptbpf_sched.h). Every record a program tries to send is counted
 * in sched_stats, and every one that does not fit is counted by cause.
 *
 * A switch is kept when its previous or its next task is traced, so the
 * task that took a traced thread's CPU is named. Perfetto's compact sched
 * format leaves the previous task out (it is the last next on that CPU),
 * so each CPU remembers its latest switch and what the kept records show
 * running there; a kept record whose previous (or waking) task is not the
 * one shown is preceded by that latest switch, replayed. A task running
 * where the latest switch put another one on came back by a switch the
 * kernel did not report: it is put on by a replay marked SW_UNSEEN.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ptbpf_sched.h"
#include "sched_shared.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Wake the loader only once this much data is waiting (it reads the ring
 * at least every 100 ms anyway). */
const volatile __u64 wakeup_bytes = 512 * 1024;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} sched_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCHED_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sched_stats SEC(".maps");

/* A CPU is warm for this many jiffies after its last kept record: its
 * switches are timed then. A cold CPU's switches are not (reading the
 * clock is most of what filtering one out would cost: ~80 ns of kvm-clock
 * on the CI VM), so a replay there has no time of its own. */
#define WARM_JIFFIES 64

/* A traced thread: the system call it is in, its last fault, its time off
 * CPU. Freed with the task. */
struct thread_state {
	__u64 sys_enter_ts;
	__u64 sys_arg[2];
	__u64 off_since;  /* when it last left the CPU, 0 while on it */
	__u64 off_ns;     /* off CPU inside the current system call */
	__u64 on_ts;      /* when it last came on a CPU */
	__u64 fault_ts, fault_addr;
	/* The fault being timed on CPU (0: none): its start, its last page
	 * mapped (rss_stat; 0: none yet), the thread's major faults and all
	 * its faults then (the kernel counts a fault once it is over). */
	__u64 pf_ts, pf_end, pf_maj, pf_flt;
	/* The stretch of faults on CPU it belongs to (run_n 0: none). */
	__u64 run_start, run_end, run_ns, run_gap, run_maj;
	__u32 run_n;
	__s32 sys_nr;
	__u32 switches;   /* blocking switches inside the current call */
	__u8 in_sys;
	__u8 entered;     /* it entered a system call since tracing began */
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} threads SEC(".maps");

static __always_inline void stat_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&sched_stats, &idx);

	if (v)
		__sync_fetch_and_add(v, n);
}

static __always_inline void stat_inc(__u32 idx)
{
	stat_add(idx, 1);
}

static __always_inline void *reserve(__u64 size, __u32 drop_cause)
{
	void *r;

	stat_inc(SCHED_STAT_SENT);
	r = bpf_ringbuf_reserve(&sched_events, size, 0);
	if (!r)
		stat_inc(drop_cause);
	return r;
}

static __always_inline void submit(void *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&sched_events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

static __always_inline struct thread_state *thread_of(struct task_struct *t, bool create)
{
	struct thread_state *st;

	st = bpf_task_storage_get(&threads, t, NULL, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!st && create)
		stat_inc(SCHED_NO_THREAD_STATE);
	return st;
}

/* A record for the CPU's switch/wakeup chain: counts what could not be
 * sent, and marks the chain broken (the next record replays). */
static __always_inline void *reserve_chain(struct ptbpf_sched_cpu *c, __u64 size, __u32 cause)
{
	void *r = reserve(size, cause);

	if (!r) {
		c->lost++;
		c->shown_valid = 0;
	}
	return r;
}

static __always_inline void hdr_fill(struct ptbpf_sched_hdr *h, struct ptbpf_sched_cpu *c,
				     __u64 ts, __u16 kind)
{
	h->ts = ts;
	h->kind = kind;
	h->cpu = bpf_get_smp_processor_id();
	h->lost = c ? c->lost : 0;
	if (c)
		c->lost = 0;
}

static __always_inline void next_fill(struct ptbpf_sched_switch *r, struct task_struct *next)
{
	r->next_tid = next->pid;
	r->next_tgid = next->tgid;
	r->next_prio = next->prio;
	bpf_probe_read_kernel(r->next_comm, sizeof(r->next_comm), next->comm);
}

/* The switch that put cur (running now) on this CPU, sent late: so that
 * what Perfetto takes for the previous task of the next record (at now)
 * is cur. Untimed (the CPU was cold), it is placed just before now. Where
 * the latest switch put another task on, the kernel did not report the
 * one that put cur on (and no CPU sample of cur came since): it is sent
 * untimed, from that task, marked SW_UNSEEN. Where this CPU has had no
 * switch since the view began, cur has run since before it: its switch is
 * sent untimed, from no task (the report counts a traced one running
 * since the view's first record). */
static __always_inline void replay_last(struct ptbpf_sched_cpu *c, struct task_struct *cur,
						__u64 now)
{
	bool fresh = !c->last_next && !c->last_prev; /* no switch seen here yet */
	struct ptbpf_sched_switch *r;

	if (c->shown_valid && c->shown == (__u32)cur->pid)
		return;
	/* The idle task runs, or an untraced task since before the view:
	 * once records went out here, what they show before it is no
	 * traced thread, and nothing need be replayed. The first record of
	 * a CPU (or the first after a loss) needs a switch before it:
	 * Perfetto takes a CPU's first switch to say only who runs, so a
	 * traced thread it put on would not be Running until its next one
	 * (20 ms of a busy thread's time missing, seen on the CI VM). */
	if (!c->last_next && c->shown_valid && (!fresh || !is_traced(cur->tgid)))
		return;
	if (!fresh && c->last_next != (__u32)cur->pid)
		put_on_unseen(c, cur->pid, 0);
	/* Not sent (the ring was full): the next record tries again, still
	 * marked unseen. */
	r = reserve_chain(c, sizeof(*r), SCHED_DROP_SWITCH);
	if (!r)
		return;
	__builtin_memset(r, 0, sizeof(*r));
	hdr_fill(&r->h, c, c->last_ts ? c->last_ts : now - 1, SCHED_REC_SWITCH);
	r->prev_tid = c->last_prev;
	r->prev_state = c->last_state;
	r->flags = SW_REPLAYED | (c->last_ts ? 0 : SW_UNTIMED) |
		   (fresh && is_traced(cur->tgid) ? SW_NEXT_TRACED : 0);
	if (c->unseen)
		r->flags |= SW_UNSEEN | (is_traced(cur->tgid) ? SW_NEXT_TRACED : 0);
	r->sys_nr = -1;
	next_fill(r, cur);
	submit(r);
	c->unseen = 0;
	c->shown = cur->pid;
	c->shown_valid = 1;
}

/*
 * Page faults a thread spends on CPU. A fault that blocks is told by the
 * switch that takes its thread off (SW_FAULT), but one that does not (a
 * page already read, memory zeroed, or a read the VM's host completes
 * before the thread would sleep: 60-100 us each on the CI VM) is time on
 * CPU that looks like the thread's own running. Its start is
 * page_fault_user; its end is not reported, so it is taken at its last
 * page mapped (rss_stat, on the faulting thread, while the thread's fault
 * counters say the fault is not over; a fault that maps none is not
 * timed), read when the thread's next fault, system call or switch comes.
 * A fault preempted before it is over ends where it left the CPU (its
 * rest, after, is not timed). Consecutive faults make one stretch while
 * the time between them is at most FAULT_GAP_NS each and never more than
 * their own time; a stretch with FAULT_MIN_NS in faults is sent (struct
 * ptbpf_sched_faults), a shorter one counted (SCHED_FAULTS_SHORT,
 * SCHED_FAULTS_SHORT_NS).
 */
#define FAULT_GAP_NS 20000
#define FAULT_MIN_NS (SCHED_FAULTS_MIN_US * 1000ull)

static __always_inline __u64 faults_of(struct task_struct *t)
{
	return t->min_flt + t->maj_flt;
}

/* The thread's stretch of faults on CPU is over: sent, or counted. maj:
 * the thread's major faults at its end. */
static __always_inline void faults_flush(struct thread_state *st, struct task_struct *t,
					 __u64 maj)
{
	struct ptbpf_sched_faults *r;
	__u32 n = st->run_n;

	if (!n)
		return;
	st->run_n = 0;
	if (st->run_ns < FAULT_MIN_NS) {
		stat_inc(SCHED_FAULTS_SHORT);
		stat_add(SCHED_FAULTS_SHORT_NS, st->run_ns);
		return;
	}
	r = reserve(sizeof(*r), SCHED_DROP_FAULTS);
	if (!r)
		return;
	hdr_fill(&r->h, NULL, st->run_end, SCHED_REC_FAULTS);
	r->tid = t->pid;
	r->tgid = t->tgid;
	r->start_ts = st->run_start;
	r->fault_ns = st->run_ns;
	r->faults = n;
	r->major = maj - st->run_maj;
	submit(r);
}

/* The fault being timed ends (at its last page mapped): into the stretch. */
static __always_inline void fault_done(struct thread_state *st, struct task_struct *t)
{
	__u64 from = st->pf_ts, to = st->pf_end, gap;

	st->pf_ts = 0;
	if (!from || to <= from)
		return;
	gap = from > st->run_end ? from - st->run_end : 0;
	if (st->run_n && gap <= FAULT_GAP_NS && st->run_gap + gap <= st->run_ns + (to - from)) {
		st->run_gap += gap;
	} else {
		faults_flush(st, t, st->pf_maj); /* this fault is not the old stretch's */
		st->run_start = from;
		st->run_ns = 0;
		st->run_gap = 0;
		st->run_maj = st->pf_maj;
	}
	st->run_end = to;
	st->run_ns += to - from;
	st->run_n++;
}

/* What the kernel's __trace_sched_switch_state() reports. */
static __always_inline __u32 switch_state(bool preempt, unsigned int prev_state,
					  struct task_struct *prev)
{
	unsigned int state;

	if (preempt)
		return SCHED_STATE_PREEMPTED;
	state = (prev_state | (unsigned int)prev->exit_state) & 0x7f; /* TASK_REPORT */
	if (prev_state == 0x402) /* TASK_IDLE */
		state = SCHED_STATE_REPORT_IDLE;
	if (prev_state & 0x1000) /* TASK_RTLOCK_WAIT */
		state = SCHED_STATE_UNINTERRUPTIBLE;
	/* The highest bit (BPF has no count-leading-zeros). */
	for (int bit = 6; bit >= 0; bit--)
		if (state & (1u << bit))
			return 1u << bit;
	return state; /* 0, or TASK_REPORT_IDLE */
}

static __always_inline bool is_blocked(__u32 state)
{
	return state != SCHED_STATE_PREEMPTED && state != SCHED_STATE_RUNNING;
}

/* A traced thread leaves the CPU at ts: its stretch of faults on CPU ends.
 * A fault it blocks in (the SW_FAULT case below: blocked outside a system
 * call after a fault began on this stretch on the CPU) is told by the
 * switch, not timed on CPU; one it is preempted in, before it is over,
 * ends here. */
static __always_inline void faults_off(struct thread_state *st, struct task_struct *prev,
				       bool blocked, __u64 ts)
{
	if (blocked && !st->in_sys && st->fault_ts > st->on_ts)
		st->pf_ts = 0;
	else if (st->pf_ts && faults_of(prev) == st->pf_flt)
		st->pf_end = ts;
	fault_done(st, prev);
	faults_flush(st, prev, prev->maj_flt);
}

/* A traced thread leaves the CPU: why, from its state. */
static __always_inline void why_off(struct ptbpf_sched_switch *r, struct task_struct *prev,
				    __u64 ts)
{
	struct thread_state *st = thread_of(prev, true);
	bool blocked = is_blocked(r->prev_state);

	r->min_flt = prev->min_flt;
	r->maj_flt = prev->maj_flt;
	if (!st)
		return;
	st->off_since = ts;
	faults_off(st, prev, blocked, ts);
	if (!blocked)
		return;
	if (st->in_sys) {
		st->switches++;
		r->flags |= SW_SYSCALL;
		r->sys_nr = st->sys_nr;
		r->sys_enter_ts = st->sys_enter_ts;
		r->sys_arg[0] = st->sys_arg[0];
		r->sys_arg[1] = st->sys_arg[1];
	} else if (st->fault_ts > st->on_ts) {
		/* Blocked outside a system call, after a user fault began on
		 * this stretch on the CPU: in the fault. */
		r->flags |= SW_FAULT;
		r->fault_addr = st->fault_addr;
		r->fault_ts = st->fault_ts;
	}
}

static __always_inline void thread_on(struct task_struct *next, __u64 ts)
{
	struct thread_state *st = thread_of(next, true);

	if (!st)
		return;
	if (st->off_since && st->in_sys)
		st->off_ns += ts - st->off_since;
	st->off_since = 0;
	st->on_ts = ts;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct ptbpf_sched_cpu *c = this_cpu();
	__u32 flags = 0, state = switch_state(preempt, prev_state, prev);
	struct ptbpf_sched_switch *r;
	struct thread_state *st;
	__u64 ts = 0, jiffies = bpf_jiffies64();

	if (!c)
		return 0;
	if (is_traced(prev->tgid))
		flags |= SW_PREV_TRACED;
	if (is_traced(next->tgid))
		flags |= SW_NEXT_TRACED;
	if (flags || jiffies - c->warm <= WARM_JIFFIES)
		ts = bpf_ktime_get_ns();
	if (flags) {
		c->warm = jiffies;
		replay_last(c, prev, ts);
		r = reserve_chain(c, sizeof(*r), SCHED_DROP_SWITCH);
		if (r) {
			__builtin_memset(r, 0, sizeof(*r));
			hdr_fill(&r->h, c, ts, SCHED_REC_SWITCH);
			r->prev_tid = prev->pid;
			r->prev_tgid = prev->tgid;
			r->prev_state = state;
			r->flags = flags;
			r->sys_nr = -1;
			next_fill(r, next);
			if (flags & SW_PREV_TRACED)
				why_off(r, prev, ts);
			submit(r);
			c->shown = next->pid;
			c->shown_valid = 1;
		} else if ((flags & SW_PREV_TRACED) && (st = thread_of(prev, true))) {
			/* The switch is lost (counted), not the thread's state. */
			st->off_since = ts;
			faults_off(st, prev, is_blocked(state), ts);
		}
		if (flags & SW_NEXT_TRACED)
			thread_on(next, ts);
	}
	c->last_ts = ts;
	c->last_prev = prev->pid;
	c->last_next = next->pid;
	c->last_state = state;
	c->unseen = 0;
	return 0;
}

static __always_inline int send_waking(struct task_struct *p, __u16 new_task)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct ptbpf_sched_waking *r;
	struct ptbpf_sched_cpu *c;
	__u64 now;

	if (!is_traced(p->tgid) || !(c = this_cpu()))
		return 0;
	now = bpf_ktime_get_ns();
	c->warm = bpf_jiffies64();
	replay_last(c, cur, now);
	r = reserve_chain(c, sizeof(*r), SCHED_DROP_WAKING);
	if (!r)
		return 0;
	hdr_fill(&r->h, c, now, SCHED_REC_WAKING);
	r->tid = p->pid;
	r->tgid = p->tgid;
	r->waker_tid = cur->pid;
	r->waker_tgid = cur->tgid;
	r->prio = p->prio;
	r->target_cpu = p->thread_info.cpu;
	/* Whether it comes from an interrupt would need the per-CPU preempt
	 * count, whose address these kernels do not give BPF (no per-CPU
	 * symbols in kallsyms): the waker is the task the CPU ran. */
	r->common_flags = 0;
	r->new_task = new_task;
	r->pad = 0;
	bpf_probe_read_kernel(r->comm, sizeof(r->comm), p->comm);
	submit(r);
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	return send_waking(p, 0);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	return send_waking(p, 1);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct thread_state *st;

	if (!is_traced(t->tgid) || !(st = thread_of(t, true)))
		return 0;
	fault_done(st, t);
	faults_flush(st, t, t->maj_flt);
	st->in_sys = 1;
	st->entered = 1;
	st->sys_nr = id;
	st->sys_enter_ts = bpf_ktime_get_ns();
	st->sys_arg[0] = regs->di;
	st->sys_arg[1] = regs->si;
	st->switches = 0;
	st->off_ns = 0;
	return 0;
}

/* What file descriptor fd of t is: its inode's number, mode and device. */
static __always_inline void fd_file(struct task_struct *t, __u64 fd,
				    struct ptbpf_sched_syscall *r)
{
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds, *f = NULL;
	struct inode *ino;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return;
	ino = BPF_CORE_READ(f, f_inode);
	r->ino = BPF_CORE_READ(ino, i_ino);
	r->mode = BPF_CORE_READ(ino, i_mode);
	r->rdev = BPF_CORE_READ(ino, i_rdev);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct ptbpf_sched_syscall *r;
	struct thread_state *st;

	if (!is_traced(t->tgid) || !(st = thread_of(t, true)))
		return 0;
	if (!st->in_sys) {
		/* The end of a call the thread was in when tracing began (once
		 * per thread): enter_ts 0, the loader knows when it began. Its
		 * record is filled apart from the one below: merged, clang loads
		 * the arguments from regs or from st with one instruction, which
		 * the verifier refuses ("same insn cannot be used with different
		 * pointers"). */
		if (st->entered)
			return 0;
		st->entered = 1;
		r = reserve(sizeof(*r), SCHED_DROP_SYSCALL);
		if (!r)
			return 0;
		__builtin_memset(r, 0, sizeof(*r));
		hdr_fill(&r->h, NULL, bpf_ktime_get_ns(), SCHED_REC_SYSCALL);
		r->tid = t->pid;
		r->tgid = t->tgid;
		r->nr = regs->orig_ax;
		r->ret = ret;
		r->arg[0] = regs->di;
		r->arg[1] = regs->si;
		if (regs->di < (1u << 20))
			fd_file(t, regs->di, r);
		submit(r);
		return 0;
	}
	st->in_sys = 0;
	if (!st->switches)
		return 0;
	r = reserve(sizeof(*r), SCHED_DROP_SYSCALL);
	if (!r)
		return 0;
	__builtin_memset(r, 0, sizeof(*r));
	hdr_fill(&r->h, NULL, bpf_ktime_get_ns(), SCHED_REC_SYSCALL);
	r->tid = t->pid;
	r->tgid = t->tgid;
	r->nr = st->sys_nr;
	r->switches = st->switches;
	r->enter_ts = st->sys_enter_ts;
	r->off_cpu_ns = st->off_ns;
	r->ret = ret;
	r->arg[0] = st->sys_arg[0];
	r->arg[1] = st->sys_arg[1];
	if (st->sys_arg[0] < (1u << 20))
		fd_file(t, st->sys_arg[0], r);
	submit(r);
	return 0;
}

/* Block I/O requests of the traced processes in flight: request -> start. */
struct block_start {
	__u64 ts;
	__u32 tid, tgid, bytes, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct block_start);
} block_rqs SEC(".maps");

SEC("tp_btf/block_io_start")
int BPF_PROG(on_block_start, struct request *rq)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct block_start b = {};
	__u64 key = (__u64)rq;

	if (!is_traced(t->tgid)) {
		/* A request freed without block_io_done (merged into another,
		 * or not accounted) may come back at this address: not ours. */
		bpf_map_delete_elem(&block_rqs, &key);
		return 0;
	}
	b.ts = bpf_ktime_get_ns();
	b.tid = t->pid;
	b.tgid = t->tgid;
	b.bytes = rq->__data_len;
	if (bpf_map_update_elem(&block_rqs, &key, &b, BPF_ANY))
		stat_inc(SCHED_BLOCK_UNTRACKED);
	return 0;
}

/* Runs for every request on the host: one hash lookup for the others. */
SEC("tp_btf/block_io_done")
int BPF_PROG(on_block_done, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct block_start *b = bpf_map_lookup_elem(&block_rqs, &key);
	struct ptbpf_sched_block *r;
	struct block_device *part;

	if (!b)
		return 0;
	r = reserve(sizeof(*r), SCHED_DROP_BLOCK);
	if (r) {
		hdr_fill(&r->h, NULL, bpf_ktime_get_ns(), SCHED_REC_BLOCK);
		r->tid = b->tid;
		r->tgid = b->tgid;
		r->start_ts = b->ts;
		r->bytes = b->bytes;
		r->sector = rq->__sector;
		part = rq->part;
		r->dev = part ? part->bd_dev : 0;
		r->op = rq->cmd_flags & 0xff; /* REQ_OP_MASK */
		r->pad = 0;
		submit(r);
	}
	bpf_map_delete_elem(&block_rqs, &key);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(on_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct thread_state *st;

	if (!is_traced(t->tgid) || !(st = thread_of(t, true)))
		return 0;
	fault_done(st, t);
	st->fault_ts = bpf_ktime_get_ns();
	st->fault_addr = address;
	st->pf_ts = st->fault_ts;
	st->pf_end = 0;
	st->pf_maj = t->maj_flt;
	st->pf_flt = faults_of(t);
	return 0;
}

/* A page mapped (or unmapped) by the current task: the fault it is in, if
 * any and not over yet, has got this far. Runs for every change of a
 * process's resident pages on the host: a bitmap load for the others. The
 * tracepoint's arguments are not read (5.x kernels had a third). */
SEC("tp_btf/rss_stat")
int BPF_PROG(on_rss, struct mm_struct *mm)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct thread_state *st;

	if (!is_traced(t->tgid) || !(st = thread_of(t, false)) || !st->pf_ts ||
	    faults_of(t) != st->pf_flt)
		return 0;
	st->pf_end = bpf_ktime_get_ns();
	return 0;
}
