/* SPDX-License-Identifier: BSD-2-Clause */
/* Reading protobuf wire format, field by field (the trace reader and merge
 * read traces with it). Bounds-checked: malformed input sets *bad. Wire
 * types: PB_* in pf_fields.h. */
#ifndef PTBPF_PBREAD_H
#define PTBPF_PBREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/pf_fields.h"

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
bool next_field(const uint8_t **p, const uint8_t *end, struct field *f, bool *bad);

#endif /* PTBPF_PBREAD_H */
