// SPDX-License-Identifier: BSD-2-Clause
/*
 * The kernel view's records into the trace (sched.h). The ring gives each
 * CPU's records in the order they were made, which is time order but for
 * a record made in an interrupt between another's clock read and its
 * reservation: each CPU's switches and wakeups are sorted before a bundle
 * is written. A CPU's bundle is written when it is full, when records of
 * that CPU were lost (the next bundle says so: trace_processor can no
 * longer infer a switch's previous task there), once a second and at the
 * end. trace_processor sorts all events by time, so bundles of one CPU
 * need not follow each other in time.
 */
#define _GNU_SOURCE
#include "record/sched.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CPUS 1024 /* trace_processor's limit too */
#define N PF_SCHED_BUNDLE_MAX

struct cpu_buf {
	struct pf_sched_switch sw[N];
	struct pf_sched_waking wk[N];
	char sw_comm[N][SCHED_COMM_LEN], wk_comm[N][SCHED_COMM_LEN];
	int nsw, nwk;
	bool lost; /* records were lost before the first of these */
};

struct sched_view {
	struct pf_writer *w;
	struct offcpu *off;
	offcpu_thread_track_fn *track;
	void *ctx;
	struct cpu_buf *cpu[MAX_CPUS];
	struct sched_counts counts;
};

struct sched_view *sched_view_new(struct pf_writer *w, offcpu_thread_track_fn *track,
				  void *ctx)
{
	struct sched_view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->off = offcpu_new(w, track, ctx);
	if (!v->off) {
		free(v);
		return NULL;
	}
	v->w = w;
	v->track = track;
	v->ctx = ctx;
	pf_system_info(w);
	return v;
}

void sched_view_free(struct sched_view *v)
{
	if (!v)
		return;
	for (int i = 0; i < MAX_CPUS; i++)
		free(v->cpu[i]);
	offcpu_free(v->off);
	free(v);
}

const struct sched_counts *sched_view_counts(const struct sched_view *v)
{
	return &v->counts;
}

const struct offcpu_counts *sched_view_offcpu(const struct sched_view *v)
{
	return offcpu_counts(v->off);
}

/* Insertion sort by time: the records come almost in order. */
#define SORT_BY_TS(a, n)                                                  \
	do {                                                              \
		for (int i_ = 1; i_ < (n); i_++) {                        \
			typeof((a)[0]) x_ = (a)[i_];                      \
			int j_ = i_ - 1;                                  \
			for (; j_ >= 0 && (a)[j_].ts > x_.ts; j_--)       \
				(a)[j_ + 1] = (a)[j_];                    \
			(a)[j_ + 1] = x_;                                 \
		}                                                         \
	} while (0)

static void flush_cpu(struct sched_view *v, int cpu)
{
	struct cpu_buf *b = v->cpu[cpu];

	if (!b || (!b->nsw && !b->nwk))
		return;
	SORT_BY_TS(b->sw, b->nsw);
	SORT_BY_TS(b->wk, b->nwk);
	pf_sched_bundle(v->w, (uint32_t)cpu, b->sw, b->nsw, b->wk, b->nwk, b->lost);
	v->counts.bundles++;
	v->counts.cpus_lost += b->lost;
	b->nsw = b->nwk = 0;
	b->lost = false;
}

void sched_view_flush(struct sched_view *v)
{
	for (int i = 0; i < MAX_CPUS; i++)
		flush_cpu(v, i);
}

/* The CPU's buffer, with room for one more record; NULL if none. */
static struct cpu_buf *cpu_room(struct sched_view *v, const struct ptbpf_sched_hdr *h,
				bool waking)
{
	struct cpu_buf *b;

	if (h->cpu >= MAX_CPUS)
		return NULL;
	if (!v->cpu[h->cpu] && !(v->cpu[h->cpu] = calloc(1, sizeof(struct cpu_buf))))
		return NULL;
	b = v->cpu[h->cpu];
	if (h->lost) {
		/* The records before the loss go in a bundle of their own. */
		v->counts.lost += h->lost;
		flush_cpu(v, h->cpu);
		b->lost = true;
	}
	if ((waking ? b->nwk : b->nsw) == N)
		flush_cpu(v, h->cpu);
	return b;
}

static void on_switch(struct sched_view *v, const struct ptbpf_sched_switch *r)
{
	struct cpu_buf *b = cpu_room(v, &r->h, false);
	int i;

	if (!b) {
		v->counts.bad++;
		return;
	}
	if (r->flags & SW_NEXT_TRACED)
		v->track(v->ctx, (int)r->next_tgid, (int)r->next_tid);
	i = b->nsw++;
	memcpy(b->sw_comm[i], r->next_comm, SCHED_COMM_LEN);
	b->sw_comm[i][SCHED_COMM_LEN - 1] = 0;
	b->sw[i] = (struct pf_sched_switch){ .ts = r->h.ts, .prev_state = r->prev_state,
					     .next_pid = (int32_t)r->next_tid,
					     .next_prio = r->next_prio,
					     .next_comm = b->sw_comm[i] };
	v->counts.switches++;
	v->counts.replayed += !!(r->flags & SW_REPLAYED);
	v->counts.untimed += !!(r->flags & SW_UNTIMED);
	v->counts.unseen += !!(r->flags & SW_UNSEEN);
	v->counts.unseen_sampled += (r->flags & (SW_UNSEEN | SW_UNTIMED)) == SW_UNSEEN;
	offcpu_switch(v->off, r);
}

static void on_waking(struct sched_view *v, const struct ptbpf_sched_waking *r)
{
	struct cpu_buf *b = cpu_room(v, &r->h, true);
	int i;

	if (!b) {
		v->counts.bad++;
		return;
	}
	v->track(v->ctx, (int)r->tgid, (int)r->tid);
	i = b->nwk++;
	memcpy(b->wk_comm[i], r->comm, SCHED_COMM_LEN);
	b->wk_comm[i][SCHED_COMM_LEN - 1] = 0;
	b->wk[i] = (struct pf_sched_waking){ .ts = r->h.ts, .pid = (int32_t)r->tid,
					     .target_cpu = (int32_t)r->target_cpu,
					     .prio = r->prio, .common_flags = r->common_flags,
					     .comm = b->wk_comm[i] };
	v->counts.wakings++;
	offcpu_waking(v->off, r);
}

int sched_view_record(struct sched_view *v, const void *data, size_t size)
{
	const struct ptbpf_sched_hdr *h = data;

	v->counts.records++;
	if (size >= sizeof(struct ptbpf_sched_switch) && h->kind == SCHED_REC_SWITCH) {
		on_switch(v, data);
	} else if (size >= sizeof(struct ptbpf_sched_waking) && h->kind == SCHED_REC_WAKING) {
		on_waking(v, data);
	} else if (size >= sizeof(struct ptbpf_sched_block) && h->kind == SCHED_REC_BLOCK) {
		offcpu_block(v->off, data);
	} else if (size >= sizeof(struct ptbpf_sched_faults) && h->kind == SCHED_REC_FAULTS) {
		offcpu_faults(v->off, data);
	} else if (size >= sizeof(struct ptbpf_sched_syscall) && h->kind == SCHED_REC_SYSCALL) {
		v->counts.syscalls++;
		offcpu_syscall(v->off, data);
	} else {
		v->counts.bad++;
	}
	return 0;
}

void sched_view_started(struct sched_view *v, int pid, uint64_t ts, struct pystack *ps)
{
	offcpu_started(v->off, pid, ts, ps);
}

void sched_view_finish(struct sched_view *v, uint64_t ts)
{
	sched_view_flush(v);
	offcpu_finish(v->off, ts);
}
