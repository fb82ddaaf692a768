// SPDX-License-Identifier: BSD-2-Clause
/*
 * The hang summary of a hang capture (report_ranks.h): the collective the
 * waiting ranks are in (the furthest one entered and not left), the ranks
 * that never entered it (alive or exited), each with its main thread's
 * Python frame and state, and the others' common wait.
 */
#define _GNU_SOURCE
#include "report/report_ranks_int.h"

#include <stdio.h>
#include <string.h>

struct hang_view {
	uint64_t seq;        /* the highest count among those in one (0: none is) */
	uint32_t coll;
	uint64_t since;      /* its oldest entry */
	int wait[RK_MAX_HANG], nwait;
	int late[RK_MAX_HANG], nlate; /* never entered it (or, with none waited in: all) */
	const struct rk_hang *fired;  /* whose wait passed the limit */
};

static void analyse(const struct rk_data *d, struct hang_view *v)
{
	*v = (struct hang_view){ .coll = RD_NONE };
	for (int i = 0; i < d->nhang; i++) {
		const struct rk_hang *h = &d->hang[i];

		if (h->seen_hung)
			v->fired = h;
		if (h->coll_open_ts && !h->gone_ts && h->coll_entered > v->seq)
			v->seq = h->coll_entered, v->coll = h->coll_name;
	}
	/* Waiting: in a collective now. Counts are not compared across ranks:
	 * each counts from when its step signal came on, which the daemon does
	 * rank by rank, steps apart. */
	for (int i = 0; i < d->nhang; i++) {
		const struct rk_hang *h = &d->hang[i];

		if (v->seq && h->coll_open_ts && !h->gone_ts) {
			v->wait[v->nwait++] = i;
			if (!v->since || h->coll_open_ts < v->since)
				v->since = h->coll_open_ts;
		} else {
			v->late[v->nlate++] = i;
		}
	}
}

static const struct rk_thread *main_thread(const struct rk_data *d, int64_t pid)
{
	for (size_t i = 0; i < d->nth; i++)
		if (d->th[i].tid == pid)
			return &d->th[i];
	return NULL;
}

/* Where the thread is: the attach's look at it blocked, else its CPU
 * samples' most frequent innermost Python frame. */
static void frame_of(const struct report *r, const struct rk_thread *t, char *buf, size_t len,
		     bool *known)
{
	const struct rk_count *best = NULL;

	*known = true;
	if (t && t->call != RD_NONE) {
		snprintf(buf, len, "%s (blocked in %s when tracing began)", rd_str(r, t->stack),
			 rd_str(r, t->call));
		return;
	}
	for (int i = 0; t && i < RK_LEAVES; i++)
		if (t->leaf[i].n && (!best || t->leaf[i].n > best->n))
			best = &t->leaf[i];
	if (best) {
		snprintf(buf, len, "%s (%lu of its %lu CPU samples)", rd_str(r, best->name),
			 (unsigned long)best->n, (unsigned long)t->samples);
		return;
	}
	*known = false;
	snprintf(buf, len, "not known (no Python stack: CPython 3.10-3.13, and CPU samples)");
}

static void state_of(const struct report *r, const struct rk_thread *t, char *buf, size_t len)
{
	if (t && t->cause_ns)
		rk_causes_line(r, t, buf, len);
	else
		snprintf(buf, len, "not known (no kernel view of it)");
}

static void late_text(const struct report *r, const struct hang_view *v, const struct rk_hang *h)
{
	const struct rk_thread *t = main_thread(r->ranks, h->pid);
	char who[32], frame[512], state[256];
	bool known;

	snprintf(who, sizeof(who), "rank %s", rd_str(r, h->rank));
	if (h->rank == RD_NONE || !*rd_str(r, h->rank))
		snprintf(who, sizeof(who), "pid %ld", (long)h->pid);
	printf("  %s (pid %ld): ", who, (long)h->pid);
	if (h->gone_ts)
		printf("EXITED %.1f s before the capture", (h->ts - h->gone_ts) / 1e9);
	else if (h->step_start)
		printf("in step %lu for %.1f s", (unsigned long)h->steps + 1,
		       (h->ts - h->step_start) / 1e9);
	else
		printf("running");
	if (h->coll_left)
		printf("; it left %s #%lu %.1f s before", rd_str(r, h->coll_left_name),
		       (unsigned long)h->coll_left_seq, (h->ts - h->coll_left_ts) / 1e9);
	if (v->seq)
		printf("; it entered %lu collectives since its step signal came on",
		       (unsigned long)h->coll_entered);
	printf("\n");
	if (h->gone_ts)
		return;
	frame_of(r, t, frame, sizeof(frame), &known);
	state_of(r, t, state, sizeof(state));
	printf("      frame:  %s\n      thread: %s\n", frame, state);
}

/* The frame most of the waiting ranks' main threads are in, and one's state. */
static void common_text(const struct report *r, const struct hang_view *v)
{
	const struct rk_data *d = r->ranks;
	struct rk_count c[RK_MAX_HANG] = { 0 };
	const struct rk_thread *one = NULL;
	char frame[512] = "not known", state[256] = "not known";
	int best = -1;

	for (int i = 0; i < v->nwait; i++) {
		const struct rk_thread *t = main_thread(d, d->hang[v->wait[i]].pid);
		int k = 0;

		if (!t || t->call == RD_NONE)
			continue;
		while (k < RK_MAX_HANG - 1 && c[k].n && c[k].name != t->stack)
			k++;
		c[k].name = t->stack;
		c[k].n++;
		if (best < 0 || c[k].n > c[best].n)
			best = k, one = t;
	}
	if (one) {
		snprintf(frame, sizeof(frame), "%s, blocked in %s (%lu of %d ranks)",
			 rd_str(r, one->stack), rd_str(r, one->call), (unsigned long)c[best].n,
			 v->nwait);
		state_of(r, one, state, sizeof(state));
	}
	printf("  The others' common wait: %s #%lu for %.1f s, at %s\n      thread: %s\n",
	       rd_str(r, v->coll), (unsigned long)v->seq, (d->hang[0].ts - v->since) / 1e9,
	       frame, state);
}

void rk_hang_text(const struct report *r)
{
	const struct rk_data *d = r->ranks;
	struct hang_view v;

	if (!d || !d->nhang)
		return;
	analyse(d, &v);
	printf("\nHang (the daemon's capture: ");
	if (v.fired)
		printf("pid %ld waited past its limit, %.1f s", (long)v.fired->pid,
		       v.fired->limit / 1e9);
	else
		printf("a wait past its limit");
	printf("; %d processes of the job on this host)\n", d->nhang);
	if (v.seq) {
		printf("  %d of them wait in %s #%lu; never entered it, or exited: %d\n",
		       v.nwait, rd_str(r, v.coll), (unsigned long)v.seq, v.nlate);
	} else {
		printf("  none waits in a collective: each one's step\n");
	}
	for (int i = 0; i < v.nlate; i++)
		late_text(r, &v, &d->hang[v.late[i]]);
	if (v.seq)
		common_text(r, &v);
}

void rk_hang_json(FILE *o, const struct report *r)
{
	const struct rk_data *d = r->ranks;
	struct hang_view v;

	if (!d || !d->nhang)
		return;
	analyse(d, &v);
	fprintf(o, ", \"hang\": {\"processes\": %d, \"waited_in\": ", d->nhang);
	json_str(o, v.seq ? rd_str(r, v.coll) : "");
	fprintf(o, ", \"seq\": %lu, \"waiting\": %d, \"waiting_s\": %.3f, \"never_entered\": [",
		(unsigned long)v.seq, v.nwait, v.since ? (d->hang[0].ts - v.since) / 1e9 : 0.0);
	for (int i = 0; i < v.nlate; i++) {
		const struct rk_hang *h = &d->hang[v.late[i]];
		const struct rk_thread *t = main_thread(d, h->pid);
		char frame[512], state[256];
		bool known;

		frame_of(r, t, frame, sizeof(frame), &known);
		state_of(r, t, state, sizeof(state));
		fprintf(o, "%s{\"pid\": %ld, \"rank\": ", i ? ", " : "", (long)h->pid);
		json_str(o, rd_str(r, h->rank));
		fprintf(o, ", \"exited\": %s, \"exited_s_before\": %.3f, \"entered\": %lu, "
			"\"frame\": ", h->gone_ts ? "true" : "false",
			h->gone_ts ? (h->ts - h->gone_ts) / 1e9 : 0.0,
			(unsigned long)h->coll_entered);
		json_str(o, h->gone_ts || !known ? "" : frame);
		fprintf(o, ", \"thread\": ");
		json_str(o, h->gone_ts ? "" : state);
		fprintf(o, "}");
	}
	fprintf(o, "]}");
}
