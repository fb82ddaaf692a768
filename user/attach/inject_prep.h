/* SPDX-License-Identifier: BSD-2-Clause */
/* inject.c's steps before any ptrace (inject_prep.c). */
#ifndef PTBPF_INJECT_PREP_H
#define PTBPF_INJECT_PREP_H

#include <stddef.h>
#include <stdint.h>

/* The refusals that need no ptrace (no such process, yama, another tracer,
 * a library that is not a file in its mount namespace): one line each. */
int inject_preflight(int pid, const char *lib_path, char *err, size_t errlen);
/* Runtime addresses in pid of n (<= 4) exported functions of the first
 * library whose basename starts with lib_prefix, from one parse of its
 * symbols, and their sizes (sizes may be NULL). 0, or -ENOENT (*bad: which
 * one) or -errno. */
int inject_lib_symbols(int pid, const char *lib_prefix, const char *const *syms,
		       uint64_t *addrs, uint64_t *sizes, int n, int *bad);
/* The runtime address of r_state in pid's dynamic linker's _r_debug (the
 * debugger interface, <link.h>), or 0 if ld.so or the symbol is not found. */
uint64_t inject_loader_state_addr(int pid);
/* Addresses of n functions of pid's libc.so.6 (dlopen and friends). */
int inject_resolve(int pid, const char *const *syms, uint64_t *addrs, int n, char *err,
		   size_t errlen);

#endif
