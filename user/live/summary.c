// SPDX-License-Identifier: BSD-2-Clause
/*
 * What a capture recorded and lost: the status line while it runs, the
 * summary on stderr at the end, and the same counts in the trace (every
 * lost event counted, per cause). See session.h.
 */
#define _GNU_SOURCE
#include "live/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "lib/log.h"
#include "lib/yield.h"
#include "attach/gpu_probes.h"
#include "record/gpu_calls.h"
#include "record/gpu_timeline.h"
#include "record/inductor.h"
#include "record/route.h"
#include "record/memtrack.h"
#include "record/ops_ring.h"
#include "record/samples.h"
#include "record/sched.h"
#include "attach/sched_probes.h"
#include "trace/perfetto.h"

void summary_status_line(struct session *s, uint64_t *last_events, uint64_t *last_ns)
{
	uint64_t st[STAT_MAX], t = clock_mono_ns();
	double secs = (t - *last_ns) / 1e9;

	session_stats(s, st);
	if (s->lost_track)
		pf_counter(s->w, s->lost_track, t, (int64_t)session_lost(st));
	if (log_verbose() || isatty(2)) {
		log_more("%s", isatty(2) ? "\r" : "");
		log_msg("%.0f events/s, %lu lost, %.1f MB written%s",
			(st[STAT_SENT] - *last_events) / secs, (unsigned long)session_lost(st),
			pf_bytes_written(s->w) / 1e6, isatty(2) ? "   " : "\n");
	}
	*last_events = st[STAT_SENT];
	*last_ns = t;
}

/* The loader's own peak RSS in kB: VmHWM, not getrusage's ru_maxrss, which
 * keeps the parent's RSS at fork across the exec (a large Python that runs
 * ptbpf would be counted as ptbpf's). */
static long own_peak_rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (kb < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld", &kb) != 1)
			kb = -1;
	fclose(f);
	return kb;
}

/* ptbpf's own footprint, for the benchmarks and for the curious. */
static void print_own_cost(const struct session *s)
{
	long kb = own_peak_rss_kb();

	if (kb < 0)
		return;
	log_msg("loader peak RSS %.1f MB, CPU %.2f s in all, %.2f s while tracing\n",
		kb / 1024.0, cpu_seconds(), cpu_seconds() - s->cpu_at_trace_start);
	if (s->yielded) {
		uint64_t reads, own;

		yield_counts(&reads, &own);
		log_msg("reader: %lu of %lu reads at SCHED_IDLE (on CPU the job left), %lu at its "
			"own priority (behind: records piled up)\n", (unsigned long)(reads - own),
			(unsigned long)reads, (unsigned long)own);
	}
}

static const char *const cost_names[COST_MAX] = {
	[COST_PROBES] = "probes and the agent's points", [COST_SCHED] = "kernel view",
	[COST_SAMPLES] = "CPU samples",
};

/* Whether --bpf-stats part i ran in this capture (--no-sched, --no-samples). */
static bool cost_part_ran(const struct session *s, int i)
{
	return (i != COST_SCHED || s->sched) && (i != COST_SAMPLES || s->samples);
}

/* --bpf-stats: the kernel's count of ptbpf's programs' runs and time,
 * and their time as a share of one CPU over the time it was counted
 * (what they took from the machine; from the traced job at most that,
 * besides the breakpoints' and tracepoints' own cost, not in it). */
static void print_bpf_cost(const struct session *s)
{
	double secs = (s->stats_to - s->stats_from) / 1e9;
	uint64_t ns = 0;

	if (!s->stats_to) /* not asked for, or never switched on */
		return;
	log_msg("BPF programs' own time (--bpf-stats, the kernel's count):");
	for (int i = 0; i < COST_MAX; i++) {
		const struct bpf_cost *c = &s->cost[i];

		if (!cost_part_ran(s, i))
			continue;
		log_more(" %s %lu runs, %.1f ms (%.0f ns a run);", cost_names[i],
			 (unsigned long)c->runs, c->ns / 1e6, c->runs ? (double)c->ns / c->runs : 0.0);
		ns += c->ns;
	}
	log_more(" in all %.1f ms, %.3f%% of one CPU over the %.1f s counted\n", ns / 1e6,
		 secs > 0 ? ns / 1e7 / secs : 0.0, secs);
}

/* Triton kernels' sources, from Inductor's output code (record/inductor.h). */
static void print_triton(const struct session *s)
{
	const struct inductor_counts *c =
		inductor_counts(gpu_timeline_inductor(s->dec->timeline));

	if (!c->names)
		return;
	log_msg("Triton kernels: %lu of %lu names with the ATen ops they fuse (aten_ops, "
		"source_nodes), from %lu modules of Inductor's output code%s\n",
		(unsigned long)c->found, (unsigned long)c->names, (unsigned long)c->modules,
		c->found < c->names ? "; the others are no Inductor kernel of the job's cache "
		"(TORCHINDUCTOR_CACHE_DIR, else /tmp/torchinductor_USER)" : "");
	if (c->modules_skipped)
		log_warn("%lu files of Inductor's cache not read: another user's, over 16 MB, "
			 "or past 16384 modules or 256 MB\n", (unsigned long)c->modules_skipped);
}

static void print_device(const struct session *s)
{
	const struct gpu_timeline_counts *d = gpu_timeline_counts(s->dec->timeline);

	if (!d->kernels && !d->memcpys && !d->memsets && !d->launch_flows)
		return;
	log_msg("GPU timeline (agent): kernels %lu, memcpys %lu, memsets %lu, "
		"launch->kernel correlations %lu, dropped by CUPTI %lu\n",
		(unsigned long)d->kernels, (unsigned long)d->memcpys, (unsigned long)d->memsets,
		(unsigned long)d->launch_flows, (unsigned long)d->cupti_dropped);
	if (d->graph_kernels || d->graph_nodes || d->graph_nodes_kept)
		log_msg("CUDA graphs: %lu replayed kernels, %lu of them joined to their capture "
			"(%lu under the op that captured them, %lu captured outside any op; %lu "
			"nodes captured while traced, %lu kept by the always-on layer, %lu kernels "
			"joined through those%s); %lu kernels of %lu graphs captured before "
			"ptbpf attached, without their op\n",
			(unsigned long)d->graph_kernels, (unsigned long)d->graph_kernels_joined,
			(unsigned long)(d->graph_kernels_joined - d->graph_kernels_no_op),
			(unsigned long)d->graph_kernels_no_op, (unsigned long)d->graph_nodes,
			(unsigned long)d->graph_nodes_kept, (unsigned long)d->graph_kernels_kept,
			d->graph_nodes_not_kept ? "; some past the map's room" : "",
			(unsigned long)d->graph_kernels_before, (unsigned long)d->graphs_before);
	print_triton(s);
	if (d->overlapping_not_laned)
		log_warn("%lu GPU activities overlap others on every lane of their stream's track "
			 "(written there anyway: the UI may nest them wrongly)\n",
			 (unsigned long)d->overlapping_not_laned);
}

/* CUDA graphs' replayed kernels, and those whose capture ptbpf did not see. */
static void write_graph_counts(const struct session *s)
{
	const struct gpu_timeline_counts *d = gpu_timeline_counts(s->dec->timeline);

	if (!d->graph_kernels && !d->graph_nodes && !d->graph_nodes_kept)
		return;
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_nodes_captured", (int64_t)d->graph_nodes);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_nodes_kept", (int64_t)d->graph_nodes_kept);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_kernels_joined_by_kept_map",
			  (int64_t)d->graph_kernels_kept);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_nodes_not_kept", (int64_t)d->graph_nodes_not_kept);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_kernels", (int64_t)d->graph_kernels);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_kernels_joined", (int64_t)d->graph_kernels_joined);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_kernels_captured_outside_ops",
			  (int64_t)d->graph_kernels_no_op);
	pf_trace_attr_int(s->w, "dev.ptbpf.graph_kernels_captured_before_attach",
			  (int64_t)d->graph_kernels_before);
	pf_trace_attr_int(s->w, "dev.ptbpf.graphs_captured_before_attach",
			  (int64_t)d->graphs_before);
}

static void print_gpu_calls(const struct session *s)
{
	const struct gpu_state *g = s->dec->calls;
	const struct join_counts *c = join_counts(s->join);
	bool any = false;

	for (unsigned i = 0; i < gpu_napis; i++) {
		if (!gpu_calls_of(g, i))
			continue;
		if (!any)
			log_msg("GPU API calls:");
		log_more("%s %s %lu", any ? "," : "", gpu_apis[i].name,
			 (unsigned long)gpu_calls_of(g, i));
		any = true;
	}
	if (any)
		log_more("; op->launch flows %lu\n", (unsigned long)c->launch_flows);
	print_device(s);
}

/* Records by kind, as the summary names them. */
static const char *const kind_names[EV_KIND_MAX] = {
	[EV_OP_BEGIN] = "op begin", [EV_OP_END] = "op end", [EV_UNWIND] = "catch",
	[EV_BWD_BEGIN] = "backward begin", [EV_BWD_END] = "backward end",
	[EV_SEQ] = "autograd seq", [EV_USER_END] = "region end",
	[EV_THREAD_EXIT] = "thread exit", [EV_PROC_EXIT] = "process exit",
	[EV_FORK] = "fork", [EV_NAMED_USER_BEGIN] = "region begin",
	[EV_NAMED_NODE_TYPE] = "node class", [EV_GPU_CALL] = "GPU call",
	[EV_GPU_RET] = "GPU return", [EV_NAMED_GPU_NAME] = "GPU name lookup",
	[EV_AGENT_CORR] = "launch correlation", [EV_AGENT_RECORD] = "GPU record",
	[EV_AGENT_DROPPED] = "CUPTI drop report", [EV_NAMED_AGENT_STATUS] = "agent status",
	[EV_LONG_NAME_KERNEL] = "kernel name", [EV_NAMED_RF_BEGIN] = "op begin (agent)",
	[EV_RF_END] = "op end (agent)", [EV_RPC] = "rpc message", [EV_MEM] = "memory record",
	[EV_PY_STACK] = "python stack", [EV_PY_CODE] = "python code object",
	[EV_OPS_GAP] = "agent ring gap", [EV_OPS_NO_RING] = "agent no free ring",
	[EV_EXEC] = "exec", [EV_CPU_SAMPLE] = "cpu sample",
};

/* Every record the agents wrote is read or went unread with its process;
 * what they could not write is counted apart, and so are the ops (BEGIN
 * records) among each. */
static void print_op_rings(const struct session *s, const struct ops_ring_counts *o)
{
	uint64_t ops_lost = o->begins_dropped + o->begins_no_slot + o->begins_unread;

	log_msg("agent op rings: written %lu = read %lu + gone unread %lu (%lu exit chunks)%s; "
		"not written: %lu (ring full %lu, no free ring %lu); ops: read %lu, lost %lu (ring "
		"full %lu, no free ring %lu, gone unread %lu); malformed %lu; processes gone "
		"without a last copy %lu; sequence numbers %s\n",
		(unsigned long)o->written, (unsigned long)o->records, (unsigned long)o->unread,
		(unsigned long)s->exit_chunks, o->written == o->records + o->unread ? "" :
		o->lost_at_exit ? " (the rest went with processes gone)" : " MISMATCH",
		(unsigned long)(o->dropped + o->no_slot), (unsigned long)o->dropped,
		(unsigned long)o->no_slot, (unsigned long)o->begins, (unsigned long)ops_lost,
		(unsigned long)o->begins_dropped, (unsigned long)o->begins_no_slot,
		(unsigned long)o->begins_unread, (unsigned long)o->bad,
		(unsigned long)o->lost_at_exit, o->layout_ok ? "read" : "NOT read "
		"(unexpected RecordFunction layout: no forward->backward flows)");
	if (o->clock_tsc)
		log_msg("op timestamps: from the TSC in %d process%s (its line checked against "
			"CLOCK_MONOTONIC %lu times: largest difference %lu ns, set anew %lu times)"
			"%s\n", o->clock_tsc, o->clock_tsc == 1 ? "" : "es",
			(unsigned long)o->clock_checks, (unsigned long)o->clock_max_err_ns,
			(unsigned long)o->clock_steps, ops_rings_count(s->opsr) > o->clock_tsc ?
			", from clock_gettime in the others" : "");
}

/* CPU samples: what reached the trace, and how well it is named. */
static void print_samples(const struct session *s, const uint64_t st[STAT_MAX])
{
	const struct sample_counts *c = sample_view_counts(s->dec->samples);

	log_msg("CPU samples (%u Hz): %lu in the trace, lost %lu; with Python frames %lu "
		"(unnamed Python frames %lu); native frames %lu, in named functions %lu\n",
		s->opt.sample_hz, (unsigned long)c->samples,
		(unsigned long)st[STAT_DROP_CPU_SAMPLE], (unsigned long)c->with_python,
		(unsigned long)c->py_unnamed, (unsigned long)c->native_frames,
		(unsigned long)c->native_named);
}

void summary_print(struct session *s, const uint64_t st[STAT_MAX])
{
	const struct join_counts *c = join_counts(s->join);
	const struct route_counts *rc = route_counts(s->route);
	struct op_stat top[10];
	int ntop = join_top_ops(s->join, top, 10);
	uint64_t total = 0;

	log_msg("events by kind:");
	for (int k = 0; k < EV_KIND_MAX; k++) {
		if (!rc->by_kind[k])
			continue;
		log_more(" %s %lu,", kind_names[k], (unsigned long)rc->by_kind[k]);
		total += rc->by_kind[k];
	}
	log_more(" total %lu\n", (unsigned long)total);
	/* Every record a BPF program emitted is received or counted lost. */
	log_msg("BPF ring: sent %lu = received %lu + lost %lu (ring full %lu, named "
		"ring full %lu, GPU ring full %lu, agent ring full %lu, op rings at exit %lu, python "
		"stacks %lu, python code objects %lu, rpc %lu, cpu samples %lu)%s; unreadable names "
		"%lu\n",
		(unsigned long)st[STAT_SENT], (unsigned long)s->received,
		(unsigned long)session_lost(st), (unsigned long)st[STAT_DROP_RINGBUF_FULL],
		(unsigned long)st[STAT_DROP_NAME_FULL], (unsigned long)st[STAT_DROP_GPU_FULL],
		(unsigned long)st[STAT_DROP_AGENT_FULL], (unsigned long)st[STAT_DROP_OPS_EXIT],
		(unsigned long)st[STAT_DROP_PY_STACK], (unsigned long)st[STAT_DROP_PY_CODE],
		(unsigned long)st[STAT_DROP_RPC_FULL], (unsigned long)st[STAT_DROP_CPU_SAMPLE],
		st[STAT_SENT] == s->received + session_lost(st) ? "" : " MISMATCH",
		(unsigned long)st[STAT_NAME_FAULT]);
	if (s->opsr)
		print_op_rings(s, ops_rings_counts(s->opsr));
	print_gpu_calls(s);
	if (s->samples)
		print_samples(s, st);
	if (s->opt.py_stacks)
		log_msg("python stacks: %lu on slices, %lu without Python frames\n",
			(unsigned long)c->py_stacks, (unsigned long)c->py_stacks_empty);
	if (s->opt.memory) {
		uint64_t peak_a, peak_r, n;

		mem_peaks(s->dec->mem, &peak_a, &peak_r, &n);
		log_msg("memory: %lu allocator records; peak allocated %.1f MiB, "
			"peak reserved %.1f MiB\n", (unsigned long)n, peak_a / 1048576.0,
			peak_r / 1048576.0);
	}
	log_msg("slices %lu; unwound by exceptions %lu, cut by exit %lu, cut by "
		"exec %lu, open at stop %lu, cut where records were lost %lu, end not seen %lu, end "
		"without its begin %lu, too deep %lu; steps %lu, forward->backward flows %lu, rpc flows "
		"%lu; records of threads past the thread table's limit %lu\n",
		(unsigned long)c->frames, (unsigned long)c->unwound, (unsigned long)c->cut_by_exit,
		(unsigned long)c->cut_by_exec, (unsigned long)c->cut_at_stop,
		(unsigned long)c->cut_by_loss,
		(unsigned long)c->end_missed,
		(unsigned long)c->end_unmatched, (unsigned long)c->too_deep,
		(unsigned long)c->steps, (unsigned long)c->bwd_flows, (unsigned long)c->rpc_flows,
		(unsigned long)c->no_thread);
	if (c->rpc_calls || c->rpc_handled || c->rpc_unmatched || c->rpc_not_drawn)
		log_msg("rpc: calls %lu, requests handled %lu, flows %lu; responses and failures of "
			"calls begun before tracing %lu; calls not drawn (past the limits) %lu\n",
			(unsigned long)c->rpc_calls, (unsigned long)c->rpc_handled,
			(unsigned long)c->rpc_flows, (unsigned long)c->rpc_unmatched,
			(unsigned long)c->rpc_not_drawn);
	if (ntop)
		log_msg("top ops by host time (inclusive):\n"
			"  %-40s %10s %12s %12s\n", "op", "calls", "total ms", "self ms");
	for (int i = 0; i < ntop; i++)
		log_more("  %-40s %10lu %12.3f %12.3f\n", s->ops.name[top[i].op],
			(unsigned long)top[i].calls, top[i].total_ns / 1e6, top[i].self_ns / 1e6);
	print_own_cost(s);
	print_bpf_cost(s);
}

/* --bpf-stats in the trace: each part's runs and run time. */
static void write_bpf_cost(struct session *s)
{
	static const char *const keys[COST_MAX][2] = {
		[COST_PROBES] = { "dev.ptbpf.bpf_runs_probes", "dev.ptbpf.bpf_run_ns_probes" },
		[COST_SCHED] = { "dev.ptbpf.bpf_runs_sched", "dev.ptbpf.bpf_run_ns_sched" },
		[COST_SAMPLES] = { "dev.ptbpf.bpf_runs_samples", "dev.ptbpf.bpf_run_ns_samples" },
	};

	if (!s->opt.bpf_stats)
		return;
	for (int i = 0; i < COST_MAX; i++) {
		if (!cost_part_ran(s, i))
			continue;
		pf_trace_attr_int(s->w, keys[i][0], (int64_t)s->cost[i].runs);
		pf_trace_attr_int(s->w, keys[i][1], (int64_t)s->cost[i].ns);
	}
}

void summary_write_counters(struct session *s, const uint64_t st[STAT_MAX])
{
	const struct join_counts *c = join_counts(s->join);

	/* now, not the last event's time: the status line wrote this counter
	 * at wall-clock times already. */
	pf_counter(s->w, s->lost_track, clock_mono_ns(), (int64_t)session_lost(st));
	pf_trace_attr_int(s->w, "dev.ptbpf.events_sent", (int64_t)st[STAT_SENT]);
	pf_trace_attr_int(s->w, "dev.ptbpf.events_received", (int64_t)s->received);
	pf_trace_attr_int(s->w, "dev.ptbpf.events_lost", (int64_t)session_lost(st));
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_ringbuf_full", (int64_t)st[STAT_DROP_RINGBUF_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_named_ringbuf_full",
			  (int64_t)st[STAT_DROP_NAME_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_gpu_ringbuf_full", (int64_t)st[STAT_DROP_GPU_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_agent_ringbuf_full",
			  (int64_t)st[STAT_DROP_AGENT_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_py_stacks", (int64_t)st[STAT_DROP_PY_STACK]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_py_code_objects", (int64_t)st[STAT_DROP_PY_CODE]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_rpc_records", (int64_t)st[STAT_DROP_RPC_FULL]);
	if (s->samples) {
		pf_trace_attr_int(s->w, "dev.ptbpf.cpu_sample_hz", (int64_t)s->opt.sample_hz);
		pf_trace_attr_int(s->w, "dev.ptbpf.cpu_samples",
				  (int64_t)sample_view_counts(s->dec->samples)->samples);
		pf_trace_attr_int(s->w, "dev.ptbpf.lost_cpu_samples",
				  (int64_t)st[STAT_DROP_CPU_SAMPLE]);
	}
	write_bpf_cost(s);
	pf_trace_attr_int(s->w, "dev.ptbpf.rpc_calls", (int64_t)c->rpc_calls);
	pf_trace_attr_int(s->w, "dev.ptbpf.rpc_requests_handled", (int64_t)c->rpc_handled);
	pf_trace_attr_int(s->w, "dev.ptbpf.rpc_unmatched", (int64_t)c->rpc_unmatched);
	pf_trace_attr_int(s->w, "dev.ptbpf.rpc_calls_not_drawn", (int64_t)c->rpc_not_drawn);
	pf_trace_attr_int(s->w, "dev.ptbpf.cupti_dropped",
			  (int64_t)gpu_timeline_counts(s->dec->timeline)->cupti_dropped);
	pf_trace_attr_int(s->w, "dev.ptbpf.gpu_activities_overlapping_not_laned",
			  (int64_t)gpu_timeline_counts(s->dec->timeline)->overlapping_not_laned);
	write_graph_counts(s);
	if (s->opsr) {
		const struct ops_ring_counts *o = ops_rings_counts(s->opsr);

		pf_trace_attr_int(s->w, "dev.ptbpf.ops_written", (int64_t)o->written);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_records", (int64_t)o->records);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_ring_full", (int64_t)o->dropped);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_no_free_ring", (int64_t)o->no_slot);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_gone_unread", (int64_t)o->unread);
		pf_trace_attr_int(s->w, "dev.ptbpf.op_begins_read", (int64_t)o->begins);
		pf_trace_attr_int(s->w, "dev.ptbpf.op_begins_lost_ring_full",
				  (int64_t)o->begins_dropped);
		pf_trace_attr_int(s->w, "dev.ptbpf.op_begins_lost_no_free_ring",
				  (int64_t)o->begins_no_slot);
		pf_trace_attr_int(s->w, "dev.ptbpf.op_begins_lost_gone_unread",
				  (int64_t)o->begins_unread);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_exit_probe_ring_full",
				  (int64_t)st[STAT_DROP_OPS_EXIT]);
		pf_trace_attr_int(s->w, "dev.ptbpf.op_clock_tsc_processes", o->clock_tsc);
		pf_trace_attr_int(s->w, "dev.ptbpf.op_clock_max_difference_ns",
				  (int64_t)o->clock_max_err_ns);
	}
	if (s->opt.daemon) {
		pf_trace_attr_str(s->w, "dev.ptbpf.window_end", s->win.stopped_why[0] ? s->win.stopped_why :
				  "full window");
		pf_trace_attr_int(s->w, "dev.ptbpf.window_s", (int64_t)s->opt.window_s);
		pf_trace_attr_str(s->w, "dev.ptbpf.trigger", s->win.trigger ?
				  capture_source_name(s->win.trigger->source) : "schedule");
		if (s->win.trigger)
			pf_trace_attr_str(s->w, "dev.ptbpf.trigger_reason", s->win.trigger->reason);
		pf_trace_attr_int(s->w, "dev.ptbpf.estimated_cost_us",
				  (int64_t)(budget_cost_s(s) * 1e6));
	}
	pf_trace_attr_int(s->w, "dev.ptbpf.frames_unwound", (int64_t)c->unwound);
	pf_trace_attr_int(s->w, "dev.ptbpf.frames_end_not_seen", (int64_t)c->end_missed);
	pf_trace_attr_int(s->w, "dev.ptbpf.records_past_thread_limit", (int64_t)c->no_thread);
	pf_clock_snapshot(s->w);
}

/* The kernel view: every record its programs sent is received or counted
 * lost, by cause; runs the kernel skipped never made one. */
void summary_print_sched(struct session *s, const uint64_t sst[SCHED_STAT_MAX])
{
	const struct sched_counts *c = sched_view_counts(s->schedv);
	const struct offcpu_counts *o = sched_view_offcpu(s->schedv);
	const char *missing = sched_probes_missing(s->sched);
	uint64_t lost = sched_probes_lost(sst);

	log_msg("kernel view: switches %lu (%lu replayed, %lu of them untimed; %lu the kernel did "
		"not report, %lu of them placed by a CPU sample), wakeups %lu; "
		"blocking system calls %lu "
		"(%lu still blocked at the end, %lu blocked since before tracing, %lu of them with "
		"their Python stack), blocked in page "
		"faults %lu (%lu not drawn: read after a later call's end), preempted "
		"%lu; page faults of the traced threads: minor %lu, major %lu; on CPU in page "
		"faults: %.1f ms in %lu stretches drawn, %.1f ms in %lu shorter than %d us not "
		"drawn%s; block I/O requests "
		"%lu (%.1f MB; not drawn: %lu past a thread's 8 at once, %lu past the in-flight "
		"table, %lu still in flight at the end)%s\n",
		(unsigned long)c->switches,
		(unsigned long)c->replayed, (unsigned long)c->untimed, (unsigned long)c->unseen,
		(unsigned long)c->unseen_sampled, (unsigned long)c->wakings,
		(unsigned long)o->syscalls, (unsigned long)o->unfinished, (unsigned long)o->before,
		(unsigned long)o->before_py, (unsigned long)o->faults,
		(unsigned long)o->faults_undrawn,
		(unsigned long)o->preempted, (unsigned long)o->minor,
		(unsigned long)o->major, o->fault_run_ns / 1e6, (unsigned long)o->fault_runs,
		sst[SCHED_FAULTS_SHORT_NS] / 1e6, (unsigned long)sst[SCHED_FAULTS_SHORT],
		SCHED_FAULTS_MIN_US, strstr(missing, "rss_stat") || strstr(missing, "page_fault_user") ?
		" (not timed: a tracepoint is missing)" : "", (unsigned long)o->block_io,
		o->block_bytes / 1e6,
		(unsigned long)o->block_undrawn, (unsigned long)sst[SCHED_BLOCK_UNTRACKED],
		(unsigned long)sched_probes_block_in_flight(s->sched),
		strstr(missing, "block_io") ? " (not traced: no tracepoint)" : "");
	log_msg("kernel view ring: sent %lu = received %lu + lost %lu (switches %lu, wakeups %lu, "
		"system calls %lu, block I/O %lu, stretches of faults %lu)%s; runs the kernel "
		"skipped (nested) %lu; threads without state %lu; CPU bundles %lu, %lu marked as "
		"after a loss; malformed %lu%s%s\n",
		(unsigned long)sst[SCHED_STAT_SENT], (unsigned long)s->sched_received,
		(unsigned long)lost, (unsigned long)sst[SCHED_DROP_SWITCH],
		(unsigned long)sst[SCHED_DROP_WAKING], (unsigned long)sst[SCHED_DROP_SYSCALL],
		(unsigned long)sst[SCHED_DROP_BLOCK], (unsigned long)sst[SCHED_DROP_FAULTS],
		sst[SCHED_STAT_SENT] == s->sched_received + lost ? "" : " MISMATCH",
		(unsigned long)sched_probes_missed(s->sched),
		(unsigned long)(sst[SCHED_NO_THREAD_STATE] + o->no_thread),
		(unsigned long)c->bundles, (unsigned long)c->cpus_lost, (unsigned long)c->bad,
		missing[0] ? "; no tracepoint " : "", missing);
}

void summary_write_sched(struct session *s, const uint64_t sst[SCHED_STAT_MAX])
{
	const struct sched_counts *c = sched_view_counts(s->schedv);
	const struct offcpu_counts *o = sched_view_offcpu(s->schedv);
	const struct { const char *key; uint64_t v; } attrs[] = {
		{ "dev.ptbpf.sched_sent", sst[SCHED_STAT_SENT] },
		{ "dev.ptbpf.sched_received", s->sched_received },
		{ "dev.ptbpf.sched_lost", sched_probes_lost(sst) },
		{ "dev.ptbpf.sched_lost_switch_ringbuf_full", sst[SCHED_DROP_SWITCH] },
		{ "dev.ptbpf.sched_lost_waking_ringbuf_full", sst[SCHED_DROP_WAKING] },
		{ "dev.ptbpf.sched_lost_syscall_ringbuf_full", sst[SCHED_DROP_SYSCALL] },
		{ "dev.ptbpf.sched_lost_block_ringbuf_full", sst[SCHED_DROP_BLOCK] },
		{ "dev.ptbpf.sched_block_untracked", sst[SCHED_BLOCK_UNTRACKED] },
		{ "dev.ptbpf.sched_lost_fault_stretch_ringbuf_full", sst[SCHED_DROP_FAULTS] },
		{ "dev.ptbpf.sched_runs_skipped_nested", sched_probes_missed(s->sched) },
		{ "dev.ptbpf.sched_threads_without_state", sst[SCHED_NO_THREAD_STATE] + o->no_thread },
		{ "dev.ptbpf.sched_switches", c->switches },
		{ "dev.ptbpf.sched_switches_unreported", c->unseen },
		{ "dev.ptbpf.sched_switches_unreported_sampled", c->unseen_sampled },
		{ "dev.ptbpf.sched_wakings", c->wakings },
		{ "dev.ptbpf.sched_blocking_syscalls", o->syscalls },
		{ "dev.ptbpf.sched_blocked_before_tracing", o->before },
		{ "dev.ptbpf.sched_blocked_before_tracing_py_stacks", o->before_py },
		{ "dev.ptbpf.sched_fault_blocks", o->faults },
		{ "dev.ptbpf.sched_fault_blocks_undrawn", o->faults_undrawn },
		{ "dev.ptbpf.sched_preempted", o->preempted },
		{ "dev.ptbpf.page_faults_minor", o->minor },
		{ "dev.ptbpf.page_faults_major", o->major },
		{ "dev.ptbpf.fault_stretches_on_cpu", o->fault_runs },
		{ "dev.ptbpf.fault_stretches_on_cpu_ns", o->fault_run_ns },
		{ "dev.ptbpf.fault_stretches_on_cpu_short", sst[SCHED_FAULTS_SHORT] },
		{ "dev.ptbpf.fault_stretches_on_cpu_short_ns", sst[SCHED_FAULTS_SHORT_NS] },
		{ "dev.ptbpf.block_io_requests", o->block_io },
		{ "dev.ptbpf.block_io_bytes", o->block_bytes },
		{ "dev.ptbpf.block_io_undrawn", o->block_undrawn },
		{ "dev.ptbpf.block_io_in_flight_at_end", sched_probes_block_in_flight(s->sched) },
	};

	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		pf_trace_attr_int(s->w, attrs[i].key, (int64_t)attrs[i].v);
	if (sched_probes_missing(s->sched)[0])
		pf_trace_attr_str(s->w, "dev.ptbpf.sched_missing_tracepoint",
				  sched_probes_missing(s->sched));
}
