// SPDX-License-Identifier: BSD-2-Clause
/*
 * Preloaded into a target (LD_PRELOAD), makes it exit the moment ptbpf's
 * agent starts in it: the agent's constructor reads $PTBPF_AGENT_LOG
 * first thing, inside the dlopen that ptbpf injects, so the process exits
 * strictly during ptbpf's attach, at the same point every run.
 *
 *   LD_PRELOAD=build/exit_at_agent.so python3 workload.py ...
 *
 * Its exit status is 3. Every other getenv is libc's.
 */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

extern char **environ;

char *getenv(const char *name)
{
	size_t len = strlen(name);

	if (!strcmp(name, "PTBPF_AGENT_LOG"))
		_exit(3);
	for (char **e = environ; e && *e; e++)
		if (!strncmp(*e, name, len) && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}
