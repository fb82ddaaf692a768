// SPDX-License-Identifier: BSD-2-Clause
/*
 * Reading, in time order: the BPF ring and the agents' op rings. Once an
 * agent records ops, both sources' records wait in the reorder buffer
 * (record/reorder.c) until nothing older can still come, then go on, in
 * order, to the raw capture and record/route.c; the kernel view's ring to
 * record/sched.c. See session.h.
 */
#define _GNU_SOURCE
#include "live/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "record/ops_ring.h"
#include "record/raw.h"
#include "record/reorder.h"
#include "record/route.h"
#include "record/sched.h"
#include "attach/sched_probes.h"

/* Every event, in order, on its way into the trace. */
static int deliver(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct ptbpf_event *e = data;

	if (s->raw)
		raw_record(s->raw, data, size);
	if (size >= sizeof(*e) && e->kind == EV_FORK && s->opt.follow_children &&
	    s->npending < (int)(sizeof(s->pending_forks) / sizeof(int)))
		s->pending_forks[s->npending++] = (int)e->arg[0];
	return route_event(s->route, data, size);
}



/* From the BPF ring. Once ops also come from agents' rings, events wait in
 * the reorder buffer; an agent's status is needed at once (add_target
 * waits for it) and is not ordered with anything. */
int read_bpf_record(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct ptbpf_event *e = data;

	if (size >= sizeof(*e) && e->kind == EV_AGENT_WAKE)
		return 0; /* it woke the reader: that was all (not counted as sent) */
	s->received++;
	if (size >= sizeof(*e) && e->kind == EV_EXEC) {
		bool traced = targets_exec(s, (int)e->pid);

		targets_watch_new(s, (int)e->pid, e->ts, traced);
		if (!traced)
			return 0;
		/* join cuts the old image's frames, in order with its events. */
	}
	if (s->opsr && size >= sizeof(struct ptbpf_ops_chunk) && e->kind == EV_OPS_CHUNK) {
		s->exit_chunks++;
		ops_rings_chunk(s->opsr, data, read_op_record, s);
		return 0;
	}
	if (s->reorder && !(size >= sizeof(*e) && e->kind == EV_NAMED_AGENT_STATUS) &&
	    !reorder_push(s->reorder, data, size))
		return 0;
	return deliver(s, data, size);
}

/* From the agents' op rings. */
int read_op_record(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;

	if (reorder_push(s->reorder, data, size))
		return deliver(s, data, size);
	return 0;
}

/* Events younger than this may still be on their way (a producer
 * preempted between its clock read and its commit): they wait a tick. */
#define REORDER_SLACK_NS 10000000ull

/* Reads the agents' rings and hands on what is old enough (everything at
 * the end: upto = UINT64_MAX); how many records were read. */
uint64_t read_op_rings(struct session *s, uint64_t upto)
{
	uint64_t before, hold;

	if (!s->reorder)
		return 0;
	before = ops_rings_counts(s->opsr)->records;
	/* The BPF ring was just read: the exit copies of processes the last
	 * drain found gone are in. */
	ops_rings_settle(s->opsr, read_op_record, s);
	ops_rings_drain(s->opsr, read_op_record, s);
	/* A process the drain found gone is settled at the next read, its
	 * losses marked where they began: nothing newer goes on before. */
	hold = ops_rings_unsettled_from(s->opsr);
	reorder_release(s->reorder, upto < hold ? upto : hold, deliver, s);
	return ops_rings_counts(s->opsr)->records - before;
}

/* One turn of reading: the BPF ring (waiting up to wait_ms for a batch,
 * then taking whatever is there: wakeups are batched) and the agents'
 * rings, then what can no longer be overtaken is handed on. Every BPF
 * record made before tick is read before any op record newer than
 * tick - REORDER_SLACK_NS goes on, so the two interleave as they happened.
 * The op records read, or the ring's error. */
int64_t read_pump(struct session *s, int wait_ms)
{
	uint64_t tick = clock_mono_ns();
	int err = ring_buffer__poll(s->rb, wait_ms);
	uint64_t n;

	if (err >= 0)
		err = ring_buffer__consume(s->rb);
	n = read_op_rings(s, tick - REORDER_SLACK_NS);
	return err < 0 && err != -EINTR ? err : (int64_t)n;
}

/* A program that reserved a record just before its link went may commit
 * it a moment later: the ring is read until every record sent is read or
 * counted lost, for this long at most. */
#define LAST_RECORD_WAIT_NS 50000000ull

void read_bpf_last(struct session *s, uint64_t st[STAT_MAX])
{
	uint64_t until = clock_mono_ns() + LAST_RECORD_WAIT_NS;

	for (;;) {
		ring_buffer__consume(s->rb);
		session_stats(s, st);
		if (st[STAT_SENT] == s->received + session_lost(st) || clock_mono_ns() >= until)
			return;
		usleep(1000);
	}
}

/* A record for the kernel view, from the ring or a replay BPF had not sent
 * when tracing stopped (not counted as received). Not ordered with the
 * others: its switches and wakeups go into per-CPU bundles, sorted there;
 * its slices are placed by their own timestamps. */
static int view_record(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;

	return s->schedv ? sched_view_record(s->schedv, data, size) : 0;
}

int read_sched_record(void *ctx, void *data, size_t size)
{
	((struct session *)ctx)->sched_received++;
	return view_record(ctx, data, size);
}

void read_sched_last(struct session *s, uint64_t sst[SCHED_STAT_MAX])
{
	uint64_t until = clock_mono_ns() + LAST_RECORD_WAIT_NS;

	for (;;) {
		ring_buffer__consume(s->rb);
		sched_probes_stats(s->sched, sst);
		if (sst[SCHED_STAT_SENT] == s->sched_received + sched_probes_lost(sst) ||
		    clock_mono_ns() >= until)
			break;
		usleep(1000);
	}
	sched_probes_pending(s->sched, view_record, s);
}
