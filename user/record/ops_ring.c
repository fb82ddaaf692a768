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

#include "ptbpf_agent.h"
#include "ptbpf_events.h"
#include "attach/target.h"

#define MAX_PROCS 64
/* A ring is read this much at a time (a record is at most ~1.2 KB). */
#define READ_CHUNK (256u << 10)

struct proc_rings {
	int pid;
	const struct target *t; /* its image: what is written goes through it */
	bool gone;
	bool rescued; /* the _exit probe copied what its rings held */
	struct ptbpf_ops_desc desc;
	uint64_t desc_addr;
	uint64_t tail[PTBPF_OPS_SLOTS];    /* our read position per ring */
	uint64_t dropped[PTBPF_OPS_SLOTS]; /* the ring's drop count last seen */
	uint64_t written[PTBPF_OPS_SLOTS]; /* ... and its count of records written */
	uint64_t gap_lost[PTBPF_OPS_SLOTS], gap_from[PTBPF_OPS_SLOTS]; /* a gap the
						* agent has not written yet */
	uint32_t tid[PTBPF_OPS_SLOTS];
	uint64_t no_slot;
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
	struct ops_ring_counts counts;
};

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

struct ops_rings *ops_rings_new(void)
{
	struct ops_rings *r = calloc(1, sizeof(*r));

	if (r && !(r->buf = malloc(READ_CHUNK))) {
		free(r);
		return NULL;
	}
	if (r)
		r->counts.layout_ok = 1;
	return r;
}

void ops_rings_free(struct ops_rings *r)
{
	if (r) {
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
	/* What an earlier session left unread is not ours. */
	for (uint32_t i = 0; i < p->desc.nslots; i++) {
		p->tail[i] = slots[i].head;
		p->dropped[i] = slots[i].dropped;
		p->written[i] = slots[i].written;
		write_tail(p, slot_addr(p, i), p->tail[i]);
	}
	p->no_slot = p->desc.no_slot;
	r->n++;
	return 0;
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

static void emit_record(struct ops_rings *r, const struct proc_rings *p, uint32_t tid,
			const struct ptbpf_ops_rec *rec,
			int (*emit)(void *, void *, size_t), void *ctx)
{
	/* Not zeroed as a whole: the shapes' room alone is a kilobyte. */
	struct {
		struct ptbpf_named_event ne;
		uint8_t shapes[OPS_SHAPES_MAX];
	} b;
	struct ptbpf_named_event *e = &b.ne;
	size_t slen = rec->shapes_len, nlen;

	r->counts.records++;
	e->ev = (struct ptbpf_event){ .ts = rec->ts, .pid = (uint32_t)p->pid, .tid = tid,
				      .source = SRC_AGENT, .key = rec->rf,
				      .arg = { (uint64_t)rec->seq, rec->scope } };
	if (rec->type == OPS_REC_END || rec->type == OPS_REC_GAP) {
		e->ev.kind = rec->type == OPS_REC_END ? EV_RF_END : EV_OPS_GAP;
		emit(ctx, &e->ev, sizeof(e->ev));
		return;
	}
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

/* Parses [tail, head) of one ring from buf (which holds position tail at
 * buf[0]); returns the new tail. With partial, head may cut the last
 * record short: it is left for later. */
static uint64_t parse(struct ops_rings *r, const struct proc_rings *p, uint32_t tid,
		      const uint8_t *buf, uint64_t tail, uint64_t head, bool partial,
		      int (*emit)(void *, void *, size_t), void *ctx)
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
			emit_record(r, p, tid, rec, emit, ctx);
		pos += rec->size;
	}
	return pos;
}

/* The image is gone (exit or exec): what its rings held since the last
 * drain went with it, unless the _exit or exec probes copied it out. */
static void image_gone(struct ops_rings *r, struct proc_rings *p)
{
	p->gone = true;
	r->counts.lost_at_exit++; /* the exit probe would have marked it */
}

static void drain_proc(struct ops_rings *r, struct proc_rings *p,
		       int (*emit)(void *, void *, size_t), void *ctx)
{
	const uint64_t cap = p->desc.slot_bytes - sizeof(struct ptbpf_ops_slot);
	struct ptbpf_ops_slot slots[PTBPF_OPS_SLOTS];
	struct ptbpf_ops_desc desc;

	if (target_mem_read(p->t, p->desc_addr, &desc, sizeof(desc)) || read_slots(p, slots) ||
	    !same_image(p)) {
		image_gone(r, p);
		return;
	}
	if (desc.no_slot != p->no_slot) {
		r->counts.no_slot += desc.no_slot - p->no_slot;
		p->no_slot = desc.no_slot;
	}
	if (!desc.layout_ok)
		r->counts.layout_ok = 0;
	for (uint32_t i = 0; i < p->desc.nslots; i++) {
		struct ptbpf_ops_slot *s = &slots[i];
		uint64_t head = s->head, tail = p->tail[i];

		if (s->dropped != p->dropped[i]) {
			r->counts.dropped += s->dropped - p->dropped[i];
			p->dropped[i] = s->dropped;
		}
		r->counts.written += s->written - p->written[i];
		p->written[i] = s->written;
		p->gap_lost[i] = s->gap_lost;
		p->gap_from[i] = s->gap_from;
		p->tid[i] = s->tid;
		if (head < tail || head - tail > cap) { /* cannot be: resynchronize */
			r->counts.bad++;
			tail = head;
		} else {
			while (tail < head) {
				uint64_t end = head - tail > READ_CHUNK ? tail + READ_CHUNK : head;
				uint64_t bad = r->counts.bad, from = tail;

				if (read_span(p, i, tail, end, r->buf))
					break;
				/* Read from this image, not one an exec put there? */
				if (!same_image(p)) {
					image_gone(r, p);
					return;
				}
				tail = parse(r, p, s->tid, r->buf, tail, end, end < head, emit, ctx);
				if (r->counts.bad != bad) { /* malformed: on from the head */
					tail = head;
					break;
				}
				if (tail == from)
					break; /* the rest of a record comes later */
			}
		}
		if (tail != p->tail[i]) {
			p->tail[i] = tail;
			write_tail(p, slot_addr(p, i), tail);
		}
		if (s->state == OPS_SLOT_RETIRED && tail == head) {
			uint32_t free_state = OPS_SLOT_FREE;

			target_mem_write(p->t, slot_addr(p, i) + offsetof(struct ptbpf_ops_slot, state),
					 &free_state, sizeof(free_state));
		}
	}
}

void ops_rings_drain(struct ops_rings *r, int (*emit)(void *ctx, void *data, size_t size),
		     void *ctx)
{
	for (int i = 0; i < r->n; i++)
		if (!r->procs[i].gone)
			drain_proc(r, &r->procs[i], emit, ctx);
}

static struct proc_rings *find_proc(struct ops_rings *r, int pid)
{
	for (int i = 0; i < r->n; i++)
		if (r->procs[i].pid == pid)
			return &r->procs[i];
	return NULL;
}

int ops_rings_loc(const struct ops_rings *r, int pid, struct ptbpf_ops_loc *loc)
{
	for (int i = 0; i < r->n; i++) {
		if (r->procs[i].pid == pid) {
			*loc = (struct ptbpf_ops_loc){ .slots = r->procs[i].desc.slots,
						       .nslots = r->procs[i].desc.nslots,
						       .slot_bytes = (uint32_t)r->procs[i].desc.slot_bytes };
			return 0;
		}
	}
	return -ENOENT;
}

void ops_rings_chunk(struct ops_rings *r, const struct ptbpf_ops_chunk *c,
		     int (*emit)(void *ctx, void *data, size_t size), void *ctx)
{
	struct proc_rings *p = find_proc(r, (int)c->ev.pid);
	uint64_t from = c->ev.arg[0], len = c->ev.arg[1], tail, end;
	uint32_t slot = c->ev.id;

	if (p && slot == OPS_CHUNK_DONE) {
		p->gone = p->rescued = true;
		return;
	}
	if (!p || slot >= p->desc.nslots || len > PTBPF_OPS_CHUNK)
		return;
	if (c->ev.arg[2] > p->written[slot]) {
		r->counts.written += c->ev.arg[2] - p->written[slot];
		p->written[slot] = c->ev.arg[2];
	}
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
	tail = p->tail[slot] > r->cstart ? p->tail[slot] : r->cstart;
	end = r->cstart + r->clen;
	if (tail >= end) {
		r->cstart = end;
		r->clen = 0;
		return;
	}
	tail = parse(r, p, c->ev.tid, r->cbuf + (tail - r->cstart), tail, end, true, emit, ctx);
	p->tail[slot] = tail;
	memmove(r->cbuf, r->cbuf + (tail - r->cstart), end - tail);
	r->clen = end - tail;
	r->cstart = tail;
}

void ops_rings_finish(struct ops_rings *r, int (*emit)(void *ctx, void *data, size_t size),
		      void *ctx)
{
	for (int k = 0; k < r->n; k++) {
		struct proc_rings *p = &r->procs[k];

		for (uint32_t i = 0; !p->gone && i < p->desc.nslots; i++) {
			struct ptbpf_event e = { .ts = p->gap_from[i], .pid = (uint32_t)p->pid,
						 .tid = p->tid[i], .kind = EV_OPS_GAP,
						 .source = SRC_AGENT, .arg = { p->gap_lost[i] } };

			/* Lost at the end of the session: no later record of the
			 * thread's carries the agent's gap marker. */
			if (p->gap_lost[i])
				emit(ctx, &e, sizeof(e));
		}
		p->gone = true;
	}
}

void ops_rings_exec(struct ops_rings *r, int pid)
{
	struct proc_rings *p = find_proc(r, pid);

	/* The exec probes copied what its rings held: nothing is lost but
	 * what other threads wrote in the instant before the exec. */
	if (p)
		p->gone = p->rescued = true;
}

const struct ops_ring_counts *ops_rings_counts(const struct ops_rings *r)
{
	return &r->counts;
}
