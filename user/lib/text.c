// SPDX-License-Identifier: BSD-2-Clause
/* Text helpers: a line built piece by piece, escaping. See text.h. */
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

void text_escape(char *dst, size_t n, const char *src, size_t srclen)
{
	size_t o = 0;

	for (size_t i = 0; i < srclen && src[i] && o + 5 < n; i++) {
		unsigned char c = src[i];

		if (c < 0x20 || c == 0x7f)
			o += snprintf(dst + o, n - o, "\\x%02x", c);
		else
			dst[o++] = c;
	}
	if (n)
		dst[o < n ? o : n - 1] = 0;
}
