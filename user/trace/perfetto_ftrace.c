/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Scheduler events as Perfetto's own ftrace data source writes them
 * (perfetto.h): a CPU's switches and wakeups in a FtraceEventBundle's
 * compact sched arrays, packed and delta-encoded, their task names in the
 * bundle's own string table; and a SystemInfo packet with the kernel's
 * release, by which trace_processor reads the switches' prev_state.
 * Bundles go on the first sequence, without a packet timestamp: their
 * clock is ftrace's, BOOTTIME.
 */
#define _GNU_SOURCE /* perfetto_int.h (strnlen, clock_gettime) */
#include "trace/perfetto_int.h"
#include "trace/pf_fields.h"

#include <sys/utsname.h>
#include <unistd.h>

#define COMM_MAX 15 /* TASK_COMM_LEN - 1 */
#define COMM_SLOTS (4 * PF_SCHED_BUNDLE_MAX) /* twice the most names a bundle has */

/* A bundle in the making: its string table (each distinct name once, by
 * index) and one column at a time. */
struct bundle_scratch {
	uint64_t ts[PF_SCHED_BUNDLE_MAX];
	int64_t v[PF_SCHED_BUNDLE_MAX];
	const char *s[2 * PF_SCHED_BUNDLE_MAX];
	uint8_t len[2 * PF_SCHED_BUNDLE_MAX];
	int n;
	int32_t slot[COMM_SLOTS]; /* index + 1, 0: empty */
};

static uint32_t comm_index(struct bundle_scratch *t, const char *s)
{
	size_t len = s ? strnlen(s, COMM_MAX) : 0;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	for (uint32_t k = h % COMM_SLOTS;; k = (k + 1) % COMM_SLOTS) {
		int i = t->slot[k] - 1;

		if (i < 0) {
			t->s[t->n] = s ? s : "";
			t->len[t->n] = (uint8_t)len;
			t->slot[k] = ++t->n;
			return (uint32_t)(t->n - 1);
		}
		if (t->len[i] == len && !memcmp(t->s[i], s, len))
			return (uint32_t)i;
	}
}

/* MONOTONIC ns to BOOTTIME, as the first snapshot relates them. */
static uint64_t boottime(const struct pf_writer *w, uint64_t mono)
{
	return (uint64_t)((int64_t)mono + w->boot_minus_mono);
}

static void packed_ts(struct pf_writer *w, uint32_t field, const uint64_t *ts, int n)
{
	size_t at = pb_begin(&w->pb, field);
	uint64_t prev = 0;

	for (int i = 0; i < n; i++) {
		uint64_t t = boottime(w, ts[i]);

		pb_varint(&w->pb, t - prev); /* a step back wraps, as the reader unwraps it */
		prev = t;
	}
	pb_end(&w->pb, at);
}

static void packed(struct pf_writer *w, uint32_t field, const int64_t *v, int n)
{
	size_t at = pb_begin(&w->pb, field);

	for (int i = 0; i < n; i++) /* int32/int64: sign-extended varints */
		pb_varint(&w->pb, (uint64_t)v[i]);
	pb_end(&w->pb, at);
}

static void put_switches(struct pf_writer *w, const struct pf_sched_switch *sw, int n,
			 struct bundle_scratch *names)
{
	uint64_t *ts = names->ts;
	int64_t *v = names->v;

	for (int i = 0; i < n; i++)
		ts[i] = sw[i].ts;
	packed_ts(w, F_SCHED_SW_TS, ts, n);
	for (int i = 0; i < n; i++)
		v[i] = sw[i].prev_state;
	packed(w, F_SCHED_SW_STATE, v, n);
	for (int i = 0; i < n; i++)
		v[i] = sw[i].next_pid;
	packed(w, F_SCHED_SW_PID, v, n);
	for (int i = 0; i < n; i++)
		v[i] = sw[i].next_prio;
	packed(w, F_SCHED_SW_PRIO, v, n);
	for (int i = 0; i < n; i++)
		v[i] = comm_index(names, sw[i].next_comm);
	packed(w, F_SCHED_SW_COMM, v, n);
}

static void put_wakings(struct pf_writer *w, const struct pf_sched_waking *wk, int n,
			struct bundle_scratch *names)
{
	uint64_t *ts = names->ts;
	int64_t *v = names->v;

	for (int i = 0; i < n; i++)
		ts[i] = wk[i].ts;
	packed_ts(w, F_SCHED_WK_TS, ts, n);
	for (int i = 0; i < n; i++)
		v[i] = wk[i].pid;
	packed(w, F_SCHED_WK_PID, v, n);
	for (int i = 0; i < n; i++)
		v[i] = wk[i].target_cpu;
	packed(w, F_SCHED_WK_CPU, v, n);
	for (int i = 0; i < n; i++)
		v[i] = wk[i].prio;
	packed(w, F_SCHED_WK_PRIO, v, n);
	for (int i = 0; i < n; i++)
		v[i] = comm_index(names, wk[i].comm);
	packed(w, F_SCHED_WK_COMM, v, n);
	for (int i = 0; i < n; i++)
		v[i] = wk[i].common_flags;
	packed(w, F_SCHED_WK_FLAGS, v, n);
}

void pf_sched_bundle(struct pf_writer *w, uint32_t cpu, const struct pf_sched_switch *sw,
		     int nsw, const struct pf_sched_waking *wk, int nwk, bool lost)
{
	static struct bundle_scratch names; /* one writer thread */
	size_t bundle, compact;

	if (!w || w->copy || (nsw <= 0 && nwk <= 0))
		return;
	nsw = nsw < PF_SCHED_BUNDLE_MAX ? nsw : PF_SCHED_BUNDLE_MAX;
	nwk = nwk < PF_SCHED_BUNDLE_MAX ? nwk : PF_SCHED_BUNDLE_MAX;
	memset(names.slot, 0, sizeof(names.slot));
	names.n = 0;
	packet_begin(w, 0);
	bundle = pb_begin(&w->pb, F_PKT_FTRACE_EVENTS);
	pb_uint(&w->pb, F_FB_CPU, cpu);
	if (lost)
		pb_uint(&w->pb, F_FB_LOST, 1);
	compact = pb_begin(&w->pb, F_FB_COMPACT);
	if (nsw > 0)
		put_switches(w, sw, nsw, &names);
	if (nwk > 0)
		put_wakings(w, wk, nwk, &names);
	for (int i = 0; i < names.n; i++)
		pb_bytes(&w->pb, F_SCHED_INTERN, names.s[i], names.len[i]);
	pb_end(&w->pb, compact);
	pb_end(&w->pb, bundle);
	pf_packet_end(w);
}

void pf_system_info(struct pf_writer *w)
{
	struct utsname u;
	size_t si, uts;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);

	if (!w || w->copy || uname(&u))
		return;
	packet_begin(w, 0);
	si = pb_begin(&w->pb, F_PKT_SYSTEM_INFO);
	uts = pb_begin(&w->pb, F_SI_UTSNAME);
	pb_bytes(&w->pb, F_UTS_SYSNAME, u.sysname, strnlen(u.sysname, sizeof(u.sysname)));
	pb_bytes(&w->pb, F_UTS_VERSION, u.version, strnlen(u.version, sizeof(u.version)));
	pb_bytes(&w->pb, F_UTS_RELEASE, u.release, strnlen(u.release, sizeof(u.release)));
	pb_bytes(&w->pb, F_UTS_MACHINE, u.machine, strnlen(u.machine, sizeof(u.machine)));
	pb_end(&w->pb, uts);
	if (ncpu > 0)
		pb_uint(&w->pb, F_SI_NUM_CPUS, (uint64_t)ncpu);
	pb_end(&w->pb, si);
	pf_packet_end(w);
}
