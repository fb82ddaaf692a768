/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Perfetto writer's tracks and their events: track descriptors
 * (processes, threads, child and counter tracks, on the first sequence,
 * each with a fresh uuid), and slices, instants and counters, each on its
 * track's event sequence (perfetto_seq.c) with the definitions of the
 * strings it uses there first. A slice begin is then about 15 bytes, an
 * end 11. A flow gets a short id (1, 2, ...: a varint in the older flow
 * fields, which trace_processor reads alike) from its first event to the
 * one that ends it, in place of the caller's 64-bit one (a fixed64); an
 * end met before its start, or a flow past FLOW_SHORT_MAX open ones, keeps
 * its id.
 */
#define _GNU_SOURCE /* for perfetto_int.h (strnlen, clock_gettime) */
#include "trace/perfetto_int.h"
#include "trace/pf_fields.h"

/* What stamping an event in full costs more than a delta, about. */
#define FULL_TS_EXTRA 10

static int clip_count(struct pf_writer *w, int n, const void *items, int max)
{
	if (n <= 0 || !items)
		return 0;
	if (n > max) {
		w->clipped += (uint64_t)(n - max);
		return max;
	}
	return n;
}

/* ---- track descriptors ---- */

static uint64_t next_uuid(struct pf_writer *w)
{
	uint64_t uuid;

	do
		uuid = mix64(w->uuid_base + ++w->uuid_seq);
	while (uuid == 0); /* 0 is the implicit global track */
	return uuid;
}

/* Descriptor packets are stamped "now" in the sequence's default clock
 * (MONOTONIC); trace_processor uses the time to tell pid/tid reuse apart. */
static uint64_t desc_begin(struct pf_writer *w, uint64_t parent, const char *name, size_t *desc)
{
	uint64_t uuid;

	if (!w)
		return 0;
	uuid = next_uuid(w);
	packet_begin(w, SEQ_NEEDS_INCREMENTAL_STATE);
	pb_uint(&w->pb, F_PKT_TIMESTAMP, clock_mono_ns());
	*desc = pb_begin(&w->pb, F_PKT_TRACK_DESC);
	pb_uint(&w->pb, F_TD_UUID, uuid);
	if (parent)
		pb_uint(&w->pb, F_TD_PARENT, parent);
	pb_str(w, F_TD_NAME, name);
	return uuid;
}

static void desc_end(struct pf_writer *w, size_t desc)
{
	pb_end(&w->pb, desc);
	pf_packet_end(w);
}

uint64_t pf_track_process(struct pf_writer *w, int32_t pid, const char *name,
			  const char *const *cmdline, int ncmdline,
			  const char *const *labels, int nlabels)
{
	size_t desc, proc;
	uint64_t uuid = desc_begin(w, 0, NULL, &desc);
	int n;

	if (!uuid)
		return 0;
	n = clip_count(w, ncmdline, cmdline, PF_MAX_CMDLINE);
	proc = pb_begin(&w->pb, F_TD_PROCESS);
	pb_int(&w->pb, F_PD_PID, pid);
	for (int i = 0; i < n; i++)
		pb_str(w, F_PD_CMDLINE, cmdline[i] ? cmdline[i] : "");
	pb_str(w, F_PD_NAME, name);
	n = clip_count(w, nlabels, labels, PF_MAX_CMDLINE);
	for (int i = 0; i < n; i++)
		pb_str(w, F_PD_LABELS, labels[i] ? labels[i] : "");
	pb_end(&w->pb, proc);
	desc_end(w, desc);
	return uuid;
}

uint64_t pf_track_thread(struct pf_writer *w, int32_t pid, int64_t tid, const char *name)
{
	size_t desc, thread;
	uint64_t uuid = desc_begin(w, 0, NULL, &desc);

	if (!uuid)
		return 0;
	thread = pb_begin(&w->pb, F_TD_THREAD);
	pb_int(&w->pb, F_THD_PID, pid);
	pb_int(&w->pb, F_THD_TID, tid);
	pb_str(w, F_THD_NAME, name);
	pb_end(&w->pb, thread);
	desc_end(w, desc);
	return uuid;
}

uint64_t pf_track_child(struct pf_writer *w, uint64_t parent, const char *name)
{
	size_t desc;
	uint64_t uuid = desc_begin(w, parent, name, &desc);

	if (!uuid)
		return 0;
	pb_uint(&w->pb, F_TD_MERGE, MERGE_NONE);
	desc_end(w, desc);
	return uuid;
}

uint64_t pf_track_counter(struct pf_writer *w, uint64_t parent, const char *name,
			  enum pf_counter_unit unit)
{
	size_t desc, counter;
	uint64_t uuid = desc_begin(w, parent, name, &desc);

	if (!uuid)
		return 0;
	counter = pb_begin(&w->pb, F_TD_COUNTER);
	pb_uint(&w->pb, F_CD_UNIT, (uint64_t)unit);
	pb_end(&w->pb, counter);
	desc_end(w, desc);
	return uuid;
}

/* ---- track events ---- */

/* An event's strings as they will be written. */
struct event_refs {
	struct str_ref name, cat;
	struct str_ref args[PF_MAX_ARGS], values[PF_MAX_ARGS]; /* names; string values */
	int nargs;
};

static void write_entry(struct pb *b, uint32_t field, const struct str_ref *r)
{
	size_t entry;

	if (!r->is_new)
		return;
	entry = pb_begin(b, field);
	pb_uint(b, F_ENTRY_IID, r->iid);
	pb_bytes(b, F_ENTRY_NAME, r->s, r->len);
	pb_end(b, entry);
}

/* Definitions of the strings this packet uses first on its sequence; the
 * reader applies interned_data before the packet's payload. */
static void write_interned(struct pb *b, const struct event_refs *r)
{
	bool any = r->name.is_new || r->cat.is_new;
	size_t data;

	for (int i = 0; i < r->nargs && !any; i++)
		any = r->args[i].is_new || r->values[i].is_new;
	if (!any)
		return;
	data = pb_begin(b, F_PKT_INTERNED);
	write_entry(b, F_ID_CATEGORIES, &r->cat);
	write_entry(b, F_ID_NAMES, &r->name);
	for (int i = 0; i < r->nargs; i++) {
		write_entry(b, F_ID_ARG_NAMES, &r->args[i]);
		write_entry(b, F_ID_STRING_VALUES, &r->values[i]);
	}
	pb_end(b, data);
}

static void write_ref(struct pb *b, const struct str_ref *r, uint32_t iid_field,
		      uint32_t inline_field)
{
	if (r->iid)
		pb_uint(b, iid_field, r->iid);
	else if (r->s)
		pb_bytes(b, inline_field, r->s, r->len);
}

static void write_arg(struct pf_writer *w, const struct pf_arg *a, const struct str_ref *name,
		      const struct str_ref *value)
{
	struct pb *b = &w->pb;
	size_t ann = pb_begin(b, F_TE_ARGS);
	uint64_t bits;

	write_ref(b, name, F_DA_NAME_IID, F_DA_NAME);
	switch (a->type) {
	case PF_ARG_INT:
		pb_int(b, F_DA_INT, a->i);
		break;
	case PF_ARG_UINT:
		pb_uint(b, F_DA_UINT, a->u);
		break;
	case PF_ARG_DOUBLE:
		memcpy(&bits, &a->d, sizeof(bits));
		pb_fixed64(b, F_DA_DOUBLE, bits); /* IEEE-754, little endian */
		break;
	case PF_ARG_STR:
		write_ref(b, value, F_DA_STRING_IID, F_DA_STRING);
		break;
	case PF_ARG_BOOL:
		pb_uint(b, F_DA_BOOL, a->b);
		break;
	case PF_ARG_PTR:
		pb_uint(b, F_DA_POINTER, a->ptr);
		break;
	}
	pb_end(b, ann);
}

/* ---- short flow ids ---- */

static bool orphan(const struct pf_writer *w, uint64_t id)
{
	for (uint32_t i = 0; i < w->norphans && i < FLOW_ORPHANS; i++)
		if (w->orphans[i] == id)
			return true;
	return false;
}

/* A flow's short id as it starts or steps (0: it keeps its own). */
static uint32_t flow_open(struct pf_writer *w, uint64_t id)
{
	uint32_t *v;

	if (!id)
		return 0;
	if ((v = hash_get(&w->flows, mix64(id))))
		return *v;
	if (w->flow_next >= INT32_MAX || orphan(w, id) || !(v = hash_add(&w->flows, mix64(id))))
		return 0;
	return *v = ++w->flow_next;
}

bool pf_flow_started(struct pf_writer *w, uint64_t id)
{
	return id && hash_get(&w->flows, mix64(id));
}

/* A flow's short id as it ends, forgotten then (0: it keeps its own). */
static uint32_t flow_close(struct pf_writer *w, uint64_t id)
{
	uint32_t v;

	if (!id || !hash_remove(&w->flows, mix64(id), &v)) {
		if (id)
			w->orphans[w->norphans++ % FLOW_ORPHANS] = id;
		return 0;
	}
	return v;
}

static void write_flows(struct pf_writer *w, bool terminating, const uint64_t *ids, int n)
{
	n = clip_count(w, n, ids, PF_MAX_FLOWS);
	for (int i = 0; i < n; i++) { /* one key each: unpacked */
		uint32_t id = terminating ? flow_close(w, ids[i]) : flow_open(w, ids[i]);

		if (id)
			pb_uint(&w->pb, terminating ? F_TE_TERM_FLOWS_V : F_TE_FLOWS_V, id);
		else
			pb_fixed64(&w->pb, terminating ? F_TE_TERM_FLOWS : F_TE_FLOWS, ids[i]);
	}
}

static void write_track_event(struct pf_writer *w, int type, uint64_t track, uint64_t ts,
			      const struct pf_event *e, const struct pf_arg *args, int nargs)
{
	struct seq *q = pf_seq_for(w, track, ts);
	struct event_refs r;
	size_t te;

	/* An event out of order is stamped in full; once the events in a row
	 * that were have cost what starting over would (a new sequence, its
	 * strings defined again), the track starts over on a new sequence. */
	q->behind = q != &w->main_seq && ts < q->last_ts ? q->behind + 1 : 0;
	if (q->behind * FULL_TS_EXTRA > 64 + q->defined_bytes)
		q = pf_seq_restart(w, q, ts);

	/* Interned first: the packet's InternedData must precede its event. */
	ref_resolve(w, q, TAB_NAME, e ? e->name : NULL, &r.name);
	ref_resolve(w, q, TAB_CAT, e ? e->category : NULL, &r.cat);
	r.nargs = clip_count(w, nargs, args, PF_MAX_ARGS);
	for (int i = 0; i < r.nargs; i++) {
		ref_resolve(w, q, TAB_ARG, args[i].name, &r.args[i]);
		ref_resolve(w, q, TAB_STRVAL, args[i].type == PF_ARG_STR ?
			    (args[i].s ? args[i].s : "") : NULL, &r.values[i]);
	}
	pf_packet_begin_on(w, q->id, q == &w->main_seq ? SEQ_NEEDS_INCREMENTAL_STATE : 0);
	pf_put_ts(w, q, ts);
	write_interned(&w->pb, &r);
	te = pb_begin(&w->pb, F_PKT_TRACK_EVENT);
	pb_uint(&w->pb, F_TE_TYPE, (uint64_t)type);
	if (q == &w->main_seq)
		pb_uint(&w->pb, F_TE_TRACK, track);
	write_ref(&w->pb, &r.name, F_TE_NAME_IID, F_TE_NAME);
	write_ref(&w->pb, &r.cat, F_TE_CAT_IIDS, F_TE_CATEGORIES);
	for (int i = 0; i < r.nargs; i++)
		write_arg(w, &args[i], &r.args[i], &r.values[i]);
	if (e) {
		write_flows(w, false, e->flows, e->nflows);
		write_flows(w, true, e->term_flows, e->nterm);
	}
	pb_end(&w->pb, te);
	pf_packet_end(w);
}

void pf_slice_begin(struct pf_writer *w, const struct pf_event *e)
{
	if (w && e)
		write_track_event(w, TE_SLICE_BEGIN, e->track, e->ts, e, e->args, e->nargs);
}

/* No name: an END that names its slice makes trace_processor search the
 * stack by name instead of closing the innermost slice. */
void pf_slice_end(struct pf_writer *w, const struct pf_event *e)
{
	struct pf_event end;

	if (!w || !e)
		return;
	end = *e;
	end.name = end.category = NULL;
	write_track_event(w, TE_SLICE_END, end.track, end.ts, &end, end.args, end.nargs);
}

void pf_instant(struct pf_writer *w, const struct pf_event *e)
{
	if (w && e)
		write_track_event(w, TE_INSTANT, e->track, e->ts, e, e->args, e->nargs);
}

void pf_counter(struct pf_writer *w, uint64_t track, uint64_t ts, int64_t value)
{
	struct seq *q;
	size_t te;

	if (!w)
		return;
	q = pf_seq_for(w, track, ts);
	pf_packet_begin_on(w, q->id, q == &w->main_seq ? SEQ_NEEDS_INCREMENTAL_STATE : 0);
	pf_put_ts(w, q, ts);
	te = pb_begin(&w->pb, F_PKT_TRACK_EVENT);
	pb_uint(&w->pb, F_TE_TYPE, TE_COUNTER);
	if (q == &w->main_seq)
		pb_uint(&w->pb, F_TE_TRACK, track);
	pb_int(&w->pb, F_TE_COUNTER, value);
	pb_end(&w->pb, te);
	pf_packet_end(w);
}
