/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The in-process agent (libptbpf-agent.so, user/agent/) from ptbpf's side:
 * starting a command with it (`ptbpf run`), and commanding it through its
 * control block (ptbpf_agent_ctl, include/ptbpf_agent.h), written through
 * the target's /proc/PID/mem: a process that exec'd is never written to.
 * No file is involved.
 */
#ifndef PTBPF_AGENT_CTL_H
#define PTBPF_AGENT_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct target;

/* The agent shipped next to this ptbpf binary, named for a ptrace dlopen
 * (to_inject: PTBPF_AGENT_INJECTED_NAME) or for the process to load; 0 or
 * -ENOENT. */
int agent_library_path(char *buf, size_t len, bool to_inject);
/* Starts argv with CUDA_INJECTION64_PATH naming the agent. The child's pid,
 * or -1 with a message printed. */
pid_t agent_run_command(char **argv, const char *agent);
/* Waits until pid maps libtorch_cpu.so or the agent (which cuInit loads),
 * or has mapped a CUDA/HIP library for AGENT_WAIT_GPU_ONLY_MS without
 * either (a GPU program without torch): 0; -ESRCH if it exited first (its
 * wait status in *status), -ETIMEDOUT. */
#define AGENT_WAIT_GPU_ONLY_MS 5000
int agent_wait_for_libraries(pid_t pid, int timeout_ms, int *status);

/* One process's agent, as ptbpf reaches it. */
struct agent_link {
	const struct target *t;
	uint64_t ctl, busy;        /* ptbpf_agent_ctl, ptbpf_agent_busy */
	uint64_t steps;            /* ptbpf_agent_steps (0: an agent without it) */
	uint64_t text_lo, text_hi; /* its executable mapping(s) */
	uint64_t seq;              /* of the last command sent */
	uint32_t tid;              /* its thread when the last command was sent */
	uint32_t cmd;
};

/* Finds the agent t maps; 0, -ENOENT (none), or -errno with one line. */
int agent_link_open(const struct target *t, struct agent_link *a, char *err, size_t errlen);
/* Sends a command (enum ptbpf_agent_cmd) with its words (ON: OPS_WORD_*);
 * job_req/job_done: the job's own CUPTI buffer callbacks, 0 if unknown;
 * injected: this ptbpf loaded it. 0 or -errno (-ESRCH: image gone,
 * -EPROTO: an agent of another version). */
int agent_send(struct agent_link *a, uint32_t cmd, const char *words, uint64_t job_req,
	       uint64_t job_done, bool injected);
/* A consistent copy of the agent's step counters (include/ptbpf_agent.h):
 * 0, -ENOTSUP (an agent without them), -EAGAIN (the agent kept writing),
 * or -errno. */
struct ptbpf_agent_steps;
int agent_steps_read(const struct agent_link *a, struct ptbpf_agent_steps *out);
/* Renews the step signal's lease (any new value will do). 0 or -errno. */
int agent_steps_renew(const struct agent_link *a, uint64_t heartbeat);
/* 0 once the agent acted on the last command, -EAGAIN before, -ESRCH if
 * the image is gone. */
int agent_acked(const struct agent_link *a);
/* Whether the agent's thread runs in this process (a forked child has a
 * copy of its parent's agent, without the thread). */
bool agent_running(const struct agent_link *a);
/* The outcome of an injected dlopen of the agent whose result ptbpf could
 * not read back (the borrowed thread reused its stack first, or the call
 * outlived ptbpf's wait), as the target itself tells it: 0 with *handle
 * when t maps the agent and its constructor ran (it writes its own
 * link_map, what dlopen returned, into its control block); -ENOENT: not
 * mapped; -EAGAIN: mapped, constructor not run yet; else -errno. */
int agent_load_outcome(const struct target *t, uint64_t *handle, char *err, size_t errlen);
/* Whether an earlier or this ptbpf loaded the agent (ptrace): then it is
 * sent EXIT and unloaded at detach. */
bool agent_injected(const struct agent_link *a);
/* After an acknowledged EXIT: waits (1 s at most) for the agent's thread
 * to end, then unloads the library once no thread is inside it. 0, or
 * -errno with one line in err (it then stays loaded, inert). */
int agent_unload(const struct agent_link *a, char *err, size_t errlen);

#endif /* PTBPF_AGENT_CTL_H */
