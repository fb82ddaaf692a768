/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The in-process agent (libptbpf-agent.so) from the outside: starting a
 * command with it (`ptbpf run`), and switching it on and off. The agent
 * stays dormant until /dev/shm/ptbpf-agent-<pid>.on exists in the target's
 * mount namespace; ptbpf refreshes that file every second, and the agent
 * retracts itself when it goes stale (ptbpf died) or disappears.
 */
#ifndef PTBPF_AGENT_CTL_H
#define PTBPF_AGENT_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct target;

/* The agent shipped next to this ptbpf binary; 0 or -ENOENT. */
int agent_library_path(char *buf, size_t len);
/* Starts argv with CUDA_INJECTION64_PATH naming the agent. The child's pid,
 * or -1 with a message printed. */
pid_t agent_run_command(char **argv, const char *agent);
/* Waits until pid maps libtorch_cpu.so or a CUDA/HIP library: 0; -ESRCH
 * if it exited first (its wait status in *status), -ETIMEDOUT. */
int agent_wait_for_libraries(pid_t pid, int timeout_ms, int *status);
/* Creates, refreshes, removes the activation file for t. */
int agent_on(const struct target *t, bool ops, const char *words);
void agent_heartbeat(const struct target *t);
void agent_off(const struct target *t);

#endif /* PTBPF_AGENT_CTL_H */
