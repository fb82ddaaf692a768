/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * offcpu: why a traced thread was off CPU, as slices on a "blocked in"
 * track under its thread's track: a system call it blocked in ("read",
 * "futex", "epoll_wait"...; what its file descriptor is: a pipe, a socket,
 * a device such as /dev/nvidia0, a file; a futex of CPython's GIL), a page
 * fault it blocked in; on a "waiting for a CPU" track beside it, each
 * stretch it was runnable but off CPU ("preempted", by the task that took
 * the CPU); on a "page faults on CPU" track, each stretch of faults it
 * took one after another without blocking (a VM's reads, memory zeroed);
 * and
 * its page faults, minor and major, as counters under its thread. A track
 * of their own, not the ops' track: these come from the kernel's clock
 * through another ring, and a slice of theirs that crossed an op's cut end
 * (lost records) would reshape the op's slices in trace_processor. The states
 * themselves (Running, Runnable, Sleeping, Uninterruptible) are the
 * scheduler records' (record/sched.c), which trace_processor turns into
 * thread_state; these slices say what a Sleeping stretch waited in.
 */
#ifndef PTBPF_OFFCPU_H
#define PTBPF_OFFCPU_H

#include <stdint.h>

#include "ptbpf_sched.h"
#include "trace/perfetto.h"

struct offcpu;
struct pystack;

/* A traced thread's track (made when new), 0 if there is none. */
typedef uint64_t offcpu_thread_track_fn(void *ctx, int pid, int tid);

struct offcpu_counts {
	uint64_t syscalls;       /* blocking system calls written as slices */
	uint64_t unfinished;     /* ... still blocked when tracing stopped */
	uint64_t faults;         /* page faults a thread blocked in, as slices */
	uint64_t faults_undrawn; /* ... whose records came after a later call's end */
	uint64_t preempted;      /* stretches runnable off CPU (preempted) */
	uint64_t fault_runs;     /* stretches of faults on CPU, as slices */
	uint64_t fault_run_ns;   /* ... their time in faults */
	uint64_t minor, major;   /* page faults of the traced threads since attach */
	uint64_t no_thread;      /* records of threads past the table's limit */
	uint64_t block_io;       /* block I/O requests, as slices */
	uint64_t block_bytes;    /* ... their bytes */
	uint64_t block_undrawn;  /* requests past a thread's tracks in flight at once */
	uint64_t before;         /* threads found blocked in a call as tracing began */
	uint64_t before_py;      /* ... of them with their Python stack */
};

struct offcpu *offcpu_new(struct pf_writer *w, offcpu_thread_track_fn *track, void *ctx);
void offcpu_free(struct offcpu *o);
/* A switch record: what its traced prev left the CPU in, its traced next
 * coming back. */
void offcpu_switch(struct offcpu *o, const struct ptbpf_sched_switch *r);
/* A traced thread woken: by whom, for its call's slice. */
void offcpu_waking(struct offcpu *o, const struct ptbpf_sched_waking *r);
/* A block I/O request a traced thread started, now done: its slice. */
void offcpu_block(struct offcpu *o, const struct ptbpf_sched_block *r);
/* A stretch of page faults on CPU: its slice. */
void offcpu_faults(struct offcpu *o, const struct ptbpf_sched_faults *r);
/* A blocking system call, now over: its slice. */
void offcpu_syscall(struct offcpu *o, const struct ptbpf_sched_syscall *r);
/* Tracing of process pid began at ts: each of its threads blocked in a
 * system call then (/proc/PID/task/TID/syscall) gets that call's slice,
 * from ts to its end, with its Python stack then (read through ps, where
 * pystack_find has run for pid; ps may be NULL). */
void offcpu_started(struct offcpu *o, int pid, uint64_t ts, struct pystack *ps);
/* Tracing stopped at ts: calls and faults still blocked end there. */
void offcpu_finish(struct offcpu *o, uint64_t ts);
const struct offcpu_counts *offcpu_counts(const struct offcpu *o);

#endif /* PTBPF_OFFCPU_H */
