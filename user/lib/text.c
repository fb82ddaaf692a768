// SPDX-License-Identifier: BSD-2-Clause
/* A line built piece by piece. See text.h. */
#include "lib/text.h"

#include <stdarg.h>
#include <stdio.h>

void text_append(char *b, size_t len, size_t *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*o + 1 >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b + *o, len - *o, fmt, ap);
	va_end(ap);
	*o = n < 0 ? *o : *o + n < len ? *o + n : len - 1;
}
