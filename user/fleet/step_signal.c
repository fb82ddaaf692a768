// SPDX-License-Identifier: BSD-2-Clause
/*
 * The daemon's always-on layer. Every 2 s it looks in /proc for torch
 * processes (libtorch_cpu mapped) that --match-env selects, claims each
 * (attach/claim.h: a capture window of this same daemon may trace it
 * besides), loads the agent where there is none (ptrace dlopen, as a
 * window does) and switches its step signal on: OFF with OPS_WORD_STEPS,
 * so nothing else is recorded (with --keep-graphs, OPS_WORD_GRAPHS too: the
 * agent keeps the CUDA-graph capture map for the windows, graphs.c). Every
 * tick (200 ms) it renews each agent's lease (the heartbeat) and reads its
 * counter block through /proc/PID/mem into the metrics. A window of this
 * daemon switches the agents on for full tracing and back to the step
 * signal at its end (agent_probes_keep).
 *
 * Slow steps (--slow-step K,W): each step the counters show (the last
 * PTBPF_STEPS_RECENT of them, if more ended between two ticks) is held
 * against the median of the W before it; so is the step under way, which
 * lets a window open while a long step still runs. One trigger per step,
 * through the capture queue, so --min-gap applies and it is counted and
 * marked as POST /capture's are.
 *
 * Hangs (--hang K,FLOOR, on by default): a process whose step under way,
 * or whose oldest open collective, has lasted over max(K x its median
 * step, FLOOR) asks for one capture of every process of its job on this
 * host, with what the counters said of each (the hang's ranks, a
 * processes that exited among them) for the trace; once per hang of the
 * job: no process of it asks again until one of them makes progress.
 * The check reads nothing more than the counters already read.
 */
#define _GNU_SOURCE
#include "fleet/step_signal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "attach/agent_ctl.h"
#include "attach/claim.h"
#include "attach/inject.h"
#include "attach/leaving.h"
#include "attach/target.h"
#include "fleet/capture.h"
#include "fleet/metrics.h"
#include "fleet/select.h"
#include "ptbpf_agent.h"

#define MAX_PROCS 256
#define MAX_REFUSED 1024
#define MAX_GONE 64
#define HANG_RETRY_NS 10000000000ull /* a hang capture --min-gap refused, asked again */
#define SCAN_NS 2000000000ull
#define RESEND_NS 2000000000ull

struct sproc {
	struct target t;
	struct agent_link a;
	bool linked;          /* its agent answers: a holds it */
	bool told;            /* "step signal on" was said (once its block said so) */
	uint64_t since;       /* when it was found (CLOCK_MONOTONIC ns) */
	uint64_t sent_at;     /* the last OFF+steps sent */
	uint64_t seen;        /* steps already held against the median */
	uint64_t fired;       /* the last step a trigger named (1-based), 0: none */
	uint64_t *last;       /* the W last step times, a ring */
	uint32_t nlast, at;
	struct ptbpf_agent_steps b; /* its counters as last read (has_b) */
	bool has_b;
	uint64_t hang_mark;   /* its progress (steps + collectives left) when a hang
			       * capture of its job was asked for, + 1; 0: none */
};

/* A process that exited: what its counters said last (a hung job's dead
 * rank is named in the capture). */
struct gone {
	int pid;
	char job[160];
	struct capture_hang_rank r;
};

struct step_signal {
	const struct options *opt;
	struct capture *capture;
	struct metrics *metrics;
	struct sproc p[MAX_PROCS];
	int n;
	struct { int pid; unsigned long long start; } refused[MAX_REFUSED];
	int nrefused;
	uint64_t last_scan;
	char agent[PATH_MAX];
	struct gone gone[MAX_GONE]; /* a ring */
	int ngone, gone_at;
	struct capture_hang hang;   /* the last hang capture's (the window reads it) */
	uint64_t hang_refused_at;   /* --min-gap refused one then */
};

const char *step_signal_words(const struct options *opt)
{
	return opt->keep_graphs ? OPS_WORD_STEPS OPS_WORD_GRAPHS : OPS_WORD_STEPS;
}

struct step_signal *step_signal_new(const struct options *opt, struct capture *c, struct metrics *m)
{
	struct step_signal *s = calloc(1, sizeof(*s));

	if (!s) {
		log_msg("daemon: out of memory for the step signal\n");
		return NULL;
	}
	s->opt = opt;
	s->capture = c;
	s->metrics = m;
	if (agent_library_path(s->agent, sizeof(s->agent), true))
		log_warn("daemon: %s not found next to ptbpf: the step signal reaches only processes "
			 "that have the agent already\n", s->agent);
	return s;
}

static bool is_refused(const struct step_signal *s, int pid, unsigned long long start)
{
	for (int i = 0; i < s->nrefused; i++)
		if (s->refused[i].pid == pid && s->refused[i].start == start)
			return true;
	return false;
}

static void refuse(struct step_signal *s, int pid)
{
	if (s->nrefused == MAX_REFUSED)
		s->nrefused = 0; /* forget the oldest at once: they are retried, said again */
	s->refused[s->nrefused].pid = pid;
	s->refused[s->nrefused++].start = target_start_time(pid);
}

static void hang_rank(const struct sproc *p, struct capture_hang_rank *r, uint64_t med);
static const char *job_of(const struct sproc *p, char *buf, size_t len);

/* p exited: kept among the gone, for a hang capture of its job. */
static void remember_gone(struct step_signal *s, const struct sproc *p)
{
	struct gone *g = &s->gone[s->gone_at];

	if (!p->has_b || !p->b.coll_entered)
		return; /* not a rank the others can wait for */
	memset(g, 0, sizeof(*g));
	g->pid = p->t.pid;
	job_of(p, g->job, sizeof(g->job));
	hang_rank(p, &g->r, 0);
	g->r.gone = true;
	g->r.gone_ts = clock_mono_ns();
	s->gone_at = (s->gone_at + 1) % MAX_GONE;
	s->ngone += s->ngone < MAX_GONE;
}

static void drop(struct step_signal *s, int i)
{
	if (leaving_agent_state(s->p[i].t.pid) == LEAVING_STEPS)
		leaving_agent(s->p[i].t.pid, LEAVING_NONE, false);
	metrics_steps(s->metrics, &s->p[i].t, NULL);
	target_close(&s->p[i].t);
	free(s->p[i].last);
	s->p[i] = s->p[--s->n];
}

/* Loads the agent into p's process (a window's load_agent does the same
 * for full tracing): true if it is there or its load may still end. */
static bool load_agent(struct step_signal *s, struct sproc *p)
{
	char err[512];
	uint64_t handle;
	int rc;

	if (target_maps(p->t.pid, "libptbpf-agent.so"))
		return true;
	if (s->opt->no_agent || !s->agent[0] || access(s->agent, R_OK))
		return false;
	rc = inject_dlopen(p->t.pid, s->agent, &handle, err, sizeof(err));
	if (rc && rc != -EIO && rc != -ETIMEDOUT) {
		if (target_alive(p->t.pid) == 1)
			log_warn("daemon: pid %d: cannot load the agent: %s; no step signal\n",
				 p->t.pid, err);
		return false;
	}
	return true; /* -EIO, -ETIMEDOUT: the call ran or runs; the link tells */
}

/* Finds p's agent and switches its step signal on: 1 done, 0 not loaded
 * yet (try again next tick), -1 never. */
static int link_agent(struct step_signal *s, struct sproc *p)
{
	char err[512];
	int ret = agent_link_open(&p->t, &p->a, err, sizeof(err));

	if (ret == -ENOENT)
		return clock_mono_ns() - p->since < 10000000000ull ? 0 : -1;
	if (ret) {
		log_warn("daemon: %s: no step signal\n", err);
		return -1;
	}
	if (!agent_running(&p->a)) {
		log_debug("daemon: pid %d maps an agent whose thread does not run (a forked "
			  "child's copy): no step signal\n", p->t.pid);
		return -1;
	}
	if (!p->a.steps) {
		log_warn("daemon: pid %d: its agent is of an older ptbpf, without the step signal "
			 "(restart the process to have it)\n", p->t.pid);
		return -1;
	}
	agent_steps_renew(&p->a, clock_mono_ns());
	/* injected: whoever loaded it by ptrace, this ptbpf unloads it at the end. */
	if (agent_send(&p->a, PTBPF_CMD_OFF, step_signal_words(s->opt), 0, 0,
		       agent_injected(&p->a)))
		return -1;
	p->sent_at = clock_mono_ns();
	p->linked = true;
	return 1;
}

static void add_process(struct step_signal *s, int pid)
{
	struct sproc *p = &s->p[s->n];
	char err[512] = "";

	memset(p, 0, sizeof(*p));
	if (target_open(pid, &p->t, err, sizeof(err)) || target_claim(&p->t, err, sizeof(err)) ||
	    p->t.memfd < 0) {
		if (!err[0])
			snprintf(err, sizeof(err), "pid %d: cannot open /proc/%d/mem: %s", pid, pid,
				 strerror(p->t.mem_errno));
		if (target_alive(pid) == 1)
			log_warn("daemon: %s: no step signal\n", err);
		target_close(&p->t);
		refuse(s, pid);
		return;
	}
	p->since = clock_mono_ns();
	p->last = calloc(s->opt->slow_w ? s->opt->slow_w : 1, sizeof(*p->last));
	if (!p->last || !load_agent(s, p) || link_agent(s, p) < 0) {
		target_close(&p->t);
		free(p->last);
		refuse(s, pid);
		return;
	}
	s->n++;
}

static bool tracked(const struct step_signal *s, int pid)
{
	for (int i = 0; i < s->n; i++)
		if (s->p[i].t.pid == pid)
			return true;
	return false;
}

/* New torch processes that --match-env selects. */
static void scan(struct step_signal *s)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) && s->n < MAX_PROCS) {
		int pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = atoi(de->d_name);
		if (pid == getpid() || tracked(s, pid) ||
		    is_refused(s, pid, target_start_time(pid)) ||
		    !target_maps(pid, "libtorch_cpu.so") || !select_process(s->opt, NULL, pid))
			continue;
		add_process(s, pid);
	}
	closedir(d);
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of p's last W steps; 0 until it has seen enough of them
 * (min(W, 10)) to judge by. */
static uint64_t median(const struct step_signal *s, const struct sproc *p)
{
	uint64_t tmp[1000];
	uint32_t need = s->opt->slow_w < 10 ? s->opt->slow_w : 10;

	if (p->nlast < need || !p->nlast)
		return 0;
	memcpy(tmp, p->last, p->nlast * sizeof(*tmp));
	qsort(tmp, p->nlast, sizeof(*tmp), by_value);
	return p->nlast % 2 ? tmp[p->nlast / 2] : (tmp[p->nlast / 2 - 1] + tmp[p->nlast / 2]) / 2;
}

/* Asks for a window for p's job (every rank of it that this daemon
 * selects), or for every process where p names no job. */
static void fire(struct step_signal *s, struct sproc *p, uint64_t step, uint64_t ns, uint64_t med,
		 bool running)
{
	const char *job = target_label(&p->t, "TORCHELASTIC_RUN_ID"), *rank;
	struct capture_req r = { .source = CAPTURE_SLOW_STEP };

	if (!job)
		job = target_label(&p->t, "SLURM_JOB_ID");
	rank = target_label(&p->t, "RANK");
	snprintf(r.reason, sizeof(r.reason), "slow step %lu: %.1f ms%s vs median %.1f ms (pid %d%s%s)",
		 (unsigned long)step, ns / 1e6, running ? " so far" : "", med / 1e6, p->t.pid,
		 rank ? ", rank " : "", rank ?: "");
	if (job) {
		snprintf(r.sel[0].job, sizeof(r.sel[0].job), "%s", job);
		r.nsel = 1;
	}
	r.step_pid = p->t.pid;
	p->fired = step;
	capture_offer(s->capture, &r);
}

/* Holds the steps that ended since the last tick, then the one under way,
 * against the median of the W before them. */
static void judge(struct step_signal *s, struct sproc *p, const struct ptbpf_agent_steps *b)
{
	uint64_t from = p->seen, med, now = clock_mono_ns();

	if (b->steps < p->seen) /* a new agent: it counts from 0 */
		from = p->seen = p->fired = p->nlast = p->at = 0;
	if (b->steps - from > PTBPF_STEPS_RECENT)
		from = b->steps - PTBPF_STEPS_RECENT;
	for (uint64_t k = from + 1; k <= b->steps; k++) {
		uint64_t ns = b->recent[(k - 1) % PTBPF_STEPS_RECENT];

		med = median(s, p);
		if (med && ns > s->opt->slow_k * med && p->fired != k)
			fire(s, p, k, ns, med, false);
		p->last[p->at] = ns;
		p->at = (p->at + 1) % s->opt->slow_w;
		p->nlast += p->nlast < s->opt->slow_w;
	}
	p->seen = b->steps;
	med = median(s, p);
	if (med && b->cur_start && now > b->cur_start && p->fired != b->steps + 1 &&
	    now - b->cur_start > s->opt->slow_k * med)
		fire(s, p, b->steps + 1, now - b->cur_start, med, true);
}

/* The job p belongs to, as a trigger's job names it: TORCHELASTIC_RUN_ID,
 * SLURM_JOB_ID, MASTER_ADDR:MASTER_PORT; NULL (every process) if none. */
static const char *job_of(const struct sproc *p, char *buf, size_t len)
{
	const char *job = target_label(&p->t, "TORCHELASTIC_RUN_ID"), *addr, *port;

	if (!job)
		job = target_label(&p->t, "SLURM_JOB_ID");
	addr = target_label(&p->t, "MASTER_ADDR");
	port = target_label(&p->t, "MASTER_PORT");
	if (job)
		snprintf(buf, len, "%s", job);
	else if (addr && port)
		snprintf(buf, len, "%s:%s", addr, port);
	else
		buf[0] = 0;
	return buf[0] ? buf : NULL;
}

static bool same_job(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void hang_rank(const struct sproc *p, struct capture_hang_rank *r, uint64_t med)
{
	const struct ptbpf_agent_steps *b = &p->b;

	memset(r, 0, sizeof(*r));
	r->pid = p->t.pid;
	snprintf(r->rank, sizeof(r->rank), "%.15s", target_label(&p->t, "RANK") ?: "");
	snprintf(r->comm, sizeof(r->comm), "%.15s", p->t.comm);
	r->steps = b->steps;
	r->step_start = b->cur_start;
	r->median_ns = med;
	r->coll_entered = b->coll_entered;
	r->coll_left = b->coll_left;
	r->coll_left_seq = b->coll_left_seq;
	r->coll_enter_ts = b->coll_enter_ts;
	r->coll_left_ts = b->coll_left_ts;
	r->coll_open_ts = b->coll_open_ts;
	memcpy(r->coll_name, b->coll_name, sizeof(r->coll_name));
	memcpy(r->coll_left_name, b->coll_left_name, sizeof(r->coll_left_name));
	r->coll_name[sizeof(r->coll_name) - 1] = r->coll_left_name[sizeof(r->coll_left_name) - 1] = 0;
}

/* The median of the last steps the agent keeps (PTBPF_STEPS_RECENT); 0
 * before any. */
static uint64_t recent_median(const struct ptbpf_agent_steps *b)
{
	uint64_t tmp[PTBPF_STEPS_RECENT];
	uint32_t n = b->steps < PTBPF_STEPS_RECENT ? (uint32_t)b->steps : PTBPF_STEPS_RECENT;

	if (!n)
		return 0;
	memcpy(tmp, b->recent, n * sizeof(*tmp)); /* the first n, or all of the ring */
	qsort(tmp, n, sizeof(*tmp), by_value);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static uint64_t progress(const struct sproc *p)
{
	return p->b.steps + p->b.coll_left + 1;
}

/* p's wait (its step under way, or its oldest open collective) past the
 * limit: the limit, else 0. The floor is looked at first: a job that
 * steps pays no sort. */
static uint64_t hung(const struct step_signal *s, const struct sproc *p, uint64_t now,
		     uint64_t *med, uint64_t *wait)
{
	uint64_t floor = s->opt->hang_floor_s * 1000000000ull, limit;
	uint64_t step = p->b.cur_start && now > p->b.cur_start ? now - p->b.cur_start : 0;
	uint64_t coll = p->b.coll_open_ts && now > p->b.coll_open_ts ? now - p->b.coll_open_ts : 0;

	*wait = step > coll ? step : coll;
	if (!p->has_b || *wait <= floor)
		return 0;
	*med = recent_median(&p->b);
	limit = s->opt->hang_k * *med > floor ? (uint64_t)(s->opt->hang_k * *med) : floor;
	return *wait > limit ? limit : 0;
}

/* Asks for a capture of p's job: every process of it this daemon reads
 * (and those of it that exited) goes into s->hang for the trace. */
static void hang_fire(struct step_signal *s, struct sproc *p, uint64_t now, uint64_t limit,
		      uint64_t med, uint64_t wait)
{
	char job[160], other[160];
	const char *j = job_of(p, job, sizeof(job));
	struct capture_req r = { .source = CAPTURE_HANG, .hang = &s->hang };
	const char *rank = target_label(&p->t, "RANK");

	uint64_t found = now;

	s->hang = (struct capture_hang){ .ts = now, .pid = p->t.pid, .limit_ns = limit };
	for (int i = 0; i < s->n && s->hang.n < CAPTURE_HANG_RANKS; i++) {
		if (!s->p[i].has_b || !same_job(j, job_of(&s->p[i], other, sizeof(other))))
			continue;
		hang_rank(&s->p[i], &s->hang.r[s->hang.n++], recent_median(&s->p[i].b));
		found = s->p[i].since < found ? s->p[i].since : found;
	}
	/* Those of the job that exited since its ranks were found (an earlier
	 * job's, of the same MASTER_ADDR:MASTER_PORT, did before). */
	for (int i = 0; i < s->ngone && s->hang.n < CAPTURE_HANG_RANKS; i++)
		if (same_job(j, s->gone[i].job[0] ? s->gone[i].job : NULL) &&
		    s->gone[i].r.gone_ts > found)
			s->hang.r[s->hang.n++] = s->gone[i].r;
	snprintf(r.reason, sizeof(r.reason), "pid %d%s%s: %s for %.1f s (limit %.1f s: %gx its "
		 "median step %.1f ms, or %lu s)", p->t.pid, rank ? ", rank " : "", rank ?: "",
		 p->b.coll_open_ts ? "in a collective" : "in one step", wait / 1e9, limit / 1e9,
		 s->opt->hang_k, med / 1e6, (unsigned long)s->opt->hang_floor_s);
	if (j) {
		snprintf(r.sel[0].job, sizeof(r.sel[0].job), "%s", j);
		r.nsel = 1;
	}
	if (capture_offer(s->capture, &r)) {
		s->hang_refused_at = now;
		return;
	}
	for (int i = 0; i < s->n; i++)
		if (same_job(j, job_of(&s->p[i], other, sizeof(other))))
			s->p[i].hang_mark = progress(&s->p[i]);
}

/* Every tick: a process of a job not yet captured for this hang, past
 * its limit, asks for the capture. */
static void hang_check(struct step_signal *s, uint64_t now)
{
	if (s->hang_refused_at && now - s->hang_refused_at < HANG_RETRY_NS)
		return;
	for (int i = 0; i < s->n; i++) {
		struct sproc *p = &s->p[i];
		uint64_t med = 0, wait, limit;

		if (p->hang_mark && p->hang_mark != progress(p))
			p->hang_mark = 0; /* it moved on: a later hang is a new one */
		if (p->hang_mark || !(limit = hung(s, p, now, &med, &wait)))
			continue;
		hang_fire(s, p, now, limit, med, wait);
		return;
	}
}

/* One process's turn: false once it is gone (exited, exec'd). */
static bool tick_one(struct step_signal *s, struct sproc *p, uint64_t now)
{
	struct ptbpf_agent_steps b;
	int ret;

	if (!p->linked) {
		ret = link_agent(s, p);
		return ret >= 0;
	}
	target_claim_answer(&p->t);
	if (agent_steps_renew(&p->a, now) == -ESRCH)
		return false;
	ret = agent_steps_read(&p->a, &b);
	if (ret == -ESRCH || ret == -ENOTSUP) /* gone, or a new image without the agent */
		return false;
	if (ret)
		return true;
	/* Off although asked on (its lease ran out during a long window, or
	 * its thread was stopped): asked again. */
	if (!b.on && now - p->sent_at > RESEND_NS) {
		agent_send(&p->a, PTBPF_CMD_OFF, step_signal_words(s->opt), 0, 0, false);
		p->sent_at = now;
	}
	if (b.on && !p->told)
		log_msg("daemon: pid %d (%s%s%s): step signal on\n", p->t.pid, p->t.comm,
			target_label(&p->t, "RANK") ? ", rank " : "",
			target_label(&p->t, "RANK") ?: "");
	p->told |= b.on;
	/* What a second Ctrl-C leaves (a window's end said "off"). */
	if (b.on && leaving_agent_state(p->t.pid) != LEAVING_STEPS)
		leaving_agent(p->t.pid, LEAVING_STEPS, agent_injected(&p->a));
	metrics_steps(s->metrics, &p->t, &b);
	p->b = b;
	p->has_b = true;
	if (s->opt->slow_k && s->capture)
		judge(s, p, &b);
	return true;
}

void step_signal_tick(struct step_signal *s)
{
	uint64_t now = clock_mono_ns();

	if (!s)
		return;
	if (s->opt->hang_k && s->capture)
		hang_check(s, now);
	for (int i = 0; i < s->n; i++) {
		if (tick_one(s, &s->p[i], now))
			continue;
		log_msg("daemon: pid %d (%s): gone; its step signal is dropped\n", s->p[i].t.pid,
			s->p[i].t.comm);
		remember_gone(s, &s->p[i]);
		drop(s, i--);
	}
	if (now - s->last_scan >= SCAN_NS) {
		s->last_scan = now;
		scan(s);
	}
}

/* After the switch-off: the agent acknowledged, then goes if a ptbpf
 * loaded it. */
static void finish_one(struct sproc *p, bool unload)
{
	char err[512];

	for (int w = 0; w < 100 && agent_acked(&p->a) == -EAGAIN; w++)
		usleep(10000);
	if (agent_acked(&p->a))
		log_warn("daemon: pid %d: its agent did not answer the switch-off; its step signal "
			 "goes by itself within %d s\n", p->t.pid, PTBPF_STEPS_LEASE_MS / 1000);
	else if (unload && agent_unload(&p->a, err, sizeof(err)))
		log_warn("daemon: %s; its agent stays mapped, switched off\n", err);
	else
		log_msg("daemon: pid %d: step signal off%s\n", p->t.pid,
			unload ? ", agent unloaded" : " (its agent is its own: it stays)");
}

void step_signal_free(struct step_signal *s)
{
	bool unload[MAX_PROCS], sent[MAX_PROCS];

	if (!s)
		return;
	/* Every agent is told first, so that they switch off side by side. */
	for (int i = 0; i < s->n; i++) {
		struct sproc *p = &s->p[i];

		unload[i] = p->linked && agent_injected(&p->a);
		sent[i] = p->linked && !agent_send(&p->a, unload[i] ? PTBPF_CMD_EXIT :
						   PTBPF_CMD_OFF, "", 0, 0, false);
	}
	for (int i = 0; i < s->n; i++)
		if (sent[i])
			finish_one(&s->p[i], unload[i]);
	while (s->n)
		drop(s, s->n - 1);
	free(s);
}
