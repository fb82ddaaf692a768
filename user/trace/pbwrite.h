/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Writing protobuf wire format: varints, keys, length-delimited and fixed64
 * fields into a buffer, the one encoder of ptbpf (the Perfetto writer and
 * merge use it; the reading side is pbread.h). Wire types: PB_* in
 * pf_fields.h.
 *
 * A buffer either grows (realloc; a zeroed struct pb is an empty one) or,
 * with `fixed`, is the caller's array of cap bytes and never grows. Either
 * way a write that does not fit (past a fixed cap, or out of memory) sets
 * `failed` and writes nothing from then on: the contents are then not a
 * whole message. The encoders are inline: the live writer calls them a few
 * times per event.
 *
 * Nested messages are encoded in place: pb_begin writes the key, the body
 * follows, pb_end moves the body up by the size of its length varint and
 * writes the length before it.
 */
#ifndef PTBPF_PBWRITE_H
#define PTBPF_PBWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace/pf_fields.h"

#define PB_VARINT_MAX 10 /* bytes of the longest varint (a 64-bit value) */

struct pb {
	uint8_t *buf;
	size_t len, cap;
	bool fixed;  /* buf is the caller's: never grown nor freed */
	bool failed; /* a write did not fit: the contents are not whole */
};

/* Grows b to hold n more bytes; false (and b->failed) if it cannot. */
bool pb_grow(struct pb *b, size_t n);
/* Frees a growing buffer's memory and empties it. */
void pb_free(struct pb *b);

/* v as a varint at p (room for PB_VARINT_MAX bytes); its size. */
static inline size_t pb_varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static inline bool pb_room(struct pb *b, size_t n)
{
	if (!b->failed && b->cap - b->len >= n)
		return true;
	return pb_grow(b, n);
}

static inline void pb_raw(struct pb *b, const void *d, size_t n)
{
	if (n && pb_room(b, n)) {
		memcpy(b->buf + b->len, d, n);
		b->len += n;
	}
}

static inline void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t t[PB_VARINT_MAX];

	if (!b->failed && b->cap - b->len >= PB_VARINT_MAX)
		b->len += pb_varint_put(b->buf + b->len, v);
	else /* near the end: only the bytes it takes */
		pb_raw(b, t, pb_varint_put(t, v));
}

static inline void pb_key(struct pb *b, uint32_t field, int wire_type)
{
	pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire_type);
}

static inline void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	pb_key(b, field, PB_VARINT);
	pb_varint(b, v);
}

/* int32/int64 are sign-extended varints (10 bytes when negative). */
static inline void pb_int(struct pb *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

/* Little endian, whatever the host's order. */
static inline void pb_fixed64(struct pb *b, uint32_t field, uint64_t v)
{
	pb_key(b, field, PB_FIXED64);
	if (!pb_room(b, 8))
		return;
	for (int i = 0; i < 8; i++)
		b->buf[b->len++] = (uint8_t)(v >> (8 * i));
}

static inline void pb_bytes(struct pb *b, uint32_t field, const void *d, size_t len)
{
	pb_key(b, field, PB_LEN);
	pb_varint(b, len);
	pb_raw(b, d, len);
}

/* Starts a nested message; returns where its body begins, for pb_end. */
static inline size_t pb_begin(struct pb *b, uint32_t field)
{
	pb_key(b, field, PB_LEN);
	return b->len;
}

static inline void pb_end(struct pb *b, size_t start)
{
	uint8_t len[PB_VARINT_MAX];
	size_t body, n;

	if (b->failed)
		return;
	body = b->len - start;
	n = pb_varint_put(len, body);
	if (!pb_room(b, n))
		return;
	memmove(b->buf + start + n, b->buf + start, body);
	memcpy(b->buf + start, len, n);
	b->len += n;
}

#endif /* PTBPF_PBWRITE_H */
