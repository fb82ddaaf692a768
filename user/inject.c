// SPDX-License-Identifier: BSD-2-Clause
/*
 * ptrace injection. See inject.h.
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
 * RIP inside ld.so never qualifies, nor does a thread that blocks or ignores
 * SIGSEGV (the return fault would make the kernel reset that). The thread
 * group leader is preferred. If no thread qualifies, all threads run for a
 * millisecond and are stopped again, up to SAFE_POINT_TRIES times (not in a
 * process that is group-stopped: nothing would move).
 *
 * The other threads are released before the call, so a lock one of them
 * holds (another thread's dlopen running constructors, a malloc in
 * progress) is released normally instead of deadlocking the borrowed
 * thread; dlopen is thread-safe. In a SIGSTOPped process they go straight
 * back into the group stop, and whatever they hold stays held: there a
 * call can time out.
 */
#define _GNU_SOURCE
#include "inject.h"

#include "elfsym.h"
#include "target.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STOP_TIMEOUT_MS 2000
#define CALL_TIMEOUT_MS 10000
#define SAFE_POINT_TRIES 200
#define MAX_THREADS 65536
#define XSTATE_MAX (64 * 1024)
#define MAX_DEFERRED 8
#define RED_ZONE 128

struct inj_thread {
	int tid;
	bool stopped;
	int sig;         /* signal to deliver on release: it was at its delivery stop */
	siginfo_t si;
};

struct inj_session {
	int pid;
	struct inj_thread *th;
	int nth, cap;
	bool group_stopped;        /* some thread reported a group stop */
	int tid;                   /* the borrowed thread, 0 before one is chosen */
	struct user_regs_struct regs; /* its registers at the stop */
	struct iovec xstate;
	int ndeferred;             /* signals it received during calls */
	siginfo_t deferred[MAX_DEFERRED];
	uint64_t libc_lo, libc_hi, ld_lo, ld_hi; /* executable text ranges */
	char *err;
	size_t errlen;
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

static bool is_group_stop_sig(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static int read_status_field(int pid, int tid, const char *key, char *out, size_t len)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	int ret = -ENOENT;
	FILE *f;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) || line[klen] != ':')
			continue;
		snprintf(out, len, "%s", line + klen + 1 + strspn(line + klen + 1, " \t"));
		out[strcspn(out, "\n")] = 0;
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

/* The refusals that need no ptrace: one line each. */
static int preflight(int pid, const char *lib_path, char *err, size_t errlen)
{
	char buf[64], path[PATH_MAX + 64];
	struct stat st;
	FILE *f;
	int fd;

	if (pid <= 0 || !target_alive(pid)) {
		snprintf(err, errlen, "no live process with pid %d", pid);
		return -ESRCH;
	}
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		int scope = 0;

		if (fscanf(f, "%d", &scope) == 1 && scope >= 2) {
			fclose(f);
			snprintf(err, errlen, "ptrace is not permitted: kernel.yama.ptrace_scope "
				 "is %d (%s)", scope, scope == 3 ? "no ptrace at all" :
				 "CAP_SYS_PTRACE only");
			return -EPERM;
		}
		fclose(f);
	}
	if (!read_status_field(pid, 0, "TracerPid", buf, sizeof(buf)) && atoi(buf) != 0) {
		snprintf(err, errlen, "pid %d is already traced by pid %d (a debugger or "
			 "strace): detach it first", pid, atoi(buf));
		return -EBUSY;
	}
	if (!lib_path)
		return 0;
	if (lib_path[0] != '/') {
		snprintf(err, errlen, "library path %s is not absolute", lib_path);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, lib_path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int e = fd < 0 ? errno : EINVAL;

		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "library %s is not a readable file in pid %d's mount "
			 "namespace: %s", lib_path, pid, strerror(e));
		return -e;
	}
	close(fd);
	return 0;
}

int inject_symbol_addr(int pid, const char *lib_prefix, const char *sym, uint64_t *addr)
{
	char path[64], line[PATH_MAX + 256], err[256];
	struct target_lib lib;
	struct elf_func fn;
	struct elf_file *ef;
	int ret;
	FILE *f;

	ret = target_find_lib(pid, lib_prefix, &lib);
	if (ret)
		return ret;
	ef = elf_file_open_exported(lib.fd, err, sizeof(err));
	close(lib.fd);
	if (!ef)
		return -ENOEXEC;
	ret = elf_file_find_func(ef, sym, &fn);
	elf_file_close(ef);
	if (ret)
		return ret;
	/* The mapping of that inode whose file range holds the symbol. */
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ret = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, off, ino;
		unsigned int major, minor;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &off,
			   &major, &minor, &ino) != 7)
			continue;
		if (ino != lib.ino || makedev(major, minor) != lib.dev || perms[2] != 'x' ||
		    fn.file_off < off || fn.file_off >= off + (end - start))
			continue;
		*addr = start + (fn.file_off - off);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

/* Executable ranges of libc.so.6 and ld.so, for the safe-point test. */
static void find_text_ranges(struct inj_session *s)
{
	char path[64], line[PATH_MAX + 256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", s->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		char perms[8];
		int pos = 0;
		const char *base;

		if (sscanf(line, "%lx-%lx %7s %*x %*x:%*x %*u %n", &start, &end, perms, &pos) < 3 ||
		    !pos || perms[2] != 'x')
			continue;
		line[strcspn(line, "\n")] = 0;
		base = strrchr(line + pos, '/');
		base = base ? base + 1 : line + pos;
		if (!strncmp(base, "libc.so.6", 9)) {
			s->libc_lo = start;
			s->libc_hi = end;
		} else if (!strncmp(base, "ld-linux-x86-64.so", 18)) {
			s->ld_lo = start;
			s->ld_hi = end;
		}
	}
	fclose(f);
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
	t->sig = 0;
	if (is_event_stop(status)) {
		if (is_group_stop_sig(WSTOPSIG(status)))
			s->group_stopped = true;
		return;
	}
	/* A signal-delivery stop: the signal is handed back on release. */
	t->sig = WSTOPSIG(status);
	if (ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &t->si))
		memset(&t->si, 0, sizeof(t->si));
}

static int wait_thread_stop(struct inj_session *s, struct inj_thread *t)
{
	int status, ret = wait_tid(t->tid, &status, STOP_TIMEOUT_MS);

	if (ret == -ECHILD || (!ret && !WIFSTOPPED(status))) {
		t->tid = 0; /* it exited */
		return 0;
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

static bool sig_in_mask(const char *hex, int sig)
{
	unsigned long long mask = strtoull(hex, NULL, 16);

	return mask & (1ULL << (sig - 1));
}

static bool thread_at_safe_point(struct inj_session *s, int tid, struct user_regs_struct *r)
{
	static const long unsafe_nr[] = { SYS_mmap, SYS_munmap, SYS_mremap, SYS_brk,
					  SYS_mprotect, SYS_madvise, SYS_clone, SYS_clone3,
					  SYS_fork, SYS_vfork };
	char blk[64], ign[64];
	uint8_t insn[2];

	if (ptrace(PTRACE_GETREGS, tid, NULL, r))
		return false;
	if (read_status_field(s->pid, tid, "SigBlk", blk, sizeof(blk)) ||
	    read_status_field(s->pid, tid, "SigIgn", ign, sizeof(ign)) ||
	    sig_in_mask(blk, SIGSEGV) || sig_in_mask(ign, SIGSEGV))
		return false;
	if (r->rip >= s->ld_lo && r->rip < s->ld_hi)
		return false;
	if (r->rip < s->libc_lo || r->rip >= s->libc_hi)
		return true;
	if ((long)r->orig_rax < 0 || target_read(s->pid, r->rip - 2, insn, 2) ||
	    insn[0] != 0x0f || insn[1] != 0x05)
		return false;
	for (size_t i = 0; i < sizeof(unsafe_nr) / sizeof(unsafe_nr[0]); i++)
		if ((long)r->orig_rax == unsafe_nr[i])
			return false;
	return true;
}

static int pick_thread(struct inj_session *s)
{
	struct user_regs_struct r;
	struct inj_thread *lead = find_thread(s, s->pid);

	if (lead && lead->tid && thread_at_safe_point(s, lead->tid, &r))
		return lead->tid;
	for (int i = 0; i < s->nth; i++)
		if (s->th[i].tid && s->th[i].tid != s->pid &&
		    thread_at_safe_point(s, s->th[i].tid, &r))
			return s->th[i].tid;
	return 0;
}

/* Lets every thread run for a moment (delivering what it was stopped
 * with), then stops them all again. */
static int run_briefly(struct inj_session *s, long us)
{
	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];

		if (!t->tid)
			continue;
		if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)t->sig) && errno == ESRCH)
			t->tid = 0;
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

/* Detaches every thread but the borrowed one, handing back its signal. */
static void release_others(struct inj_session *s)
{
	for (int i = 0; i < s->nth; i++) {
		struct inj_thread *t = &s->th[i];

		if (!t->tid || t->tid == s->tid)
			continue;
		ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->sig);
		t->tid = 0;
	}
}

static int session_begin(struct inj_session *s, int pid, char *err, size_t errlen)
{
	struct inj_thread *t;
	int ret;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->err = err;
	s->errlen = errlen;
	s->xstate.iov_base = malloc(XSTATE_MAX);
	if (!s->xstate.iov_base)
		return -ENOMEM;
	find_text_ranges(s);
	if (!s->libc_hi) {
		snprintf(err, errlen, "pid %d does not map libc.so.6", pid);
		return -ENOENT;
	}
	ret = seize_all(s);
	for (int i = 0; !ret && i < SAFE_POINT_TRIES; i++) {
		s->tid = pick_thread(s);
		if (s->tid || s->group_stopped)
			break;
		ret = run_briefly(s, 1000);
	}
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "pid %d: stopping its threads failed: %s", pid,
				 strerror(-ret));
		return ret;
	}
	if (!s->tid) {
		snprintf(err, errlen, "pid %d: no thread reached a safe point (all inside "
			 "malloc, the dynamic loader, or blocking SIGSEGV)", pid);
		return -EAGAIN;
	}
	t = find_thread(s, s->tid);
	s->xstate.iov_len = XSTATE_MAX;
	if (ptrace(PTRACE_GETREGS, s->tid, NULL, &s->regs) ||
	    ptrace(PTRACE_GETREGSET, s->tid, (void *)NT_X86_XSTATE, &s->xstate)) {
		ret = -errno;
		snprintf(err, errlen, "pid %d: saving thread %d's registers: %s", pid, s->tid,
			 strerror(errno));
		s->tid = 0;
		return ret;
	}
	if (t->sig && s->ndeferred < MAX_DEFERRED)
		s->deferred[s->ndeferred++] = t->si;
	t->sig = 0;
	release_others(s);
	return 0;
}

/* Restores the borrowed thread, detaches everything still attached, and
 * hands back the signals that arrived for the borrowed thread. */
static void session_end(struct inj_session *s)
{
	if (s->tid) {
		int sig = 0;

		ptrace(PTRACE_SETREGS, s->tid, NULL, &s->regs);
		ptrace(PTRACE_SETREGSET, s->tid, (void *)NT_X86_XSTATE, &s->xstate);
		if (s->ndeferred &&
		    !ptrace(PTRACE_SETSIGINFO, s->tid, NULL, &s->deferred[0]))
			sig = s->deferred[0].si_signo;
		ptrace(PTRACE_DETACH, s->tid, NULL, (void *)(long)sig);
		for (int i = sig ? 1 : 0; i < s->ndeferred; i++)
			if (syscall(SYS_rt_tgsigqueueinfo, s->pid, s->tid,
				    s->deferred[i].si_signo, &s->deferred[i]))
				syscall(SYS_tgkill, s->pid, s->tid, s->deferred[i].si_signo);
		for (int i = 0; i < s->nth; i++)
			if (s->th[i].tid == s->tid)
				s->th[i].tid = 0;
		s->tid = 0;
	}
	release_others(s);
	free(s->th);
	free(s->xstate.iov_base);
	s->th = NULL;
	s->xstate.iov_base = NULL;
}

/* Bytes into the borrowed thread's stack, below its red zone. */
static int write_stack(struct inj_session *s, const void *buf, size_t len, uint64_t *addr)
{
	uint64_t at = (s->regs.rsp - RED_ZONE - len) & ~15ULL;
	struct iovec local = { (void *)buf, len }, remote = { (void *)at, len };

	if (process_vm_writev(s->pid, &local, 1, &remote, 1, 0) != (ssize_t)len) {
		snprintf(s->err, s->errlen, "pid %d: writing to thread %d's stack at 0x%llx: %s",
			 s->pid, s->tid, (unsigned long long)at, strerror(errno));
		return -EFAULT;
	}
	*addr = at;
	return 0;
}

/* Waits for the called function to return to address 0. */
static int wait_return(struct inj_session *s, uint64_t ret_rsp, uint64_t *ret)
{
	struct timespec t0, now;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct user_regs_struct r;
		int status, rc, sig;
		long left_ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left_ms = CALL_TIMEOUT_MS - ((now.tv_sec - t0.tv_sec) * 1000 +
					     (now.tv_nsec - t0.tv_nsec) / 1000000);
		rc = left_ms > 0 ? wait_tid(s->tid, &status, left_ms) : -ETIMEDOUT;
		if (rc == -ETIMEDOUT) {
			snprintf(s->err, s->errlen, "pid %d: the call on thread %d did not return "
				 "within %d ms; thread restored, the target may be left "
				 "inconsistent", s->pid, s->tid, CALL_TIMEOUT_MS);
			if (!ptrace(PTRACE_INTERRUPT, s->tid, NULL, NULL) &&
			    wait_tid(s->tid, &status, STOP_TIMEOUT_MS))
				s->tid = 0;
			return -ETIMEDOUT;
		}
		if (rc || !WIFSTOPPED(status)) {
			snprintf(s->err, s->errlen, "pid %d exited during the call", s->pid);
			s->tid = 0;
			return -ESRCH;
		}
		sig = WSTOPSIG(status);
		if (is_event_stop(status)) { /* a late interrupt or a group stop */
			ptrace(PTRACE_CONT, s->tid, NULL, NULL);
			continue;
		}
		if (ptrace(PTRACE_GETREGS, s->tid, NULL, &r))
			memset(&r, 0, sizeof(r));
		if (sig == SIGSEGV && r.rip == 0 && r.rsp == ret_rsp) {
			*ret = r.rax;
			return 0;
		}
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
			snprintf(s->err, s->errlen, "pid %d: the call faulted (signal %d at 0x%llx); "
				 "thread restored", s->pid, sig, (unsigned long long)r.rip);
			return -EFAULT;
		}
		/* Someone else's signal: keep it for after the call. */
		if (s->ndeferred < MAX_DEFERRED &&
		    !ptrace(PTRACE_GETSIGINFO, s->tid, NULL, &s->deferred[s->ndeferred]))
			s->ndeferred++;
		ptrace(PTRACE_CONT, s->tid, NULL, NULL);
	}
}

/* fn(arg0, arg1) on the borrowed thread; its stack below scratch_lo is free. */
static int session_call(struct inj_session *s, uint64_t scratch_lo, uint64_t fn,
			uint64_t arg0, uint64_t arg1, uint64_t *ret)
{
	struct user_regs_struct r = s->regs;
	uint64_t zero = 0, ret_slot;
	int rc;

	/* At the call rsp is 16-aligned; the pushed return address is 0. */
	r.rsp = ((scratch_lo - 256) & ~15ULL) - 8;
	ret_slot = r.rsp;
	{
		struct iovec local = { &zero, 8 }, remote = { (void *)ret_slot, 8 };

		if (process_vm_writev(s->pid, &local, 1, &remote, 1, 0) != 8) {
			snprintf(s->err, s->errlen, "pid %d: writing the return address: %s",
				 s->pid, strerror(errno));
			return -EFAULT;
		}
	}
	r.rip = fn;
	r.rdi = arg0;
	r.rsi = arg1;
	r.rax = 0;
	r.orig_rax = -1; /* no syscall restart into our code */
	if (ptrace(PTRACE_SETREGS, s->tid, NULL, &r) ||
	    ptrace(PTRACE_CONT, s->tid, NULL, NULL)) {
		rc = -errno;
		snprintf(s->err, s->errlen, "pid %d: starting the call: %s", s->pid,
			 strerror(errno));
		return rc;
	}
	return wait_return(s, ret_slot + 8, ret);
}

int inject_call(int pid, uint64_t fn_addr, uint64_t arg0, uint64_t arg1, uint64_t *ret,
		char *err, size_t errlen)
{
	struct inj_session s;
	int rc;

	err[0] = 0;
	rc = preflight(pid, NULL, err, errlen);
	if (rc)
		return rc;
	rc = session_begin(&s, pid, err, errlen);
	if (!rc)
		rc = session_call(&s, s.regs.rsp - RED_ZONE, fn_addr, arg0, arg1, ret);
	session_end(&s);
	return rc;
}

static int resolve(int pid, const char *sym, uint64_t *addr, char *err, size_t errlen)
{
	int rc = inject_symbol_addr(pid, "libc.so.6", sym, addr);

	if (rc)
		snprintf(err, errlen, "pid %d: cannot find %s in its libc.so.6 (glibc >= 2.34 "
			 "needed): %s", pid, sym, strerror(-rc));
	return rc;
}

int inject_dlopen(int pid, const char *lib_path, uint64_t *handle, char *err, size_t errlen)
{
	uint64_t dlopen_addr, dlerror_addr, path_addr, msg_addr = 0;
	struct inj_session s;
	int rc;

	err[0] = 0;
	rc = preflight(pid, lib_path, err, errlen);
	if (!rc)
		rc = resolve(pid, "dlopen", &dlopen_addr, err, errlen);
	if (!rc)
		rc = resolve(pid, "dlerror", &dlerror_addr, err, errlen);
	if (rc)
		return rc;
	rc = session_begin(&s, pid, err, errlen);
	if (!rc)
		rc = write_stack(&s, lib_path, strlen(lib_path) + 1, &path_addr);
	if (!rc)
		rc = session_call(&s, path_addr, dlopen_addr, path_addr,
				  RTLD_NOW | RTLD_LOCAL, handle);
	if (!rc && *handle == 0) {
		char msg[512] = "(no dlerror message)";

		if (!session_call(&s, path_addr, dlerror_addr, 0, 0, &msg_addr) && msg_addr)
			target_read_str(pid, msg_addr, msg, sizeof(msg));
		snprintf(err, errlen, "pid %d: dlopen(%s) failed: %s", pid, lib_path, msg);
		rc = -ENOEXEC;
	}
	session_end(&s);
	return rc;
}

int inject_dlclose(int pid, uint64_t handle, int *ret, char *err, size_t errlen)
{
	uint64_t dlclose_addr, r = 0;
	int rc;

	err[0] = 0;
	rc = resolve(pid, "dlclose", &dlclose_addr, err, errlen);
	if (!rc)
		rc = inject_call(pid, dlclose_addr, handle, 0, &r, err, errlen);
	if (!rc)
		*ret = (int)r;
	return rc;
}
