/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Loading a shared library into a running process with ptrace, and calling
 * functions in it (x86-64, glibc >= 2.34 where dlopen lives in libc.so.6).
 *
 * Each call below is one ptrace session: every thread is seized and
 * interrupted and one thread at a safe point is chosen. Nothing in the
 * target changes until a single PTRACE_SETREGS points that thread at a small
 * trampoline (copied into the zero padding after libc's code) that saves its
 * state, makes the call, restores every register and returns to where the
 * thread was; then every thread is detached. From that instant on the
 * target needs nothing more from ptbpf: if ptbpf dies at any point, the
 * thread still gets its state back. ptbpf reads the result from the
 * thread's stack and afterwards erases the trampoline. A process stopped by
 * SIGSTOP (or SIGTSTP...) is refused and left stopped. Every wait is
 * bounded.
 *
 * All return 0 or a negative errno and, on error, write one line into err.
 * Two errors say what became of the process: -ETIME, a thread did not stop
 * (or has not since an earlier call): nothing in the process was changed;
 * -ETIMEDOUT, the call was started and its end was not seen (it may still
 * run, and its effects are the process's from then on); -EBUSY, no thread
 * was at a safe point (all in malloc or the dynamic loader, as during an
 * import that loads libraries): nothing was changed, and a later try may
 * find one.
 */
#ifndef PTBPF_INJECT_H
#define PTBPF_INJECT_H

#include <stddef.h>
#include <stdint.h>

/* dlopen(lib_path, RTLD_NOW | RTLD_LOCAL) inside pid. lib_path is absolute
 * and as seen in the target's mount namespace. *handle gets the handle
 * (never 0 on success); a failed dlopen reports dlerror()'s message. */
int inject_dlopen(int pid, const char *lib_path, uint64_t *handle, char *err, size_t errlen);
/* dlclose(handle) inside pid; *ret gets its return value (0 = success). */
int inject_dlclose(int pid, uint64_t handle, int *ret, char *err, size_t errlen);
/* The same, but only at an instant when no thread runs the library: with
 * every thread stopped, no thread's RIP lies in [text_lo, text_hi) and every
 * byte of the target's [busy_addr, busy_addr + busy_len) is zero (busy_len
 * at most 1 MiB; 0 for none). Up to about 100 tries, the threads running a
 * millisecond in between; then -EBUSY. */
int inject_dlclose_checked(int pid, uint64_t handle, uint64_t text_lo, uint64_t text_hi,
			   uint64_t busy_addr, size_t busy_len, int *ret, char *err,
			   size_t errlen);
/* Calls fn_addr(arg0, arg1) on a borrowed thread of pid; *ret gets RAX. */
int inject_call(int pid, uint64_t fn_addr, uint64_t arg0, uint64_t arg1, uint64_t *ret,
		char *err, size_t errlen);
/* Detaches the threads an earlier call had to leave traced (they did not
 * stop within 2 s: blocked in the kernel) once they have stopped; returns
 * how many are still waited for. Call it often: such a thread stays stopped
 * from the moment it leaves the kernel until then. Every call above does. */
int inject_reap(void);
/* Runtime address in pid of the exported function sym of the first library
 * whose basename starts with lib_prefix. 0, -ENOENT, or -errno. */
int inject_symbol_addr(int pid, const char *lib_prefix, const char *sym, uint64_t *addr);

#endif /* PTBPF_INJECT_H */
