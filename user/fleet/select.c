// SPDX-License-Identifier: BSD-2-Clause
/*
 * Process selection for --all and daemon windows, from /proc/PID/environ
 * (as it was at exec: what the launcher set). --match-env lets a daemon
 * own one job's processes on a host other jobs share. A trigger's job
 * names a job as the metrics' run_id label does (TORCHELASTIC_RUN_ID,
 * else SLURM_JOB_ID) or as MASTER_ADDR:MASTER_PORT; its rank is RANK.
 * Inductor's compile workers map torch and share the job's environment,
 * but run none of its steps: never selected.
 */
#define _GNU_SOURCE
#include "fleet/select.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/target.h"

#define ENV_MAX (1 << 17)

static bool env_has(const char *env, size_t n, const char *kv)
{
	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strcmp(env + i, kv))
			return true;
	return false;
}

/* The labels a trigger selects by, from an environment. */
static void labels_of(const char *env, size_t n, struct select_proc *p)
{
	const char *run = target_env_get(env, n, "TORCHELASTIC_RUN_ID"),
		   *slurm = target_env_get(env, n, "SLURM_JOB_ID"),
		   *addr = target_env_get(env, n, "MASTER_ADDR"),
		   *port = target_env_get(env, n, "MASTER_PORT"),
		   *rank = target_env_get(env, n, "RANK");

	snprintf(p->run_id, sizeof(p->run_id), "%s", run ? run : "");
	snprintf(p->slurm_job, sizeof(p->slurm_job), "%s", slurm ? slurm : "");
	if (addr && port)
		snprintf(p->master, sizeof(p->master), "%s:%s", addr, port);
	else
		p->master[0] = 0;
	snprintf(p->rank, sizeof(p->rank), "%s", rank ? rank : "");
}

static bool sel_matches(const struct select_proc *p, const struct capture_sel *s)
{
	if (s->job[0] && strcmp(p->run_id, s->job) && strcmp(p->slurm_job, s->job) &&
	    strcmp(p->master, s->job))
		return false;
	return !s->rank[0] || !strcmp(p->rank, s->rank);
}

bool select_matches(const struct select_proc *p, const struct capture_req *trigger)
{
	if (!trigger || !trigger->nsel)
		return true;
	for (int i = 0; i < trigger->nsel; i++)
		if (sel_matches(p, &trigger->sel[i]))
			return true;
	return false;
}

/* Whether env has every --match-env KEY=VALUE of opt. */
static bool env_selected(const struct options *opt, const char *env, size_t n)
{
	for (int i = 0; i < opt->nmatch_env; i++)
		if (!env_has(env, n, opt->match_env[i]))
			return false;
	return true;
}

/* Whether pid's arguments run Inductor's compile worker: the sidecar
 * torch/_inductor/compile_worker/__main__.py, started by the job with its
 * environment, and the workers it forks (the same arguments). */
static bool runs_compile_worker(int pid)
{
	static const char script[] = "/_inductor/compile_worker/__main__.py";
	char argv[4096];
	size_t n = target_argv(pid, argv, sizeof(argv));

	for (size_t i = 0; i < n; i += strlen(argv + i) + 1) {
		const char *arg = argv + i;
		size_t len = strlen(arg), slen = strlen(script);

		if ((len >= slen && !strcmp(arg + len - slen, script)) ||
		    !strcmp(arg, "torch._inductor.compile_worker"))
			return true;
	}
	return false;
}

bool select_compile_worker(int pid)
{
	int parent = target_parent(pid);

	/* A worker it spawns (not forks) runs multiprocessing's arguments. */
	return runs_compile_worker(pid) || (parent > 1 && runs_compile_worker(parent));
}

bool select_process(const struct options *opt, const struct capture_req *trigger, int pid)
{
	static char env[ENV_MAX];
	struct select_proc p;
	size_t n;

	if (select_compile_worker(pid))
		return false;
	if (!opt->nmatch_env && (!trigger || !trigger->nsel))
		return true;
	n = target_environ(pid, env, ENV_MAX);
	if (!n || !env_selected(opt, env, n))
		return false;
	labels_of(env, n, &p);
	return select_matches(&p, trigger);
}

int select_scan(const struct options *opt, struct select_proc *out, int max)
{
	static char env[ENV_MAX];
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		int pid = atoi(de->d_name);
		size_t len;

		if (pid <= 0 || pid == getpid() || !(len = target_environ(pid, env, ENV_MAX)) ||
		    !env_selected(opt, env, len) || !target_maps(pid, "libtorch_cpu.so") ||
		    select_compile_worker(pid))
			continue;
		out[n].pid = pid;
		labels_of(env, len, &out[n++]);
	}
	closedir(d);
	return n;
}
