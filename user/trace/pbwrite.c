// SPDX-License-Identifier: BSD-2-Clause
/* Protobuf encoding: a buffer's growth, out of the inline fast path. See
 * pbwrite.h. */
#include "trace/pbwrite.h"

#include <stdlib.h>

#define PB_FIRST_CAP 4096

bool pb_grow(struct pb *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->failed)
		return false;
	if (b->cap - b->len >= n)
		return true;
	if (b->fixed || n > SIZE_MAX / 2 - b->len)
		goto fail;
	cap = b->cap ? b->cap : PB_FIRST_CAP;
	while (cap < b->len + n)
		cap *= 2;
	p = realloc(b->buf, cap);
	if (!p)
		goto fail;
	b->buf = p;
	b->cap = cap;
	return true;
fail:
	b->failed = true;
	return false;
}

void pb_free(struct pb *b)
{
	if (!b->fixed)
		free(b->buf);
	*b = (struct pb){ 0 };
}
