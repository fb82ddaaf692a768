// SPDX-License-Identifier: BSD-2-Clause
/*
 * Daemon windows: what tracing costs the traced processes (estimated from
 * what was recorded), the size cap and the governor (--budget) that end a
 * window early, and the metrics endpoint's running totals. See session.h.
 */
#define _GNU_SOURCE
#include "live/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/agent_probes.h"
#include "fleet/metrics.h"
#include "ptbpf_agent.h"
#include "record/route.h"
#include "trace/perfetto.h"

/* Daemon: the window's running totals to the metrics endpoint. */
void budget_publish_metrics(struct session *s)
{
	uint64_t st[STAT_MAX];

	if (!s->win.metrics)
		return;
	session_stats(s, st);
	metrics_update(s->win.metrics, s->join, s->dec->timeline, s->targets, s->ntargets,
		       session_lost(st));
}

/* The traced processes' CPU seconds (user + system), living ones only. */
double budget_targets_cpu(const struct session *s)
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
double budget_cost_s(const struct session *s)
{
	const struct route_counts *c = route_counts(s->route);
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

/* --steps: a slow step's window counts the steps of its process from the
 * start of tracing; the step under way then is not a whole one. */
void budget_steps_start(struct session *s)
{
	const struct capture_req *r = s->win.trigger;
	struct ptbpf_agent_steps b;

	if (!r || !r->step_pid || !s->opt.window_steps ||
	    agent_probes_steps(s->agents, r->step_pid, &b))
		return;
	s->win.steps_pid = r->step_pid;
	s->win.steps_end = b.steps + 1 + s->opt.window_steps;
}

static bool budget_steps_done(struct session *s)
{
	struct ptbpf_agent_steps b;

	if (!s->win.steps_pid || agent_probes_steps(s->agents, s->win.steps_pid, &b) ||
	    b.steps < s->win.steps_end)
		return false;
	snprintf(s->win.stopped_why, sizeof(s->win.stopped_why), "%u whole steps of pid %d "
		 "captured (--steps)", s->opt.window_steps, s->win.steps_pid);
	return true;
}

/* Daemon windows end early at the size cap, over the budget, or once
 * --steps whole steps are in; the reason goes into the trace. */
bool budget_window_must_end(struct session *s)
{
	double cpu, cost;

	if (!s->opt.daemon)
		return false;
	if (budget_steps_done(s))
		return true;
	if (pf_bytes_written(s->w) > s->win.max_trace_bytes) {
		snprintf(s->win.stopped_why, sizeof(s->win.stopped_why), "size cap: %.1f MB written",
			 pf_bytes_written(s->w) / 1e6);
		return true;
	}
	cpu = budget_targets_cpu(s) - s->win.targets_cpu0;
	cost = budget_cost_s(s);
	if (s->opt.budget_pct > 0 && cpu > 0.2 && cost / cpu * 100 > s->opt.budget_pct) {
		snprintf(s->win.stopped_why, sizeof(s->win.stopped_why),
			 "governor: estimated cost %.3f s = %.1f%% of the traced processes' %.2f "
			 "CPU-s > budget %.1f%%", cost, cost / cpu * 100, cpu, s->opt.budget_pct);
		return true;
	}
	return false;
}
