// SPDX-License-Identifier: BSD-2-Clause
/* Starting a command with the agent, and commanding it. See agent_ctl.h. */
#define _GNU_SOURCE
#include "attach/agent_ctl.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/elfsym.h"
#include "lib/procmaps.h"
#include "attach/inject.h"
#include "ptbpf_agent.h"
#include "attach/target.h"

int agent_library_path(char *buf, size_t len, bool to_inject)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -ENOENT;
	exe[n] = 0;
	snprintf(buf, len, "%s%s", dirname(exe),
		 to_inject ? PTBPF_AGENT_INJECTED_NAME : "/libptbpf-agent.so");
	return access(buf, R_OK) ? -ENOENT : 0;
}

pid_t agent_run_command(char **argv, const char *agent)
{
	pid_t pid = fork();

	if (pid < 0) {
		log_msg("run: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		setenv("CUDA_INJECTION64_PATH", agent, 1);
		execvp(argv[0], argv);
		log_msg("run: cannot execute %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* A GPU library mapped with neither torch nor the agent: torch 2.x's import
 * maps the CUDA runtime (and, through libraries it preloads, libcuda)
 * before libtorch_cpu, so this alone is no reason to start yet. */
static bool maps_gpu_library(pid_t pid)
{
	return target_maps(pid, "libcuda.so") || target_maps(pid, "libcudart.so") ||
	       target_maps(pid, "libamdhip64.so");
}

int agent_wait_for_libraries(pid_t pid, int timeout_ms, int *status)
{
	int gpu_since = -1;

	for (int waited = 0; waited < timeout_ms; waited += 20) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return -ESRCH;
		/* torch, or CUDA initialized (cuInit loaded the agent): no
		 * torch op or CUDA call has run before either. */
		if (target_maps(pid, "libtorch_cpu.so") || target_maps(pid, "libptbpf-agent.so"))
			return 0;
		if (gpu_since < 0 && maps_gpu_library(pid))
			gpu_since = waited;
		/* A CUDA or HIP program without torch whose agent did not load */
		if (gpu_since >= 0 && waited - gpu_since >= AGENT_WAIT_GPU_ONLY_MS)
			return 0;
		usleep(20000);
	}
	return -ETIMEDOUT;
}

struct ctl_syms {
	uint64_t ctl, busy, steps;
};

static int find_ctl(const char *name, uint64_t addr, uint64_t size, void *ctx)
{
	struct ctl_syms *s = ctx;

	(void)size;
	if (!strcmp(name, "ptbpf_agent_ctl"))
		s->ctl = addr;
	else if (!strcmp(name, "ptbpf_agent_busy"))
		s->busy = addr;
	else if (!strcmp(name, "ptbpf_agent_steps"))
		s->steps = addr;
	return 0;
}

/* The lowest and highest address of lib's executable mappings in pid. */
static int text_range(int pid, const struct target_lib *lib, uint64_t *lo, uint64_t *hi)
{
	struct procmaps *m = procmaps_open(pid);
	struct procmap e;

	if (!m)
		return -errno;
	*lo = UINT64_MAX;
	*hi = 0;
	while (procmaps_next(m, &e)) {
		if (e.inode != lib->ino || e.dev != lib->dev || e.perms[2] != 'x')
			continue;
		*lo = e.start < *lo ? e.start : *lo;
		*hi = e.end > *hi ? e.end : *hi;
	}
	procmaps_close(m);
	return *hi ? 0 : -ENOENT;
}

int agent_link_open(const struct target *t, struct agent_link *a, char *err, size_t errlen)
{
	struct ctl_syms syms = { 0 };
	struct target_lib lib;
	struct elf_file *ef;
	char why[256];
	uint64_t first;
	int ret;

	memset(a, 0, sizeof(*a));
	a->t = t;
	ret = target_find_lib(t->pid, "libptbpf-agent.so", &lib);
	if (ret)
		return ret;
	ef = elf_file_open_exported(lib.fd, why, sizeof(why));
	if (!ef) {
		snprintf(err, errlen, "pid %d: cannot read its agent %s: %s", t->pid, lib.path, why);
		close(lib.fd);
		return -EINVAL;
	}
	elf_file_for_each_object(ef, "ptbpf_agent_", find_ctl, &syms);
	/* The load base: where the first mapping's file offset lies. */
	first = elf_file_off_to_vaddr(ef, lib.map_off);
	elf_file_close(ef);
	ret = text_range(t->pid, &lib, &a->text_lo, &a->text_hi);
	close(lib.fd);
	if (!syms.ctl || !syms.busy || first == UINT64_MAX || ret) {
		snprintf(err, errlen, "pid %d: its agent %s is of an older ptbpf (no control block): "
			 "restart the process to trace it with this one", t->pid, lib.path);
		return -EPROTO;
	}
	a->ctl = lib.map_start - first + syms.ctl;
	a->busy = lib.map_start - first + syms.busy;
	a->steps = syms.steps ? lib.map_start - first + syms.steps : 0;
	return 0;
}

static int read_ctl(const struct agent_link *a, struct ptbpf_agent_ctl *c)
{
	int ret = target_mem_read(a->t, a->ctl, c, sizeof(*c));

	if (!ret && (c->magic != PTBPF_CTL_MAGIC || c->version != PTBPF_CTL_VERSION))
		return -EPROTO;
	return ret;
}

int agent_send(struct agent_link *a, uint32_t cmd, const char *words, uint64_t job_req,
	       uint64_t job_done, bool injected)
{
	const size_t from = offsetof(struct ptbpf_agent_ctl, cmd),
		     to = offsetof(struct ptbpf_agent_ctl, ack);
	struct ptbpf_agent_ctl c;
	int ret = read_ctl(a, &c);

	if (ret)
		return ret;
	c.cmd = cmd;
	/* Our pid means something to the agent only in a shared namespace. */
	c.owner = a->t->ns_pid == a->t->pid ? (uint32_t)getpid() : 0;
	c.job_buf_requested = job_req;
	c.job_buf_completed = job_done;
	c.injected |= injected;
	snprintf(c.words, sizeof(c.words), "%s", words ? words : "");
	/* The command first, then its sequence number: the agent acts on a
	 * new seq only. */
	ret = target_mem_write(a->t, a->ctl + from, (const uint8_t *)&c + from, to - from);
	c.seq++;
	if (!ret)
		ret = target_mem_write(a->t, a->ctl + offsetof(struct ptbpf_agent_ctl, seq), &c.seq,
				       sizeof(c.seq));
	if (!ret) {
		a->seq = c.seq;
		a->tid = c.agent_tid;
		a->cmd = cmd;
	}
	return ret;
}

int agent_steps_read(const struct agent_link *a, struct ptbpf_agent_steps *out)
{
	uint64_t seq;
	int ret;

	if (!a->steps)
		return -ENOTSUP;
	/* The agent writes a few words per step: a retry or two at most. A
	 * version 1 agent's block (of an older ptbpf) has no collectives. */
	for (int i = 0; i < 16; i++) {
		/* (a version 1 block may end where the mapping does) */
		ret = target_mem_read(a->t, a->steps, out, sizeof(*out));
		if (ret && ret != -ESRCH)
			ret = target_mem_read(a->t, a->steps, out, PTBPF_STEPS_V1_SIZE);
		if (ret)
			return ret;
		if (out->magic != PTBPF_STEPS_MAGIC || !out->version ||
		    out->version > PTBPF_STEPS_VERSION)
			return -ENOTSUP;
		if (out->version == 1)
			memset((char *)out + PTBPF_STEPS_V1_SIZE, 0,
			       sizeof(*out) - PTBPF_STEPS_V1_SIZE);
		if (out->seq & 1 || target_mem_read(a->t, a->steps + offsetof(struct
			ptbpf_agent_steps, seq), &seq, sizeof(seq)) || seq != out->seq)
			continue;
		return 0;
	}
	return -EAGAIN;
}

int agent_steps_renew(const struct agent_link *a, uint64_t heartbeat)
{
	if (!a->steps)
		return -ENOTSUP;
	return target_mem_write(a->t, a->steps + offsetof(struct ptbpf_agent_steps, heartbeat),
				&heartbeat, sizeof(heartbeat));
}

int agent_acked(const struct agent_link *a)
{
	struct ptbpf_agent_ctl c;
	int ret = read_ctl(a, &c);

	if (ret)
		return ret == -EPROTO ? -ESRCH : ret;
	return c.ack == a->seq ? 0 : -EAGAIN;
}

int agent_load_outcome(const struct target *t, uint64_t *handle, char *err, size_t errlen)
{
	struct agent_link a;
	struct ptbpf_agent_ctl c;
	int ret = agent_link_open(t, &a, err, errlen);

	if (!ret)
		ret = read_ctl(&a, &c);
	if (!ret && !c.handle)
		ret = -EAGAIN; /* mapped, its constructor not run yet: dlopen goes on */
	if (!ret)
		*handle = c.handle;
	return ret;
}

bool agent_injected(const struct agent_link *a)
{
	struct ptbpf_agent_ctl c;

	return !read_ctl(a, &c) && c.injected;
}

static bool thread_alive(int pid, uint32_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%u", pid, tid);
	return tid && access(path, F_OK) == 0;
}

bool agent_running(const struct agent_link *a)
{
	struct ptbpf_agent_ctl c;

	/* Just loaded, its thread may not have started yet (it writes its tid
	 * first thing): a second at most. A copy in a forked child names its
	 * parent's thread, which is not in the child. */
	for (int i = 0; i < 100 && !read_ctl(a, &c) && !c.agent_tid; i++)
		usleep(10000);
	return !read_ctl(a, &c) && thread_alive(a->t->pid, c.agent_tid);
}

int agent_unload(const struct agent_link *a, char *err, size_t errlen)
{
	struct ptbpf_agent_ctl c;
	int ret = read_ctl(a, &c), rc = 0;

	if (ret || c.state != PTBPF_STATE_GONE) {
		snprintf(err, errlen, "pid %d: its agent did not end (%s)", a->t->pid,
			 ret ? strerror(-ret) : "still running");
		return ret ? ret : -EBUSY;
	}
	for (int i = 0; i < 100 && thread_alive(a->t->pid, a->tid); i++)
		usleep(10000);
	if (thread_alive(a->t->pid, a->tid)) {
		snprintf(err, errlen, "pid %d: its agent's thread %u did not end", a->t->pid, a->tid);
		return -EBUSY;
	}
	ret = inject_dlclose_checked(a->t->pid, c.handle, a->text_lo, a->text_hi, a->busy,
				     sizeof(struct ptbpf_agent_busy), &rc, err, errlen);
	/* The call may have run and only its result be unreadable (the thread
	 * reused its stack at once): the maps tell. */
	if (ret && ret != -EBUSY && !target_maps(a->t->pid, "libptbpf-agent.so"))
		ret = rc = 0;
	if (!ret && (rc || target_maps(a->t->pid, "libptbpf-agent.so"))) {
		snprintf(err, errlen, "pid %d: dlclose of its agent returned %d and left it mapped "
			 "(loaded by another too?)", a->t->pid, rc);
		ret = -EBUSY;
	}
	return ret;
}
