/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Perfetto writer's output: packets into records, records into the
 * file. Each packet is encoded into one fixed scratch buffer, then appended
 * whole, as a `Trace.packet` record (0x0A, length, bytes), to an output
 * buffer that goes to the file by write() at packet boundaries: when it
 * fills, 100 ms after its oldest byte, and at the end. So the file holds
 * whole packets at every moment; a write that fails half way (a full disk)
 * is truncated back to the last whole packet. A killed writer leaves a
 * valid prefix (at most the record a write() was cut in is partial, which
 * readers drop), with no end marker.
 *
 * Nested messages are encoded in place (pbwrite.h: the body, then moved
 * up by the size of its length varint) in that one fixed buffer. Depth is
 * at most three, so the moves are cheap and no second buffer is needed.
 * In copy mode (merge) packets come encoded and are appended as they are.
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC_COARSE; perfetto_int.h (strnlen, clock_gettime) */
#include "trace/perfetto_int.h"
#include "trace/pbread.h"
#include "trace/pf_fields.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* The output buffer is written once its oldest byte is this old. */
#define FLUSH_NS 100000000ull

void pf_packet_begin_on(struct pf_writer *w, uint32_t seq, uint32_t flags)
{
	w->pb.len = PREFIX_ROOM;
	w->pb.failed = false;
	if (!w->copy) /* a copy's packets have their own sequences */
		pb_uint(&w->pb, F_PKT_SEQ_ID, seq);
	if (flags)
		pb_uint(&w->pb, F_PKT_SEQ_FLAGS, flags);
	if (w->loss_pending)
		pb_uint(&w->pb, F_PKT_PREV_DROPPED, 1);
}

/* Bytes of the whole records at the start of buf[0..len) (records this
 * writer made): where a write that stopped at len leaves the last one. */
static size_t whole_records(const uint8_t *buf, size_t len)
{
	size_t pos = 0;

	for (;;) {
		uint64_t plen;
		int n = pos + 1 < len ? pb_varint_get(buf + pos + 1, len - pos - 1, &plen) : 0;

		if (n <= 0 || plen > len - pos - 1 - (size_t)n)
			return pos;
		pos += 1 + (size_t)n + plen;
	}
}

/* Writes out[] to the file. If a write fails part way (a full disk), the
 * file is cut back to its last whole record and the writer stops: later
 * records could not be trusted to follow whole ones. */
void pf_flush_out(struct pf_writer *w)
{
	size_t done = 0;

	while (done < w->out_len && !w->err) {
		ssize_t n = write(w->fd, w->out + done, w->out_len - done);

		if (n > 0)
			done += (size_t)n;
		else if (n < 0 && errno != EINTR)
			set_error(w, -errno);
		else if (n == 0)
			set_error(w, -EIO);
	}
	if (w->err && done) {
		size_t whole = whole_records(w->out, done);

		/* Should even the cut fail, readers drop a cut last record. */
		if (whole < done && ftruncate(w->fd, w->base + (off_t)(w->on_disk + whole)) == 0)
			done = whole;
	}
	w->on_disk += done;
	w->out_len = 0;
	w->first_buffered_ns = 0;
	if (w->err)
		w->bytes = w->on_disk;
}

/* Appends one record (head, then body) to out[], which is written when it
 * fills or FLUSH_NS after its oldest byte (checked here, on the coarse
 * clock: a few ns). */
static void append_record(struct pf_writer *w, const uint8_t *head, size_t hlen,
			  const uint8_t *body, size_t blen)
{
	size_t rec = hlen + blen;
	uint64_t now;

	if (w->out_len + rec > w->out_cap)
		pf_flush_out(w);
	if (w->err)
		return;
	if (rec > w->out_cap) { /* a packet larger than the buffer */
		uint8_t *g = realloc(w->out, rec);

		if (!g) {
			set_error(w, -ENOMEM);
			return;
		}
		w->out = g;
		w->out_cap = rec;
	}
	memcpy(w->out + w->out_len, head, hlen);
	if (blen)
		memcpy(w->out + w->out_len + hlen, body, blen);
	w->out_len += rec;
	w->bytes += rec;
	w->loss_pending = false;
	now = clock_mono_coarse_ns();
	if (!w->first_buffered_ns)
		w->first_buffered_ns = now ? now : 1;
	else if (now - w->first_buffered_ns >= FLUSH_NS)
		pf_flush_out(w);
}

/* Ends the packet encoded in pb as one Trace.packet record. */
void pf_packet_end(struct pf_writer *w)
{
	struct pb *b = &w->pb;
	uint8_t hdr[PREFIX_ROOM];
	size_t plen, n;
	uint8_t *start;

	if (b->failed)
		set_error(w, -EMSGSIZE);
	if (w->err)
		return;
	plen = b->len - PREFIX_ROOM;
	hdr[0] = PF_PACKET_TAG;
	n = 1 + pb_varint_put(hdr + 1, plen);
	start = b->buf + PREFIX_ROOM - n;
	memcpy(start, hdr, n);
	append_record(w, start, n + plen, NULL, 0);
}

void pf_write_packet(struct pf_writer *w, const uint8_t *packet, size_t len)
{
	uint8_t hdr[PREFIX_ROOM];

	if (!w || w->err)
		return;
	hdr[0] = PF_PACKET_TAG;
	append_record(w, hdr, 1 + pb_varint_put(hdr + 1, len), packet, len);
}

int pf_writer_flush(struct pf_writer *w)
{
	if (!w)
		return -EINVAL;
	pf_flush_out(w);
	return w->err;
}
