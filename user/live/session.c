// SPDX-License-Identifier: BSD-2-Clause
/*
 * A live capture's life: BPF objects loaded, the trace opened, the loop
 * (read, attach what appears, stop when asked, when the targets are gone
 * or when time is up), then the agents switched off, everything read,
 * probes removed and the trace completed. See session.h.
 */
#define _GNU_SOURCE
#include "live/session.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <bpf/libbpf.h>

#include "lib/log.h"
#include "lib/yield.h"
#include "version.h"
#include "attach/agent_probes.h"
#include "attach/claim.h"
#include "attach/exec_probes.h"
#include "attach/gpu_probes.h"
#include "attach/inject.h"
#include "attach/leaving.h"
#include "attach/probes.h"
#include "attach/sample_probes.h"
#include "attach/sched_probes.h"
#include "offline/gap_track.h"
#include "record/gpu_timeline.h"
#include "record/inductor.h"
#include "record/route.h"
#include "record/ops_ring.h"
#include "record/raw.h"
#include "record/reorder.h"
#include "record/sched.h"
#include "trace/perfetto.h"
#include "ptbpf.skel.h"

/* Without -v, libbpf's own messages are not shown; ptbpf explains errors. */
volatile sig_atomic_t session_exiting;

static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}



void session_stats(struct session *s, uint64_t out[STAT_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t vals[ncpu > 0 ? ncpu : 1];

	for (uint32_t k = 0; k < STAT_MAX; k++) {
		out[k] = 0;
		if (bpf_map__lookup_elem(s->skel->maps.stats, &k, sizeof(k), vals,
					 sizeof(uint64_t) * ncpu, 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
}

uint64_t session_lost(const uint64_t st[STAT_MAX])
{
	return st[STAT_DROP_RINGBUF_FULL] + st[STAT_DROP_NAME_FULL] + st[STAT_DROP_GPU_FULL] +
	       st[STAT_DROP_AGENT_FULL] + st[STAT_DROP_OPS_EXIT] + st[STAT_DROP_PY_STACK] +
	       st[STAT_DROP_PY_CODE] + st[STAT_DROP_RPC_FULL] + st[STAT_DROP_CPU_SAMPLE];
}

/* Nothing read from the op rings for this long, and every agent idles:
 * the reader waits READER_IDLE_MS between reads (a job that idles pays
 * nothing for the reader's wake-ups: 40-60 us of CPU each on the CI VM). */
#define READER_QUIET_NS 300000000ull
#define READER_IDLE_MS  1000
/* Op records in one read that say the reader is behind: it reads again at
 * once, at its own priority (a yielding reader lost records to full rings
 * where 2 threads wrote 1 M records/s each on the CI VM's 2 CPUs). */
#define READER_BEHIND   10000

/*
 * How long the next read may wait. Op rings hold 4 MiB a thread: read
 * every 20 ms, and at once again while a read brings much (a thread
 * writing 2 M records/s fills its ring in about 50 ms); without op rings
 * every 100 ms is enough. Once the rings brought nothing for
 * READER_QUIET_NS and every agent idles, READER_IDLE_MS: the first op
 * record wakes the reader (ptbpf_agent_wake), and the BPF rings wake it
 * at their threshold (the kernel view's records of a quiet job, a
 * thread's few switches, need no reader at once).
 */
static int next_wait(struct session *s, int64_t got, uint64_t *quiet_since, uint64_t due)
{
	uint64_t now = clock_mono_ns();

	if (got > 0) {
		*quiet_since = now;
		return got > READER_BEHIND ? 1 : 20;
	}
	if (now - *quiet_since < READER_QUIET_NS || (s->opsr && !ops_rings_idle(s->opsr)))
		return s->reorder ? 20 : 100;
	/* Not past what is due: the second's bookkeeping (a window's end), -d. */
	if (due <= now)
		return 1;
	return (due - now) / 1000000 < READER_IDLE_MS ? (int)((due - now) / 1000000) + 1 :
							READER_IDLE_MS;
}

int session_loop(struct session *s)
{
	uint64_t start = clock_mono_ns(), last_status = start, last_events = 0, last_scan = start;
	uint64_t deadline = s->opt.duration_s ? start + s->opt.duration_s * 1000000000ull : 0;
	uint64_t quiet_since = start;
	int wait_ms = 20, ret = 0, rings[2], nrings = 0;
	bool behind = false;

	s->cpu_at_trace_start = cpu_seconds();
	rings[nrings++] = bpf_map__fd(s->skel->maps.events);
	if (s->schedv)
		rings[nrings++] = sched_probes_ring_fd(s->sched);
	s->yielded = !yield_watch_start(rings, nrings);

	while (!session_exiting) {
		int64_t got;

		/* Reading, ordering and writing take what CPU the job leaves,
		 * unless the reader is behind; the bookkeeping below (attaches
		 * stop a process) does not. */
		yield_read_begin(behind);
		got = read_pump(s, wait_ms);
		yield_read_end();
		behind = got > READER_BEHIND;

		if (got < 0) {
			log_msg("reading the ring buffer failed: %s; stopping\n", strerror(-got));
			ret = -1;
			break;
		}
		for (int i = 0; i < s->npending; i++)
			targets_add_child(s, s->pending_forks[i]);
		s->npending = 0;
		inject_reap();
		if (!targets_reap(s) && !s->opt.all && !s->find.nmapped) {
			log_more("%s", isatty(2) ? "\n" : "");
			log_msg("every traced process has exited\n");
			break;
		}
		if (deadline && clock_mono_ns() >= deadline)
			break;
		if (pf_writer_error(s->w)) {
			log_msg("writing %s failed: %s; stopping\n", s->opt.output,
				strerror(-pf_writer_error(s->w)));
			break;
		}
		if (s->find.nmapped)
			targets_attach_mapped(s);
		if (clock_mono_ns() - last_status >= 1000000000ull) {
			/* With the BPF hook a full /proc scan is only a safety net. */
			if (s->opt.all && clock_mono_ns() - s->find.last_full_scan >=
					  (s->find.exec_probes ? 5000000000ull : 1000000000ull)) {
				targets_scan_all(s);
				s->find.last_full_scan = clock_mono_ns();
			}
			if (s->schedv)
				sched_view_flush(s->schedv);
			budget_publish_metrics(s);
			if (budget_window_must_end(s))
				break;
			summary_status_line(s, &last_events, &last_status);
		}
		/* libcuda is loaded at the first CUDA call, and later than that
		 * by programs that start on the CPU: look for it again. */
		if (clock_mono_ns() - last_scan >= 500000000ull) {
			for (int i = 0; i < s->ntargets; i++) {
				if (s->targets[i].pidfd < 0)
					continue;
				target_claim_answer(&s->targets[i]);
				targets_rescan(s, &s->targets[i]);
			}
			last_scan = clock_mono_ns();
		}
		wait_ms = next_wait(s, got, &quiet_since, deadline && deadline < last_status +
				    1000000000ull ? deadline : last_status + 1000000000ull);
	}
	yield_watch_stop();
	if (isatty(2))
		fputc('\n', stderr);
	return ret;
}

int session_setup_bpf(struct session *s)
{
	uint64_t t0 = clock_mono_ns();
	char why[256];
	int err;

	if (!log_verbose())
		libbpf_set_print(quiet_libbpf);
	if (s->opt.bpf_stats && !s->stats_on) {
		err = bpf_cost_enable();
		if (err < 0) {
			log_msg("--bpf-stats: the kernel's BPF statistics cannot be switched on: %s\n",
				strerror(-err));
			return -1;
		}
		s->stats_fd = err;
		s->stats_on = true;
		s->stats_from = clock_mono_ns();
	}
	s->skel = probes_load(s->opt.ring_bytes, s->opt.py_stacks > 0, why, sizeof(why));
	if (!s->skel) {
		log_msg("%s\n", why);
		return -1;
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), read_bpf_record, s, NULL);
	if (!s->rb) {
		log_msg("ring buffer: %s\n", strerror(errno));
		return -1;
	}
	s->find.exec_probes = exec_probes_new(s->skel, s->opt.all || s->opt.daemon);
	if (!s->find.exec_probes)
		log_warn("no exec tracepoint (%s): %s\n", strerror(errno),
			 s->opt.all || s->opt.daemon ?
			 "new torch processes are found by scanning /proc every second" :
			 "a traced process that exec's is noticed at its next read");
	s->probes = probes_new(s->skel, &s->ops, s->opt.entries_only);
	s->gpu = gpu_probes_new(s->skel);
	s->agents = agent_probes_new(s->skel);
	if (!s->agents)
		log_warn("loading the agent BPF programs failed (%s): no GPU "
			"timeline\n", strerror(errno));
	if (!s->gpu)
		log_msg("loading the GPU BPF programs failed: %s\n", strerror(errno));
	log_debug("BPF programs loaded in %.0f ms\n", (clock_mono_ns() - t0) / 1e6);
	if (!s->probes)
		log_msg("out of memory\n");
	return s->probes && s->gpu ? 0 : -1;
}

/* A hang capture: what the daemon's step signal knew of each process of
 * the job when the hang was seen (the report's hang summary reads it),
 * one instant per process on the track "ptbpf hang"; times are the
 * trace's clock (CLOCK_MONOTONIC), 0 where unknown. */
static void mark_hang(struct session *s, const struct capture_hang *h)
{
	uint64_t track = pf_track_child(s->w, 0, "ptbpf hang");

	for (int i = 0; track && i < h->n; i++) {
		const struct capture_hang_rank *r = &h->r[i];
		struct pf_arg a[] = {
			{ .name = "pid", .type = PF_ARG_INT, .i = r->pid },
			{ .name = "rank", .type = PF_ARG_STR, .s = r->rank },
			{ .name = "comm", .type = PF_ARG_STR, .s = r->comm },
			{ .name = "state", .type = PF_ARG_STR, .s = r->gone ? "exited" : "running" },
			{ .name = "gone_ts", .type = PF_ARG_UINT, .u = r->gone_ts },
			{ .name = "steps", .type = PF_ARG_UINT, .u = r->steps },
			{ .name = "step_start", .type = PF_ARG_UINT, .u = r->step_start },
			{ .name = "median_step_ns", .type = PF_ARG_UINT, .u = r->median_ns },
			{ .name = "coll_entered", .type = PF_ARG_UINT, .u = r->coll_entered },
			{ .name = "coll_left", .type = PF_ARG_UINT, .u = r->coll_left },
			{ .name = "coll_left_seq", .type = PF_ARG_UINT, .u = r->coll_left_seq },
			{ .name = "coll_name", .type = PF_ARG_STR, .s = r->coll_name },
			{ .name = "coll_left_name", .type = PF_ARG_STR, .s = r->coll_left_name },
			{ .name = "coll_enter_ts", .type = PF_ARG_UINT, .u = r->coll_enter_ts },
			{ .name = "coll_left_ts", .type = PF_ARG_UINT, .u = r->coll_left_ts },
			{ .name = "coll_open_ts", .type = PF_ARG_UINT, .u = r->coll_open_ts },
			{ .name = "seen_hung", .type = PF_ARG_BOOL, .b = r->pid == h->pid },
			{ .name = "limit_ns", .type = PF_ARG_UINT, .u = h->limit_ns },
		};

		pf_instant(s->w, &(struct pf_event){ .track = track, .ts = h->ts, .name = "rank",
						     .category = "ptbpf", .args = a,
						     .nargs = sizeof(a) / sizeof(a[0]) });
	}
}

/* A triggered daemon window starts with an instant on its own track that
 * says what asked for it and why (also in the attributes, summary.c). */
static void mark_trigger(struct session *s)
{
	const struct capture_req *t = s->win.trigger;
	struct pf_arg args[2] = {
		{ .name = "source", .type = PF_ARG_STR },
		{ .name = "reason", .type = PF_ARG_STR },
	};
	uint64_t track;

	if (!t || !(track = pf_track_child(s->w, 0, "ptbpf trigger")))
		return;
	args[0].s = capture_source_name(t->source);
	args[1].s = t->reason;
	pf_instant(s->w, &(struct pf_event){ .track = track, .ts = clock_mono_ns(), .name = "trigger",
					     .category = "ptbpf", .args = args, .nargs = 2 });
	if (t->hang)
		mark_hang(s, t->hang);
}

/* The kernel view: its programs on the scheduler's, system calls' and page
 * faults' tracepoints, its ring read with the others. Without it tracing
 * goes on, and says so. */
static void setup_sched(struct session *s)
{
	uint32_t ring = s->opt.ring_bytes > 8192 ? s->opt.ring_bytes / 2 : 4096;
	char err[256];

	s->sched = sched_probes_new(ring, err, sizeof(err));
	if (!s->sched) {
		log_warn("no kernel view (thread states, blocking calls): %s\n", err);
		return;
	}
	s->schedv = sched_view_new(s->w, join_thread_track, s->join);
	if (!s->schedv || ring_buffer__add(s->rb, sched_probes_ring_fd(s->sched),
					   read_sched_record, s)) {
		log_warn("no kernel view: %s\n", s->schedv ? strerror(errno) : "out of memory");
		sched_view_free(s->schedv);
		s->schedv = NULL;
		sched_probes_free(s->sched);
		s->sched = NULL;
		return;
	}
	const char *m = sched_probes_missing(s->sched);
	bool faults = strstr(m, "page_fault"), block = strstr(m, "block_io");

	if (m[0])
		log_warn("no %s tracepoint: %s%s%s\n", m,
			 faults ? "page faults threads block in are not named" : "",
			 faults && block ? "; " : "",
			 block ? "no block I/O tracks (kernels 6.5+ have them)" : "");
}

/* CPU samples: a perf event per CPU, its records in the BPF ring. Without
 * them tracing goes on, and says so. */
static void setup_samples(struct session *s)
{
	char err[256];

	s->samples = sample_probes_new(s->skel, s->sched, s->opt.sample_hz, err, sizeof(err));
	if (!s->samples)
		log_warn("no CPU samples: %s\n", err);
	else
		log_debug("CPU samples: %u Hz on %d CPUs\n", s->opt.sample_hz,
			  sample_probes_cpus(s->samples));
}

int session_setup_trace(struct session *s)
{
	if (outfile_open(&s->out, s->opt.output, s->opt.force, NULL, 0, ""))
		return -1;
	s->w = pf_writer_open(s->out.fd);
	if (!s->w) {
		outfile_cannot_write("", s->out.tmp, errno);
		return -1;
	}
	pf_trace_attr_str(s->w, "dev.ptbpf.version", PTBPF_VERSION);
	/* Find out now, before attaching, whether the file takes data at all. */
	if (pf_writer_flush(s->w)) {
		outfile_cannot_write("", s->out.tmp, -pf_writer_error(s->w));
		return -1;
	}
	log_msg("writing %s (renamed to %s when tracing ends; removed if it never "
		"starts)\n", s->out.tmp, s->opt.output);
	leaving_prune();
	leaving_trace(s->out.tmp, false);
	s->route = route_new(s->w, &s->ops, s->opt.entries_only);
	if (!s->route) {
		log_msg("out of memory\n");
		return -1;
	}
	s->join = route_join(s->route);
	s->dec = route_decoders(s->route);
	if (s->opt.raw_output[0] && !(s->raw = raw_open(s->opt.raw_output, s->opt.force)))
		return -1;
	if (s->raw) /* what the job's files said, for replay */
		inductor_on_found(gpu_timeline_inductor(s->dec->timeline), raw_inductor, s->raw);
	s->lost_track = pf_track_counter(s->w, 0, "ptbpf lost events", PF_UNIT_COUNT);
	pf_counter(s->w, s->lost_track, clock_mono_ns(), 0);
	mark_trigger(s);
	if (!s->opt.no_sched)
		setup_sched(s);
	if (!s->opt.no_samples)
		setup_samples(s);
	if (s->raw && s->sched) /* said, not lost silently: replay lacks it */
		log_warn("the raw capture does not keep the kernel view (thread states, "
			 "blocking calls): `ptbpf replay` re-makes the trace without it\n");
	return 0;
}

/* Probes off, then the agents ptbpf loaded leave the processes; the
 * tracepoints too (a job that runs on still starts and ends threads, and
 * switches): nothing new after this, so sent = received + lost. */
static void detach_all(struct session *s)
{
	uint64_t t0 = clock_mono_ns(), t_unloaded;

	if (s->stats_on) /* the agents' probe points go now */
		bpf_cost_add(&s->cost[COST_PROBES], agent_probes_obj(s->agents));
	agent_probes_free(s->agents);
	s->agents = NULL;
	t_unloaded = clock_mono_ns();
	if (s->probes)
		probes_detach(s->probes);
	if (s->stats_on) /* and the GPU probes, which ran until now */
		bpf_cost_add(&s->cost[COST_PROBES], gpu_probes_obj(s->gpu));
	gpu_probes_free(s->gpu);
	s->gpu = NULL;
	if (s->skel)
		ptbpf_bpf__detach(s->skel);
	sched_probes_detach(s->sched);
	sample_probes_detach(s->samples);
	exec_probes_detach(s->find.exec_probes);
	log_debug("stop: agents unloaded in %.0f ms, probes detached in %.0f ms\n",
		  (t_unloaded - t0) / 1e6, (clock_mono_ns() - t_unloaded) / 1e6);
}

/* Every source switched off, drained and detached, in the order that
 * loses nothing: the agents record until they see the switch-off. */
static void stop_sources(struct session *s, uint64_t *st, uint64_t *sst)
{
	uint64_t t0 = clock_mono_ns();

	if (agent_probes_any(s->agents)) {
		/* Switched off, each agent flushes what CUPTI still holds, then
		 * acknowledges (within 20 ms, plus the flush). */
		uint64_t until = clock_mono_ns() + 3000000000ull;

		agent_probes_switch_off(s->agents);
		/* The agents record until they see the switch-off: their rings
		 * are read on, or they would fill and drop. */
		while (clock_mono_ns() < until && s->rb && !agent_probes_all_acked(s->agents))
			read_pump(s, 5);
	}
	/* What the agents wrote, all of it, before they may be unloaded. */
	if (s->rb)
		read_pump(s, 0);
	if (s->opsr)
		ops_rings_finish(s->opsr, read_op_record, s);
	log_debug("stop: agents switched off and read in %.0f ms\n", (clock_mono_ns() - t0) / 1e6);
	detach_all(s);
	if (s->rb)
		read_bpf_last(s, st);
	if (s->rb && s->sched)
		read_sched_last(s, sst);
	read_op_rings(s, UINT64_MAX);
}

/* The GPU idle track, appended to a complete trace that has a GPU
 * timeline (gap_track.h); said in one line. */
static void idle_track(struct session *s)
{
	const struct gpu_timeline_counts *d = s->dec ? gpu_timeline_counts(s->dec->timeline) : NULL;
	uint64_t t0 = clock_mono_ns();
	struct stat st;
	long n;

	if (s->opt.no_idle_track || s->out.fd < 0 || !s->out.tmp[0] || !d ||
	    !(d->kernels + d->memcpys + d->memsets) || fstat(s->out.fd, &st))
		return;
	if (st.st_size > 16 << 20) /* a second or more: say what it waits for */
		log_msg("GPU idle track: reading the %.0f MB trace again (--no-idle-track "
			"leaves it out)\n", st.st_size / 1e6);
	n = gap_track_append(s->out.tmp, s->out.fd);
	if (n >= 0)
		log_msg("GPU idle track: %ld gaps of 10 us or more, named by cause (%.0f ms; "
			"--no-idle-track leaves it out)\n", n, (clock_mono_ns() - t0) / 1e6);
}

/* The trace renamed from FILE.partial and said, kept as FILE.partial
 * (err: writing failed), or removed (!keep); rc, or 1 if that failed.
 * A second Ctrl-C waits (microseconds) while the file is renamed and
 * said, so that its line and exit status tell the outcome, never a
 * .partial renamed meanwhile; the slow part, the sync, comes first. */
static int trace_complete(struct session *s, bool keep, int err, bool failed_before, int rc)
{
	struct stat fst;
	sigset_t hold, held;
	off_t size;

	size = s->out.fd >= 0 && !fstat(s->out.fd, &fst) ? fst.st_size : 0;
	if (s->out.fd >= 0 && keep && !err)
		fsync(s->out.fd);
	sigemptyset(&hold);
	sigaddset(&hold, SIGINT);
	sigaddset(&hold, SIGTERM);
	sigprocmask(SIG_BLOCK, &hold, &held);
	if (!s->out.tmp[0] || s->out.fd < 0) {
		/* setup failed before the file was made: nothing to do */
	} else if (!keep) { /* the caller said why */
		outfile_discard(&s->out);
	} else if (err) {
		outfile_keep_partial(&s->out);
		if (!failed_before) /* else the trace loop has said why */
			log_msg("writing %s failed: %s\n", s->out.tmp, strerror(-err));
		log_msg("the trace up to the failure (%.1f MB, whole packets) is in "
			"%s; `ptbpf report` and the Perfetto UI open it\n", size / 1e6, s->out.tmp);
		rc = 1;
	} else if (outfile_commit(&s->out, "")) {
		rc = 1;
	} else if (s->w) {
		log_msg("wrote %s (%.1f MB): open it at https://ui.perfetto.dev\n",
			s->opt.output, size / 1e6);
	}
	leaving_trace(s->out.tmp[0] && !access(s->out.tmp, F_OK) ? s->out.tmp : "", true);
	if (!s->opt.run_argv) /* ptbpf run's status is its command's */
		leaving_settled(rc);
	sigprocmask(SIG_SETMASK, &held, NULL);
	return rc;
}

int session_finish(struct session *s, int rc)
{
	uint64_t st[STAT_MAX] = { 0 }, sst[SCHED_STAT_MAX] = { 0 }, stopped_at = clock_mono_ns();
	uint64_t t_written;
	bool failed_before = s->w && pf_writer_error(s->w); /* said already */
	bool keep = s->traced && !s->discard_output;
	int err;

	stop_sources(s, st, sst);
	if (s->stats_on) {
		bpf_cost_add(&s->cost[COST_PROBES], s->skel ? s->skel->obj : NULL);
		bpf_cost_add(&s->cost[COST_PROBES], exec_probes_obj(s->find.exec_probes));
		bpf_cost_add(&s->cost[COST_SCHED], sched_probes_obj(s->sched));
		bpf_cost_add(&s->cost[COST_SAMPLES], sample_probes_obj(s->samples));
		close(s->stats_fd);
		s->stats_on = false;
		s->stats_to = clock_mono_ns();
	}
	t_written = clock_mono_ns();
	if (s->join && keep) {
		/* Frames still open are cut where tracing stopped (or at the
		 * last record, if later), not after the agents' wind-down. */
		if (s->schedv)
			sched_view_finish(s->schedv, stopped_at);
		route_finish(s->route, stopped_at);
		if (s->schedv)
			summary_write_sched(s, sst);
		summary_write_counters(s, st);
		summary_print(s, st);
		if (s->schedv)
			summary_print_sched(s, sst);
	}
	if (s->raw && raw_close(s->raw, keep))
		rc = 1;
	err = s->w ? pf_writer_close(s->w) : 0;
	if (!err && s->w && keep)
		idle_track(s);
	rc = trace_complete(s, keep, err, failed_before, rc);
	log_debug("stop: the trace written in %.0f ms\n", (clock_mono_ns() - t_written) / 1e6);
	exec_probes_free(s->find.exec_probes);
	route_free(s->route);
	ops_rings_free(s->opsr);
	reorder_free(s->reorder);
	probes_free(s->probes);
	ring_buffer__free(s->rb);
	sched_view_free(s->schedv);
	sched_probes_free(s->sched);
	sample_probes_free(s->samples);
	ptbpf_bpf__destroy(s->skel);
	for (int i = 0; i < s->ntargets; i++)
		target_close(&s->targets[i]);
	return rc;
}
