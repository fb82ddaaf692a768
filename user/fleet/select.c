// SPDX-License-Identifier: BSD-2-Clause
/*
 * Process selection for --all and daemon windows, from /proc/PID/environ
 * (as it was at exec: what the launcher set). --match-env lets a daemon
 * own one job's processes on a host other jobs share. A trigger's job
 * names a job as the metrics' run_id label does (TORCHELASTIC_RUN_ID,
 * else SLURM_JOB_ID) or as MASTER_ADDR:MASTER_PORT; its rank is RANK.
 */
#define _GNU_SOURCE
#include "fleet/select.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ENV_MAX (1 << 17)

/* The value of key in env (n bytes of NUL-separated KEY=VALUE), or NULL. */
static const char *env_get(const char *env, size_t n, const char *key)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strncmp(env + i, key, klen) && env[i + klen] == '=')
			return env + i + klen + 1;
	return NULL;
}

static bool env_has(const char *env, size_t n, const char *kv)
{
	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strcmp(env + i, kv))
			return true;
	return false;
}

static bool job_is(const char *env, size_t n, const char *job)
{
	const char *run = env_get(env, n, "TORCHELASTIC_RUN_ID"),
		   *slurm = env_get(env, n, "SLURM_JOB_ID"),
		   *addr = env_get(env, n, "MASTER_ADDR"), *port = env_get(env, n, "MASTER_PORT");
	char master[256];

	if ((run && !strcmp(run, job)) || (slurm && !strcmp(slurm, job)))
		return true;
	if (!addr || !port)
		return false;
	snprintf(master, sizeof(master), "%s:%s", addr, port);
	return !strcmp(master, job);
}

static bool sel_matches(const char *env, size_t n, const struct capture_sel *s)
{
	const char *rank = env_get(env, n, "RANK");

	if (s->job[0] && !job_is(env, n, s->job))
		return false;
	return !s->rank[0] || (rank && !strcmp(rank, s->rank));
}

bool select_process(const struct options *opt, const struct capture_req *trigger, int pid)
{
	static char env[ENV_MAX];
	char path[64];
	ssize_t n;
	int fd;
	bool ok = true;

	if (!opt->nmatch_env && (!trigger || !trigger->nsel))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, env, ENV_MAX - 1);
	close(fd);
	if (n <= 0)
		return false;
	env[n] = 0;
	for (int i = 0; i < opt->nmatch_env && ok; i++)
		ok = env_has(env, (size_t)n, opt->match_env[i]);
	if (!ok || !trigger || !trigger->nsel)
		return ok;
	for (int i = 0; i < trigger->nsel; i++)
		if (sel_matches(env, (size_t)n, &trigger->sel[i]))
			return true;
	return false;
}
