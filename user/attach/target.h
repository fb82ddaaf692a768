/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The traced process as /proc shows it: its identity, namespaces, the
 * libraries it maps (opened through /proc/PID/map_files, so the probes go
 * on the inode that is really mapped, even if the path was replaced or lives
 * in another mount namespace), and its memory for lazy symbolization.
 */
#ifndef PTBPF_TARGET_H
#define PTBPF_TARGET_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct target_lib {
	char path[PATH_MAX];  /* as written in the target's maps */
	int fd;               /* the mapped inode, -1 if absent */
	char attach_path[32]; /* "/proc/self/fd/N": what uprobes attach to */
	uint64_t dev, ino;
	uint64_t map_start, map_off; /* its first mapping: address, file offset */
};

#define TARGET_MAX_LABELS 8

struct target {
	int pid;
	int pidfd;          /* readable once the process has exited */
	int memfd;          /* /proc/PID/mem of the image attached to (see
			     * target_mem_read); -1 if it could not be opened */
	int mem_errno;      /* why not */
	int claimfd;        /* held while this ptbpf traces it (attach/claim.h) */
	int ns_pid;         /* the pid inside its own pid namespace */
	char comm[64];      /* control characters escaped */
	char cmdline[1024]; /* argv joined by spaces, escaped */
	/* "RANK=0", "WORLD_SIZE=8", ...: the distributed-training variables
	 * (torchrun, SLURM, TorchElastic) of its environment, escaped. */
	char labels[TARGET_MAX_LABELS][128];
	int nlabels;
	struct target_lib torch;  /* libtorch_cpu.so; fd -1 in a CUDA/HIP-only program */
	struct target_lib stdcxx; /* libstdc++.so.6 */
	bool no_gpu_timeline;     /* set by main: its agent leaves CUPTI alone
				   * (--gpu-timeline) */
	bool ops_from_agent;      /* set by main: its agent records ops (and,
				   * with CUPTI on, CUDA API calls) */
	/* Set by main: target_vm_size, and whether its agent made the CUDA
	 * calls' records, at the last scan of its maps for new libraries. */
	unsigned long long vm_scanned;
	bool calls_scanned;
};

/* Fills t for pid; on error writes one line into err and returns -errno. */
int target_open(int pid, struct target *t, char *err, size_t errlen);
void target_close(struct target *t);
/* The process's start time (clock ticks since boot), 0 if unreadable: with
 * the pid, a name no later process shares. */
unsigned long long target_start_time(int pid);
/* pid's environment as it started (NUL-separated KEY=VALUE, NUL-ended)
 * into env, at most len - 1 bytes: its length, or 0. */
size_t target_environ(int pid, char *env, size_t len);
/* pid's arguments (NUL-separated, NUL-ended) into argv, at most len - 1
 * bytes: their length, or 0. */
size_t target_argv(int pid, char *argv, size_t len);
/* The value of key in env (n bytes from target_environ), or NULL. */
const char *target_env_get(const char *env, size_t n, const char *key);
/* Its parent's pid, 0 if unreadable. */
int target_parent(int pid);
/* Its virtual memory size: it changes as objects are mapped (a library
 * loaded), so a rescan of its maps is needed only when it did. */
unsigned long long target_vm_size(int pid);
/* Its CPU time so far (user and system, s), 0 if unreadable. */
double target_cpu_seconds(int pid);
/* The value of a label ("RANK" -> "0"), or NULL. */
const char *target_label(const struct target *t, const char *key);
/* Finds the first file mapping whose basename starts with prefix and opens
 * it through map_files. 0, -ENOENT if not mapped, or -errno. */
int target_find_lib(int pid, const char *prefix, struct target_lib *lib);
/* Whether pid maps a file whose basename starts with prefix. */
bool target_maps(int pid, const char *prefix);
/* Whether pid runs NCCL: a thread of torch's ProcessGroupNCCL (pt_nccl_*)
 * or of NCCL's own (NCCL *); its name goes to thread. */
bool target_runs_nccl(int pid, char *thread, size_t len);
/* Whether pid is alive (not exited, not a zombie). */
int target_alive(int pid);
/* Whether pid has exited or is on its way out (a zombie, its main thread
 * exiting, SIGKILL pending); then it waits until pid is gone (1 s at
 * most), so that nothing after meets a dying process. What failed in a
 * process that is gone failed for that: it gets no diagnosis of its own. */
bool target_gone(int pid);
/* Thread tid's state letter ('D': blocked in the kernel), 0 if unreadable;
 * wchan (len bytes) gets the kernel function it waits in, or "". */
char target_thread_state(int pid, int tid, char *wchan, size_t len);
/* Whether pid is stopped: 'T' (a stop signal), 't' (by its tracer), 0 if
 * it runs; *tracer: the pid that ptraces it (a debugger, strace), or 0. */
int target_stopped(int pid, int *tracer);
/* The memory of the process image t was opened on, through /proc/PID/mem
 * (bound to that image when opened): once the process exec'd or exited,
 * every access fails with -ESRCH and never reaches a new image. 0,
 * -ESRCH, or -EFAULT (not mapped). */
int target_mem_read(const struct target *t, uint64_t addr, void *buf, size_t len);
int target_mem_write(const struct target *t, uint64_t addr, const void *buf, size_t len);
/* Runtime address in pid of file offset file_off of lib (the mapping of its
 * inode whose file range holds it); 0 or -ENOENT. */
int target_file_addr(int pid, const struct target_lib *lib, uint64_t file_off, uint64_t *addr);
/* Reads target memory (of whatever image pid runs now); 0 or -errno. */
int target_read(int pid, uint64_t addr, void *buf, size_t len);
/* Reads a NUL-terminated string of at most len-1 bytes; 0 or -errno. */
int target_read_str(int pid, uint64_t addr, char *buf, size_t len);
/* Thread name from /proc/PID/task/TID/comm, escaped; "tid N" if gone. */
void target_thread_name(int pid, int tid, char *buf, size_t len);
/* 1 if this process runs in the initial pid namespace. */
int target_in_initial_pidns(void);

#endif /* PTBPF_TARGET_H */
