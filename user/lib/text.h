/* SPDX-License-Identifier: BSD-2-Clause */
/* A line built piece by piece in a fixed buffer (user/lib/text.c). */
#ifndef PTBPF_TEXT_H
#define PTBPF_TEXT_H

#include <stddef.h>

/* Appends to b (len bytes, *o of them used) as snprintf would, never past
 * it: what does not fit is cut, and *o stays below len. */
void text_append(char *b, size_t len, size_t *o, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* PTBPF_TEXT_H */
