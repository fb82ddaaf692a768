// SPDX-License-Identifier: BSD-2-Clause
/* Agent op rings -> ring events. See ops_ring.h and include/ptbpf_agent.h. */
#define _GNU_SOURCE
#include "record/ops_ring.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "ptbpf_agent.h"
#include "ptbpf_events.h"
#include "attach/target.h"
#include "lib/clock.h"

#define MAX_PROCS 64
/* A ring is read this much at a time (a record is at most ~1.2 KB). */
#define READ_CHUNK (256u << 10)

/* What ptbpf knows of one ring. */
struct ring_seen {
	uint64_t tail;                      /* our read position */
	uint64_t written, begins;           /* the header's counts, last seen */
	uint64_t dropped, begins_dropped;
	uint64_t marked, marked_begins;     /* drops a gap marker said so far */
	int64_t pending, pending_begins;    /* written, not read yet */
	uint64_t gap_from;                  /* the header's, last seen */
	uint64_t last_ts;                   /* the last record read */
	uint32_t tid;                       /* the owner, last seen */
};

enum proc_state {
	PROC_LIVE,
	PROC_ENDED,   /* its image is gone; settled once the BPF ring, where
		       * its exit copy may still wait, was read after */
	PROC_SETTLED, /* counted to its end: not read again */
};

struct proc_rings {
	int pid;
	const struct target *t; /* its image: what is written goes through it */
	enum proc_state state;
	struct ptbpf_ops_desc desc;
	uint64_t desc_addr;
	uint64_t no_slot, no_slot_begins;
	uint64_t ended_ts;           /* when it was found gone */
	uint64_t drained_ts;         /* when its last whole drain began: what
				      * it left unread is newer */
	struct ptbpf_ops_loc *final; /* its exit probe's counters (ENDED) */
	struct ring_seen ring[PTBPF_OPS_SLOTS];
	bool clock_tsc;              /* its records came from the TSC (some) */
	uint64_t clock_checks, clock_steps; /* its agent's, as last read */
	bool idle;                   /* its agent idled, as last read */
};

struct ops_rings {
	struct proc_rings procs[MAX_PROCS];
	int n;
	uint8_t *buf; /* READ_CHUNK bytes of a ring */
	/* Exit chunks (EV_OPS_CHUNK) of one ring, reassembled: bytes of
	 * ring positions [cstart, cstart + clen) of (cpid, cslot); allocated
	 * at the first. */
	uint8_t *cbuf;
	int cpid;
	uint32_t cslot;
	uint64_t cstart, clen;
	ops_final_fn final;
	void *final_ctx;
	struct ops_ring_counts counts;
};

typedef int (*emit_fn)(void *ctx, void *data, size_t size);

static int vm_read(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* Whether the image p was attached to is still the process's: reads
 * with process_vm_readv (of whatever image pid runs) are kept only if it
 * still is after them; writes go through the image's own /proc/PID/mem,
 * so nothing reaches a process image that exec replaced. */
static bool same_image(const struct proc_rings *p)
{
	uint64_t magic;

	return !target_mem_read(p->t, p->desc_addr, &magic, sizeof(magic)) &&
	       magic == PTBPF_OPS_MAGIC;
}

static void write_tail(const struct proc_rings *p, uint64_t slot, uint64_t tail)
{
	target_mem_write(p->t, slot + offsetof(struct ptbpf_ops_slot, tail), &tail, sizeof(tail));
}

struct ops_rings *ops_rings_new(ops_final_fn final, void *final_ctx)
{
	struct ops_rings *r = calloc(1, sizeof(*r));

	if (r && !(r->buf = malloc(READ_CHUNK))) {
		free(r);
		return NULL;
	}
	if (r) {
		r->counts.layout_ok = 1;
		r->final = final;
		r->final_ctx = final_ctx;
	}
	return r;
}

void ops_rings_free(struct ops_rings *r)
{
	if (r) {
		for (int i = 0; i < r->n; i++)
			free(r->procs[i].final);
		free(r->buf);
		free(r->cbuf);
	}
	free(r);
}

static uint64_t slot_addr(const struct proc_rings *p, uint32_t i)
{
	return p->desc.slots + (uint64_t)i * p->desc.slot_bytes;
}

static int read_slots(const struct proc_rings *p, struct ptbpf_ops_slot *s)
{
	struct iovec local[PTBPF_OPS_SLOTS], remote[PTBPF_OPS_SLOTS];
	size_t want = p->desc.nslots * sizeof(*s);
	ssize_t n;

	for (uint32_t i = 0; i < p->desc.nslots; i++) {
		local[i] = (struct iovec){ &s[i], sizeof(*s) };
		remote[i] = (struct iovec){ (void *)(uintptr_t)slot_addr(p, i), sizeof(*s) };
	}
	n = process_vm_readv(p->pid, local, p->desc.nslots, remote, p->desc.nslots, 0);
	return n == (ssize_t)want ? 0 : n < 0 ? -errno : -EIO;
}

/* The agent's clock: its checks since the last read (counters that grow,
 * or start over with a new session of the agent), and whether its records
 * came from the TSC. */
static void seen_clock(struct ops_rings *r, struct proc_rings *p, const struct ptbpf_ops_desc *d)
{
	r->counts.clock_checks += d->clock_checks - (d->clock_checks >= p->clock_checks ?
						       p->clock_checks : 0);
	r->counts.clock_steps += d->clock_steps - (d->clock_steps >= p->clock_steps ?
						     p->clock_steps : 0);
	if (d->clock_max_err_ns > r->counts.clock_max_err_ns)
		r->counts.clock_max_err_ns = d->clock_max_err_ns;
	p->clock_checks = d->clock_checks;
	p->clock_steps = d->clock_steps;
	if (d->clock == OPS_CLOCK_TSC && !p->clock_tsc) {
		p->clock_tsc = true;
		r->counts.clock_tsc++;
	}
}

int ops_rings_add(struct ops_rings *r, const struct target *t, uint64_t desc_addr, char *err,
		  size_t errlen)
{
	int pid = t->pid;
	struct ptbpf_ops_slot slots[PTBPF_OPS_SLOTS];
	struct proc_rings *p;
	int ret;

	if (r->n == MAX_PROCS) {
		snprintf(err, errlen, "pid %d: at most %d processes' op rings are read", pid,
			 MAX_PROCS);
		return -E2BIG;
	}
	p = &r->procs[r->n];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->t = t;
	p->desc_addr = desc_addr;
	ret = target_mem_read(t, desc_addr, &p->desc, sizeof(p->desc));
	if (ret) {
		snprintf(err, errlen, "pid %d: cannot read its agent's op rings at %#lx: %s", pid,
			 (unsigned long)desc_addr, strerror(-ret));
		return ret;
	}
	if (p->desc.magic != PTBPF_OPS_MAGIC || p->desc.version != PTBPF_OPS_VERSION ||
	    p->desc.nslots != PTBPF_OPS_SLOTS || p->desc.slot_bytes != PTBPF_OPS_SLOT_BYTES) {
		snprintf(err, errlen, "pid %d: its agent's op rings are of another version "
			 "(magic %#lx, version %u): use the agent shipped with this ptbpf", pid,
			 (unsigned long)p->desc.magic, p->desc.version);
		return -EPROTO;
	}
	ret = read_slots(p, slots);
	if (ret) {
		snprintf(err, errlen, "pid %d: cannot read its op rings: %s", pid, strerror(-ret));
		return ret;
	}
	if (!same_image(p)) {
		snprintf(err, errlen, "pid %d exec'd or exited while its op rings were opened", pid);
		return -ESRCH;
	}
	/* What an earlier session left unread, or lost, is not ours; what
	 * this one wrote since the agent was switched on is, counts and
	 * records alike (the agent set them apart while nothing wrote). */
	for (uint32_t i = 0; i < p->desc.nslots; i++) {
		struct ring_seen *g = &p->ring[i];

		g->tail = slots[i].start_head;
		g->written = slots[i].start_written;
		g->begins = slots[i].start_begins;
		g->dropped = g->marked = slots[i].start_dropped;
		g->begins_dropped = g->marked_begins = slots[i].start_begins_dropped;
		write_tail(p, slot_addr(p, i), g->tail);
	}
	p->no_slot = p->desc.no_slot;
	p->no_slot_begins = p->desc.no_slot_begins;
	seen_clock(r, p, &p->desc);
	r->n++;
	return 0;
}

bool ops_rings_idle(const struct ops_rings *r)
{
	for (int i = 0; i < r->n; i++)
		if (r->procs[i].state == PROC_LIVE && !r->procs[i].idle)
			return false;
	return true;
}

int ops_rings_count(const struct ops_rings *r)
{
	return r->n;
}

/* Copies [from, to) of ring i (positions modulo cap) into buf. */
static int read_span(struct proc_rings *p, uint32_t i, uint64_t from, uint64_t to, uint8_t *buf)
{
	const uint64_t cap = p->desc.slot_bytes - sizeof(struct ptbpf_ops_slot);
	const uint64_t data = slot_addr(p, i) + sizeof(struct ptbpf_ops_slot);
	uint64_t off = from % cap, first = to - from < cap - off ? to - from : cap - off;
	int ret = vm_read(p->pid, data + off, buf, first);

	if (!ret && first < to - from)
		ret = vm_read(p->pid, data, buf + first, to - from - first);
	return ret;
}

/* A ring header's counts (read now, or saved by the exit probe): what
 * was written joins what waits to be read; what was dropped is counted. */
static void seen_counts(struct ops_rings *r, struct ring_seen *g, const struct ptbpf_ops_slot *s)
{
	if (s->written > g->written) {
		r->counts.written += s->written - g->written;
		g->pending += (int64_t)(s->written - g->written);
		g->written = s->written;
	}
	if (s->begins > g->begins) {
		g->pending_begins += (int64_t)(s->begins - g->begins);
		g->begins = s->begins;
	}
	if (s->dropped > g->dropped) {
		r->counts.dropped += s->dropped - g->dropped;
		g->dropped = s->dropped;
	}
	if (s->begins_dropped > g->begins_dropped) {
		r->counts.begins_dropped += s->begins_dropped - g->begins_dropped;
		g->begins_dropped = s->begins_dropped;
	}
	g->gap_from = s->gap_from;
	g->tid = s->tid;
}

/* The descriptor's counts of records (and BEGINs) of threads that found
 * no free ring, as of ts: what is new is counted and marked. */
static void seen_no_slot(struct ops_rings *r, struct proc_rings *p, uint64_t no_slot,
			 uint64_t begins, uint64_t ts, emit_fn emit, void *ctx)
{
	struct ptbpf_event e = { .ts = ts, .pid = (uint32_t)p->pid, .tid = (uint32_t)p->pid,
				 .kind = EV_OPS_NO_RING, .source = SRC_AGENT };

	if (no_slot <= p->no_slot && begins <= p->no_slot_begins)
		return;
	e.arg[0] = no_slot > p->no_slot ? no_slot - p->no_slot : 0;
	e.arg[1] = begins > p->no_slot_begins ? begins - p->no_slot_begins : 0;
	r->counts.no_slot += e.arg[0];
	r->counts.begins_no_slot += e.arg[1];
	p->no_slot += e.arg[0];
	p->no_slot_begins += e.arg[1];
	emit(ctx, &e, sizeof(e));
}

static void emit_gap(const struct proc_rings *p, uint32_t tid, uint64_t ts, uint64_t records,
		     uint64_t begins, emit_fn emit, void *ctx)
{
	struct ptbpf_event e = { .ts = ts, .pid = (uint32_t)p->pid, .tid = tid,
				 .kind = EV_OPS_GAP, .source = SRC_AGENT,
				 .arg = { records, begins } };

	emit(ctx, &e, sizeof(e));
}

/* Ring g's drops up to (dropped, begins_dropped), from ts on, that no
 * marker said yet: one now (the agent's gap record, or ptbpf's where no
 * later record of the thread carries one). */
static void mark_drops(const struct proc_rings *p, struct ring_seen *g, uint32_t tid, uint64_t ts,
		       uint64_t dropped, uint64_t begins_dropped, emit_fn emit, void *ctx)
{
	uint64_t n = dropped > g->marked ? dropped - g->marked : 0;
	uint64_t b = begins_dropped > g->marked_begins ? begins_dropped - g->marked_begins : 0;

	if (n)
		emit_gap(p, tid, ts, n, b, emit, ctx);
	if (dropped > g->marked)
		g->marked = dropped;
	if (begins_dropped > g->marked_begins)
		g->marked_begins = begins_dropped;
}

static void emit_record(struct ops_rings *r, const struct proc_rings *p, struct ring_seen *g,
			uint32_t tid, const struct ptbpf_ops_rec *rec, emit_fn emit, void *ctx)
{
	/* Not zeroed as a whole: the shapes' room alone is a kilobyte. */
	struct {
		struct ptbpf_named_event ne;
		uint8_t shapes[OPS_SHAPES_MAX];
	} b;
	struct ptbpf_named_event *e = &b.ne;
	size_t slen = rec->shapes_len, nlen;

	r->counts.records++;
	g->pending--;
	g->last_ts = rec->ts;
	if (rec->type == OPS_REC_GAP) {
		mark_drops(p, g, tid, rec->ts, (uint64_t)rec->seq, rec->rf, emit, ctx);
		return;
	}
	e->ev = (struct ptbpf_event){ .ts = rec->ts, .pid = (uint32_t)p->pid, .tid = tid,
				      .source = SRC_AGENT, .key = rec->rf,
				      .arg = { (uint64_t)rec->seq, rec->scope } };
	if (rec->type == OPS_REC_END) {
		e->ev.kind = EV_RF_END;
		emit(ctx, &e->ev, sizeof(e->ev));
		return;
	}
	r->counts.begins++;
	g->pending_begins--;
	e->ev.kind = EV_NAMED_RF_BEGIN;
	nlen = rec->name_len < PTBPF_NAME_LEN - 1 ? rec->name_len : PTBPF_NAME_LEN - 1;
	memcpy(e->name, rec + 1, nlen);
	memset(e->name + nlen, 0, PTBPF_NAME_LEN - nlen);
	/* Input shapes ride after the named event (join.c reads them). */
	if (slen > sizeof(b.shapes) || sizeof(*rec) + rec->name_len + slen > rec->size)
		slen = 0;
	memcpy(b.shapes, (const uint8_t *)(rec + 1) + rec->name_len, slen);
	emit(ctx, &b, sizeof(*e) + slen);
}

/* Parses [tail, head) of ring i from buf (which holds position tail at
 * buf[0]); returns the new tail. With partial, head may cut the last
 * record short: it is left for later. */
static uint64_t parse(struct ops_rings *r, struct proc_rings *p, uint32_t i, uint32_t tid,
		      const uint8_t *buf, uint64_t tail, uint64_t head, bool partial,
		      emit_fn emit, void *ctx)
{
	const uint64_t cap = p->desc.slot_bytes - sizeof(struct ptbpf_ops_slot);
	const size_t hdr = sizeof(struct ptbpf_ops_rec);
	uint64_t pos = tail;

	while (pos < head) {
		const struct ptbpf_ops_rec *rec;
		uint64_t left = cap - pos % cap;

		if (left < hdr) { /* a rest too short for a record: skipped */
			pos += left;
			continue;
		}
		if (head - pos < hdr)
			break;
		rec = (const struct ptbpf_ops_rec *)(buf + (pos - tail));
		if (partial && rec->size <= left && rec->size > head - pos)
			break;
		if (rec->size < hdr || rec->size % 8 || rec->size > left || rec->size > head - pos ||
		    (rec->type != OPS_REC_PAD && rec->name_len > rec->size - hdr) ||
		    rec->type < OPS_REC_BEGIN || rec->type > OPS_REC_GAP) {
			r->counts.bad++;
			return head;
		}
		if (rec->type != OPS_REC_PAD)
			emit_record(r, p, &p->ring[i], tid, rec, emit, ctx);
		pos += rec->size;
	}
	return pos;
}

/* The counters p's exit or signal probes saved, as they are now (they
 * only grow), if any: kept for when they can no longer be asked for. */
static void fetch_final(struct ops_rings *r, struct proc_rings *p)
{
	struct ptbpf_ops_loc *f = malloc(sizeof(*f));

	if (f && r->final && !r->final(r->final_ctx, p->pid, f)) {
		free(p->final);
		p->final = f;
		return;
	}
	free(f);
}

/* The image is gone (exit, exec, a signal): settled once its exit copy,
 * in the BPF ring, was read. */
static void image_gone(struct ops_rings *r, struct proc_rings *p)
{
	p->state = PROC_ENDED;
	p->ended_ts = clock_mono_ns();
	fetch_final(r, p);
}

/* Counts a gone process's rings to their end: the exit probe's counters,
 * then what was written and never read (marked where ptbpf last read the
 * ring, or at the thread's last record read if that is later), and the
 * drops no marker said. */
static void settle(struct ops_rings *r, struct proc_rings *p, emit_fn emit, void *ctx)
{
	const struct ptbpf_ops_loc *f;

	fetch_final(r, p); /* a thread that died after the first may have saved more */
	f = p->final;
	if (f)
		seen_no_slot(r, p, f->no_slot[0], f->no_slot[1], f->final_ts, emit, ctx);
	else
		r->counts.lost_at_exit++;
	for (uint32_t i = 0; i < p->desc.nslots; i++) {
		struct ring_seen *g = &p->ring[i];
		struct ptbpf_ops_slot s = { 0 };

		/* (All zeros: never used, or unreadable to the probe.) */
		if (f && i < PTBPF_OPS_RINGS && memcmp(f->hdr[i], &s, PTBPF_OPS_HDR_OUT)) {
			memcpy(&s, f->hdr[i], PTBPF_OPS_HDR_OUT);
			if (s.head >= g->tail)
				seen_counts(r, g, &s);
		}
		if (g->pending > 0) {
			uint64_t b = g->pending_begins > 0 ? (uint64_t)g->pending_begins : 0;
			uint64_t at = g->last_ts > p->drained_ts ? g->last_ts : p->drained_ts;

			emit_gap(p, g->tid, at ? at : f ? f->final_ts : p->ended_ts,
				 (uint64_t)g->pending, b, emit, ctx);
			r->counts.unread += (uint64_t)g->pending;
			r->counts.begins_unread += b;
		}
		g->pending = g->pending_begins = 0;
		mark_drops(p, g, g->tid, g->gap_from, g->dropped, g->begins_dropped, emit, ctx);
	}
	p->state = PROC_SETTLED;
	free(p->final);
	p->final = NULL;
}

/* The earliest a settle may mark: where ptbpf last read the rings (what
 * was left unread came later; so did drops no header had shown), or
 * where drops it knew of but no marker said began. */
uint64_t ops_rings_unsettled_from(const struct ops_rings *r)
{
	uint64_t from = UINT64_MAX;

	for (int k = 0; k < r->n; k++) {
		const struct proc_rings *p = &r->procs[k];

		if (p->state != PROC_ENDED)
			continue;
		if (p->drained_ts < from)
			from = p->drained_ts;
		for (uint32_t i = 0; i < p->desc.nslots; i++)
			if (p->ring[i].dropped > p->ring[i].marked && p->ring[i].gap_from < from)
				from = p->ring[i].gap_from;
	}
	return from;
}

void ops_rings_settle(struct ops_rings *r, emit_fn emit, void *ctx)
{
	for (int i = 0; i < r->n; i++)
		if (r->procs[i].state == PROC_ENDED)
			settle(r, &r->procs[i], emit, ctx);
}

/* Reads ring i of p from its tail to head; the new tail (head if the
 * ring was skipped), or UINT64_MAX if the image is gone. */
static uint64_t drain_ring(struct ops_rings *r, struct proc_rings *p, uint32_t i, uint32_t tid,
			   uint64_t head, emit_fn emit, void *ctx)
{
	const uint64_t cap = p->desc.slot_bytes - sizeof(struct ptbpf_ops_slot);
	uint64_t tail = p->ring[i].tail;

	if (head < tail || head - tail > cap) { /* cannot be: resynchronize */
		r->counts.bad++;
		return head;
	}
	while (tail < head) {
		uint64_t end = head - tail > READ_CHUNK ? tail + READ_CHUNK : head;
		uint64_t bad = r->counts.bad, from = tail;

		if (read_span(p, i, tail, end, r->buf))
			break;
		/* Read from this image, not one an exec put there? */
		if (!same_image(p))
			return UINT64_MAX;
		tail = parse(r, p, i, tid, r->buf, tail, end, end < head, emit, ctx);
		if (r->counts.bad != bad) /* malformed: on from the head */
			return head;
		if (tail == from)
			break; /* the rest of a record comes later */
	}
	return tail;
}

/* A ring whose thread exited and that is read to its end: the drops no
 * record of the thread will mark are marked, and the ring is freed for
 * another thread. */
static void free_ring(struct proc_rings *p, uint32_t i, emit_fn emit, void *ctx)
{
	struct ring_seen *g = &p->ring[i];
	uint32_t free_state = OPS_SLOT_FREE;

	mark_drops(p, g, g->tid, g->gap_from, g->dropped, g->begins_dropped, emit, ctx);
	target_mem_write(p->t, slot_addr(p, i) + offsetof(struct ptbpf_ops_slot, state),
			 &free_state, sizeof(free_state));
}

static void drain_proc(struct ops_rings *r, struct proc_rings *p, emit_fn emit, void *ctx)
{
	struct ptbpf_ops_slot slots[PTBPF_OPS_SLOTS];
	struct ptbpf_ops_desc desc;
	uint64_t began = clock_mono_ns();

	if (target_mem_read(p->t, p->desc_addr, &desc, sizeof(desc)) || read_slots(p, slots) ||
	    !same_image(p)) {
		image_gone(r, p);
		return;
	}
	p->idle = desc.idle;
	seen_no_slot(r, p, desc.no_slot, desc.no_slot_begins, began, emit, ctx);
	if (!desc.layout_ok)
		r->counts.layout_ok = 0;
	seen_clock(r, p, &desc);
	for (uint32_t i = 0; i < p->desc.nslots; i++) {
		struct ptbpf_ops_slot *s = &slots[i];
		bool retired = s->state == OPS_SLOT_RETIRED;
		uint64_t tail;

		/* Its head as read with the header may predate its thread's
		 * last records: read again now that the thread is gone. */
		if (retired && (vm_read(p->pid, slot_addr(p, i), s, sizeof(*s)) || !same_image(p))) {
			image_gone(r, p);
			return;
		}
		seen_counts(r, &p->ring[i], s);
		tail = drain_ring(r, p, i, s->tid, s->head, emit, ctx);
		if (tail == UINT64_MAX) {
			image_gone(r, p);
			return;
		}
		if (tail != p->ring[i].tail) {
			p->ring[i].tail = tail;
			write_tail(p, slot_addr(p, i), tail);
		}
		if (retired && tail == s->head)
			free_ring(p, i, emit, ctx);
	}
	p->drained_ts = began;
}

void ops_rings_drain(struct ops_rings *r, emit_fn emit, void *ctx)
{
	for (int i = 0; i < r->n; i++)
		if (r->procs[i].state == PROC_LIVE)
			drain_proc(r, &r->procs[i], emit, ctx);
}

/* pid's latest entry (a pid that exec'd has one per image). */
static struct proc_rings *find_proc(struct ops_rings *r, int pid)
{
	for (int i = r->n - 1; i >= 0; i--)
		if (r->procs[i].pid == pid)
			return &r->procs[i];
	return NULL;
}

int ops_rings_loc(const struct ops_rings *r, int pid, struct ptbpf_ops_loc *loc)
{
	for (int i = r->n - 1; i >= 0; i--) {
		const struct proc_rings *p = &r->procs[i];

		if (p->pid == pid) {
			memset(loc, 0, sizeof(*loc));
			loc->slots = p->desc.slots;
			loc->nslots = p->desc.nslots;
			loc->slot_bytes = (uint32_t)p->desc.slot_bytes;
			loc->desc = p->desc_addr;
			return 0;
		}
	}
	return -ENOENT;
}

/* The last of the process's exit copy (its chunks come before): it is
 * counted to its end now. */
static void exit_copied(struct ops_rings *r, struct proc_rings *p, emit_fn emit, void *ctx)
{
	if (p->state == PROC_LIVE)
		image_gone(r, p);
	if (p->state == PROC_ENDED)
		settle(r, p, emit, ctx);
}

void ops_rings_chunk(struct ops_rings *r, const struct ptbpf_ops_chunk *c, emit_fn emit, void *ctx)
{
	struct proc_rings *p = find_proc(r, (int)c->ev.pid);
	uint64_t from = c->ev.arg[0], len = c->ev.arg[1], tail, end;
	uint32_t slot = c->ev.id;

	if (p && slot == OPS_CHUNK_DONE) {
		exit_copied(r, p, emit, ctx);
		return;
	}
	if (!p || p->state == PROC_SETTLED || slot >= p->desc.nslots || len > PTBPF_OPS_CHUNK)
		return;
	if (r->cpid != p->pid || r->cslot != slot || from != r->cstart + r->clen) {
		if (r->clen)
			r->counts.bad++; /* the last ring's rest was cut short */
		r->cpid = p->pid;
		r->cslot = slot;
		r->cstart = from;
		r->clen = 0;
	}
	if (r->clen + len > PTBPF_OPS_SLOT_BYTES ||
	    (!r->cbuf && !(r->cbuf = malloc(PTBPF_OPS_SLOT_BYTES))))
		return;
	memcpy(r->cbuf + r->clen, c->data, len);
	r->clen += len;
	/* What ptbpf read already (it may have raced the copy) is skipped;
	 * its tail is a record boundary. */
	tail = p->ring[slot].tail > r->cstart ? p->ring[slot].tail : r->cstart;
	end = r->cstart + r->clen;
	if (tail >= end) {
		r->cstart = end;
		r->clen = 0;
		return;
	}
	tail = parse(r, p, slot, c->ev.tid, r->cbuf + (tail - r->cstart), tail, end, true, emit,
		     ctx);
	p->ring[slot].tail = tail;
	memmove(r->cbuf, r->cbuf + (tail - r->cstart), end - tail);
	r->clen = end - tail;
	r->cstart = tail;
}

void ops_rings_finish(struct ops_rings *r, emit_fn emit, void *ctx)
{
	for (int k = 0; k < r->n; k++) {
		struct proc_rings *p = &r->procs[k];

		if (p->state != PROC_LIVE)
			continue;
		/* Lost at the end of the session: no later record of the
		 * thread carries the agent's gap marker. */
		for (uint32_t i = 0; i < p->desc.nslots; i++) {
			struct ring_seen *g = &p->ring[i];

			mark_drops(p, g, g->tid, g->gap_from, g->dropped, g->begins_dropped, emit,
				   ctx);
		}
		p->state = PROC_SETTLED;
	}
}

void ops_rings_exec(struct ops_rings *r, int pid, emit_fn emit, void *ctx)
{
	struct proc_rings *p = find_proc(r, pid);

	/* The exec probes copied what its rings held and their counters:
	 * nothing is lost uncounted but what other threads wrote in the
	 * instant before the exec. */
	if (p)
		exit_copied(r, p, emit, ctx);
}

const struct ops_ring_counts *ops_rings_counts(const struct ops_rings *r)
{
	return &r->counts;
}
