/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel view's record ABI, shared by bpf/sched.bpf.c and the loader
 * (user/attach/sched_probes.c, user/record/sched.c, user/record/offcpu.c).
 * Fixed-width types only. Every record starts with struct ptbpf_sched_hdr;
 * its kind says which struct it is.
 *
 * The scheduler records follow the kernel's sched_switch and sched_waking
 * tracepoints, field for field where Perfetto's compact sched encoding needs
 * them, kept where a traced process is involved: a switch whose previous or
 * next task is a traced process's thread, a wakeup of one. Perfetto infers
 * a switch's previous task from the one before it on the CPU, so before such
 * a record BPF replays the switch that put the CPU's current task on, when
 * the records so far show another one there (SW_REPLAYED): the task that ran
 * before a traced thread, or woke it, is the right one. Its time is the
 * switch's own where the CPU had a record in the last ~64 jiffies (CPUs
 * the traced threads use), else unknown (SW_UNTIMED).
 *
 * Now and then the kernel reports no switch at all for a task coming back
 * on a CPU (seen on the CI VM, kernel 6.18: a training thread preempted by
 * another process's thread, then 517 ms with no record, then a switch that
 * takes the training thread off that CPU; BCC's sched_switch tracepoint saw
 * the same). Such a task is put on by a replayed switch marked SW_UNSEEN,
 * at its first CPU sample there (bpf/samples.bpf.c shares each CPU's state,
 * struct ptbpf_sched_cpu), else untimed, just before the record that shows
 * it there.
 */
#ifndef PTBPF_SCHED_H
#define PTBPF_SCHED_H

#include "ptbpf_events.h" /* u8_t ... u64_t */

enum ptbpf_sched_kind {
	SCHED_REC_SWITCH = 1, /* struct ptbpf_sched_switch */
	SCHED_REC_WAKING,     /* struct ptbpf_sched_waking */
	SCHED_REC_SYSCALL,    /* struct ptbpf_sched_syscall */
	SCHED_REC_BLOCK,      /* struct ptbpf_sched_block */
	SCHED_REC_FAULTS,     /* struct ptbpf_sched_faults */
};

struct ptbpf_sched_hdr {
	u64_t ts;   /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	u16_t kind; /* enum ptbpf_sched_kind */
	u16_t cpu;  /* the CPU it happened on */
	u32_t lost; /* switch/waking records this CPU failed to send just before
		     * this one (the records' chain on the CPU is broken there) */
};

#define SCHED_COMM_LEN 16

/* struct ptbpf_sched_switch.flags */
#define SW_PREV_TRACED (1u << 0) /* prev is a traced process's thread */
#define SW_NEXT_TRACED (1u << 1)
#define SW_REPLAYED    (1u << 2) /* an earlier switch, replayed (see above): no prev_* */
#define SW_SYSCALL     (1u << 3) /* prev blocked in syscall sys_nr */
#define SW_FAULT       (1u << 4) /* prev blocked in a user page fault at fault_addr */
#define SW_UNTIMED     (1u << 5) /* replayed from a CPU whose switches were not
				  * timed: placed just before the next record */
#define SW_UNSEEN      (1u << 6) /* replayed, but the kernel reported no switch
				  * putting next on: at next's first CPU sample
				  * there, else untimed (SW_UNTIMED) */

/* What each CPU last did, and what the records sent so far show (the
 * per-CPU `cpus` map of bpf/sched.bpf.c, which bpf/samples.bpf.c shares). */
struct ptbpf_sched_cpu {
	u64_t last_ts;     /* the CPU's latest switch, 0 if not timed (cold) */
	u64_t warm;        /* jiffies of its last kept record */
	u32_t last_prev, last_next, last_state;
	u32_t shown;       /* the task the records sent show running here */
	u32_t lost;        /* records that could not be sent since the last one */
	u8_t shown_valid;  /* 0: nothing sent yet, or the last send failed */
	u8_t unseen;       /* the kernel reported no switch putting last_next on
			    * (a CPU sample or a record found it running): its
			    * replay is not sent yet (the loader sends what is
			    * left at the end, sched_probes_pending) */
	u8_t pad[2];
};

/* Perfetto's prev_state: TASK_REPORT bits, as the sched_switch tracepoint
 * reports them (kernels 4.14+). */
#define SCHED_STATE_RUNNING      0x0
#define SCHED_STATE_INTERRUPTIBLE 0x1  /* S */
#define SCHED_STATE_UNINTERRUPTIBLE 0x2 /* D */
#define SCHED_STATE_REPORT_IDLE  0x80  /* I */
#define SCHED_STATE_PREEMPTED    0x100 /* R+: TASK_REPORT_MAX */

struct ptbpf_sched_switch {
	struct ptbpf_sched_hdr h;
	u32_t prev_tid, prev_tgid;
	u32_t next_tid, next_tgid;
	u32_t prev_state;     /* see SCHED_STATE_*; 0 when replayed (not known) */
	int32_t next_prio;    /* task->prio, as the tracepoint reports it */
	char next_comm[SCHED_COMM_LEN];
	u32_t flags;          /* SW_* */
	int32_t sys_nr;       /* SW_SYSCALL: the system call prev blocked in */
	u64_t sys_enter_ts;   /* ... entered then */
	u64_t sys_arg[2];     /* ... with these first two arguments */
	u64_t fault_addr;     /* SW_FAULT: the address that faulted */
	u64_t fault_ts;       /* ... when */
	u64_t min_flt, maj_flt; /* SW_PREV_TRACED: prev's fault counters (task_struct) */
};

/* waking_common_flags (the trace entry's flags), as Perfetto reads them */
#define SCHED_WAKE_HARDIRQ 0x08
#define SCHED_WAKE_SOFTIRQ 0x10

struct ptbpf_sched_waking {
	struct ptbpf_sched_hdr h;
	u32_t tid, tgid;       /* the task woken */
	u32_t waker_tid, waker_tgid; /* the current task of the waking CPU */
	int32_t prio;
	u32_t target_cpu;      /* task_cpu(p) at the time, as the tracepoint reports it */
	u16_t common_flags;    /* SCHED_WAKE_* */
	u16_t new_task;        /* from sched_wakeup_new: a thread's first wakeup */
	u32_t pad;
	char comm[SCHED_COMM_LEN];
};

/* A system call of a traced thread that went off CPU (blocked) at least
 * once. h.ts is its exit. For a first argument that is an open file
 * descriptor of the thread, what the file is (ino 0: not one). enter_ts 0:
 * the call a thread was in when tracing began, now over (sent once per
 * thread, blocked or not; switches and off_cpu_ns are not known). */
struct ptbpf_sched_syscall {
	struct ptbpf_sched_hdr h;
	u32_t tid, tgid;
	int32_t nr;
	u32_t switches;   /* times it went off CPU blocked inside the call */
	u64_t enter_ts;
	u64_t off_cpu_ns; /* time off CPU (blocked, then waiting for a CPU) inside it */
	int64_t ret;
	u64_t arg[2];
	u64_t ino;        /* the fd's inode number */
	u32_t mode;       /* its i_mode (S_IFIFO, S_IFSOCK, S_IFCHR, ...) */
	u32_t rdev;       /* its i_rdev (the kernel's dev_t: major << 20 | minor) */
};

/* A block I/O request a traced thread started (block_io_start runs in the
 * task that submits it), now done (block_io_done); h.ts is its end. */
struct ptbpf_sched_block {
	struct ptbpf_sched_hdr h;
	u32_t tid, tgid;  /* the thread that started it */
	u64_t start_ts;
	u64_t sector;
	u32_t bytes;
	u32_t dev;        /* the partition's dev_t (major << 20 | minor), 0: none */
	u32_t op;         /* REQ_OP_*: 0 read, 1 write, 2 flush, 3 discard, ... */
	u32_t pad;
};

#define SCHED_FAULTS_MIN_US 100 /* a shorter stretch is counted, not sent */

/* A stretch of page faults a traced thread took one after another on CPU,
 * without blocking in them (bpf/sched.bpf.c says how they are timed);
 * h.ts is the last one's end. */
struct ptbpf_sched_faults {
	struct ptbpf_sched_hdr h;
	u32_t tid, tgid;
	u64_t start_ts;   /* the first one's start */
	u64_t fault_ns;   /* time in the faults themselves (the rest: between them) */
	u32_t faults;     /* faults timed */
	u32_t major;      /* of them, and of faults not timed in between, major ones */
};

/* Why a record did not reach the ring, or what could not be followed;
 * index of the per-CPU `sched_stats` array. */
enum ptbpf_sched_stat {
	SCHED_STAT_SENT = 0,      /* every record a program tried to send */
	SCHED_DROP_SWITCH,        /* the ring was full for a switch (replays too) */
	SCHED_DROP_WAKING,        /* ... for a wakeup */
	SCHED_DROP_SYSCALL,       /* ... for a blocking system call */
	SCHED_NO_THREAD_STATE,    /* no per-thread storage: a call or fault not followed */
	SCHED_DROP_BLOCK,         /* the ring was full for a block I/O request */
	SCHED_BLOCK_UNTRACKED,    /* a request started while the table of those in
				   * flight was full: not followed */
	SCHED_DROP_FAULTS,        /* the ring was full for a stretch of faults on CPU */
	SCHED_FAULTS_SHORT,       /* stretches of faults on CPU too short to send */
	SCHED_FAULTS_SHORT_NS,    /* ... their time in faults, summed (ns) */
	SCHED_STAT_MAX,
};

#endif /* PTBPF_SCHED_H */
