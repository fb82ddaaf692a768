/* SPDX-License-Identifier: BSD-2-Clause */
/* Text helpers (user/lib/text.c): a line built piece by piece in a fixed
 * buffer; names from another process made safe to print. */
#ifndef PTBPF_TEXT_H
#define PTBPF_TEXT_H

#include <stddef.h>

/* Appends to b (len bytes, *o of them used) as snprintf would, never past
 * it: what does not fit is cut, and *o stays below len. */
void text_append(char *b, size_t len, size_t *o, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Copies src (at most srclen bytes, up to a NUL) into dst (n bytes,
 * NUL-terminated; what does not fit is cut), control characters written
 * as \xNN: a name a process chose (its comm, a thread's, an op's) cannot
 * break a line or a terminal. */
void text_escape(char *dst, size_t n, const char *src, size_t srclen);

#endif /* PTBPF_TEXT_H */
