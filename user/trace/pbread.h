/* SPDX-License-Identifier: BSD-2-Clause */
/* Reading protobuf wire format: varints (also the packet records' lengths
 * for the trace reader and the writer), and messages field by field (the
 * trace reader and merge read traces with it). Bounds-checked: malformed
 * input sets *bad. Wire types: PB_* in pf_fields.h; writing: pbwrite.h. */
#ifndef PTBPF_PBREAD_H
#define PTBPF_PBREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/pf_fields.h"

/* The varint at p (avail bytes): its size (1 to 10); 0 if the bytes end
 * first (cut short), -1 if 10 bytes go by without its end (malformed). */
static inline int pb_varint_get(const uint8_t *p, size_t avail, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < 10; i++) {
		if ((size_t)i >= avail)
			return 0;
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80))
			return i + 1;
	}
	return -1;
}

/* One field of a message. */
struct field {
	uint32_t num;
	int wt;
	uint64_t v;         /* varint, fixed64, fixed32 */
	const uint8_t *d;   /* PB_LEN */
	size_t len;
	const uint8_t *raw; /* the whole field, tag included */
	size_t rawlen;
};

/* Reads the next field at *p; false at the end or on malformed input
 * (then *bad is set). */
bool pb_next_field(const uint8_t **p, const uint8_t *end, struct field *f, bool *bad);

#endif /* PTBPF_PBREAD_H */
