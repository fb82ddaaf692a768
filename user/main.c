// SPDX-License-Identifier: BSD-2-Clause
/*
 * ptbpf: attach to running PyTorch processes and record what they do into a
 * Perfetto trace. The data path: bpf/ptbpf.bpf.c (probes -> ring buffer) ->
 * here (poll) -> user/record/join.c (pair begins and ends) -> user/trace/perfetto.c.
 */
#define _GNU_SOURCE
#include <argp.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "lib/log.h"
#include "attach/agent_ctl.h"
#include "cli.h"
#include "version.h"
#include "attach/agent_probes.h"
#include "record/gpu_timeline.h"
#include "record/gpu_calls.h"
#include "attach/inject.h"
#include "ptbpf_agent.h"
#include "fleet/daemon.h"
#include "record/join.h"
#include "record/memtrack.h"
#include "record/pystack.h"
#include "offline/merge.h"
#include "fleet/metrics.h"
#include "record/ops_ring.h"
#include "lib/files.h"
#include "trace/perfetto.h"
#include "attach/probes.h"
#include "record/raw.h"
#include "record/reorder.h"
#include "offline/report.h"
#include "attach/target.h"
#include "ptbpf.skel.h"
#include "fleet.skel.h"

#define MAX_TARGETS 256

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	if (exiting) /* a second Ctrl-C: leave now; the kernel drops our probes */
		_exit(128 + sig);
	exiting = sig;
}

struct session {
	struct options opt;
	struct ptbpf_bpf *skel;
	struct ring_buffer *rb;
	struct probes *probes;
	struct gpu_probes *gpu;
	struct agent_probes *dev;
	struct op_table ops;
	struct pf_writer *w;
	struct outfile out;      /* the trace, under its .partial name until complete */
	struct join *join;
	struct target targets[MAX_TARGETS];
	int ntargets;
	int pending_forks[64];
	int refused[256];        /* --all: pids that could not be attached (not retried) */
	int nrefused;
	struct fleet_bpf *fleet;   /* EV_EXEC (exec tracepoint) */
	struct { int pid; uint64_t at, checked; bool exec; } mapped[256];
				   /* --all and exec'd targets: new processes,
				    * watched until they map libtorch */
	int execs;               /* traced processes that exec'd */
	int nmapped;
	uint64_t last_full_scan;
	int npending;
	uint64_t lost_track;
	struct raw_writer *raw;
	struct ops_rings *opsr;  /* the agents' op rings (--ops agent/auto) */
	struct reorder *reorder; /* set once an op ring is read: merges the two sources */
	uint64_t exit_chunks;    /* op-ring bytes sent by the _exit probe (EV_OPS_CHUNK) */
	uint64_t received;       /* records read from the BPF ring buffer */
	struct metrics *metrics; /* daemon: where running totals go */
	uint64_t max_trace_bytes; /* daemon: a window stops at this trace size */
	double targets_cpu0;     /* the traced processes' CPU seconds at the start */
	char stopped_why[256];   /* daemon: why a window ended early */
	bool discard_output;
	double cpu_at_trace_start; /* CPU seconds spent planning and attaching */
};

/* Without -v, libbpf's own messages are not shown; ptbpf explains errors. */
static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void stats_read(struct session *s, uint64_t out[STAT_MAX])
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

static uint64_t lost_total(const uint64_t st[STAT_MAX])
{
	return st[STAT_DROP_RINGBUF_FULL] + st[STAT_DROP_NAME_FULL] + st[STAT_DROP_GPU_FULL] +
	       st[STAT_DROP_AGENT_FULL] + st[STAT_DROP_OPS_EXIT] + st[STAT_DROP_PY_STACK] +
	       st[STAT_DROP_PY_CODE];
}

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
	return join_event(s->join, data, size);
}

static int handle_op_record(void *ctx, void *data, size_t size);

/* --all (every exec) and exec'd targets: watched every 200 ms for 60 s,
 * and attached the moment they map libtorch. */
static void watch_new_process(struct session *s, int pid, uint64_t ts, bool was_traced)
{
	int i;

	if (!s->opt.all && !was_traced)
		return;
	for (i = 0; i < s->nmapped && s->mapped[i].pid != pid; i++)
		;
	if (i == s->nmapped && s->nmapped < (int)(sizeof(s->mapped) / sizeof(s->mapped[0])))
		s->nmapped++;
	else if (i == s->nmapped) /* full: the oldest watch makes room */
		i = 0;
	s->mapped[i] = (typeof(s->mapped[0])){ pid, ts, 0, was_traced };
}

/* A traced process exec'd: its old image is gone, and nothing of ptbpf's
 * reads or writes memory there again (its rings and agent were reached
 * through the old image's /proc/PID/mem). Its probes go too; the new
 * image is a new process, traced once it maps libtorch. */
static bool target_exec(struct session *s, int pid)
{
	char comm[64];

	for (int i = 0; i < s->ntargets; i++) {
		struct target *t = &s->targets[i];

		if (t->pid != pid || t->pidfd < 0)
			continue;
		target_thread_name(pid, pid, comm, sizeof(comm));
		log_msg("pid %d exec'd (now %s): the trace of its old image ends "
			"here; the new one is traced as a new process once it maps libtorch\n",
			pid, comm);
		if (s->opsr)
			ops_rings_exec(s->opsr, pid);
		agent_probes_gone(s->dev, pid);
		gpu_probes_forget_pid(s->gpu, pid);
		probes_forget_pid(s->probes, pid);
		target_close(t);
		s->execs++;
		return true;
	}
	return false;
}

/* From the BPF ring. Once ops also come from agents' rings, events wait in
 * the reorder buffer; an agent's status is needed at once (add_target
 * waits for it) and is not ordered with anything. */
static int handle_event(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct ptbpf_event *e = data;

	s->received++;
	if (size >= sizeof(*e) && e->kind == EV_EXEC) {
		bool traced = target_exec(s, (int)e->pid);

		watch_new_process(s, (int)e->pid, e->ts, traced);
		if (!traced)
			return 0;
		/* join cuts the old image's frames, in order with its events. */
	}
	if (s->opsr && size >= sizeof(struct ptbpf_ops_chunk) && e->kind == EV_OPS_CHUNK) {
		s->exit_chunks++;
		ops_rings_chunk(s->opsr, data, handle_op_record, s);
		return 0;
	}
	if (s->reorder && !(size >= sizeof(*e) && e->kind == EV_NAMED_AGENT_STATUS) &&
	    !reorder_push(s->reorder, data, size))
		return 0;
	return deliver(s, data, size);
}

/* From the agents' op rings. */
static int handle_op_record(void *ctx, void *data, size_t size)
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
static uint64_t drain_op_rings(struct session *s, uint64_t upto)
{
	uint64_t before;

	if (!s->reorder)
		return 0;
	before = ops_rings_counts(s->opsr)->records;
	ops_rings_drain(s->opsr, handle_op_record, s);
	reorder_release(s->reorder, upto, deliver, s);
	return ops_rings_counts(s->opsr)->records - before;
}

/* One turn of reading: the BPF ring (waiting up to wait_ms for a batch,
 * then taking whatever is there: wakeups are batched) and the agents'
 * rings, then what can no longer be overtaken is handed on. Every BPF
 * record made before tick is read before any op record newer than
 * tick - REORDER_SLACK_NS goes on, so the two interleave as they happened.
 * The op records read, or the ring's error. */
static int64_t pump(struct session *s, int wait_ms)
{
	uint64_t tick = now_ns();
	int err = ring_buffer__poll(s->rb, wait_ms);
	uint64_t n;

	if (err >= 0)
		err = ring_buffer__consume(s->rb);
	n = drain_op_rings(s, tick - REORDER_SLACK_NS);
	return err < 0 && err != -EINTR ? err : (int64_t)n;
}

static void print_attach(const struct target *t, const struct attach_report *r, bool agent_ops)
{
	if (agent_ops) {
		log_msg("tracing pid %d (%s): ops from the agent's RecordFunction "
			"callbacks (no op uprobes)\n", t->pid, t->comm);
		return;
	}
	if (t->torch.fd < 0) {
		log_msg("tracing pid %d (%s): no libtorch mapped, GPU API calls only\n",
			t->pid, t->comm);
		return;
	}
	log_msg("tracing pid %d (%s): %u ops (%u skipped), %u ret + %u tail-jump exit "
		"sites, %u/%u entries on emulated instructions; unwind %s, backward %s, "
		"seq %s, record_function %s; planned in %.0f ms, attached in %.0f ms\n",
		t->pid, t->comm, r->ops, r->ops_skipped, r->ret_sites, r->tail_sites,
		r->emulated_entries, r->ops, r->catch_probe ? "on" : "OFF",
		r->bwd_probe ? "on" : "off", r->seq_probe ? "on" : "off",
		r->user_probes ? "on" : "off", r->plan_ms, r->attach_ms);
	if (!r->catch_probe)
		log_warn("pid %d maps no libstdc++ __cxa_begin_catch: "
			"frames unwound by exceptions close only at their parent's end\n", t->pid);
}

/* A CUDA process started without the agent gets it by ptrace dlopen (it
 * stays dormant until agent_probes_scan switches it on, and is unloaded
 * at the end). Failure is not fatal: ptbpf traces host-side only, and says
 * why. */
static void load_agent(struct session *s, const struct target *t, bool for_ops)
{
	char agent[PATH_MAX], err[512];
	uint64_t handle;

	if (s->opt.no_agent || t->memfd < 0)
		return;
	if ((!for_ops && !target_maps(t->pid, "libcuda.so")) ||
	    target_maps(t->pid, "libptbpf-agent.so"))
		return;
	if (agent_library_path(agent, sizeof(agent))) {
		log_warn("%s not found: no GPU timeline\n", agent);
		return;
	}
	if (inject_dlopen(t->pid, agent, &handle, err, sizeof(err)))
		log_warn("pid %d: cannot load the agent: %s; %s\n", t->pid,
			err, for_ops ? "ops come from uprobes, and there is no GPU timeline" :
			"tracing host-side only");
	else
		agent_probes_injected(s->dev, t->pid);
}

/* The agent polls its control block every 20 ms, switches on what was
 * asked and acknowledges: wait (3 s at most) for that, so that "tracing"
 * means tracing; its statuses are in the ring then. If it does not answer
 * (a stopped process), it is switched off again: it must not start later
 * behind ptbpf's back. */
static bool wait_for_agent(struct session *s, int pid)
{
	uint64_t until = now_ns() + 3000000000ull;
	int r;

	while ((r = agent_probes_acked(s->dev, pid)) == -EAGAIN && now_ns() < until)
		pump(s, 5);
	pump(s, 0);
	if (!r)
		return true;
	log_warn("pid %d: its agent did not answer within 3 s%s; it is "
		"switched off again\n", pid, r == -EAGAIN ? " (is the process stopped?)" : "");
	agent_probes_off(s->dev, pid);
	return false;
}

/* Uprobes on the CUDA/HIP/NCCL libraries; only NCCL's when the agent
 * records the CUDA calls (ops from the agent, CUPTI on): the others would
 * only add cost then. */
static void scan_gpu_calls(struct session *s, const struct target *t)
{
	gpu_probes_scan(s->gpu, t->pid, t->ops_from_agent && join_agent_calls(s->join, t->pid));
}

/* Whether pid's ops should come from its agent: wherever it loads (auto or
 * --ops=agent): exact and cheap, with steps, regions and backward nodes on
 * every torch; uprobes with --ops=probes, and where the agent is refused. */
static bool wants_agent_ops(const struct session *s, const struct target *t)
{
	if (s->opt.ops == OPS_PROBES || t->torch.fd < 0 || !s->dev)
		return false;
	if (t->memfd < 0)
		log_warn("pid %d: no agent: cannot open /proc/%d/mem: %s%s; "
			"ops come from uprobes\n", t->pid, t->pid, strerror(t->mem_errno),
			t->mem_errno == EACCES ? " (another user's process: ptbpf needs "
			"CAP_DAC_OVERRIDE, or root)" : "");
	return t->memfd >= 0;
}

/* Loads and switches on t's agent with its op recorder, and starts reading
 * its rings. False (with a warning) if that did not work: then uprobes. */
static bool start_agent_ops(struct session *s, const struct target *t)
{
	struct ptbpf_ops_loc loc;
	uint64_t desc;
	char err[512];

	if (probes_trace_pid(s->probes, t->pid)) /* the agent's probes filter on it */
		return false;
	load_agent(s, t, true);
	if (agent_probes_scan(s->dev, t, true) != 1 || !wait_for_agent(s, t->pid))
		return false;
	desc = join_ops_desc(s->join, t->pid);
	if (!desc) {
		log_warn("pid %d: its agent records no ops; ops come from "
			"uprobes\n", t->pid);
		return false;
	}
	if (!s->opsr && !(s->opsr = ops_rings_new()))
		return false;
	if (!s->reorder && !(s->reorder = reorder_new()))
		return false;
	if (ops_rings_add(s->opsr, t, desc, err, sizeof(err))) {
		log_warn("%s; ops come from uprobes\n", err);
		return false;
	}
	if (ops_rings_loc(s->opsr, t->pid, &loc) || agent_probes_ops_exit(s->dev, t, &loc))
		log_warn("pid %d: no probe on its libc's _exit: ops of "
			"its last 20 ms before it exits will be missing\n", t->pid);
	return true;
}

/* What the agent switched on for the next target records besides ops. */
static void agent_words(struct session *s, bool stacks)
{
	char words[64];

	if (!s->dev)
		return;
	snprintf(words, sizeof(words), "%s", s->opt.shapes ? OPS_WORD_SHAPES : "");
	if (stacks)
		snprintf(words + strlen(words), sizeof(words) - strlen(words), "%s%u",
			 OPS_WORD_STACKS, s->opt.py_stacks);
	agent_probes_ops_words(s->dev, words);
}

/* --py-stacks: where t's interpreter keeps its frames, for the BPF side;
 * then what t's agent is to record besides ops. */
static void watch_python(struct session *s, const struct target *t)
{
	struct ptbpf_py_proc pp;
	char err[512];
	int ret = pystack_find(join_pystack(s->join), t->pid, &pp, err, sizeof(err));

	if (!ret) {
		pp.every = s->opt.py_stacks;
		ret = bpf_map__update_elem(s->skel->maps.py_procs, &t->pid, sizeof(t->pid), &pp,
					   sizeof(pp), BPF_ANY);
		if (ret)
			snprintf(err, sizeof(err), "pid %d: %s", t->pid, strerror(-ret));
	}
	if (ret)
		log_warn("no Python stacks: %s\n", err);
	agent_words(s, !ret);
}

/* Opens and attaches one more process; 0, or -errno with a message printed. */
static int add_target(struct session *s, int pid, bool quiet_if_gone)
{
	struct target *t = &s->targets[s->ntargets];
	struct attach_report rep = { 0 };
	bool agent_ops = false;
	char err[512];
	int ret, rpc;

	if (s->ntargets >= MAX_TARGETS) {
		log_msg("at most %d processes can be traced\n", MAX_TARGETS);
		return -E2BIG;
	}
	ret = target_open(pid, t, err, sizeof(err));
	if (!ret)
		ret = target_claim(t, err, sizeof(err));
	if (!ret) {
		join_add_process(s->join, t);
		if (s->opt.py_stacks) /* before any op can ask for a stack */
			watch_python(s, t);
		else
			agent_words(s, false);
		agent_ops = wants_agent_ops(s, t) && start_agent_ops(s, t);
		if (!agent_ops)
			ret = probes_attach(s->probes, t, &rep, &exiting, err, sizeof(err));
		/* Children it forks have the agent without its thread: they get
		 * uprobes, which must not take a plan's time then. */
		else if (s->opt.follow_children && probes_prepare(s->probes, t, err, sizeof(err)))
			log_warn("%s\n", err);
	}
	if (ret) {
		target_close(t);
		if (ret != -EINTR && !(quiet_if_gone && ret == -ESRCH))
			log_msg("%s\n", err);
		return ret;
	}
	t->ops_from_agent = agent_ops;
	rpc = probes_attach_rpc(s->probes, t);
	if (rpc < 0)
		log_warn("pid %d: no torch.distributed.rpc probes: %s\n",
			pid, strerror(-rpc));
	if (s->opt.memory && t->torch.fd >= 0 && probes_attach_mem(s->probes, t, err, sizeof(err)))
		log_warn("no memory timeline: %s\n", err);
	s->ntargets++;
	if (s->raw) {
		raw_ops(s->raw, &s->ops);
		raw_process(s->raw, t);
	}
	scan_gpu_calls(s, t);
	if (s->dev && !agent_ops) {
		load_agent(s, t, false);
		if (agent_probes_scan(s->dev, t, false) == 1)
			wait_for_agent(s, pid);
	}
	print_attach(t, &rep, agent_ops); /* last: tests wait for this line */
	return 0;
}

/* Whether /proc/PID/maps names libtorch_cpu.so. */
static bool maps_torch(int pid)
{
	char path[64], line[4096];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libtorch_cpu.so") != NULL;
	fclose(f);
	return found;
}

static bool refused(const struct session *s, int pid)
{
	for (int i = 0; i < s->nrefused; i++)
		if (s->refused[i] == pid)
			return true;
	return false;
}

static bool traced_now(const struct session *s, int pid)
{
	for (int i = 0; i < s->ntargets; i++)
		if (s->targets[i].pid == pid && s->targets[i].pidfd >= 0)
			return true;
	return false;
}

/* --all: attaches a process found mapping libtorch; one that cannot be
 * attached is not tried again. */
static void attach_found(struct session *s, int pid)
{
	if (add_target(s, pid, true) &&
	    s->nrefused < (int)(sizeof(s->refused) / sizeof(s->refused[0])))
		s->refused[s->nrefused++] = pid;
}

/* Processes seen exec'ing (--all: any; else traced ones) are checked every
 * 200 ms for 60 s: the moment one maps libtorch, it is attached. */
static void attach_mapped(struct session *s)
{
	uint64_t now = now_ns();

	for (int i = 0; i < s->nmapped; i++) {
		int pid = s->mapped[i].pid;
		bool alive = target_alive(pid) == 1;

		if (alive && now - s->mapped[i].checked < 200000000ull)
			continue;
		s->mapped[i].checked = now;
		if (alive && !traced_now(s, pid) && !refused(s, pid) && maps_torch(pid)) {
			attach_found(s, pid);
		} else if (alive && !traced_now(s, pid) && now - s->mapped[i].at < 60000000000ull) {
			continue;
		} else if (s->mapped[i].exec && !traced_now(s, pid)) {
			log_msg("pid %d exec'd into a program that %s\n", pid,
				alive ? "did not map libtorch within 60 s: not traced" : "has exited");
		}
		s->mapped[i--] = s->mapped[--s->nmapped];
	}
}

/* --all: attaches to every process that maps libtorch_cpu.so and is not
 * traced yet. Run at start, then every 5 s (every second without the exec
 * tracepoint): a process imports torch, and so maps it, whenever it gets
 * to it. */
static void scan_all(struct session *s)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) && !exiting) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == getpid() || traced_now(s, (int)pid) ||
		    refused(s, (int)pid) || !maps_torch((int)pid))
			continue;
		if (s->ntargets >= MAX_TARGETS)
			break;
		attach_found(s, (int)pid);
	}
	closedir(d);
}

static void status_line(struct session *s, uint64_t *last_events, uint64_t *last_ns)
{
	uint64_t st[STAT_MAX], t = now_ns();
	double secs = (t - *last_ns) / 1e9;

	stats_read(s, st);
	if (s->lost_track)
		pf_counter(s->w, s->lost_track, t, (int64_t)lost_total(st));
	if (log_verbose() || isatty(2)) {
		log_more("%s", isatty(2) ? "\r" : "");
		log_msg("%.0f events/s, %lu lost, %.1f MB written%s",
			(st[STAT_SENT] - *last_events) / secs, (unsigned long)lost_total(st),
			pf_bytes_written(s->w) / 1e6, isatty(2) ? "   " : "\n");
	}
	*last_events = st[STAT_SENT];
	*last_ns = t;
}

/* Marks exited targets; returns how many are still alive. */
static int reap_targets(struct session *s)
{
	int alive = 0;

	for (int i = 0; i < s->ntargets; i++) {
		struct target *t = &s->targets[i];
		struct pollfd p = { .fd = t->pidfd, .events = POLLIN };

		if (t->pidfd < 0)
			continue;
		if (poll(&p, 1, 0) > 0) {
			/* Its frames close at its EV_PROC_EXIT, the last record it
			 * sends (or at the end, should that be lost): records of
			 * its threads may still be on their way into the ring. */
			ring_buffer__consume(s->rb);
			close(t->pidfd);
			t->pidfd = -1;
			continue;
		}
		alive++;
	}
	return alive;
}

/* Daemon: the window's running totals to the metrics endpoint. */
static void publish_metrics(struct session *s)
{
	uint64_t st[STAT_MAX];

	if (!s->metrics)
		return;
	stats_read(s, st);
	metrics_update(s->metrics, s->join, s->targets, s->ntargets, lost_total(st));
}

/* The traced processes' CPU seconds (user + system), living ones only. */
static double targets_cpu(const struct session *s)
{
	double total = 0;

	for (int i = 0; i < s->ntargets; i++) {
		char path[64], buf[1024], *p;
		unsigned long ut, st;
		FILE *f;

		if (s->targets[i].pidfd < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", s->targets[i].pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
			total += (ut + st) / (double)sysconf(_SC_CLK_TCK);
		fclose(f);
	}
	return total;
}

/*
 * What tracing costs the traced processes, estimated from what was
 * recorded: seconds per record, as measured on the H200 machine
 * (BENCHMARKS.md): an emulated uprobe hit ~2 us, a single-stepped ret
 * probe ~10 us, a GPU call's entry + uretprobe ~6 us, an agent record
 * 0.15 us. Against the processes' own CPU time this is the slowdown the
 * governor (--budget) holds a window under.
 */
static double estimated_cost_s(const struct session *s)
{
	const struct join_counts *c = join_counts(s->join);
	static const double cost[EV_KIND_MAX] = {
		[EV_OP_BEGIN] = 2e-6, [EV_OP_END] = 10e-6, [EV_UNWIND] = 2e-6,
		[EV_BWD_BEGIN] = 2e-6, [EV_BWD_END] = 10e-6, [EV_SEQ] = 10e-6,
		[EV_USER_END] = 2e-6, [EV_NAMED_USER_BEGIN] = 4e-6, [EV_GPU_CALL] = 2e-6,
		[EV_GPU_RET] = 4e-6, [EV_AGENT_CORR] = 2e-6, [EV_NAMED_RF_BEGIN] = 0.15e-6,
		[EV_RF_END] = 0.15e-6,
	};
	double total = 0;

	for (int k = 0; k < EV_KIND_MAX; k++)
		total += c->by_kind[k] * cost[k];
	return total;
}

/* Daemon windows end early at the size cap or over the budget; the
 * reason goes into the trace. */
static bool window_must_end(struct session *s)
{
	double cpu, cost;

	if (!s->opt.daemon)
		return false;
	if (pf_bytes_written(s->w) > s->max_trace_bytes) {
		snprintf(s->stopped_why, sizeof(s->stopped_why), "size cap: %.1f MB written",
			 pf_bytes_written(s->w) / 1e6);
		return true;
	}
	cpu = targets_cpu(s) - s->targets_cpu0;
	cost = estimated_cost_s(s);
	if (s->opt.budget_pct > 0 && cpu > 0.2 && cost / cpu * 100 > s->opt.budget_pct) {
		snprintf(s->stopped_why, sizeof(s->stopped_why),
			 "governor: estimated cost %.3f s = %.1f%% of the traced processes' %.2f "
			 "CPU-s > budget %.1f%%", cost, cost / cpu * 100, cpu, s->opt.budget_pct);
		return true;
	}
	return false;
}

static void trace_loop(struct session *s)
{
	uint64_t start = now_ns(), last_status = start, last_events = 0, last_scan = start;
	uint64_t deadline = s->opt.duration_s ? start + s->opt.duration_s * 1000000000ull : 0;
	int wait_ms = 20;

	s->cpu_at_trace_start = cpu_seconds();

	while (!exiting) {
		/* Op rings hold 4 MiB a thread: read them every 20 ms, and at
		 * once again while a read brings much (a thread writing 2 M
		 * records/s fills its ring in about 50 ms). Without op rings
		 * every 100 ms is enough. */
		int64_t got = pump(s, s->reorder ? wait_ms : 100);

		if (got < 0) {
			log_msg("reading the ring buffer failed: %s\n", strerror(-got));
			break;
		}
		wait_ms = got > 10000 ? 1 : 20;
		for (int i = 0; i < s->npending; i++)
			add_target(s, s->pending_forks[i], true);
		s->npending = 0;
		if (!reap_targets(s) && !s->opt.all && !s->nmapped) {
			log_more("%s", isatty(2) ? "\n" : "");
			log_msg("every traced process has exited\n");
			break;
		}
		if (deadline && now_ns() >= deadline)
			break;
		if (pf_writer_error(s->w)) {
			log_msg("writing %s failed: %s; stopping\n", s->opt.output,
				strerror(-pf_writer_error(s->w)));
			break;
		}
		if (s->nmapped)
			attach_mapped(s);
		if (now_ns() - last_status >= 1000000000ull) {
			/* With the BPF hook a full /proc scan is only a safety net. */
			if (s->opt.all && now_ns() - s->last_full_scan >=
					  (s->fleet ? 5000000000ull : 1000000000ull)) {
				scan_all(s);
				s->last_full_scan = now_ns();
			}
			publish_metrics(s);
			if (window_must_end(s))
				break;
			status_line(s, &last_events, &last_status);
		}
		/* libcuda is loaded at the first CUDA call, and later than that
		 * by programs that start on the CPU: look for it again. */
		if (now_ns() - last_scan >= 500000000ull) {
			for (int i = 0; i < s->ntargets; i++) {
				if (s->targets[i].pidfd < 0)
					continue;
				scan_gpu_calls(s, &s->targets[i]);
				if (s->dev && agent_probes_scan(s->dev, &s->targets[i], false) == 1)
					wait_for_agent(s, s->targets[i].pid);
			}
			last_scan = now_ns();
		}
	}
	if (isatty(2))
		fputc('\n', stderr);
}

/* ptbpf's own footprint, for the benchmarks and for the curious. */
static void print_own_cost(const struct session *s)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return;
	log_msg("loader peak RSS %.1f MB, CPU %.2f s in all, %.2f s while tracing\n",
		ru.ru_maxrss / 1024.0, cpu_seconds(), cpu_seconds() - s->cpu_at_trace_start);
}

static void print_device(const struct session *s)
{
	const struct gpu_timeline_counts *d = join_device_counts(s->join);

	if (!d->kernels && !d->memcpys && !d->memsets && !d->launch_flows)
		return;
	log_msg("GPU timeline (agent): kernels %lu, memcpys %lu, memsets %lu, "
		"launch->kernel correlations %lu, dropped by CUPTI %lu\n",
		(unsigned long)d->kernels, (unsigned long)d->memcpys, (unsigned long)d->memsets,
		(unsigned long)d->launch_flows, (unsigned long)d->cupti_dropped);
}

static void print_gpu_calls(const struct session *s)
{
	const struct gpu_state *g = join_gpu(s->join);
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

static void print_summary(struct session *s, const uint64_t st[STAT_MAX])
{
	const struct join_counts *c = join_counts(s->join);
	static const char *const kind[EV_KIND_MAX] = {
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
		[EV_OPS_GAP] = "agent ring gap",
		[EV_EXEC] = "exec",
	};
	struct op_stat top[10];
	int ntop = join_top_ops(s->join, top, 10);
	uint64_t total = 0;

	log_msg("events by kind:");
	for (int k = 0; k < EV_KIND_MAX; k++) {
		if (!c->by_kind[k])
			continue;
		log_more(" %s %lu,", kind[k], (unsigned long)c->by_kind[k]);
		total += c->by_kind[k];
	}
	log_more(" total %lu\n", (unsigned long)total);
	/* Every record a BPF program emitted is received or counted lost. */
	log_msg("BPF ring: sent %lu = received %lu + lost %lu (ring full %lu, named "
		"ring full %lu, GPU ring full %lu, agent ring full %lu, op rings at exit %lu, python "
		"stacks %lu, python code objects %lu)%s; unreadable names %lu\n",
		(unsigned long)st[STAT_SENT], (unsigned long)s->received,
		(unsigned long)lost_total(st), (unsigned long)st[STAT_DROP_RINGBUF_FULL],
		(unsigned long)st[STAT_DROP_NAME_FULL], (unsigned long)st[STAT_DROP_GPU_FULL],
		(unsigned long)st[STAT_DROP_AGENT_FULL], (unsigned long)st[STAT_DROP_OPS_EXIT],
		(unsigned long)st[STAT_DROP_PY_STACK], (unsigned long)st[STAT_DROP_PY_CODE],
		st[STAT_SENT] == s->received + lost_total(st) ? "" : " MISMATCH",
		(unsigned long)st[STAT_NAME_FAULT]);
	if (s->opsr) {
		const struct ops_ring_counts *o = ops_rings_counts(s->opsr);

		/* written = read (the last reads come after the agents stop);
		 * what they could not write is counted apart. */
		log_msg("agent op rings: written %lu = read %lu (%lu exit chunks)%s; "
			"not written: %lu (ring full %lu, no free ring %lu); malformed %lu; processes "
			"gone without a last copy %lu; sequence numbers %s\n",
			(unsigned long)o->written, (unsigned long)o->records,
			(unsigned long)s->exit_chunks, o->written == o->records ? "" :
			o->lost_at_exit ? " (the rest went with processes gone)" : " MISMATCH",
			(unsigned long)(o->dropped + o->no_slot), (unsigned long)o->dropped,
			(unsigned long)o->no_slot, (unsigned long)o->bad,
			(unsigned long)o->lost_at_exit, o->layout_ok ? "read" : "NOT read "
			"(unexpected RecordFunction layout: no forward->backward flows)");
	}
	print_gpu_calls(s);
	if (s->opt.py_stacks)
		log_msg("python stacks: %lu on slices, %lu without Python frames\n",
			(unsigned long)c->py_stacks, (unsigned long)c->py_stacks_empty);
	if (s->opt.memory) {
		uint64_t peak_a, peak_r, n;

		mem_peaks(join_mem(s->join), &peak_a, &peak_r, &n);
		log_msg("memory: %lu allocator records; peak allocated %.1f MiB, "
			"peak reserved %.1f MiB\n", (unsigned long)n, peak_a / 1048576.0,
			peak_r / 1048576.0);
	}
	log_msg("slices %lu; unwound by exceptions %lu, cut by exit %lu, cut by "
		"exec %lu, open at stop %lu, cut where records were lost %lu, end not seen %lu, end "
		"before attach %lu, too deep %lu; steps %lu, forward->backward flows %lu, rpc flows "
		"%lu\n",
		(unsigned long)c->frames, (unsigned long)c->unwound, (unsigned long)c->cut_by_exit,
		(unsigned long)c->cut_by_exec, (unsigned long)c->cut_at_stop,
		(unsigned long)c->cut_by_loss,
		(unsigned long)c->end_missed,
		(unsigned long)c->end_unmatched, (unsigned long)c->too_deep,
		(unsigned long)c->steps, (unsigned long)c->bwd_flows, (unsigned long)c->rpc_flows);
	if (ntop)
		log_msg("top ops by host time (inclusive):\n"
			"  %-40s %10s %12s %12s\n", "op", "calls", "total ms", "self ms");
	for (int i = 0; i < ntop; i++)
		log_more("  %-40s %10lu %12.3f %12.3f\n", s->ops.name[top[i].op],
			(unsigned long)top[i].calls, top[i].total_ns / 1e6, top[i].self_ns / 1e6);
	print_own_cost(s);
}

static void write_final_counters(struct session *s, const uint64_t st[STAT_MAX])
{
	const struct join_counts *c = join_counts(s->join);

	/* now, not the last event's time: the status line wrote this counter
	 * at wall-clock times already. */
	pf_counter(s->w, s->lost_track, now_ns(), (int64_t)lost_total(st));
	pf_trace_attr_int(s->w, "dev.ptbpf.events_sent", (int64_t)st[STAT_SENT]);
	pf_trace_attr_int(s->w, "dev.ptbpf.events_received", (int64_t)s->received);
	pf_trace_attr_int(s->w, "dev.ptbpf.events_lost", (int64_t)lost_total(st));
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_ringbuf_full", (int64_t)st[STAT_DROP_RINGBUF_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_named_ringbuf_full",
			  (int64_t)st[STAT_DROP_NAME_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_gpu_ringbuf_full", (int64_t)st[STAT_DROP_GPU_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_agent_ringbuf_full",
			  (int64_t)st[STAT_DROP_AGENT_FULL]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_py_stacks", (int64_t)st[STAT_DROP_PY_STACK]);
	pf_trace_attr_int(s->w, "dev.ptbpf.lost_py_code_objects", (int64_t)st[STAT_DROP_PY_CODE]);
	pf_trace_attr_int(s->w, "dev.ptbpf.cupti_dropped",
			  (int64_t)join_device_counts(s->join)->cupti_dropped);
	if (s->opsr) {
		const struct ops_ring_counts *o = ops_rings_counts(s->opsr);

		pf_trace_attr_int(s->w, "dev.ptbpf.ops_written", (int64_t)o->written);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_records", (int64_t)o->records);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_ring_full", (int64_t)o->dropped);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_no_free_ring", (int64_t)o->no_slot);
		pf_trace_attr_int(s->w, "dev.ptbpf.ops_lost_exit_probe_ring_full",
				  (int64_t)st[STAT_DROP_OPS_EXIT]);
	}
	if (s->opt.daemon) {
		pf_trace_attr_str(s->w, "dev.ptbpf.window_end", s->stopped_why[0] ? s->stopped_why :
				  "full window");
		pf_trace_attr_int(s->w, "dev.ptbpf.window_s", (int64_t)s->opt.window_s);
		pf_trace_attr_int(s->w, "dev.ptbpf.estimated_cost_us",
				  (int64_t)(estimated_cost_s(s) * 1e6));
	}
	pf_trace_attr_int(s->w, "dev.ptbpf.frames_unwound", (int64_t)c->unwound);
	pf_trace_attr_int(s->w, "dev.ptbpf.frames_end_not_seen", (int64_t)c->end_missed);
	pf_clock_snapshot(s->w);
}

static int setup_bpf(struct session *s)
{
	int err;

	if (!log_verbose())
		libbpf_set_print(quiet_libbpf);
	s->skel = ptbpf_bpf__open();
	if (!s->skel) {
		log_msg("opening the BPF object failed: %s\n", strerror(errno));
		return -1;
	}
	bpf_map__set_max_entries(s->skel->maps.events, s->opt.ring_bytes);
	s->skel->rodata->wakeup_bytes = s->opt.ring_bytes / 16;
	s->skel->rodata->py_stacks = s->opt.py_stacks > 0;
	err = ptbpf_bpf__load(s->skel);
	if (!err)
		err = ptbpf_bpf__attach(s->skel); /* the sched tracepoints */
	if (err) {
		log_msg("loading the BPF programs failed: %s (run with -v for "
			"the verifier log)\n", strerror(-err));
		return -1;
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), handle_event, s, NULL);
	if (!s->rb) {
		log_msg("ring buffer: %s\n", strerror(errno));
		return -1;
	}
	{
		int e = 0;

		s->fleet = fleet_bpf__open();
		if (s->fleet)
			s->fleet->rodata->all_procs = s->opt.all || s->opt.daemon;
		if (!s->fleet || (e = probes_share_maps(s->skel, s->fleet->obj)) ||
		    (e = fleet_bpf__load(s->fleet)) || (e = fleet_bpf__attach(s->fleet))) {
			log_warn("no exec tracepoint (%s): %s\n",
				strerror(e ? -e : errno), s->opt.all || s->opt.daemon ?
				"new torch processes are found by scanning /proc every second" :
				"a traced process that exec's is noticed at its next read");
			fleet_bpf__destroy(s->fleet);
			s->fleet = NULL;
		}
	}
	s->probes = probes_new(s->skel, &s->ops, s->opt.entries_only);
	s->gpu = gpu_probes_new(s->skel);
	s->dev = agent_probes_new(s->skel);
	if (!s->dev)
		log_warn("loading the agent BPF programs failed (%s): no GPU "
			"timeline\n", strerror(errno));
	if (!s->gpu)
		log_msg("loading the GPU BPF programs failed: %s\n", strerror(errno));
	return s->probes && s->gpu ? 0 : -1;
}

static int setup_trace(struct session *s)
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
	log_msg("writing %s (renamed to %s when tracing ends)\n", s->out.tmp,
		s->opt.output);
	s->join = join_new(s->w, &s->ops, s->opt.entries_only);
	if (!s->join)
		return -1;
	if (s->opt.raw_output[0] && !(s->raw = raw_open(s->opt.raw_output, s->opt.force)))
		return -1;
	s->lost_track = pf_track_counter(s->w, 0, "ptbpf lost events", PF_UNIT_COUNT);
	pf_counter(s->w, s->lost_track, now_ns(), 0);
	return 0;
}

static int finish(struct session *s, int rc)
{
	uint64_t st[STAT_MAX] = { 0 }, stopped_at = now_ns();
	bool failed_before = s->w && pf_writer_error(s->w); /* said already */
	struct stat fst;
	off_t size;
	int err;

	if (agent_probes_any(s->dev)) {
		/* Switched off, each agent flushes what CUPTI still holds, then
		 * acknowledges (within 20 ms, plus the flush). */
		uint64_t until = now_ns() + 3000000000ull;

		agent_probes_switch_off(s->dev);
		/* The agents record until they see the switch-off: their rings
		 * are read on, or they would fill and drop. */
		while (now_ns() < until && s->rb && !agent_probes_all_acked(s->dev))
			pump(s, 5);
	}
	/* What the agents wrote, all of it, before they may be unloaded. */
	if (s->rb)
		pump(s, 0);
	if (s->opsr)
		ops_rings_finish(s->opsr, handle_op_record, s);
	/* Probes off, then the agents ptbpf loaded leave the processes. */
	agent_probes_free(s->dev);
	s->dev = NULL;
	if (s->probes)
		probes_detach(s->probes); /* nothing new after this */
	gpu_probes_free(s->gpu);
	s->gpu = NULL;
	if (s->rb)
		ring_buffer__consume(s->rb);
	drain_op_rings(s, UINT64_MAX);
	if (s->skel)
		stats_read(s, st);
	if (s->join && s->ntargets) {
		/* Frames still open are cut where tracing stopped (or at the
		 * last record, if later), not after the agents' wind-down. */
		join_finish(s->join, stopped_at);
		write_final_counters(s, st);
		print_summary(s, st);
	}
	if (s->raw && raw_close(s->raw, !s->discard_output))
		rc = 1;
	err = s->w ? pf_writer_close(s->w) : 0;
	size = s->out.fd >= 0 && !fstat(s->out.fd, &fst) ? fst.st_size : 0;
	if (!s->out.tmp[0] || s->out.fd < 0) {
		/* setup failed before the file was made: nothing to do */
	} else if (s->discard_output) {
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
	fleet_bpf__destroy(s->fleet);
	join_free(s->join);
	ops_rings_free(s->opsr);
	reorder_free(s->reorder);
	probes_free(s->probes);
	ring_buffer__free(s->rb);
	ptbpf_bpf__destroy(s->skel);
	for (int i = 0; i < s->ntargets; i++)
		target_close(&s->targets[i]);
	return rc;
}

/* `ptbpf run -- CMD`: start CMD with the agent, and trace it as -p once it
 * has loaded torch or a CUDA/HIP library. */
static int start_command(struct options *opt, pid_t *child)
{
	char agent[PATH_MAX];
	int status = 0, ret;

	if (agent_library_path(agent, sizeof(agent))) {
		log_msg("run: %s not found next to ptbpf\n", agent);
		return -1;
	}
	*child = agent_run_command(opt->run_argv, agent);
	if (*child < 0)
		return -1;
	ret = agent_wait_for_libraries(*child, 600000, &status);
	if (ret == -ESRCH) {
		log_msg("run: %s exited before it loaded torch or CUDA (status %d)\n",
			opt->run_argv[0], WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		return -1;
	}
	if (ret) {
		log_msg("run: %s loaded neither torch nor CUDA within 10 minutes\n",
			opt->run_argv[0]);
		return -1;
	}
	opt->pids[opt->npids++] = *child;
	if (!opt->output[0]) {
		char stamp[32];
		time_t now = time(NULL);

		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
		snprintf(opt->output, sizeof(opt->output), "ptbpf-%d-%s.pftrace", *child, stamp);
	}
	return 0;
}

/* In run mode, ptbpf exits with the command's status once it has exited. */
static int command_status(pid_t child, int rc)
{
	int status;

	if (child <= 0 || waitpid(child, &status, WNOHANG) != child)
		return rc;
	if (rc)
		return rc;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One daemon window: a fresh session over every torch process. */
static int run_window(const struct options *opt, const char *path, struct metrics *m)
{
	static struct session s;
	int rc;

	memset(&s, 0, sizeof(s));
	s.opt = *opt;
	s.opt.all = true;
	s.opt.duration_s = opt->window_s;
	snprintf(s.opt.output, sizeof(s.opt.output), "%s", path);
	s.metrics = m;
	s.max_trace_bytes = opt->max_bytes / 2;
	if (setup_bpf(&s) || setup_trace(&s)) {
		s.discard_output = true;
		return finish(&s, 1);
	}
	metrics_window(m, true);
	scan_all(&s);
	s.targets_cpu0 = targets_cpu(&s);
	trace_loop(&s);
	if (exiting && !s.stopped_why[0])
		snprintf(s.stopped_why, sizeof(s.stopped_why), "stopped by a signal");
	if (!s.ntargets) { /* no torch process: no file */
		log_msg("daemon: no PyTorch process in this window; nothing written\n");
		s.discard_output = true;
	}
	pump(&s, 0);
	publish_metrics(&s);
	if (s.stopped_why[0])
		log_msg("daemon: window ended early: %s\n", s.stopped_why);
	rc = finish(&s, 0);
	metrics_window(m, false);
	return rc;
}

int main(int argc, char **argv)
{
	static struct session s;
	struct sigaction sa = { .sa_handler = on_signal };
	pid_t child = 0;
	char err[512];
	int rc = 1;

	if (argc >= 2 && !strcmp(argv[1], "replay"))
		return replay_main(argc, argv);
	if (argc >= 2 && (!strcmp(argv[1], "report") || !strcmp(argv[1], "export")))
		return report_main(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "merge"))
		return merge_main(argc, argv);
	rc = cli_parse(argc, argv, &s.opt);
	if (rc)
		return rc > 0 ? rc : 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (cli_check_privileges(err, sizeof(err))) {
		log_msg("%s\n", err);
		return 1;
	}
	if (s.opt.daemon)
		return daemon_run(&s.opt, run_window, &exiting);
	if (s.opt.run_argv && start_command(&s.opt, &child))
		return 1;
	/* Refuse bad pids before anything touches a process or the disk. */
	for (int i = 0; i < s.opt.npids; i++) {
		struct target t;

		if (target_open(s.opt.pids[i], &t, err, sizeof(err)) ||
		    target_claim(&t, err, sizeof(err))) {
			log_msg("%s\n", err);
			target_close(&t);
			return 1;
		}
		target_close(&t);
	}
	if (setup_bpf(&s) || setup_trace(&s)) {
		s.discard_output = true; /* nothing was traced: leave no file */
		return finish(&s, 1);
	}
	for (int i = 0; i < s.opt.npids && !exiting; i++)
		if (add_target(&s, s.opt.pids[i], false) && !exiting)
			return finish(&s, 1);
	if (s.opt.all) {
		scan_all(&s);
		log_msg("--all: tracing %d processes; looking for more %s\n",
			s.ntargets, s.fleet ? "as they start (exec tracepoint; /proc every 5 s)" :
			"every second (/proc)");
	}
	if (exiting) {
		log_msg("interrupted during attach; detaching\n");
		return finish(&s, 128 + exiting);
	}
	trace_loop(&s);
	rc = 0;
	return command_status(child, finish(&s, rc));
}
