// SPDX-License-Identifier: BSD-2-Clause
/* The agent's probe points, attached, and commands to it. See agent_probes.h. */
#define _GNU_SOURCE
#include "attach/agent_probes.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "lib/log.h"
#include "attach/agent_ctl.h"
#include "lib/elfsym.h"
#include "attach/leaving.h"
#include "attach/links.h"
#include "attach/probes.h"
#include "ptbpf_agent.h"
#include "attach/target.h"
#include "ptbpf.skel.h"
#include "agent.skel.h"

_Static_assert(sizeof(struct ptbpf_agent_kernel) <= AGENT_RAW_LEN, "kernel record too big");
_Static_assert(sizeof(struct ptbpf_agent_memcpy) <= AGENT_RAW_LEN, "memcpy record too big");
_Static_assert(sizeof(struct ptbpf_agent_memset) <= AGENT_RAW_LEN, "memset record too big");

#define MAX_AGENTS 256
#define MAX_STREAM_TRACKS 4096

struct agent_probes {
	struct agent_bpf *skel;
	struct link_set links;
	struct {
		int pid;
		struct agent_link a;
		bool sent;     /* a command went out (ON at attach, then OFF/EXIT) */
		bool injected; /* this ptbpf loaded it */
	} ag[MAX_AGENTS];
	int n;
	/* Targets whose agent this ptbpf loaded, or whose load it started
	 * and could not see end (it may load later). */
	const struct target *injected[MAX_AGENTS];
	int ninjected;
	char ops_words[64]; /* what the op recorder adds (OPS_WORD_*) */
	char keep_words[16]; /* agent_probes_keep's, or "" */
	bool signal_probe;  /* ops_signal attached (once, for every process) */
};

struct agent_probes *agent_probes_new(struct ptbpf_bpf *ops)
{
	struct agent_probes *d = calloc(1, sizeof(*d));
	uint64_t again = 0;
	int err;

	if (!d)
		return NULL;
	do {
		agent_bpf__destroy(d->skel);
		d->skel = agent_bpf__open();
		if (!d->skel)
			goto fail;
		d->skel->rodata->wakeup_bytes = ops->rodata->wakeup_bytes;
		if (!(err = probes_share_maps(ops, d->skel->obj)))
			err = agent_bpf__load(d->skel);
	} while (probes_load_again(err, &again));
	if (err) {
		errno = -err;
		goto fail;
	}
	return d;
fail:
	agent_probes_free(d);
	return NULL;
}

static int agent_index(const struct agent_probes *d, int pid)
{
	for (int i = 0; i < d->n; i++)
		if (d->ag[i].pid == pid)
			return i;
	return -1;
}

static int attach_one(struct agent_probes *d, struct bpf_program *prog, int pid,
		      const char *path, struct elf_file *ef, const char *sym, uint64_t cookie)
{
	struct elf_func f;
	unsigned long off;
	__u64 c = cookie;

	if (elf_file_find_func(ef, sym, &f))
		return -ENOENT;
	off = f.file_off;
	/* A uprobe.multi link even for one point: it leaves at detach in one
	 * grace period that runs beside the others' (keeper.c); a perf-event
	 * uprobe's is serialized (4 of them took ~420 ms per process). */
	LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = &off, .cookies = &c, .cnt = 1);
	return link_set_uprobes(&d->links, pid, prog, path, &o, false);
}

static int attach_records(struct agent_probes *d, int pid, const char *path,
			  struct elf_file *ef)
{
	/* Optional: an agent older than graph nodes has none (its replayed
	 * kernels then carry no capture), or no kept capture map. */
	static const struct { const char *sym; uint64_t cookie; bool optional; } recs[] = {
		{ "ptbpf_agent_kernel",
		  AGENT_REC_KERNEL | (offsetof(struct ptbpf_agent_kernel, name) << 8), false },
		{ "ptbpf_agent_memcpy", AGENT_REC_MEMCPY, false },
		{ "ptbpf_agent_memset", AGENT_REC_MEMSET, false },
		{ "ptbpf_agent_graph_node", AGENT_REC_GRAPH_NODE, true },
		{ "ptbpf_agent_graph_kept", AGENT_REC_GRAPH_KEPT, true },
	};
	unsigned long offs[sizeof(recs) / sizeof(recs[0])];
	__u64 cookies[sizeof(recs) / sizeof(recs[0])];
	struct elf_func f;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		if (elf_file_find_func(ef, recs[i].sym, &f)) {
			if (recs[i].optional)
				continue;
			return -ENOENT;
		}
		offs[n] = f.file_off;
		cookies[n++] = recs[i].cookie;
	}
	LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = offs, .cookies = cookies, .cnt = n);
	return link_set_uprobes(&d->links, pid, d->skel->progs.agent_record, path, &o, false);
}

void agent_probes_ops_words(struct agent_probes *d, const char *words)
{
	snprintf(d->ops_words, sizeof(d->ops_words), "%s", words);
}

_Static_assert(sizeof(OPS_WORD_STEPS OPS_WORD_GRAPHS) <=
	       sizeof(((struct agent_probes *)0)->keep_words),
	       "the always-on layer's words do not fit keep_words");

void agent_probes_keep(struct agent_probes *d, const char *words)
{
	if (d)
		snprintf(d->keep_words, sizeof(d->keep_words), "%s", words);
}

void agent_probes_injected(struct agent_probes *d, const struct target *t)
{
	if (d->ninjected < MAX_AGENTS)
		d->injected[d->ninjected++] = t;
	leaving_agent(t->pid, LEAVING_DORMANT, true);
}

/* An agent an earlier ptbpf switched off for good (its thread ended) but
 * could not unload (it was interrupted, or the process was stopped or
 * traced then). */
static bool ended_agent(const struct agent_link *a)
{
	struct ptbpf_agent_ctl c;

	return !target_mem_read(a->t, a->ctl, &c, sizeof(c)) && c.magic == PTBPF_CTL_MAGIC &&
	       c.version == PTBPF_CTL_VERSION && c.state == PTBPF_STATE_GONE && !c.agent_tid;
}

int agent_probes_unload_ended(const struct target *t)
{
	struct agent_link a;
	char err[512];
	int ret = agent_link_open(t, &a, err, sizeof(err));

	if (ret || !ended_agent(&a))
		return ret ? ret : -EBUSY;
	ret = agent_unload(&a, err, sizeof(err));
	if (ret)
		log_warn("%s; the agent an earlier ptbpf switched off stays mapped\n", err);
	else
		log_msg("pid %d: unloaded the agent an earlier ptbpf had switched off but "
			"left mapped\n", t->pid);
	return ret;
}

/* The agent's probes: its records, correlations, drops, statuses (the one
 * on ptbpf_agent_status also tells the agent that ptbpf lives), stacks. */
static int attach_agent(struct agent_probes *d, const struct target *t)
{
	struct target_lib lib;
	struct elf_file *ef;
	char why[256];
	int err;

	err = target_find_lib(t->pid, "libptbpf-agent.so", &lib);
	if (err)
		return err;
	ef = elf_file_open_exported(lib.fd, why, sizeof(why));
	if (!ef) {
		log_msg("pid %d: cannot read %s: %s\n", t->pid, lib.path, why);
		close(lib.fd);
		return -EINVAL;
	}
	err = attach_records(d, t->pid, lib.attach_path, ef);
	if (!err)
		err = attach_one(d, d->skel->progs.agent_correlate, t->pid, lib.attach_path, ef,
				 "ptbpf_agent_correlate", 0);
	if (!err)
		err = attach_one(d, d->skel->progs.agent_dropped, t->pid, lib.attach_path, ef,
				 "ptbpf_agent_dropped", 0);
	if (!err)
		err = attach_one(d, d->skel->progs.agent_status, t->pid, lib.attach_path, ef,
				 "ptbpf_agent_status", 0);
	/* An agent of an older ptbpf lacks it (and its op rings are of
	 * another version: ptbpf reads none). */
	if (!err)
		attach_one(d, d->skel->progs.agent_wake, t->pid, lib.attach_path, ef,
			   "ptbpf_agent_wake", 0);
	/* Only where Python stacks are wanted; an agent of an older ptbpf
	 * lacks the point and gets none. */
	if (!err && strstr(d->ops_words, OPS_WORD_STACKS) &&
	    attach_one(d, d->skel->progs.agent_pystack, t->pid, lib.attach_path, ef,
		       "ptbpf_agent_pystack", 0))
		log_warn("pid %d: no Python stacks from its agent %s\n",
			t->pid, lib.path);
	elf_file_close(ef);
	close(lib.fd);
	return err;
}

/* Kineto's CUPTI buffer callbacks in t's libtorch_cpu (static member
 * functions, exported by torch 2.11's and in .symtab): the agent hands the
 * job's buffers back through them should it ever take CUPTI from a
 * profiler session it could not see. 0s if not found (the agent then
 * waits for the job's next session to learn them). */
static void kineto_callbacks(const struct target *t, uint64_t *req, uint64_t *done)
{
	/* The length of each name before it, as the mangling has it. */
	static const char *const needles[2] = { "CuptiActivityApi25bufferRequestedTrampoline",
						"CuptiActivityApi25bufferCompletedTrampoline" };
	uint64_t off[2];
	struct elf_file *ef;
	char why[256];

	*req = *done = 0;
	if (t->torch.fd < 0 || !target_maps(t->pid, "libcupti.so"))
		return;
	ef = elf_file_open_sections(t->torch.fd, why, sizeof(why));
	if (ef && !elf_file_find_containing(ef, needles, 2, off) && off[0] && off[1] &&
	    (target_file_addr(t->pid, &t->torch, off[0], req) ||
	     target_file_addr(t->pid, &t->torch, off[1], done)))
		*req = *done = 0;
	elf_file_close(ef);
}

int agent_probes_scan(struct agent_probes *d, const struct target *t, bool ops)
{
	uint64_t req, done;
	char words[128], err[512];
	bool injected = false;
	int i, ret;

	if (agent_index(d, t->pid) >= 0 || d->n == MAX_AGENTS ||
	    (!ops && t->no_gpu_timeline && !d->keep_words[0]))
		return 0; /* nothing to switch on */
	i = d->n;
	ret = agent_link_open(t, &d->ag[i].a, err, sizeof(err));
	if (ret == -ENOENT)
		return 0;
	d->ag[i].pid = t->pid;
	d->n++; /* failures are not retried */
	if (ret) {
		log_warn("%s\n", err);
		return ret;
	}
	if (!agent_running(&d->ag[i].a)) {
		log_msg("pid %d maps an agent whose thread does not run (a copy in a child "
			"forked by a traced process?): not used\n", t->pid);
		return 0;
	}
	/* Loaded by this ptbpf, or by one that left before it could say so
	 * (the agent notes a load by a ptbpf's ptrace); not one the process
	 * loaded itself, which stays. */
	injected = agent_injected(&d->ag[i].a);
	for (int k = 0; k < d->ninjected; k++)
		injected |= d->injected[k]->pid == t->pid;
	d->ag[i].injected = injected;
	ret = attach_agent(d, t);
	if (!ret) {
		kineto_callbacks(t, &req, &done);
		snprintf(words, sizeof(words), "%s%s%s%s", ops ? OPS_WORD_OPS : "",
			 ops ? d->ops_words : "", d->keep_words,
			 t->no_gpu_timeline ? OPS_WORD_NO_GPU : "");
		ret = agent_send(&d->ag[i].a, PTBPF_CMD_ON, words, req, done, injected);
		d->ag[i].sent = !ret;
	}
	if (ret) {
		log_msg("pid %d: cannot use its agent: %s\n", t->pid,
			ret == -EPROTO ? "it is of another version: restart the process to trace "
			"it with this ptbpf" : strerror(-ret));
		return ret;
	}
	leaving_agent(t->pid, LEAVING_ON, agent_injected(&d->ag[i].a));
	/* The GPU timeline is asked for: whether CUPTI gives it, the agent's
	 * own line says next ("active: GPU timeline on", or why not). */
	log_msg("pid %d: agent switched on (%s)\n", t->pid,
		!ops ? (t->no_gpu_timeline ? "its step signal; no GPU timeline" :
			"the GPU timeline asked for") :
		t->no_gpu_timeline ? "ops; no GPU timeline" :
		"ops; the GPU timeline asked for if CUDA is used");
	return 1;
}

void agent_probes_off(struct agent_probes *d, int pid)
{
	int i = agent_index(d, pid);

	if (i < 0 || !d->ag[i].sent)
		return;
	d->ag[i].sent = !agent_send(&d->ag[i].a, PTBPF_CMD_OFF, d->keep_words, 0, 0, false);
	if (d->ag[i].sent)
		leaving_agent(pid, LEAVING_OFF, agent_injected(&d->ag[i].a));
}

int agent_probes_steps(const struct agent_probes *d, int pid, struct ptbpf_agent_steps *out)
{
	int i = d ? agent_index(d, pid) : -1;

	return i < 0 ? -ENOENT : agent_steps_read(&d->ag[i].a, out);
}

int agent_probes_acked(const struct agent_probes *d, int pid)
{
	int i = agent_index(d, pid);

	return i < 0 || !d->ag[i].sent ? -ENOENT : agent_acked(&d->ag[i].a);
}

int agent_probes_tid(const struct agent_probes *d, int pid)
{
	int i = agent_index(d, pid);

	return i < 0 || !d->ag[i].sent ? 0 : (int)d->ag[i].a.tid;
}

int agent_probes_ops_exit(struct agent_probes *d, const struct target *t,
			  const struct ptbpf_ops_loc *loc)
{
	/* _exit: the process ends, its memory goes: the last copy, then a
	 * marker (cookie 1). execve*: the image goes, the process may go on:
	 * a copy only. */
	static const struct { const char *sym; uint64_t cookie; } sites[] = {
		{ "_exit", 1 }, { "execve", 0 }, { "execveat", 0 }, { "fexecve", 0 },
	};
	struct target_lib lib;
	struct elf_file *ef;
	char why[256];
	int err;

	err = target_find_lib(t->pid, "libc.so.6", &lib);
	if (err)
		return err;
	ef = elf_file_open_exported(lib.fd, why, sizeof(why));
	err = ef ? 0 : -EINVAL;
	for (size_t i = 0; !err && i < sizeof(sites) / sizeof(sites[0]); i++) {
		int e = attach_one(d, d->skel->progs.ops_exit, t->pid, lib.attach_path, ef,
				   sites[i].sym, sites[i].cookie);

		if (i == 0 || e != -ENOENT) /* _exit is required */
			err = e;
	}
	elf_file_close(ef);
	close(lib.fd);
	if (!err)
		err = bpf_map__update_elem(d->skel->maps.ops_rings, &t->pid, sizeof(t->pid), loc,
					   sizeof(*loc), BPF_ANY);
	/* A process killed by a signal runs no _exit: a tracepoint on the
	 * way out saves its rings' counters (pid 0: every process's). */
	if (!err && !d->signal_probe) {
		int e = link_set_keep(&d->links, 0, bpf_program__attach(d->skel->progs.ops_signal));

		d->signal_probe = !e;
		if (e)
			log_warn("no signal_deliver tracepoint (%s): ops a process killed by a "
				 "signal wrote after ptbpf's last read are not counted\n",
				 strerror(-e));
	}
	return err;
}

/* An agent whose load this ptbpf started but never saw end (the call
 * outlived its wait) may have loaded since: it was never switched on, and
 * is sent EXIT now, so that it leaves with the others. */
static void adopt_late_agents(struct agent_probes *d)
{
	char err[512];

	for (int k = 0; k < d->ninjected && d->n < MAX_AGENTS; k++) {
		const struct target *t = d->injected[k];
		int i = d->n;

		if (t->pidfd < 0 || agent_index(d, t->pid) >= 0 ||
		    agent_link_open(t, &d->ag[i].a, err, sizeof(err)) || !agent_running(&d->ag[i].a))
			continue;
		d->ag[i].pid = t->pid;
		d->ag[i].injected = true;
		d->ag[i].sent = !agent_send(&d->ag[i].a, d->keep_words[0] ? PTBPF_CMD_OFF :
					    PTBPF_CMD_EXIT, d->keep_words, 0, 0, true);
		d->n++;
		log_msg("pid %d: the agent whose load did not finish in time has loaded since; it was "
			"never switched on and is %s now\n", t->pid, d->keep_words[0] ?
			"left to the always-on layer" : "unloaded");
	}
}

int agent_probes_ops_final(const struct agent_probes *d, int pid, struct ptbpf_ops_loc *out)
{
	if (!d || bpf_map__lookup_elem(d->skel->maps.ops_rings, &pid, sizeof(pid), out,
				       sizeof(*out), 0))
		return -ENOENT;
	return out->final_ts ? 0 : -ENOENT;
}

void agent_probes_switch_off(struct agent_probes *d)
{
	if (d)
		adopt_late_agents(d);
	for (int i = 0; d && i < d->n; i++) {
		struct agent_link *a = &d->ag[i].a;
		bool injected;

		/* One loaded by a ptbpf goes, also if it was never switched on. */
		if ((!d->ag[i].sent && !d->ag[i].injected) || a->t->pidfd < 0)
			continue;
		/* An agent ptbpf loaded ends its thread, to be unloaded, unless
		 * it is kept. */
		injected = (d->ag[i].injected || agent_injected(a)) && !d->keep_words[0];
		d->ag[i].sent = !agent_send(a, injected ? PTBPF_CMD_EXIT : PTBPF_CMD_OFF,
					    d->keep_words, 0, 0, d->ag[i].injected);
		if (d->ag[i].sent)
			leaving_agent(d->ag[i].pid, LEAVING_OFF, injected);
	}
}

bool agent_probes_all_acked(const struct agent_probes *d)
{
	int tracer;

	for (int i = 0; d && i < d->n; i++)
		if (d->ag[i].sent && d->ag[i].a.t->pidfd >= 0 &&
		    agent_acked(&d->ag[i].a) == -EAGAIN && !target_stopped(d->ag[i].pid, &tracer))
			return false;
	return true;
}

bool agent_probes_any(const struct agent_probes *d)
{
	return d && d->n > 0;
}

void agent_probes_gone(struct agent_probes *d, int pid)
{
	int i = d ? agent_index(d, pid) : -1;

	if (i < 0)
		return;
	link_set_destroy_pid(&d->links, pid);
	bpf_map__delete_elem(d->skel->maps.ops_rings, &pid, sizeof(pid), 0);
	d->ag[i] = d->ag[--d->n];
	leaving_agent(pid, LEAVING_NONE, false);
}

/* What stays of an agent switched off that did not answer (acked false),
 * or could not be unloaded because its process is stopped, in one line;
 * unload: it was to leave the process. */
static void say_kept(const struct agent_probes *d, int i, bool unload, bool acked)
{
	char how[160], comm[64], then[96];
	int pid = d->ag[i].pid, tracer, stopped = target_stopped(pid, &tracer);

	if (stopped && tracer) {
		target_thread_name(tracer, tracer, comm, sizeof(comm));
		snprintf(how, sizeof(how), "is stopped under a debugger (pid %d, %s)", tracer, comm);
	} else {
		snprintf(how, sizeof(how), "%s", stopped ? "is stopped (SIGSTOP or another stop "
			 "signal)" : "has not answered its switch-off");
	}
	snprintf(then, sizeof(then), "%s", acked ? "switched off" : stopped ?
		 "switches itself off once the process runs again" :
		 "switches itself off once its thread gets to it");
	if (!unload)
		log_warn("pid %d %s: its agent %s\n", pid, how, then);
	else
		log_warn("pid %d %s: its agent cannot be unloaded now; it stays mapped and %s (run "
			 "ptbpf -p %d again and stop it normally to unload it)\n", pid, how, then, pid);
}

/* After the switch-off: an agent told to EXIT that did leaves the
 * process; what stays instead is said in one line. */
static void unload_one(struct agent_probes *d, int i)
{
	struct agent_link *a = &d->ag[i].a;
	int pid = d->ag[i].pid, acked = d->ag[i].sent ? agent_acked(a) : 0, tracer;
	bool unload = a->cmd == PTBPF_CMD_EXIT;
	char err[512];

	if (a->t->pidfd < 0 || acked == -ESRCH) { /* exited, or exec'd: nothing stays */
		leaving_agent(pid, LEAVING_NONE, false);
		return;
	}
	if (!d->ag[i].sent) /* never commanded, or its command failed (said then) */
		return;
	if (acked || (unload && target_stopped(pid, &tracer))) {
		say_kept(d, i, unload, !acked);
		return;
	}
	if (!unload) { /* the process's own agent, switched off */
		leaving_agent(pid, LEAVING_NONE, false);
		return;
	}
	leaving_agent(pid, LEAVING_UNLOADING, true);
	if (!agent_unload(a, err, sizeof(err)) || !target_alive(pid)) {
		leaving_agent(pid, LEAVING_NONE, false);
		return;
	}
	leaving_agent(pid, LEAVING_OFF, ended_agent(a));
	if (ended_agent(a))
		log_warn("%s; its agent stays mapped, switched off (run ptbpf -p %d again and "
			 "stop it normally to unload it)\n", err, pid);
	else
		log_warn("%s; its agent stays mapped, switched off\n", err);
}

const struct bpf_object *agent_probes_obj(const struct agent_probes *d)
{
	return d ? d->skel->obj : NULL;
}

void agent_probes_free(struct agent_probes *d)
{
	if (!d)
		return;
	link_set_destroy(&d->links);
	agent_bpf__destroy(d->skel);
	for (int i = 0; i < d->n; i++)
		unload_one(d, i);
	free(d);
}
