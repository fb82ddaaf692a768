// SPDX-License-Identifier: BSD-2-Clause
/*
 * Causes of a step's Other, from the kernel view (report_causes.h).
 */
#define _GNU_SOURCE
#include "report/report_causes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/pbread.h"

#define MAX_CPUS 8192

/* A cause interval of thread tid: into both tables. */
static void cause(struct report *r, int64_t tid, uint32_t name, enum step_cause_class cls,
		  uint64_t start, uint64_t end)
{
	if (r->steps && !r->steps_done)
		steps_cause(r->steps, tid, name, cls, start, end);
	if (r->gaps && !r->gaps_done)
		steps_cause(r->gaps, tid, name, cls, start, end);
	if (r->late && !r->late_done)
		steps_cause(r->late, tid, name, cls, start, end);
	if (!r->pass && r->rview)
		r->rview->cause(r, tid, name, start, end);
}

/* A gap is a row of the gaps' table: from the stream's last activity's
 * end to this one's start, named by the stream, of the thread that
 * launched this one (whose causes split the gap's Other). */
static void gpu_activity(struct report *r, struct rd_track *t, uint64_t start, uint64_t end,
			 const struct rd_launch *l)
{
	if (r->gaps && t->last_end && start >= t->last_end + RC_GAP_MIN_NS) {
		if (r->ngaps < RC_MAX_GAPS)
			steps_add_key(r->gaps, t->last_end, start, t->name, l ? l->tid : 0,
				      t->uuid);
		else
			r->gaps_skipped++;
		r->ngaps++;
	}
	if (end > t->last_end)
		t->last_end = end;
}

static const char *arg_str(const struct report *r, const struct rd_frame *f, enum rd_arg k)
{
	return f->a.v[k] != RD_UNSET ? rd_str(r, (uint32_t)f->a.v[k]) : NULL;
}

static bool starts(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

/* What a blocking system call waited on, from its name and its file. */
void rc_call_cause(const char *call, const char *file, const char *lock, char *buf,
		       size_t size)
{
	if (lock && !strcmp(lock, "GIL"))
		snprintf(buf, size, "waiting for the GIL");
	else if (!strcmp(call, "futex"))
		snprintf(buf, size, "futex (a lock or condition wait)");
	else if (!strcmp(call, "clock_nanosleep") || !strcmp(call, "nanosleep"))
		snprintf(buf, size, "sleep (%s)", call);
	else if (starts(file, "pipe:"))
		snprintf(buf, size, "%s on a pipe", call);
	else if (starts(file, "socket:"))
		snprintf(buf, size, "%s on a socket", call);
	else if (starts(file, "/dev/nvidia"))
		snprintf(buf, size, "%s on the GPU driver (a synchronizing CUDA call)", call);
	else if (starts(file, "anon_inode:"))
		snprintf(buf, size, "%s on %s", call, file + 11);
	else if (starts(file, "/"))
		snprintf(buf, size, "%s on a file (I/O)", call);
	else
		snprintf(buf, size, "%s", call);
}

/* The call's woken_by, kept for the gaps' chains (first pass only). */
static void wake(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		 uint64_t end)
{
	char buf[96];
	const char *by = arg_str(r, f, A_WOKEN_BY);
	struct rc_wake *w;

	if (!by || r->pass || !r->gaps)
		return;
	if (r->nwakes >= RC_MAX_WAKES) {
		r->wakes_dropped++;
		return;
	}
	if (r->nwakes == r->wakes_cap) {
		size_t n = r->wakes_cap ? 2 * r->wakes_cap : 256;

		if (!(w = realloc(r->wakes, n * sizeof(*w)))) {
			r->wakes_dropped++;
			return;
		}
		r->wakes = w;
		r->wakes_cap = n;
	}
	if (f->a.v[A_WOKEN_TID] != RD_UNSET)
		snprintf(buf, sizeof(buf), "%s (tid %ld)", by, (long)f->a.v[A_WOKEN_TID]);
	else
		snprintf(buf, sizeof(buf), "%s", by);
	r->wakes[r->nwakes++] = (struct rc_wake){ .tid = t->owner_tid, .ts = end,
						  .name = rd_str_id(r, buf, strlen(buf)) };
}

static int by_tid_ts(const void *a, const void *b)
{
	const struct rc_wake *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

void rc_wakes_sort(struct report *r)
{
	if (r->nwakes)
		qsort(r->wakes, r->nwakes, sizeof(*r->wakes), by_tid_ts);
}

uint32_t rc_woken_by(const struct report *r, int64_t tid, uint64_t from, uint64_t to)
{
	size_t lo = 0, hi = r->nwakes; /* the first wake after (tid, to) */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rc_wake *w = &r->wakes[mid];

		if (w->tid < tid || (w->tid == tid && w->ts <= to))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && r->wakes[lo - 1].tid == tid && r->wakes[lo - 1].ts >= from)
		return r->wakes[lo - 1].name;
	return RD_NONE;
}

static void blocked(struct report *r, const struct rd_track *t, const struct rd_frame *f,
		    uint64_t end)
{
	char buf[128];
	enum step_cause_class cls = SC_SCHED;

	if (f->cat == r->cat_fault) {
		snprintf(buf, sizeof(buf), "page faults");
	} else if (f->cat == r->cat_sched) {
		const char *by = arg_str(r, f, A_BY);
		bool unsure = f->a.v[A_RETURN_NOT_REPORTED] != RD_UNSET;

		snprintf(buf, sizeof(buf), "%spreempted by %s%s", unsure ? "unreported return: " : "",
			 by && *by ? by : "another task", unsure ? ", or running" : "");
	} else if (f->cat == r->cat_syscall) {
		cls = SC_CALL;
		wake(r, t, f, end);
		rc_call_cause(rd_str(r, f->name), arg_str(r, f, A_FILE), arg_str(r, f, A_LOCK), buf,
			   sizeof(buf));
	} else {
		return;
	}
	cause(r, t->owner_tid, rd_str_id(r, buf, strlen(buf)), cls, f->ts, end);
}

static struct rc_cpu *cpu_of(struct report *r, uint64_t cpu)
{
	if (cpu >= MAX_CPUS)
		return NULL;
	if (cpu >= r->ncpus) {
		size_t n = cpu + 1 > 2 * r->ncpus ? cpu + 1 : 2 * r->ncpus;
		struct rc_cpu *g = realloc(r->cpus, n * sizeof(*g));

		if (!g)
			return NULL;
		for (size_t i = r->ncpus; i < n; i++)
			g[i] = (struct rc_cpu){ .next = -1 };
		r->cpus = g;
		r->ncpus = n;
	}
	return &r->cpus[cpu];
}

static bool traced(struct report *r, int64_t tid)
{
	uint64_t *t = tid > 0 ? rd_map_slot(&r->thread_tids, (uint64_t)tid, false) : NULL;

	return t && *t;
}

static void running(struct report *r, int64_t tid, uint64_t start, uint64_t end)
{
	cause(r, tid, rd_str_id(r, RC_RUNNING, strlen(RC_RUNNING)), SC_RUNNING, start, end);
}

/* The kernel view's first switch read so far is at ts: the threads found
 * running when it began ran since then (a bundle of another CPU, written
 * later, can hold an earlier switch). */
static void view_began(struct report *r, uint64_t ts)
{
	if (r->sched_first_ts && !r->sched_broke)
		for (size_t i = 0; i < r->nclaims; i++) {
			running(r, r->claims[i].tid, ts, r->claims[i].from);
			r->claims[i].from = ts;
		}
	r->sched_first_ts = ts;
}

static void claim(struct report *r, int64_t tid, uint64_t from)
{
	if (r->nclaims == r->claims_cap) {
		size_t n = r->claims_cap ? 2 * r->claims_cap : 16;
		struct rc_claim *c = realloc(r->claims, n * sizeof(*c));

		if (!c)
			return; /* its time before `from` stays unexplained */
		r->claims = c;
		r->claims_cap = n;
	}
	r->claims[r->nclaims++] = (struct rc_claim){ .tid = tid, .from = from };
}

/*
 * A switch on c at ts (the events' clock) to task next: the task it took
 * off ran since the CPU's last switch. A traced thread already running
 * when the kernel view began is put on by a replayed switch without a time
 * of its own, 1 ns before the switch that takes it off (bpf/sched.bpf.c).
 * Every switch of a traced thread is recorded, so with no record of it
 * before, and none lost, it ran since the kernel view's first switch.
 */
static void on_switch(struct report *r, struct rc_cpu *c, uint64_t ts, int64_t next)
{
	uint64_t *seen;

	if (!r->sched_first_ts || ts < r->sched_first_ts)
		view_began(r, ts);
	if (c->next > 0 && ts > c->ts && traced(r, c->next)) {
		uint64_t start = c->ts;

		if (c->next_new && ts - c->ts <= 1 && !r->sched_broke) {
			start = r->sched_first_ts; /* at or before c->ts, seen here */
			claim(r, c->next, start);
		}
		running(r, c->next, start, ts);
	}
	c->next_new = false;
	if (traced(r, next) && (seen = rd_map_slot(&r->sched_seen, (uint64_t)next, true))) {
		c->next_new = *seen != (uint64_t)r->pass + 1;
		*seen = (uint64_t)r->pass + 1;
	}
	c->ts = ts;
	c->next = next;
}

/* The switches of a compact sched message: timestamps (deltas) and next
 * pids, in two packed arrays of the same length. */
static void switches(struct report *r, struct rc_cpu *c, const uint8_t *d, size_t n)
{
	const uint8_t *p = d, *ts = NULL, *pid = NULL;
	size_t nts = 0, npid = 0, a = 0, b = 0;
	struct field f;
	bool bad = false;
	uint64_t t = 0;

	while (pb_next_field(&p, d + n, &f, &bad)) {
		if (f.num == F_SCHED_SW_TS && f.wt == PB_LEN)
			ts = f.d, nts = f.len;
		else if (f.num == F_SCHED_SW_PID && f.wt == PB_LEN)
			pid = f.d, npid = f.len;
	}
	while (!bad && a < nts && b < npid) {
		uint64_t dt, next;
		int k = pb_varint_get(ts + a, nts - a, &dt), l = pb_varint_get(pid + b, npid - b, &next);

		if (k <= 0 || l <= 0)
			break;
		a += (size_t)k;
		b += (size_t)l;
		t += dt;
		if ((int64_t)t > r->boot_minus_mono)
			on_switch(r, c, t - (uint64_t)r->boot_minus_mono, (int64_t)(int32_t)next);
	}
}

static void sched_bundle(struct report *r, const uint8_t *d, size_t n)
{
	const uint8_t *p = d, *compact = NULL;
	size_t ncompact = 0;
	uint64_t cpu = UINT64_MAX;
	bool bad = false, lost = false;
	struct field f;
	struct rc_cpu *c;

	r->sched_bundles += !r->pass;
	if (!r->has_boot || !r->steps)
		return;
	while (pb_next_field(&p, d + n, &f, &bad)) {
		if (f.num == F_FB_CPU && f.wt == PB_VARINT)
			cpu = f.v;
		else if (f.num == F_FB_LOST && f.wt == PB_VARINT)
			lost = f.v != 0;
		else if (f.num == F_FB_COMPACT && f.wt == PB_LEN)
			compact = f.d, ncompact = f.len;
	}
	if (bad || !compact || !(c = cpu_of(r, cpu)))
		return;
	if (lost) {
		c->next = -1;
		r->sched_broke = true;
	}
	switches(r, c, compact, ncompact);
}

static void new_pass(struct report *r)
{
	for (size_t i = 0; i < r->ncpus; i++)
		r->cpus[i] = (struct rc_cpu){ .next = -1 };
	r->sched_first_ts = 0;
	r->sched_broke = false;
	r->nclaims = 0;
}

/* Each slice that ends: a cause of its thread, or a GPU activity. */
static void slice(struct report *r, struct rd_track *t, const struct rd_frame *f, uint64_t end,
		  const struct rd_launch *l)
{
	if (t->owner_tid)
		blocked(r, t, f, end);
	else if (t->gpu && !r->pass &&
		 (f->cat == r->cat_kernel || f->cat == r->cat_memcpy || f->cat == r->cat_memset))
		gpu_activity(r, t, f->ts, end, l);
}

const struct rd_kernel_view rc_kernel_view = { slice, sched_bundle, new_pass };

/* Advice by the cause's first words. */
const char *rc_advice(const char *cause)
{
	static const struct { const char *prefix, *advice; } tab[] = {
		{ "running", "the thread runs Python (or native code) between ops: the CPU samples "
			     "or --py-stacks show where" },
		{ "preempted by", "another task takes the thread's CPU: move it away (taskset, "
				  "cgroups) or give the job more cores" },
		{ "unreported return", "the kernel reported no switch for the thread's return to "
				       "its CPU, and no CPU sample placed it (--no-samples?)" },
		{ "waiting for the GIL", "another Python thread holds the GIL: the slice's "
					 "waker is the holder" },
		{ "page faults", "the thread faults memory in (fresh buffers; with major_faults on "
				 "its slices, a mapped file read in): reuse buffers, preallocate and "
				 "touch them once, or read the file ahead" },
		{ "sleep", "the job sleeps in its own code" },
		{ "futex", "the thread waits for a lock or a condition: its waker is the thread "
			   "it waited for" },
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (starts(cause, tab[i].prefix))
			return tab[i].advice;
	if (strstr(cause, "on a pipe") || strstr(cause, "on a socket"))
		return "the thread waits for another process (a pipe or socket: DataLoader "
		       "workers, a queue, RPC)";
	if (strstr(cause, "on a file"))
		return "the thread waits for file I/O: read ahead, cache, or load in workers";
	if (strstr(cause, "GPU driver"))
		return "the thread waits for the GPU in a synchronizing CUDA call";
	return "the thread blocks in this system call";
}

static int by_ns(const void *a, const void *b)
{
	const struct rc_total *x = a, *y = b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* The rows' causes (each row's cause_rest: into "other causes"). */
bool rc_sum(const struct report *r, const struct step_table *t, const struct step_row *rows,
	    size_t nrows, struct rc_totals *out)
{
	size_t cap = 0;
	uint64_t rest = 0;

	*out = (struct rc_totals){ .kernel_view = r->sched_bundles > 0 };
	for (size_t i = 0; i < nrows; i++) {
		out->steps_ns += rows[i].dur;
		out->other_ns += rows[i].brk[STEP_BREAKDOWN - 1];
		rest += rows[i].cause_rest;
		out->explained_ns += rows[i].cause_rest;
		const struct step_cause *cs = steps_causes(t, &rows[i]);

		for (int k = 0; k < rows[i].ncause; k++) {
			const struct step_cause *c = &cs[k];
			size_t j = 0;

			while (j < out->n && out->v[j].name != c->name)
				j++;
			if (j == out->n) {
				if (!rd_room((void **)&out->v, &cap, out->n, sizeof(*out->v)))
					return false;
				out->v[out->n++] = (struct rc_total){ .name = c->name };
			}
			out->v[j].ns += c->ns;
			out->explained_ns += c->ns;
		}
	}
	if (rest) {
		if (!rd_room((void **)&out->v, &cap, out->n, sizeof(*out->v)))
			return false;
		out->v[out->n++] = (struct rc_total){ .name = RD_NONE, .ns = rest };
	}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), by_ns);
	return true;
}
