// SPDX-License-Identifier: BSD-2-Clause
/*
 * The traced processes: attaching one (the agent with its op recorder, or
 * uprobes; GPU-library probes; the agent's CUPTI timeline), finding new
 * ones (--all, exec, fork), and noticing when they exec or exit. See
 * session.h.
 */
#define _GNU_SOURCE
#include "live/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <bpf/libbpf.h>

#include "lib/log.h"
#include "lib/procmaps.h"
#include "attach/agent_ctl.h"
#include "attach/agent_probes.h"
#include "attach/claim.h"
#include "attach/gpu_probes.h"
#include "attach/inject.h"
#include "attach/leaving.h"
#include "attach/probes.h"
#include "fleet/select.h"
#include "attach/sample_probes.h"
#include "record/sched.h"
#include "attach/sched_probes.h"
#include "record/route.h"
#include "record/gpu_timeline.h"
#include "record/ops_ring.h"
#include "record/pystack.h"
#include "record/raw.h"
#include "record/reorder.h"
#include "record/samples.h"
#include "ptbpf_agent.h"
#include "ptbpf.skel.h"

/* Whether t's process has exited (a zombie has). */
static bool exited(const struct target *t)
{
	struct pollfd p = { .fd = t->pidfd, .events = POLLIN };

	return t->pidfd >= 0 && poll(&p, 1, 0) > 0;
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
 * why. Where the call's result could not be read back, the agent's own
 * control block says whether it loaded: every message is what happened.
 * False where it said the agent is not there (then it is not used). */
static bool load_agent(struct session *s, const struct target *t, bool for_ops)
{
	const char *instead = for_ops ? "ops come from uprobes, and there is no GPU timeline" :
					"tracing host-side only";
	char agent[PATH_MAX], err[512], why[512];
	uint64_t handle;
	int rc, call;

	if (s->opt.no_agent || t->memfd < 0)
		return true;
	if ((!for_ops && (t->no_gpu_timeline || !target_maps(t->pid, "libcuda.so"))) ||
	    target_maps(t->pid, "libptbpf-agent.so"))
		return true;
	if (agent_library_path(agent, sizeof(agent), true)) {
		log_warn("%s not found: no GPU timeline\n", agent);
		return false;
	}
	rc = inject_dlopen(t->pid, agent, &handle, err, sizeof(err));
	/* ptbpf run attaches while the command imports torch, whose threads
	 * can spend a second and more in the dynamic loader: it tries again
	 * (every 100 ms, for 10 s), where -p's one try meets a job past it. */
	for (int i = 0; rc == -EBUSY && s->opt.run_argv && i < 100 && !session_exiting; i++) {
		usleep(100000);
		rc = inject_dlopen(t->pid, agent, &handle, err, sizeof(err));
	}
	if (rc != -EIO && rc != -ETIMEDOUT) {
		if (rc && rc != -ESRCH && !exited(t)) /* else the attach fails, and says so */
			log_warn("pid %d: cannot load the agent: %s; %s\n", t->pid, err, instead);
		else
			agent_probes_injected(s->agents, t);
		return !rc;
	}
	/* The call ran (-EIO: it returned, then its thread wrote over the
	 * result) or still runs (-ETIMEDOUT): whatever comes of it is ours. */
	agent_probes_injected(s->agents, t);
	call = rc;
	rc = agent_load_outcome(t, &handle, why, sizeof(why));
	if (!rc) {
		log_debug("pid %d: the agent loaded (%s; its control block says so)\n", t->pid, err);
		return true;
	}
	if (exited(t))
		return false; /* the attach fails, and says so */
	if (rc == -ENOENT && call == -EIO)
		log_warn("pid %d: cannot load the agent: its dlopen failed and its message was lost "
			 "(%s); %s\n", t->pid, err, instead);
	else
		log_warn("pid %d: the agent is not loaded yet: %s; %s until it is (should it load "
			 "later, ptbpf switches it on for the GPU timeline, and unloads it when "
			 "tracing ends)\n", t->pid, err, instead);
	return false;
}

/* load_agent, with what a second Ctrl-C would leave noted around it
 * (attach/leaving.h); an agent an earlier ptbpf switched off but left
 * mapped is unloaded first, so that a fresh one can be loaded. */
static bool load_agent_noted(struct session *s, const struct target *t, bool for_ops)
{
	bool has_one, ok;

	if (s->opt.no_agent || t->memfd < 0)
		return true;
	has_one = target_maps(t->pid, "libptbpf-agent.so") && agent_probes_unload_ended(t);
	if (!has_one) /* this ptbpf loads it: it unloads it */
		leaving_agent(t->pid, LEAVING_LOADING, true);
	ok = load_agent(s, t, for_ops);
	/* Not loaded, or its load failed after the call had run. */
	if (!has_one && leaving_agent_state(t->pid) == LEAVING_LOADING)
		leaving_agent(t->pid, target_maps(t->pid, "libptbpf-agent.so") ?
			      LEAVING_DORMANT : LEAVING_NONE, true);
	return ok;
}

/* Why pid's agent has not answered, as far as /proc tells: the process
 * stopped, or where its thread is. */
static void unanswered_why(const struct session *s, int pid, char *b, size_t len)
{
	int tracer, tid = agent_probes_tid(s->agents, pid);
	char wchan[64], st;

	if ((st = target_stopped(pid, &tracer)))
		snprintf(b, len, st == 't' && tracer ? "the process is stopped by its tracer, "
			 "pid %d" : "the process is stopped", tracer);
	else if (!tid || !(st = target_thread_state(pid, tid, wchan, sizeof(wchan))))
		snprintf(b, len, "its agent thread is gone");
	else if (st == 'R')
		snprintf(b, len, "its agent thread, tid %d, is running", tid);
	else
		snprintf(b, len, "its agent thread, tid %d, is %s%s%s", tid,
			 st == 'D' ? "blocked in the kernel" : "asleep", wchan[0] ? " in " : "",
			 wchan);
}

/* The agent polls its control block every 20 ms, switches on what was
 * asked and acknowledges: wait (3 s at most) for that, so that "tracing"
 * means tracing; its statuses are in the ring then. If it does not answer
 * (a stopped process, its thread blocked), it is switched off again (it
 * must not start later behind ptbpf's back), and what /proc says of the
 * process and that thread is told. */
bool targets_wait_for_agent(struct session *s, int pid)
{
	uint64_t until = clock_mono_ns() + 3000000000ull;
	int r;

	while ((r = agent_probes_acked(s->agents, pid)) == -EAGAIN && clock_mono_ns() < until)
		read_pump(s, 5);
	read_pump(s, 0);
	if (!r)
		return true;
	/* A process that has exited: nothing to say. */
	if (target_alive(pid) == 1 && r == -EAGAIN) {
		char why[160];

		unanswered_why(s, pid, why, sizeof(why));
		log_warn("pid %d: its agent did not answer within 3 s (%s); it is switched off "
			 "again\n", pid, why);
	} else if (target_alive(pid) == 1)
		log_warn("pid %d: its agent can no longer be reached (%s); it is switched off "
			 "again\n", pid,
			 r == -ESRCH ? "its image is gone: it exec'd or is exiting" : strerror(-r));
	agent_probes_off(s->agents, pid);
	return false;
}

/* Uprobes on the CUDA/HIP/NCCL libraries; only NCCL's when the agent
 * records the CUDA calls (ops from the agent, CUPTI on): the others would
 * only add cost then. */
static bool calls_from_agent(struct session *s, const struct target *t)
{
	return t->ops_from_agent && !t->no_gpu_timeline &&
	       gpu_timeline_agent_calls(s->dec->timeline, t->pid);
}

void targets_scan_gpu(struct session *s, const struct target *t)
{
	gpu_probes_scan(s->gpu, t->pid, calls_from_agent(s, t));
}

void targets_rescan(struct session *s, struct target *t)
{
	unsigned long long vm = target_vm_size(t->pid);
	bool calls = calls_from_agent(s, t);

	/* Only where something was mapped since the last look, or CUDA calls
	 * stopped coming from the agent: reading a torch process's maps
	 * twice a second took most of the reader's CPU while the job idled. */
	if (vm && vm == t->vm_scanned && calls == t->calls_scanned)
		return;
	t->vm_scanned = vm;
	t->calls_scanned = calls;
	gpu_probes_scan(s->gpu, t->pid, calls);
	if (s->agents && agent_probes_scan(s->agents, t, false) == 1)
		targets_wait_for_agent(s, t->pid);
}

/* --gpu-timeline: in a process that runs NCCL, CUPTI 13.0's activity thread
 * crashed the job under ptbpf's agent (a SIGSEGV inside libcupti during a
 * forced flush, 3 of 3 two-GPU DDP soaks, within 40-66 attaches a rank;
 * not without the agent), so by default the agent leaves CUPTI alone
 * there. Said once per process (of the last 64). */
static bool wants_gpu_timeline(struct session *s, const struct target *t)
{
	static int said[64]; /* the daemon's windows: once per process */
	static unsigned nsaid;
	char thread[32];

	if (s->opt.gpu_timeline != GPU_TL_AUTO)
		return s->opt.gpu_timeline == GPU_TL_ON;
	if (s->opt.no_agent || !s->agents) /* no GPU timeline anyway */
		return true;
	if (!target_runs_nccl(t->pid, thread, sizeof(thread)))
		return true;
	for (unsigned i = 0; i < nsaid && i < 64; i++)
		if (said[i] == t->pid)
			return false;
	said[nsaid++ % 64] = t->pid;
	log_warn("pid %d runs NCCL (thread %s): no GPU timeline (CUPTI crashed NCCL jobs under "
		 "ptbpf's agent; README, known blind spots); CUDA and NCCL calls are traced, and "
		 "--gpu-timeline on records it anyway\n", t->pid, thread);
	return false;
}

/* Whether pid's ops should come from its agent: wherever it loads (auto or
 * --ops=agent): exact and cheap, with steps, regions and backward nodes on
 * every torch; uprobes with --ops=probes, and where the agent is refused. */
static bool wants_agent_ops(const struct session *s, const struct target *t)
{
	if (s->opt.ops == OPS_PROBES || t->torch.fd < 0 || !s->agents)
		return false;
	if (t->memfd < 0)
		log_warn("pid %d: no agent: cannot open /proc/%d/mem: %s%s; "
			"ops come from uprobes\n", t->pid, t->pid, strerror(t->mem_errno),
			t->mem_errno == EACCES ? " (another user's process: ptbpf needs "
			"CAP_DAC_OVERRIDE, or root)" : "");
	return t->memfd >= 0;
}

/* What a process's _exit or exec probe saved of its op rings' counters. */
static int ops_final(void *ctx, int pid, struct ptbpf_ops_loc *out)
{
	struct session *s = ctx;

	return agent_probes_ops_final(s->agents, pid, out);
}

/* Loads and switches on t's agent with its op recorder, and starts reading
 * its rings. False (with a warning) if that did not work: then uprobes. */
static bool start_agent_ops(struct session *s, const struct target *t)
{
	struct ptbpf_ops_loc loc;
	uint64_t desc, t0 = clock_mono_ns(), t1, t2;
	char err[512];
	bool ok;

	if (probes_trace_pid(s->probes, t->pid)) /* the agent's probes filter on it */
		return false;

	ok = load_agent_noted(s, t, true);
	t1 = clock_mono_ns();
	ok = ok && agent_probes_scan(s->agents, t, true) == 1;
	t2 = clock_mono_ns();
	ok = ok && targets_wait_for_agent(s, t->pid);
	log_debug("pid %d: agent: loaded in %.0f ms, probes and switched on in %.0f ms, "
		  "acknowledged in %.0f ms\n", t->pid, (t1 - t0) / 1e6, (t2 - t1) / 1e6,
		  (clock_mono_ns() - t2) / 1e6);
	if (!ok)
		return false;
	desc = gpu_timeline_ops_desc(s->dec->timeline, t->pid);
	if (!desc) {
		log_warn("pid %d: its agent records no ops; ops come from "
			"uprobes\n", t->pid);
		return false;
	}
	if (!s->opsr && !(s->opsr = ops_rings_new(ops_final, s)))
		return false;
	if (!s->reorder && !(s->reorder = reorder_new()))
		return false;
	if (ops_rings_add(s->opsr, t, desc, err, sizeof(err))) {
		log_warn("%s; ops come from uprobes\n", err);
		return false;
	}
	if (ops_rings_loc(s->opsr, t->pid, &loc) || agent_probes_ops_exit(s->agents, t, &loc))
		log_warn("pid %d: no probe on its libc's _exit: ops of "
			"its last 20 ms before it exits will be missing\n", t->pid);
	return true;
}

/* What the agent switched on for the next target records besides ops. */
static void agent_words(struct session *s, bool stacks)
{
	char words[64];

	if (!s->agents)
		return;
	snprintf(words, sizeof(words), "%s%s%s", s->opt.shapes ? OPS_WORD_SHAPES : "",
		 s->opt.kernel_clock ? OPS_WORD_KERNEL_CLOCK : "",
		 s->opt.compiled_regions ? OPS_WORD_REGIONS : "");
	if (stacks)
		snprintf(words + strlen(words), sizeof(words) - strlen(words), "%s%u",
			 OPS_WORD_STACKS, s->opt.py_stacks);
	agent_probes_ops_words(s->agents, words);
}

/* --py-stacks: where t's interpreter keeps its frames, for the BPF side;
 * then what t's agent is to record besides ops. */
static void watch_python(struct session *s, const struct target *t)
{
	struct ptbpf_py_proc pp;
	char err[512];
	int ret = pystack_find(s->dec->py, t->pid, &pp, err, sizeof(err));

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

/* Without --py-stacks: the interpreter's layout for the BPF side all the
 * same, op probes taking no stacks (every = 0), for RPC calls (the
 * caller's stack tells rpc_sync from rpc_async, record/join_rpc.c) and for
 * CPU samples' Python frames. */
static void watch_python_layout(struct session *s, const struct target *t)
{
	struct ptbpf_py_proc pp;
	char err[512];
	int ret;

	if (s->opt.py_stacks)
		return; /* watch_python did it */
	ret = pystack_find(s->dec->py, t->pid, &pp, err, sizeof(err));
	if (!ret) {
		pp.every = 0;
		ret = bpf_map__update_elem(s->skel->maps.py_procs, &t->pid, sizeof(t->pid), &pp,
					   sizeof(pp), BPF_ANY);
		if (ret)
			snprintf(err, sizeof(err), "pid %d: %s", t->pid, strerror(-ret));
	}
	/* -v: a process without Python (a C++ program) is no fault */
	if (ret && s->samples && ret != -ENOENT)
		log_warn("CPU samples of pid %d have no Python frames: %s\n", t->pid, err);
	else if (ret)
		log_debug("no Python stacks for pid %d (RPC calls are named without "
			  "rpc_sync/rpc_async, CPU samples have no Python frames): %s\n", t->pid,
			  err);
}

/* Agents record from their switch-on, and an attach goes on for 50 ms and
 * more after it (probes; the kernel view's and the sampler's start): their
 * rings are read meanwhile into the reorder buffer, so that a thread writing
 * 2 M records/s does not fill its 4 MiB before tracing starts. The loop's
 * first reads hand them on, in order. */
static void hold_op_records(struct session *s)
{
	if (s->opsr && s->reorder)
		ops_rings_drain(s->opsr, read_op_record, s);
}

/* The kernel view and the sampler take pid's threads: its attach is over. */
static void watch_threads(struct session *s, int pid)
{
	uint64_t ts = clock_mono_ns(); /* before: a wakeup just after the watch is inside the call */

	if (sched_probes_watch(s->sched, pid, true))
		log_warn("pid %d: no thread states (the kernel view could not take it)\n", pid);
	else if (s->schedv) /* the calls its threads are blocked in already */
		sched_view_started(s->schedv, pid, ts, s->dec->py);
	hold_op_records(s);
	if (sample_probes_watch(s->samples, pid, true)) {
		log_warn("pid %d: no CPU samples (the sampler could not take it)\n", pid);
		sample_view_process_gone(s->dec->samples, pid);
	} else if (s->samples) { /* its mappings again: the agent's library is new */
		sample_view_warm(s->dec->samples, pid);
	}
	hold_op_records(s);
}

/* What else a process gets once its ops are traced: torch.distributed.rpc
 * probes (and Python's layout, for them and for CPU samples), and the
 * memory timeline. */
static void attach_extras(struct session *s, const struct target *t)
{
	char err[512];
	int rpc = probes_attach_rpc(s->probes, t);

	if (rpc < 0)
		log_warn("pid %d: no torch.distributed.rpc probes: %s\n", t->pid, strerror(-rpc));
	if (rpc > 0 || s->samples)
		watch_python_layout(s, t);
	if (s->opt.memory && t->torch.fd >= 0 && probes_attach_mem(s->probes, t, err, sizeof(err)))
		log_warn("no memory timeline: %s\n", err);
}

/* When each part of an attach ended (-v says). */
struct attach_times {
	uint64_t start, opened, ops, gpu;
};

/* Opens and attaches pid into t (ops from its agent or from uprobes); 0,
 * or -errno with one line in err ("" when said already, or for -EINTR). */
static int attach_ops(struct session *s, struct target *t, int pid, struct attach_report *rep,
		      bool *agent_ops, struct attach_times *at, char *err, size_t errlen)
{
	int ret;

	ret = target_open(pid, t, err, errlen);
	if (!ret)
		ret = target_claim(t, err, errlen);
	if (ret)
		return ret;
	at->opened = clock_mono_ns();
	join_add_process(s->join, t);
	t->no_gpu_timeline = !wants_gpu_timeline(s, t);
	if (s->opt.py_stacks) /* before any op can ask for a stack */
		watch_python(s, t);
	else
		agent_words(s, false);
	/* Its libraries' symbols, for CPU samples, read now (100 ms and more
	 * for libtorch), before an agent records (forgotten if the attach
	 * fails; its mappings read again at the watch). */
	if (s->samples)
		sample_view_warm(s->dec->samples, pid);
	*agent_ops = wants_agent_ops(s, t) && start_agent_ops(s, t);
	if (!*agent_ops)
		ret = probes_attach(s->probes, t, rep, &session_exiting, err, errlen);
	/* Children it forks have the agent without its thread: they get
	 * uprobes, which must not take a plan's time then. */
	else if (s->opt.follow_children && probes_prepare(s->probes, t, err, errlen))
		log_warn("%s\n", err);
	at->ops = clock_mono_ns();
	if (ret && s->samples) /* warmed, not traced */
		sample_view_process_gone(s->dec->samples, pid);
	return ret;
}

/* The rest of a process's attach, once its ops are traced: rpc, memory
 * and GPU probes, the GPU agent. */
static void attach_rest(struct session *s, struct target *t, bool agent_ops,
			struct attach_times *at)
{
	t->ops_from_agent = agent_ops;
	hold_op_records(s);
	attach_extras(s, t);
	s->ntargets++;
	if (s->raw) {
		raw_ops(s->raw, &s->ops);
		raw_process(s->raw, t);
	}
	hold_op_records(s);
	targets_scan_gpu(s, t);
	at->gpu = clock_mono_ns();
	if (s->agents && !agent_ops) {
		if (load_agent_noted(s, t, false) && agent_probes_scan(s->agents, t, false) == 1)
			targets_wait_for_agent(s, t->pid);
	}
	log_debug("pid %d: attach: opened in %.0f ms, ops (%s) in %.0f ms, rpc/memory/GPU "
		  "probes in %.0f ms, the GPU agent in %.0f ms\n", t->pid,
		  (at->opened - at->start) / 1e6, agent_ops ? "agent" : "uprobes", (at->ops - at->opened) / 1e6,
		  (at->gpu - at->ops) / 1e6, (clock_mono_ns() - at->gpu) / 1e6);
}

/* Opens and attaches one more process; 0, or -errno with a message
 * printed. What the attach says is held until it ends (lib/log.h): a
 * process that exits, or is being killed, meanwhile gets one line that
 * says so, never a diagnosis of what failed because it was going (its
 * libc unmapped, its agent unreachable). Tracing it starts when its
 * attach ends with it still there and no Ctrl-C meanwhile ("tracing pid
 * N"); a Ctrl-C during the attach makes it -EINTR, said by the caller. */
int targets_add(struct session *s, int pid, bool quiet_if_gone)
{
	struct target *t = &s->targets[s->ntargets];
	struct attach_report rep = { 0 };
	bool agent_ops = false, gone;
	struct attach_times at = { .start = clock_mono_ns() };
	char err[512] = "";
	int ret;

	if (s->ntargets >= MAX_TARGETS) {
		log_msg("at most %d processes can be traced\n", MAX_TARGETS);
		return -E2BIG;
	}
	log_hold();
	ret = attach_ops(s, t, pid, &rep, &agent_ops, &at, err, sizeof(err));
	if (ret)
		target_close(t);
	else
		attach_rest(s, t, agent_ops, &at);
	gone = ret != -EINTR && (ret == -ESRCH || target_gone(pid));
	log_release(gone);
	if (gone) {
		if (!quiet_if_gone)
			log_msg("pid %d exited during the attach: nothing of it was traced\n", pid);
		return -ESRCH;
	}
	if (ret && ret != -EINTR && err[0])
		log_msg("%s\n", err);
	if (ret || session_exiting) {
		s->attach_cut |= ret == -EINTR || session_exiting;
		return ret ? ret : -EINTR;
	}
	if (!s->traced)
		leaving_trace(s->out.tmp, true);
	s->traced = true;
	watch_threads(s, pid);
	print_attach(t, &rep, agent_ops); /* last: tests wait for this line */
	return 0;
}

void targets_add_child(struct session *s, int pid)
{
	/* It may have exec'd before this looks: torch.compile's sidecar is
	 * started so. One that execs later is watched (targets_exec). */
	if (select_compile_worker(pid))
		log_msg("pid %d, a child of a traced process, is Inductor's compile worker: "
			"not traced\n", pid);
	else
		targets_add(s, pid, true);
}

/* Whether /proc/PID/maps names libtorch_cpu.so. */
static bool maps_torch(int pid)
{
	struct procmaps *m = procmaps_open(pid);
	struct procmap e;
	bool found = false;

	while (m && !found && procmaps_next(m, &e))
		found = strstr(e.path, "/libtorch_cpu.so") != NULL;
	procmaps_close(m);
	return found;
}

static bool refused(const struct session *s, int pid)
{
	for (int i = 0; i < s->find.nrefused; i++)
		if (s->find.refused[i] == pid)
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
	if (targets_add(s, pid, true) &&
	    s->find.nrefused < (int)(sizeof(s->find.refused) / sizeof(s->find.refused[0])))
		s->find.refused[s->find.nrefused++] = pid;
}

/* Processes seen exec'ing (--all: any; else traced ones) are checked every
 * 200 ms for 60 s: the moment one maps libtorch, it is attached. */
void targets_attach_mapped(struct session *s)
{
	uint64_t now = clock_mono_ns();

	for (int i = 0; i < s->find.nmapped; i++) {
		int pid = s->find.mapped[i].pid;
		bool alive = target_alive(pid) == 1, torch;

		if (alive && now - s->find.mapped[i].checked < 200000000ull)
			continue;
		s->find.mapped[i].checked = now;
		torch = alive && !traced_now(s, pid) && maps_torch(pid);
		if (torch && !refused(s, pid) && select_process(&s->opt, s->win.trigger, pid)) {
			attach_found(s, pid);
		} else if (alive && !torch && !traced_now(s, pid) &&
			   now - s->find.mapped[i].at < 60000000000ull) {
			continue;
		} else if (s->find.mapped[i].exec && !traced_now(s, pid) && !refused(s, pid)) {
			/* (a refused one was told when its attach failed) */
			log_msg("pid %d exec'd into %s\n", pid,
				!alive ? "a program that has exited" :
				!torch ? "a program that did not map libtorch within 60 s: not traced" :
				select_compile_worker(pid) ? "Inductor's compile worker: not traced" :
				"a torch process that --match-env or the window's trigger leaves out:"
				" not traced");
		}
		s->find.mapped[i--] = s->find.mapped[--s->find.nmapped];
	}
}

/* --all: attaches to every process that maps libtorch_cpu.so and is not
 * traced yet. Run at start, then every 5 s (every second without the exec
 * tracepoint): a process imports torch, and so maps it, whenever it gets
 * to it. */
void targets_scan_all(struct session *s)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) && !session_exiting) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == getpid() || traced_now(s, (int)pid) ||
		    refused(s, (int)pid) || !maps_torch((int)pid) ||
		    !select_process(&s->opt, s->win.trigger, (int)pid))
			continue;
		if (s->ntargets >= MAX_TARGETS)
			break;
		attach_found(s, (int)pid);
	}
	closedir(d);
}

/* --all (every exec) and exec'd targets: watched every 200 ms for 60 s,
 * and attached the moment they map libtorch. */
void targets_watch_new(struct session *s, int pid, uint64_t ts, bool was_traced)
{
	int i;

	if (!s->opt.all && !was_traced)
		return;
	for (i = 0; i < s->find.nmapped && s->find.mapped[i].pid != pid; i++)
		;
	if (i == s->find.nmapped &&
	    s->find.nmapped < (int)(sizeof(s->find.mapped) / sizeof(s->find.mapped[0])))
		s->find.nmapped++;
	else if (i == s->find.nmapped) /* full: the oldest watch makes room */
		i = 0;
	s->find.mapped[i] = (typeof(s->find.mapped[0])){ pid, ts, 0, was_traced };
}

/* A traced process exec'd: its old image is gone, and nothing of ptbpf's
 * reads or writes memory there again (its rings and agent were reached
 * through the old image's /proc/PID/mem). Its probes go too; the new
 * image is a new process, traced once it maps libtorch. */
bool targets_exec(struct session *s, int pid)
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
			ops_rings_exec(s->opsr, pid, read_op_record, s);
		agent_probes_gone(s->agents, pid);
		gpu_probes_forget_pid(s->gpu, pid);
		probes_forget_pid(s->probes, pid);
		sched_probes_watch(s->sched, pid, false);
		sample_probes_watch(s->samples, pid, false);
		target_close(t);
		s->execs++;
		return true;
	}
	return false;
}

/* Marks exited targets; returns how many are still alive. */
int targets_reap(struct session *s)
{
	int alive = 0;

	for (int i = 0; i < s->ntargets; i++) {
		struct target *t = &s->targets[i];

		if (t->pidfd < 0)
			continue;
		if (exited(t)) {
			/* Its frames close at its EV_PROC_EXIT, the last record it
			 * sends (or at the end, should that be lost): records of
			 * its threads may still be on their way into the ring. */
			ring_buffer__consume(s->rb);
			sched_probes_watch(s->sched, t->pid, false); /* its pid may be reused */
			sample_probes_watch(s->samples, t->pid, false);
			close(t->pidfd);
			t->pidfd = -1;
			leaving_agent(t->pid, LEAVING_NONE, false);
			continue;
		}
		alive++;
	}
	return alive;
}
