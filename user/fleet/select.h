/* SPDX-License-Identifier: BSD-2-Clause */
/* Which processes --all and daemon windows trace (user/fleet/select.c):
 * --match-env, and a triggered window's job/rank filter. */
#ifndef PTBPF_SELECT_H
#define PTBPF_SELECT_H

#include <stdbool.h>

#include "cli.h"
#include "fleet/trigger.h"

/* Whether pid is one of Inductor's compile workers (torch.compile's
 * sidecar process and its workers). */
bool select_compile_worker(int pid);
/* Whether pid's environment has every --match-env KEY=VALUE of opt and,
 * for a trigger with a filter, matches one of its job/rank pairs. true
 * when there is nothing to check; false for a process whose environment
 * cannot be read while there is, and for a compile worker. */
bool select_process(const struct options *opt, const struct capture_req *trigger, int pid);

/* A process's labels a trigger selects by: its job as TORCHELASTIC_RUN_ID,
 * SLURM_JOB_ID or MASTER_ADDR:MASTER_PORT, its RANK ("" where unset). */
struct select_proc {
	int pid;
	char run_id[128], slurm_job[128], master[256], rank[32];
};

/* The running torch processes (mapping libtorch_cpu.so, not compile
 * workers) that opt's --match-env selects, with their labels: how many (at most max). */
int select_scan(const struct options *opt, struct select_proc *out, int max);
/* Whether p matches one of the trigger's job/rank pairs (any, without). */
bool select_matches(const struct select_proc *p, const struct capture_req *trigger);

#endif /* PTBPF_SELECT_H */
