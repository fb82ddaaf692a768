// SPDX-License-Identifier: BSD-2-Clause
/* Records to their consumers. See route.h. */
#include "record/route.h"

#include <stdlib.h>

#include "record/gpu_calls.h"
#include "record/gpu_timeline.h"
#include "record/memtrack.h"
#include "record/pystack.h"
#include "record/samples.h"

struct route {
	struct join *join;
	struct decoders dec;
	struct route_counts counts;
};

struct route *route_new(struct pf_writer *w, struct op_table *ops, bool entries_only)
{
	struct route *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	/* The decoders name their tracks under join's process tracks. */
	r->join = join_new(w, ops, entries_only, &r->dec);
	if (r->join) {
		r->dec.calls = gpu_state_new(w, join_process_track, r->join);
		r->dec.timeline = gpu_timeline_new(w, join_process_track, r->join);
		r->dec.mem = mem_state_new(w, join_process_track, r->join);
		r->dec.py = pystack_new();
		r->dec.samples = r->dec.py ? sample_view_new(w, r->dec.py) : NULL;
	}
	if (!r->join || !r->dec.calls || !r->dec.timeline || !r->dec.mem || !r->dec.py ||
	    !r->dec.samples) {
		route_free(r);
		return NULL;
	}
	return r;
}

void route_free(struct route *r)
{
	if (!r)
		return;
	join_free(r->join);
	gpu_state_free(r->dec.calls);
	gpu_timeline_free(r->dec.timeline);
	mem_state_free(r->dec.mem);
	sample_view_free(r->dec.samples);
	pystack_free(r->dec.py);
	free(r);
}

/* Records that belong to no thread's frames; true if e was one. */
static bool route_unthreaded(struct route *r, const struct ptbpf_event *e, uint64_t size)
{
	const struct decoders *d = &r->dec;
	bool named = size >= sizeof(struct ptbpf_named_event);

	switch (e->kind) {
	case EV_PROC_EXIT:
		join_process_gone(r->join, e->pid, e->ts);
		sample_view_process_gone(d->samples, (int)e->pid);
		return true;
	case EV_EXEC:
		join_process_exec(r->join, e->pid, e->ts);
		return true;
	case EV_FORK: /* the loop attaches the child (-f) */
		return true;
	case EV_OPS_NO_RING:
		join_ops_no_ring(r->join, e->pid, e->ts, e->arg[0], e->arg[1]);
		return true;
	/* The agent's records come from its own thread (no thread track);
	 * a graph node's from the job thread that made it, for the op there. */
	case EV_AGENT_RECORD:
		if (size < sizeof(struct ptbpf_agent_event))
			return false;
		if (e->id == AGENT_REC_GRAPH_NODE)
			join_graph_node(r->join, (const void *)e);
		else if (e->id == AGENT_REC_GRAPH_KEPT)
			gpu_timeline_graph_kept(d->timeline, (const void *)e);
		else
			gpu_timeline_record(d->timeline, (const void *)e);
		return true;
	case EV_LONG_NAME_KERNEL:
		if (size >= sizeof(struct ptbpf_long_name))
			gpu_timeline_kernel_name(d->timeline, (const void *)e);
		return size >= sizeof(struct ptbpf_long_name);
	case EV_NAMED_AGENT_STATUS:
		if (named)
			gpu_timeline_status(d->timeline, (const void *)e, size);
		return named;
	case EV_AGENT_DROPPED:
		gpu_timeline_dropped(d->timeline, e);
		return true;
	case EV_NAMED_GPU_NAME:
		if (named)
			gpu_note_name(d->calls, (const void *)e);
		return true;
	case EV_CPU_SAMPLE:
		sample_view_record(d->samples, e, size);
		return true;
	case EV_PY_CODE: /* names for later stacks */
		pystack_code(d->py, (const void *)e, size);
		sample_view_code_named(d->samples);
		return true;
	case EV_NAMED_NODE_TYPE:
		if (named)
			join_node_type(r->join, (const void *)e);
		return true;
	default:
		return false;
	}
}

int route_event(struct route *r, const void *data, uint64_t size)
{
	const struct ptbpf_event *e = data;

	if (size < sizeof(*e) || e->kind >= EV_KIND_MAX)
		return 0;
	r->counts.by_kind[e->kind]++;
	if (e->ts > r->counts.last_ts)
		r->counts.last_ts = e->ts;
	if (route_unthreaded(r, e, size))
		return 0;
	if (e->kind == EV_MEM) /* the device's counters; join: the op's bytes */
		mem_event(r->dec.mem, e);
	return join_thread_event(r->join, data, size);
}

void route_finish(struct route *r, uint64_t ts)
{
	join_finish(r->join, ts > r->counts.last_ts ? ts : r->counts.last_ts);
}

const struct route_counts *route_counts(const struct route *r)
{
	return &r->counts;
}

struct join *route_join(const struct route *r)
{
	return r->join;
}

const struct decoders *route_decoders(const struct route *r)
{
	return &r->dec;
}
