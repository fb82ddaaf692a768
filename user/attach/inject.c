// SPDX-License-Identifier: BSD-2-Clause
/*
 * ptrace injection. See inject.h.
 *
 * The call. With every thread stopped, ptbpf copies a trampoline (the asm
 * below) into a slot of the zero padding that ends libc's (else ld.so's)
 * executable segment, and a data block D (function, arguments, the
 * registers the thread must get back, room for its xstate and a message)
 * onto the chosen thread's own stack, 32 KiB below its red zone. One
 * PTRACE_SETREGS (rip = slot, rsp = D, rbx = D) commits; every thread is
 * detached. The thread blocks signals, saves its vector state, calls the
 * function on the stack below D, writes the result and DONE into D, and
 * restores itself: signal mask, xstate, flags, every register, then rsp,
 * and the last two instructions take rbx and rip from the slot (after rsp
 * is restored a signal frame may overwrite D). ptbpf polls D for DONE and
 * then zeroes the slot again, after checking that the thread has left it.
 *
 * Kill safety. Before the SETREGS nothing the target uses has changed (the
 * slot and D are unused memory), and the kernel detaches every thread when
 * ptbpf dies. After it, the thread finishes on its own. The registers it
 * restores are what the kernel would have resumed it with: a syscall
 * interrupted by the stop is restarted (rip - 2, rax = its number, or
 * restart_syscall), and a stop inside an rseq critical section resumes at
 * its abort handler. The one signal-related limit: a thread that was just
 * handed a signal (a signal-delivery stop) is never chosen.
 *
 * Slots. A slot holds the code, then the final rbx and rip and its owner
 * (tid, D, a nonce), all written by ptbpf (the page is not writable by the
 * target). A slot is free when all zero, or when it holds exactly this code
 * and its owner is done: the owner thread is gone, or its rip is outside
 * the slot and its D does not say STARTED. A slot a killed ptbpf left
 * behind is reused; one whose call still runs (a timeout) is skipped, and
 * its thread is not chosen. A padding with any byte that is neither zero
 * nor one of our slots is not used at all.
 *
 * Safe point. The borrowed thread must not hold a lock that dlopen takes:
 * glibc's malloc arena locks (not recursive) or the loader's locks in a
 * half-done state. With every thread stopped, a thread qualifies when its
 * RIP is
 *   - outside libc.so.6 and ld.so (application or other library code:
 *     glibc 2.36 malloc has no hooks, so no allocator frame is below it), or
 *   - in libc, blocked in a system call (orig_rax >= 0 and `syscall` just
 *     before RIP) that is not one malloc or fork makes while holding arena
 *     locks (mmap, munmap, mremap, brk, mprotect, madvise, clone*, fork).
 * RIP inside ld.so never qualifies, nor a thread inside a dl_iterate_phdr
 * walk (a return address into it in the top 64 KiB of its stack: its
 * callback holds the loader's write lock). No thread qualifies while the
 * loader is mapping or unmapping objects (_r_debug.r_state, which it keeps
 * for debuggers, is not RT_CONSISTENT): the thread doing it may wait in
 * libc, and a dlopen nested there makes ld.so abort the process. Its stack
 * must be a thread stack with room: the growable [stack] with D inside it,
 * or an anonymous mapping above a guard page with at least STACK_ROOM below
 * rsp (a thread on a small or borrowed stack, e.g. a signal stack, is not
 * chosen). The thread group leader is preferred. If no thread qualifies,
 * all threads run for a millisecond and are stopped again, up to
 * SAFE_POINT_TRIES times.
 *
 * The other threads run during the call, so a lock one of them holds
 * (another thread's dlopen running constructors, a malloc in progress) is
 * released normally; dlopen is thread-safe. A group-stopped process is
 * refused: there the call could not run to its end.
 */
#define _GNU_SOURCE
#include "attach/inject.h"

#include "lib/clock.h"
#include "lib/elfsym.h"
#include "lib/procmaps.h"
#include "attach/inject_prep.h"
#include "attach/inject_tramp.h"
#include "attach/target.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STOP_TIMEOUT_MS 2000
#define RELEASE_WAIT_MS 500 /* after a failed stop, for the threads not yet waited for */
#define SAFE_POINT_TRIES 200
#define UNLOAD_TRIES 100
#define ERASE_TRIES 100
#define MAX_THREADS 65536
#define MAX_BUSY_LEN (1 << 20)
#define LOADER_SCAN_BYTES (64 * 1024) /* of a candidate thread's stack */

struct inj_session {
	int pid;
	struct inj_thread *th;
	int nth, cap;
	int group_stop_sig;        /* a thread reported a group stop by it */
	uint64_t libc_lo, libc_hi, ld_lo, ld_hi; /* executable text ranges */
	uint64_t loader_state;     /* &_r_debug.r_state, or 0 (not checked) */
	uint64_t walk_lo, walk_hi; /* libc's dl_iterate_phdr, or 0 */
	struct tramp_pad pads[2];  /* after libc's code, after ld.so's */
	char *err;
	size_t errlen;
};

/* For inject_dlclose_checked: what must be idle. */
struct inj_unload {
	uint64_t text_lo, text_hi, busy_addr;
	size_t busy_len;
};

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* waitpid on one traced thread, bounded. 0, -ETIMEDOUT, or -errno. */
static int wait_tid(int tid, int *status, int timeout_ms)
{
	for (long waited_us = 0;; waited_us += 200) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);

		if (r == tid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (waited_us >= timeout_ms * 1000L)
			return -ETIMEDOUT;
		sleep_us(200);
	}
}

static bool is_event_stop(int status)
{
	return WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP;
}

/*
 * Threads still traced by this process that were interrupted but did not
 * stop in time (blocked in the kernel: an uninterruptible driver call, a
 * vfork, a core dump). The interrupt cannot be taken back: such a thread
 * stops as soon as it leaves the kernel, and would stay stopped, with every
 * thread ptbpf could not detach, until ptbpf exits. inject_reap() detaches
 * each as soon as it has stopped; the loader calls it with every read.
 */
#define MAX_PENDING 1024
static int pending[MAX_PENDING];
static int npending;

static void leave_pending(int tid)
{
	if (npending < MAX_PENDING)
		pending[npending++] = tid;
	/* else the kernel detaches it when ptbpf exits */
}

/* Detaches a thread that reported status, handing back a signal it was
 * stopped to deliver (a group stop or an interrupt hands back none). False
 * if it was killed meanwhile: it exits as a zombie that only its tracer
 * can reap, which inject_reap's waitpid does. */
static bool detach(int tid, int status)
{
	int sig = WIFSTOPPED(status) && !is_event_stop(status) ? WSTOPSIG(status) : 0;

	return !ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)sig) || errno != ESRCH;
}

static void detach_stopped(int tid, int status)
{
	if (!detach(tid, status))
		leave_pending(tid);
}

int inject_reap(void)
{
	int left = 0;

	for (int i = 0; i < npending; i++) {
		int status;
		pid_t r = waitpid(pending[i], &status, __WALL | WNOHANG);

		if (!r || (r < 0 && errno == EINTR) ||
		    (r == pending[i] && WIFSTOPPED(status) && !detach(pending[i], status)))
			pending[left++] = pending[i];
		/* else let go, reaped, or not ours any more */
	}
	npending = left;
	return npending;
}

static bool is_group_stop_sig(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

int inject_symbol_addr(int pid, const char *lib_prefix, const char *sym, uint64_t *addr)
{
	int bad;

	return inject_lib_symbols(pid, lib_prefix, &sym, addr, NULL, 1, &bad);
}

/* Executable ranges of libc.so.6 and ld.so, for the safe-point test, and
 * the padding after their code, for the trampoline. */
static void find_text_ranges(struct inj_session *s)
{
	struct procmaps *m = procmaps_open(s->pid);
	struct procmap e;

	while (m && procmaps_next(m, &e)) {
		if (e.perms[2] != 'x')
			continue;
		if (procmap_named(&e, "libc.so.6")) {
			s->libc_lo = e.start;
			s->libc_hi = e.end;
			tramp_find_padding(s->pid, e.start, e.end, e.offset, &s->pads[0]);
		} else if (procmap_named(&e, "ld-linux-x86-64.so")) {
			s->ld_lo = e.start;
			s->ld_hi = e.end;
			tramp_find_padding(s->pid, e.start, e.end, e.offset, &s->pads[1]);
		}
	}
	procmaps_close(m);
}

static struct inj_thread *find_thread(struct inj_session *s, int tid)
{
	for (int i = 0; i < s->nth; i++)
		if (s->th[i].tid == tid)
			return &s->th[i];
	return NULL;
}

/* Records the stop a thread just reported. */
static void note_stop(struct inj_session *s, struct inj_thread *t, int status)
{
	t->stopped = true;
	t->have_regs = false;
	t->sig = 0;
	if (is_event_stop(status)) {
		if (is_group_stop_sig(WSTOPSIG(status)))
			s->group_stop_sig = WSTOPSIG(status);
		return;
	}
	t->sig = WSTOPSIG(status); /* a signal-delivery stop: handed back on release */
}

static int wait_thread_stop(struct inj_session *s, struct inj_thread *t)
{
	int status, ret = wait_tid(t->tid, &status, STOP_TIMEOUT_MS);

	if (ret == -ECHILD || (!ret && !WIFSTOPPED(status))) {
		t->tid = 0; /* it exited */
		return 0;
	}
	if (ret == -ETIMEDOUT) {
		char wchan[64], state = target_thread_state(s->pid, t->tid, wchan, sizeof(wchan));

		t->blocked = true;
		snprintf(s->err, s->errlen, "pid %d: thread %d did not stop within %d ms (state "
			 "%c%s%s%s); nothing in the process was changed", s->pid, t->tid,
			 STOP_TIMEOUT_MS, state ? state : '?', wchan[0] ? ", in " : "", wchan,
			 state == 'D' ? ": blocked in the kernel" : "");
		return -ETIME;
	}
	if (ret) {
		snprintf(s->err, s->errlen, "pid %d: thread %d did not stop: %s", s->pid,
			 t->tid, strerror(-ret));
		return ret;
	}
	note_stop(s, t, status);
	return 0;
}

/* Seizes and interrupts one new thread. 0, or -EPERM style errors. */
static int seize_thread(struct inj_session *s, int tid)
{
	struct inj_thread *t;

	if (s->nth == s->cap) {
		int cap = s->cap ? s->cap * 2 : 16;
		struct inj_thread *th;

		if (cap > MAX_THREADS) {
			snprintf(s->err, s->errlen, "pid %d has too many threads", s->pid);
			return -E2BIG;
		}
		th = realloc(s->th, cap * sizeof(*th));
		if (!th)
			return -ENOMEM;
		s->th = th;
		s->cap = cap;
	}
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL)) {
		int e = errno;

		if (e == ESRCH)
			return 0; /* exited meanwhile */
		snprintf(s->err, s->errlen, "ptrace is not permitted on pid %d (thread %d): "
			 "PTRACE_SEIZE: %s (another tracer, seccomp, a non-dumpable process, "
			 "or missing CAP_SYS_PTRACE)", s->pid, tid, strerror(e));
		return -e;
	}
	t = &s->th[s->nth++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) && errno != ESRCH) {
		snprintf(s->err, s->errlen, "pid %d: PTRACE_INTERRUPT of thread %d: %s",
			 s->pid, tid, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Seizes every thread, rescanning until a pass finds none new, and waits
 * for each to stop. */
static int seize_all(struct inj_session *s)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", s->pid);
	for (int pass = 0; pass < 100; pass++) {
		struct dirent *de;
		int added = 0, ret = 0;
		DIR *d = opendir(path);

		if (!d) {
			snprintf(s->err, s->errlen, "pid %d exited", s->pid);
			return -ESRCH;
		}
		while (!ret && (de = readdir(d))) {
			int tid = atoi(de->d_name);

			if (tid <= 0 || find_thread(s, tid))
				continue;
			ret = seize_thread(s, tid);
			added++;
		}
		closedir(d);
		for (int i = 0; !ret && i < s->nth; i++)
			if (s->th[i].tid && !s->th[i].stopped)
				ret = wait_thread_stop(s, &s->th[i]);
		if (ret)
			return ret;
		if (!added)
			return find_thread(s, s->pid) ? 0 : -ESRCH;
	}
	snprintf(s->err, s->errlen, "pid %d: its threads kept changing", s->pid);
	return -EAGAIN;
}

/* Lets every thread run for a moment (delivering what it was stopped
 * with), then stops them all again. */
static int run_briefly(struct inj_session *s, long us)
{
	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];

		if (!t->tid)
			continue;
		if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)t->sig) && errno == ESRCH) {
			leave_pending(t->tid); /* killed while stopped: to be reaped */
			t->tid = 0;
		}
		t->stopped = false;
		t->sig = 0;
	}
	sleep_us(us);
	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];
		int ret;

		if (!t->tid)
			continue;
		if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) && errno == ESRCH) {
			t->tid = 0;
			continue;
		}
		ret = wait_thread_stop(s, t);
		if (ret)
			return ret;
	}
	return find_thread(s, s->pid) && find_thread(s, s->pid)->tid ? 0 : -ESRCH;
}

/* Detaches every thread, handing back the signal each was stopped with.
 * After a failed stop some were never waited for (or never interrupted
 * again after run_briefly): they are interrupted, and get RELEASE_WAIT_MS
 * in all to stop; one that does not, and the one known to be blocked, are
 * left to inject_reap(). */
static void release_all(struct inj_session *s)
{
	long budget_us = RELEASE_WAIT_MS * 1000L;

	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];

		if (t->tid && t->stopped) {
			if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->sig) &&
			    errno == ESRCH)
				leave_pending(t->tid);
			t->tid = 0;
		} else if (t->tid && ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL)) {
			leave_pending(t->tid);
			t->tid = 0;
		}
	}
	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];
		uint64_t a;
		int status, ret;

		if (!t->tid || t->blocked)
			continue;
		a = clock_mono_ns();
		ret = wait_tid(t->tid, &status, budget_us > 0 ? budget_us / 1000 : 0);
		budget_us -= (long)((clock_mono_ns() - a) / 1000);
		if (ret == -ETIMEDOUT)
			leave_pending(t->tid);
		else if (!ret && WIFSTOPPED(status))
			detach_stopped(t->tid, status);
		t->tid = 0;
	}
	for (int i = 0; i < s->nth; i++)
		if (s->th[i].tid) /* blocked */
			leave_pending(s->th[i].tid);
}

static void fetch_regs(struct inj_session *s)
{
	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];

		if (t->tid && !t->have_regs)
			t->have_regs = !ptrace(PTRACE_GETREGS, t->tid, NULL, &t->regs);
	}
}

/* Whether the thread is inside a dl_iterate_phdr walk (whose callback
 * runs holding the loader's write lock): among the words of the top 64 KiB
 * of its stack, a return address into libc's dl_iterate_phdr. A dlopen
 * nested there waits for the load lock, which a concurrent dlopen holds
 * while it waits for that write lock: the process deadlocks. A stale word
 * that only looks like such an address makes the thread wait for the next
 * try. */
static bool inside_loader_walk(const struct inj_session *s, uint64_t rsp)
{
	uint64_t words[512], a = rsp & ~7ull;

	while (s->walk_hi && a < rsp + LOADER_SCAN_BYTES) {
		size_t n = (size_t)(((a | 4095) + 1 - a) / 8);

		if (target_read(s->pid, a, words, n * 8))
			break; /* the stack's end */
		for (size_t i = 0; i < n; i++)
			if (words[i] >= s->walk_lo && words[i] < s->walk_hi)
				return true;
		a += n * 8;
	}
	return false;
}

static bool thread_at_safe_point(struct inj_session *s, const struct inj_thread *t,
				 const char *path)
{
	static const long unsafe_nr[] = { SYS_mmap, SYS_munmap, SYS_mremap, SYS_brk,
					  SYS_mprotect, SYS_madvise, SYS_clone, SYS_clone3,
					  SYS_fork, SYS_vfork };
	const struct user_regs_struct *r = &t->regs;
	uint8_t insn[2];

	if (!t->tid || !t->have_regs || t->sig || t->in_call)
		return false;
	if (r->rip >= s->ld_lo && r->rip < s->ld_hi)
		return false;
	if (r->rip >= s->libc_lo && r->rip < s->libc_hi) {
		if ((long)r->orig_rax < 0 || target_read(s->pid, r->rip - 2, insn, 2) ||
		    insn[0] != 0x0f || insn[1] != 0x05)
			return false;
		for (size_t i = 0; i < sizeof(unsafe_nr) / sizeof(unsafe_nr[0]); i++)
			if ((long)r->orig_rax == unsafe_nr[i])
				return false;
	}
	return tramp_stack_ok(s->pid, r->rsp, path) && !inside_loader_walk(s, r->rsp);
}

/* Whether no thread is mapping or unmapping objects: the dynamic linker
 * says RT_ADD or RT_DELETE in _r_debug (as it tells debuggers) from a
 * dlopen's first mapping to the end of its mapping, and around a dlclose's
 * unmapping. A call nested in that thread there (it may wait in libc: for
 * the loader's write lock, which a dl_iterate_phdr walk holds, or a malloc
 * lock) makes ld.so assert and abort the process ("r->r_state == RT_ADD"):
 * 1 attach in 3 over a job that dlopens in a loop beside such a walk. */
static bool loader_consistent(const struct inj_session *s)
{
	int state = RT_CONSISTENT;

	if (s->loader_state && target_read(s->pid, s->loader_state, &state, sizeof(state)))
		return true; /* unreadable: as before the check */
	return state == RT_CONSISTENT;
}

static struct inj_thread *pick_thread(struct inj_session *s, const char *path)
{
	struct inj_thread *lead = find_thread(s, s->pid);

	if (lead && thread_at_safe_point(s, lead, path))
		return lead;
	for (int i = 0; i < s->nth; i++)
		if (s->th[i].tid != s->pid && thread_at_safe_point(s, &s->th[i], path))
			return &s->th[i];
	return NULL;
}

/* Whether no thread runs the library to unload and its busy flags are 0. */
static bool unload_idle(struct inj_session *s, const struct inj_unload *u)
{
	uint8_t *buf;
	bool idle;

	for (int i = 0; i < s->nth; i++) {
		const struct inj_thread *t = &s->th[i];

		if (t->tid && (!t->have_regs ||
			       (t->regs.rip >= u->text_lo && t->regs.rip < u->text_hi)))
			return false;
	}
	if (!u->busy_len)
		return true;
	buf = malloc(u->busy_len);
	idle = buf && !target_read(s->pid, u->busy_addr, buf, u->busy_len);
	for (size_t i = 0; idle && i < u->busy_len; i++)
		idle = !buf[i];
	free(buf);
	return idle;
}

static int refuse_stopped(struct inj_session *s)
{
	snprintf(s->err, s->errlen, "pid %d is stopped (SIG%s): ptbpf loads nothing into a "
		 "stopped process; continue it (kill -CONT %d) or use --ops probes", s->pid,
		 sigabbrev_np(s->group_stop_sig), s->pid);
	return -EAGAIN;
}

/* Seizes every thread and stops them all at an instant when a thread is at
 * a safe point, a slot is free and (for an unload) the library is idle.
 * 0 with *t and *slot set, or -errno with one line in err. */
static int session_begin(struct inj_session *s, const char *path, const struct inj_unload *u,
			 struct inj_thread **t, uint64_t *slot)
{
	int tries = u ? UNLOAD_TRIES : SAFE_POINT_TRIES, slot_ret = 0, ret;
	bool idle = false;

	*t = NULL;
	ret = seize_all(s);
	for (int i = 0; !ret && !s->group_stop_sig; i++) {
		fetch_regs(s);
		slot_ret = tramp_find_slot(s->pid, s->pads, 2, s->th, s->nth, slot);
		idle = !u || unload_idle(s, u);
		if (idle && !slot_ret && loader_consistent(s))
			*t = pick_thread(s, path);
		if (*t || slot_ret == -ENOSPC || i + 1 >= tries)
			break;
		ret = run_briefly(s, 1000);
	}
	if (ret) {
		if (!s->err[0])
			snprintf(s->err, s->errlen, "pid %d: stopping its threads failed: %s",
				 s->pid, strerror(-ret));
		return ret;
	}
	if (s->group_stop_sig)
		return refuse_stopped(s);
	if (!idle) {
		snprintf(s->err, s->errlen, "pid %d: the library is still in use after %d tries (a "
			 "thread runs its code or its busy flags are set); not unloaded", s->pid,
			 tries);
		return -EBUSY;
	}
	if (slot_ret) {
		snprintf(s->err, s->errlen, "pid %d: no room for ptbpf's trampoline after the code "
			 "of libc.so.6 or ld.so (%s)", s->pid, slot_ret == -ENOSPC ?
			 "no zero padding there" : "earlier injected calls still run there");
		return slot_ret;
	}
	if (!*t) {
		snprintf(s->err, s->errlen, "pid %d: no thread reached a safe point (all inside "
			 "malloc or the dynamic loader, or on a small stack)", s->pid);
		return -EBUSY;
	}
	return 0;
}

/* Stops the borrowed thread alone and zeroes the slot once it has left it
 * for good. If ptbpf dies first, the slot stays: unreachable, and reused. */
static void erase_trampoline(int pid, int mem_fd, const struct tramp_ticket *tk)
{
	for (int i = 0; i < ERASE_TRIES; i++) {
		struct inj_thread t = { .tid = tk->tid };
		int status, ret;

		if (ptrace(PTRACE_SEIZE, t.tid, NULL, NULL))
			return; /* gone, or someone else traces it */
		if (ptrace(PTRACE_INTERRUPT, t.tid, NULL, NULL)) {
			leave_pending(t.tid); /* reaped, or detached once it stops */
			return;
		}
		ret = wait_tid(t.tid, &status, STOP_TIMEOUT_MS);
		if (ret == -ETIMEDOUT)
			leave_pending(t.tid); /* detached once it stops; the slot stays */
		if (ret || !WIFSTOPPED(status))
			return;
		t.have_regs = !ptrace(PTRACE_GETREGS, t.tid, NULL, &t.regs);
		ret = tramp_erase(pid, mem_fd, tk, &t);
		detach_stopped(t.tid, status);
		if (ret != -EBUSY)
			return;
		sleep_us(100);
	}
}

/* Makes call c on a borrowed thread of pid: the whole session. */
static int inject_run(int pid, struct tramp_call *c, const struct inj_unload *u, char *err,
		      size_t errlen)
{
	struct inj_session s = { .pid = pid, .err = err, .errlen = errlen };
	const char *walk = "dl_iterate_phdr";
	uint64_t walk_size = 0;
	struct user_regs_struct entry;
	struct tramp_ticket tk;
	struct inj_thread *t;
	char path[64];
	uint64_t slot;
	int ret, bad, mem_fd = -1;

	if (!tramp_cpu_ok()) {
		snprintf(err, errlen, "this CPU has no XSAVE that ptbpf can use: no injection");
		return -EOPNOTSUPP;
	}
	find_text_ranges(&s);
	s.loader_state = inject_loader_state_addr(pid);
	if (!inject_lib_symbols(pid, "libc.so.6", &walk, &s.walk_lo, &walk_size, 1, &bad))
		s.walk_hi = s.walk_lo + walk_size;
	if (!s.libc_hi) {
		snprintf(err, errlen, "pid %d does not map libc.so.6", pid);
		return -ENOENT;
	}
	ret = session_begin(&s, c->path, u, &t, &slot);
	if (!ret) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/mem", pid, t->tid);
		mem_fd = open(path, O_RDWR | O_CLOEXEC);
		if (mem_fd < 0) {
			ret = -errno;
			snprintf(err, errlen, "pid %d: opening %s: %s", pid, path, strerror(errno));
		}
	}
	if (!ret)
		ret = tramp_prepare(pid, mem_fd, t, slot, c, &entry, &tk, err, errlen);
	/* The commit: from here on the thread restores itself. */
	if (!ret && ptrace(PTRACE_SETREGS, t->tid, NULL, &entry)) {
		ret = -errno;
		snprintf(err, errlen, "pid %d: starting the call on thread %d: %s", pid, t->tid,
			 strerror(errno));
		tramp_discard(mem_fd, &tk);
	}
	release_all(&s);
	free(s.th);
	if (!ret)
		ret = tramp_wait(pid, mem_fd, &tk, c, err, errlen);
	if (!ret)
		erase_trampoline(pid, mem_fd, &tk);
	if (mem_fd >= 0)
		close(mem_fd);
	return ret;
}

/* What every call checks first: threads an earlier call could not let go
 * are let go if they have stopped by now; one of pid's that is still
 * blocked refuses the call (seizing it again would fail), then the
 * refusals that need no ptrace. */
static int before_ptrace(int pid, const char *lib_path, char *err, size_t errlen)
{
	char path[64];

	err[0] = 0;
	inject_reap();
	for (int i = 0; i < npending; i++) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d", pid, pending[i]);
		if (!access(path, F_OK)) {
			snprintf(err, errlen, "pid %d: thread %d has not stopped since an earlier "
				 "attempt (blocked in the kernel; it is let go as soon as it stops): "
				 "not tried again until then", pid, pending[i]);
			return -ETIME;
		}
	}
	return inject_preflight(pid, lib_path, err, errlen);
}

int inject_call(int pid, uint64_t fn_addr, uint64_t arg0, uint64_t arg1, uint64_t *ret,
		char *err, size_t errlen)
{
	struct tramp_call c = { .fn = fn_addr, .arg0 = arg0, .arg1 = arg1 };
	int rc;

	rc = before_ptrace(pid, NULL, err, errlen);
	if (!rc)
		rc = inject_run(pid, &c, NULL, err, errlen);
	if (!rc)
		*ret = c.result;
	return rc;
}

int inject_dlopen(int pid, const char *lib_path, uint64_t *handle, char *err, size_t errlen)
{
	static const char *const syms[] = { "dlopen", "dlerror" };
	struct tramp_call c = { .path = lib_path, .arg1 = RTLD_NOW | RTLD_LOCAL };
	uint64_t addrs[2] = { 0 };
	int rc;

	rc = before_ptrace(pid, lib_path, err, errlen);
	if (!rc)
		rc = inject_resolve(pid, syms, addrs, 2, err, errlen);
	c.fn = addrs[0];
	c.errfn = addrs[1];
	if (!rc)
		rc = inject_run(pid, &c, NULL, err, errlen);
	if (!rc && !c.result) {
		snprintf(err, errlen, "pid %d: dlopen(%s) failed: %s", pid, lib_path,
			 c.msg[0] ? c.msg : "(no dlerror message)");
		rc = -ENOEXEC;
	}
	if (!rc)
		*handle = c.result;
	return rc;
}

int inject_dlclose(int pid, uint64_t handle, int *ret, char *err, size_t errlen)
{
	return inject_dlclose_checked(pid, handle, 0, 0, 0, 0, ret, err, errlen);
}

int inject_dlclose_checked(int pid, uint64_t handle, uint64_t text_lo, uint64_t text_hi,
			   uint64_t busy_addr, size_t busy_len, int *ret, char *err,
			   size_t errlen)
{
	struct inj_unload u = { text_lo, text_hi, busy_addr, busy_len };
	struct tramp_call c = { .arg0 = handle };
	bool checked = text_lo < text_hi || busy_len;
	int rc;

	err[0] = 0;
	if (busy_len > MAX_BUSY_LEN) {
		snprintf(err, errlen, "busy range of %zu bytes is too long", busy_len);
		return -EINVAL;
	}
	rc = before_ptrace(pid, NULL, err, errlen);
	if (!rc)
		rc = inject_resolve(pid, (const char *const[]){ "dlclose" }, &c.fn, 1, err, errlen);
	if (!rc)
		rc = inject_run(pid, &c, checked ? &u : NULL, err, errlen);
	if (!rc)
		*ret = (int)c.result;
	return rc;
}
