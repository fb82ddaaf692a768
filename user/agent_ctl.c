// SPDX-License-Identifier: BSD-2-Clause
/* Starting a command with the agent, and switching it on and off. See agent_ctl.h. */
#define _GNU_SOURCE
#include "agent_ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

int agent_library_path(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -ENOENT;
	exe[n] = 0;
	snprintf(buf, len, "%s/libptbpf-agent.so", dirname(exe));
	return access(buf, R_OK) ? -ENOENT : 0;
}

pid_t agent_run_command(char **argv, const char *agent)
{
	pid_t pid = fork();

	if (pid < 0) {
		fprintf(stderr, "ptbpf: run: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		setenv("CUDA_INJECTION64_PATH", agent, 1);
		execvp(argv[0], argv);
		fprintf(stderr, "ptbpf: run: cannot execute %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

static bool maps_libraries(pid_t pid)
{
	return target_maps(pid, "libtorch_cpu.so") || target_maps(pid, "libcuda.so") ||
	       target_maps(pid, "libcudart.so") || target_maps(pid, "libamdhip64.so");
}

int agent_wait_for_libraries(pid_t pid, int timeout_ms, int *status)
{
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return -ESRCH;
		if (maps_libraries(pid))
			return 0;
		usleep(20000);
	}
	return -ETIMEDOUT;
}

/* The file, seen from here: through /proc/PID/root, named with the pid the
 * target sees as its own. */
static void activation_path(const struct target *t, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/%d/root/dev/shm/ptbpf-agent-%d.on", t->pid, t->ns_pid);
}

int agent_on(const struct target *t, bool ops, const char *words)
{
	char path[128];
	int fd;

	activation_path(t, path, sizeof(path));
	/* Always a new file: an agent still on from an earlier session sees
	 * another inode, and starts over for this one. */
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	dprintf(fd, "%d%s%s\n", getpid(), ops ? " ops" : "", ops && words ? words : "");
	close(fd);
	return 0;
}

void agent_heartbeat(const struct target *t)
{
	char path[128];

	activation_path(t, path, sizeof(path));
	utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
}

void agent_off(const struct target *t)
{
	char path[128];

	activation_path(t, path, sizeof(path));
	unlink(path);
}
