/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Streaming Perfetto writer (perfetto.h): the writer's life and the packets
 * that describe the whole trace. Open writes the first sequence's defaults
 * (timestamps in MONOTONIC) and a clock snapshot; close writes the end
 * marker, an attribute holding its own offset, so a reader can tell a
 * finished trace from a cut one. Copy mode (merge) takes packets already
 * encoded. The rest lives beside it (perfetto_int.h has the map): records
 * and the file in perfetto_out.c, event sequences and interning in
 * perfetto_seq.c, tracks and events in perfetto_track.c.
 */
#define _GNU_SOURCE /* CLOCK_BOOTTIME, getrandom; perfetto_int.h (strnlen, clock_gettime) */
#include "trace/perfetto_int.h"
#include "trace/pf_fields.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

static uint64_t random_base(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	return clock_mono_ns() ^ clock_ns(CLOCK_REALTIME) ^
	       ((uint64_t)getpid() << 32);
}

static struct pf_writer *writer_new(int fd, bool copy)
{
	struct pf_writer *w;

	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	w = calloc(1, sizeof(*w) + PREFIX_ROOM + PACKET_MAX);
	if (!w)
		return NULL;
	w->out = malloc(OUT_CAP);
	if (!w->out) {
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	w->out_cap = OUT_CAP;
	w->pb.buf = w->scratch;
	w->pb.cap = PREFIX_ROOM + PACKET_MAX;
	w->pb.fixed = true;
	w->fd = fd;
	w->copy = copy;
	w->base = lseek(fd, 0, SEEK_CUR);
	if (w->base < 0)
		w->base = 0; /* not seekable (a device): nothing to cut back */
	w->uuid_base = random_base();
	pf_seq_tables_init(w);
	hash_init(&w->flows, FLOW_SHORT_MAX, sizeof(uint32_t));
	return w;
}

/* Open failed: w freed (no end marker after an error), its error in errno. */
static struct pf_writer *open_failed(struct pf_writer *w)
{
	int err = w->err;

	pf_writer_close(w);
	errno = -err;
	return NULL;
}

static struct pf_writer *open_seq(int fd, uint32_t seq)
{
	struct pf_writer *w = writer_new(fd, false);
	size_t defaults;

	if (!w)
		return NULL;
	w->main_seq.id = seq;
	/* Starts the sequence; event timestamps default to MONOTONIC from here. */
	packet_begin(w, SEQ_INCREMENTAL_STATE_CLEARED);
	pb_uint(&w->pb, F_PKT_FIRST_ON_SEQ, 1);
	defaults = pb_begin(&w->pb, F_PKT_DEFAULTS);
	pb_uint(&w->pb, F_DEF_CLOCK_ID, CLOCK_ID_MONOTONIC);
	pb_end(&w->pb, defaults);
	pf_packet_end(w);
	pf_clock_snapshot(w);
	return w->err ? open_failed(w) : w;
}

struct pf_writer *pf_writer_open(int fd)
{
	return open_seq(fd, SEQ_ID);
}

struct pf_writer *pf_writer_open_appending(int fd)
{
	return open_seq(fd, SEQ_MAX + SEQ_ID);
}

struct pf_writer *pf_writer_open_copy(int fd)
{
	return writer_new(fd, true);
}

static void trace_attr(struct pf_writer *w, const char *key, const char *sval, int64_t ival);

int pf_writer_close(struct pf_writer *w)
{
	int err;

	if (!w)
		return -EINVAL;
	if (!w->err) /* the end marker: its own offset in the file */
		trace_attr(w, PF_END_MARKER_KEY, NULL, (int64_t)(w->base + w->bytes));
	pf_flush_out(w);
	err = w->err;
	pf_seq_tables_free(w);
	sample_seq_free(w);
	hash_free(&w->flows);
	free(w->out);
	free(w);
	return err;
}

int pf_writer_error(const struct pf_writer *w)
{
	return w ? w->err : -EINVAL;
}

uint64_t pf_bytes_written(const struct pf_writer *w)
{
	return w ? w->bytes : 0;
}

uint64_t pf_items_clipped(const struct pf_writer *w)
{
	return w ? w->clipped : 0;
}

void pf_mark_loss(struct pf_writer *w)
{
	if (w)
		w->loss_pending = true;
}

static void write_clock(struct pb *b, uint32_t id, uint64_t ts)
{
	size_t clock = pb_begin(b, F_CS_CLOCKS);

	pb_uint(b, F_CLK_ID, id);
	pb_uint(b, F_CLK_TS, ts);
	pb_end(b, clock);
}

/* The packet is stamped in BOOTTIME explicitly: the sequence default
 * (MONOTONIC) must not be needed to place the snapshot that defines it. */
int pf_clock_snapshot(struct pf_writer *w)
{
	uint64_t boot, mono, real;
	size_t snap;

	if (!w)
		return -EINVAL;
	/* Back to back, so the three readings describe one instant. */
	boot = clock_ns(CLOCK_BOOTTIME);
	mono = clock_mono_ns();
	real = clock_ns(CLOCK_REALTIME);
	if (!boot || !mono || !real)
		return -EIO;
	if (!w->have_boot) {
		/* trace_processor moves MONOTONIC events by the snapshot before
		 * them: for a trace's events, this first one. */
		w->boot_minus_mono = (int64_t)(boot - mono);
		w->have_boot = true;
	}
	packet_begin(w, 0);
	pb_uint(&w->pb, F_PKT_TIMESTAMP, boot);
	pb_uint(&w->pb, F_PKT_CLOCK_ID, CLOCK_ID_BOOTTIME);
	snap = pb_begin(&w->pb, F_PKT_CLOCK_SNAPSHOT);
	write_clock(&w->pb, CLOCK_ID_BOOTTIME, boot);
	write_clock(&w->pb, CLOCK_ID_MONOTONIC, mono);
	write_clock(&w->pb, CLOCK_ID_REALTIME, real);
	pb_uint(&w->pb, F_CS_PRIMARY, CLOCK_ID_BOOTTIME);
	pb_end(&w->pb, snap);
	pf_packet_end(w);
	return w->err;
}

/* One TraceAttributes.Attribute: the string value if sval, else ival. */
static void trace_attr(struct pf_writer *w, const char *key, const char *sval, int64_t ival)
{
	size_t attrs, attr;

	if (!w)
		return;
	packet_begin(w, 0);
	attrs = pb_begin(&w->pb, F_PKT_TRACE_ATTRS);
	attr = pb_begin(&w->pb, F_TA_ATTR);
	pb_str(w, F_ATTR_KEY, key ? key : "");
	if (sval)
		pb_str(w, F_ATTR_STR, sval);
	else
		pb_int(&w->pb, F_ATTR_LONG, ival);
	pb_end(&w->pb, attr);
	pb_end(&w->pb, attrs);
	pf_packet_end(w);
}

void pf_trace_attr_str(struct pf_writer *w, const char *key, const char *value)
{
	trace_attr(w, key, value ? value : "", 0);
}

void pf_trace_attr_int(struct pf_writer *w, const char *key, int64_t value)
{
	trace_attr(w, key, NULL, value);
}
