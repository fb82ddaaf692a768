/* SPDX-License-Identifier: BSD-2-Clause */
/* x86-64 system calls: names, and what their first argument is. */
#ifndef PTBPF_SYSCALLS_H
#define PTBPF_SYSCALLS_H

#include <stdbool.h>
#include <stddef.h>

enum syscall_arg { SYSCALL_ARG_OTHER, SYSCALL_ARG_FD, SYSCALL_ARG_ADDR };

/* "read", or "syscall N" (written into buf) for a number it does not know. */
const char *syscall_name(int nr, char *buf, size_t len);
/* What the first argument of call nr is. */
enum syscall_arg syscall_arg0(int nr);

#endif /* PTBPF_SYSCALLS_H */
