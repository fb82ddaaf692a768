// SPDX-License-Identifier: BSD-2-Clause
/* The traced process as /proc shows it. See target.h. */
#define _GNU_SOURCE
#include "attach/target.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/procmaps.h"
#include "lib/text.h"

/* The inode of the initial pid namespace (PROC_PID_INIT_INO). */
#define INIT_PIDNS_INO 0xEFFFFFFCu

static ssize_t read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, total = 0;

	if (fd < 0)
		return -errno;
	while ((size_t)total < len - 1 && (n = read(fd, buf + total, len - 1 - total)) > 0)
		total += n;
	close(fd);
	buf[total] = 0;
	return total;
}

int target_in_initial_pidns(void)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st))
		return 0;
	return st.st_ino == INIT_PIDNS_INO;
}

/* The state letter of a /proc .../stat file (after the name), or 0. */
static char stat_state(const char *path)
{
	char buf[512], *p;

	if (read_file(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')) || p[1] != ' ')
		return 0;
	return p[2];
}

int target_alive(int pid)
{
	char path[64], state;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	state = stat_state(path);
	return state && state != 'Z' && state != 'X';
}

/* Whether the hex signal set after key in a /proc status file holds SIGKILL. */
static bool holds_sigkill(const char *status, const char *key)
{
	const char *p = strstr(status, key);

	return p && strtoull(p + strlen(key), NULL, 16) & (1ull << (SIGKILL - 1));
}

/* Whether pid is on its way out: a zombie or gone, its main thread
 * exiting (PF_EXITING), or a SIGKILL pending (sent to it, or to every
 * thread by the kernel once a fatal signal took the process). */
static bool exiting(int pid)
{
	char path[64], buf[4096], *p, state;
	unsigned long flags = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return true;
	if (state == 'Z' || state == 'X' || (flags & 0x4)) /* PF_EXITING */
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return true;
	return holds_sigkill(buf, "\nSigPnd:") || holds_sigkill(buf, "\nShdPnd:");
}

bool target_gone(int pid)
{
	if (!exiting(pid))
		return false;
	for (int i = 0; i < 100 && target_alive(pid); i++)
		usleep(10000);
	return true;
}

int target_stopped(int pid, int *tracer)
{
	char path[64], buf[4096], *p, state;

	*tracer = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (read_file(path, buf, sizeof(buf)) > 0 && (p = strstr(buf, "\nTracerPid:")))
		*tracer = atoi(p + strlen("\nTracerPid:"));
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	state = stat_state(path);
	return state == 'T' || state == 't' ? state : 0;
}

char target_thread_state(int pid, int tid, char *wchan, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", pid, tid);
	if (read_file(path, wchan, len) <= 0 || !strcmp(wchan, "0"))
		wchan[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	return stat_state(path);
}

static int read_ns_pid(int pid)
{
	char path[64], buf[4096], *line, *last = NULL, *tok, *save;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return pid;
	line = strstr(buf, "\nNSpid:");
	if (!line)
		return pid;
	line = strtok_r(line + 7, "\n", &save);
	for (tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
		last = tok;
	return last ? atoi(last) : pid;
}

/* /proc/PID/name (environ, cmdline: NUL-separated) into buf, NUL-ended. */
static size_t read_proc_list(int pid, const char *name, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	n = read_file(path, buf, len - 1);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (size_t)n;
}

size_t target_environ(int pid, char *env, size_t len)
{
	return read_proc_list(pid, "environ", env, len);
}

size_t target_argv(int pid, char *argv, size_t len)
{
	return read_proc_list(pid, "cmdline", argv, len);
}

const char *target_env_get(const char *env, size_t n, const char *key)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strncmp(env + i, key, klen) && env[i + klen] == '=')
			return env + i + klen + 1;
	return NULL;
}

/* The distributed-training variables of its environment, as labels. */
static void read_dist_env(struct target *t)
{
	static const char *const keys[TARGET_MAX_LABELS] = {
		"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
		"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "GROUP_RANK",
	};
	static char env[1 << 17];
	size_t n = target_environ(t->pid, env, sizeof(env));

	t->nlabels = 0;
	for (size_t k = 0; n && k < TARGET_MAX_LABELS; k++) {
		const char *v = target_env_get(env, n, keys[k]);

		if (v) /* KEY=VALUE, escaped */
			text_escape(t->labels[t->nlabels++], sizeof(t->labels[0]),
				    v - strlen(keys[k]) - 1, strlen(v) + strlen(keys[k]) + 1);
	}
}

const char *target_label(const struct target *t, const char *key)
{
	size_t len = strlen(key);

	for (int i = 0; i < t->nlabels; i++)
		if (!strncmp(t->labels[i], key, len) && t->labels[i][len] == '=')
			return t->labels[i] + len + 1;
	return NULL;
}

static void read_identity(struct target *t)
{
	char path[64], buf[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", t->pid);
	n = read_file(path, buf, sizeof(buf));
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	text_escape(t->comm, sizeof(t->comm), buf, n > 0 ? n : 0);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", t->pid);
	n = read_file(path, buf, sizeof(buf));
	for (ssize_t i = 0; i + 1 < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	text_escape(t->cmdline, sizeof(t->cmdline), buf, n > 0 ? n : 0);
	t->ns_pid = read_ns_pid(t->pid);
	read_dist_env(t);
}

/* Opens /proc/PID/map_files/START-END and checks it is the mapped inode. */
static int open_mapping(int pid, unsigned long start, unsigned long end,
			uint64_t dev, uint64_t ino, struct target_lib *lib)
{
	char path[128];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, start, end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_ino != ino ||
	    st.st_dev != dev) {
		close(fd);
		return -ESTALE;
	}
	lib->fd = fd;
	lib->dev = dev;
	lib->ino = ino;
	snprintf(lib->attach_path, sizeof(lib->attach_path), "/proc/self/fd/%d", fd);
	return 0;
}

int target_find_lib(int pid, const char *prefix, struct target_lib *lib)
{
	struct procmaps *m = procmaps_open(pid);
	struct procmap e;
	int err = -ENOENT;

	lib->fd = -1;
	if (!m)
		return -errno;
	while (procmaps_next(m, &e)) {
		if (e.inode == 0 || !procmap_named(&e, prefix))
			continue;
		snprintf(lib->path, sizeof(lib->path), "%s", e.path);
		err = open_mapping(pid, e.start, e.end, e.dev, e.inode, lib);
		lib->map_start = e.start;
		lib->map_off = e.offset;
		break;
	}
	procmaps_close(m);
	return err;
}

bool target_maps(int pid, const char *prefix)
{
	struct target_lib lib;

	if (target_find_lib(pid, prefix, &lib))
		return false;
	close(lib.fd);
	return true;
}

bool target_runs_nccl(int pid, char *thread, size_t len)
{
	char path[64], comm[32];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && !found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/comm", pid, de->d_name);
		if (read_file(path, comm, sizeof(comm)) <= 0)
			continue;
		comm[strcspn(comm, "\n")] = 0;
		found = !strncmp(comm, "pt_nccl", 7) || !strncmp(comm, "NCCL", 4);
		if (found)
			snprintf(thread, len, "%s", comm);
	}
	if (d)
		closedir(d);
	return found;
}

static bool maps_gpu_library(int pid)
{
	return target_maps(pid, "libcuda.so") || target_maps(pid, "libcudart.so") ||
	       target_maps(pid, "libamdhip64.so") || target_maps(pid, "libnccl.so");
}

/* Why libtorch_cpu.so could not be opened, and what to do: reading
 * /proc/PID/maps takes CAP_SYS_PTRACE over the process (and root for some,
 * such as pid 1); /proc/PID/map_files (mode 0500, owned by the process's
 * user) takes CAP_DAC_READ_SEARCH besides CAP_SYS_ADMIN when that user is
 * not ptbpf's. */
static void describe_open_failure(int pid, int ret, char *err, size_t errlen)
{
	struct procmaps *maps = procmaps_open(pid);
	char path[64];
	struct stat st;

	if (!maps && geteuid()) {
		snprintf(err, errlen, "pid %d: cannot read /proc/%d/maps: %s: the kernel does not "
			 "let ptbpf's user read this process (CAP_SYS_PTRACE is not enough for "
			 "some, e.g. pid 1); run ptbpf as root", pid, pid, strerror(errno));
		return;
	}
	if (!maps) {
		snprintf(err, errlen, "pid %d: cannot read /proc/%d/maps: %s: the kernel does not "
			 "let ptbpf read this process, even as root (it holds capabilities ptbpf "
			 "lacks, or a security module refuses)", pid, pid, strerror(errno));
		return;
	}
	procmaps_close(maps);
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if ((ret == -EACCES || ret == -EPERM) && !stat(path, &st) && st.st_uid != geteuid())
		snprintf(err, errlen, "pid %d: cannot open its libtorch_cpu.so through "
			 "/proc/%d/map_files: %s: that directory belongs to the process's user "
			 "(uid %u); ptbpf needs CAP_DAC_READ_SEARCH for it (or run it as root)", pid,
			 pid, strerror(-ret), (unsigned)st.st_uid);
	else
		snprintf(err, errlen, "pid %d: cannot open its libtorch_cpu.so through "
			 "/proc/%d/map_files: %s", pid, pid, strerror(-ret));
}

int target_open(int pid, struct target *t, char *err, size_t errlen)
{
	char path[64];
	int ret;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->pidfd = t->memfd = t->claimfd = t->torch.fd = t->stdcxx.fd = -1;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (access(path, F_OK) || !target_alive(pid)) {
		snprintf(err, errlen, "no process with pid %d", pid);
		return -ESRCH;
	}
	t->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "pid %d: pidfd_open: %s", pid, strerror(errno));
		return ret;
	}
	/* Needed only to talk to an agent: without it (another user's process
	 * and no CAP_DAC_OVERRIDE) ops come from uprobes. */
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	t->mem_errno = t->memfd < 0 ? errno : 0;
	read_identity(t);
	ret = target_find_lib(pid, "libtorch_cpu.so", &t->torch);
	if (ret == -ENOENT && !maps_gpu_library(pid)) {
		snprintf(err, errlen, "pid %d (%s) maps neither libtorch_cpu.so nor a CUDA, HIP or NCCL "
			 "library: is it a PyTorch process that has imported torch?", pid, t->comm);
		return ret;
	}
	if (ret == -ENOENT) /* a CUDA/HIP program without torch: GPU calls only */
		ret = 0;
	if (ret) {
		describe_open_failure(pid, ret, err, errlen);
		return ret;
	}
	ret = target_find_lib(pid, "libstdc++.so", &t->stdcxx);
	if (ret && ret != -ENOENT) {
		snprintf(err, errlen, "pid %d: cannot open its libstdc++: %s", pid,
			 strerror(-ret));
		return ret;
	}
	return 0;
}

void target_close(struct target *t)
{
	if (t->torch.fd >= 0)
		close(t->torch.fd);
	if (t->stdcxx.fd >= 0)
		close(t->stdcxx.fd);
	if (t->pidfd >= 0)
		close(t->pidfd);
	if (t->memfd >= 0)
		close(t->memfd);
	if (t->claimfd >= 0)
		close(t->claimfd);
	t->torch.fd = t->stdcxx.fd = t->pidfd = t->memfd = t->claimfd = -1;
}

/* Field n (1-based, as proc(5) numbers them; n > 3) of /proc/PID/stat, 0 if
 * it cannot be read. */
static unsigned long long stat_field(int pid, int n)
{
	char path[64], buf[1024], *p, *save = NULL;
	int i = 3;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
		return 0;
	strtok_r(p + 1, " ", &save); /* field 3, the state */
	while ((p = strtok_r(NULL, " ", &save)))
		if (++i == n)
			return strtoull(p, NULL, 10);
	return 0;
}

unsigned long long target_start_time(int pid)
{
	return stat_field(pid, 22);
}

int target_parent(int pid)
{
	return (int)stat_field(pid, 4);
}

unsigned long long target_vm_size(int pid)
{
	return stat_field(pid, 23);
}

double target_cpu_seconds(int pid)
{
	return (double)(stat_field(pid, 14) + stat_field(pid, 15)) / sysconf(_SC_CLK_TCK);
}

/* /proc/PID/mem reads 0 bytes once its image has no users left. */
static int mem_result(ssize_t n, size_t len)
{
	if (n == (ssize_t)len)
		return 0;
	if (n == 0 || (n < 0 && errno == ESRCH))
		return -ESRCH;
	return -EFAULT;
}

int target_mem_read(const struct target *t, uint64_t addr, void *buf, size_t len)
{
	if (t->memfd < 0)
		return -ESRCH;
	return mem_result(pread(t->memfd, buf, len, (off_t)addr), len);
}

int target_mem_write(const struct target *t, uint64_t addr, const void *buf, size_t len)
{
	if (t->memfd < 0)
		return -ESRCH;
	return mem_result(pwrite(t->memfd, buf, len, (off_t)addr), len);
}

int target_file_addr(int pid, const struct target_lib *lib, uint64_t file_off, uint64_t *addr)
{
	struct procmaps *m = procmaps_open(pid);
	struct procmap e;
	int ret = -ENOENT;

	if (!m)
		return -errno;
	while (procmaps_next(m, &e)) {
		if (e.inode != lib->ino || e.dev != lib->dev || file_off < e.offset ||
		    file_off >= e.offset + (e.end - e.start))
			continue;
		*addr = e.start + (file_off - e.offset);
		ret = 0;
		break;
	}
	procmaps_close(m);
	return ret;
}

int target_read(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int target_read_str(int pid, uint64_t addr, char *buf, size_t len)
{
	/* Read in small chunks so a string near the end of a mapping is found. */
	for (size_t off = 0; off + 1 < len; off += 32) {
		size_t n = len - 1 - off < 32 ? len - 1 - off : 32;

		if (target_read(pid, addr + off, buf + off, n))
			return -EFAULT;
		if (memchr(buf + off, 0, n))
			return 0;
	}
	buf[len - 1] = 0;
	return 0;
}

void target_thread_name(int pid, int tid, char *buf, size_t len)
{
	char path[64], raw[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	n = read_file(path, raw, sizeof(raw));
	if (n <= 0) {
		snprintf(buf, len, "tid %d", tid);
		return;
	}
	if (raw[n - 1] == '\n')
		raw[--n] = 0;
	text_escape(buf, len, raw, n);
}
