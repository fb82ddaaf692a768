/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Loading a shared library into a running process with ptrace, and calling
 * functions in it (x86-64, glibc >= 2.34 where dlopen lives in libc.so.6).
 *
 * Each call below is one ptrace session: every thread is seized and
 * interrupted, one thread at a safe point is borrowed (see inject.c for what
 * "safe" means), the other threads are released again, the function runs on
 * the borrowed thread and returns to address 0, and the fault that follows
 * hands the thread back to us; its registers and full xstate are restored
 * and it is detached. A process stopped by SIGSTOP stays stopped. Signals
 * that arrive meanwhile are delivered on detach. Every wait is bounded; on
 * any failure the thread is restored and every thread detached.
 *
 * All return 0 or a negative errno and, on error, write one line into err.
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
/* Calls fn_addr(arg0, arg1) on a borrowed thread of pid; *ret gets RAX. */
int inject_call(int pid, uint64_t fn_addr, uint64_t arg0, uint64_t arg1, uint64_t *ret,
		char *err, size_t errlen);
/* Runtime address in pid of the exported function sym of the first library
 * whose basename starts with lib_prefix. 0, -ENOENT, or -errno. */
int inject_symbol_addr(int pid, const char *lib_prefix, const char *sym, uint64_t *addr);

#endif /* PTBPF_INJECT_H */
