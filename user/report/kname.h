/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Kernel names a reader can tell apart in a column: demangled CUDA kernel
 * names run to hundreds of characters of namespaces, template arguments and
 * parameter lists, and cutting them at the column's width leaves rows that
 * read the same ("void at::native::(anonymous namespace)::multi_tensor_apply_k").
 */
#ifndef PTBPF_KNAME_H
#define PTBPF_KNAME_H

#include <stddef.h>

/*
 * name, readable within width bytes, into out (at least width + 1 bytes):
 * without "void ", parameter lists and namespaces; with as many levels of
 * template arguments as fit (deeper ones as "<...>"), else its first
 * template arguments ("f<a, b, ...>"), else its head and tail ("ab...yz").
 */
void kname_short(const char *name, size_t width, char *out);

/*
 * Short names for a column of n names (each out[i] at least width + 1
 * bytes): kname_short's, while no two rows read the same; rows that would
 * collide show the head and tail of their full template arguments, and
 * where even those read the same, get " #1", " #2", ...
 */
void kname_column(const char *const *names, size_t n, size_t width, char **out);

#endif /* PTBPF_KNAME_H */
