// SPDX-License-Identifier: BSD-2-Clause
/* Protobuf wire format, field by field. See pbread.h. */
#include "trace/pbread.h"

#include <string.h>

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	int n = pb_varint_get(*p, (size_t)(end - *p), v);

	if (n <= 0)
		return false;
	*p += n;
	return true;
}

bool pb_next_field(const uint8_t **p, const uint8_t *end, struct field *f, bool *bad)
{
	const uint8_t *start = *p;
	uint64_t tag;

	if (*p >= end)
		return false;
	/* Field numbers run from 1 to 2^29 - 1 (so a run of zeros is malformed). */
	if (!get_varint(p, end, &tag) || tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
		goto malformed;
	f->num = (uint32_t)(tag >> 3);
	f->wt = tag & 7;
	switch (f->wt) {
	case PB_VARINT:
		if (!get_varint(p, end, &f->v))
			goto malformed;
		break;
	case PB_FIXED64:
		if (end - *p < 8)
			goto malformed;
		memcpy(&f->v, *p, 8);
		*p += 8;
		break;
	case PB_FIXED32:
		if (end - *p < 4)
			goto malformed;
		f->v = 0;
		memcpy(&f->v, *p, 4);
		*p += 4;
		break;
	case PB_LEN:
		if (!get_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p))
			goto malformed;
		f->d = *p;
		f->len = f->v;
		*p += f->len;
		break;
	default:
		goto malformed;
	}
	f->raw = start;
	f->rawlen = *p - start;
	return true;
malformed:
	*bad = true;
	return false;
}

