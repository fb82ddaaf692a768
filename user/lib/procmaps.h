/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A process's mappings, as /proc/PID/maps lists them, one at a time: the
 * loader's one reader of that file (the agent, a library of its own, reads
 * its /proc/self/maps itself).
 *
 *     struct procmaps *m = procmaps_open(pid);
 *     struct procmap e;
 *
 *     if (!m)
 *             return -errno;
 *     while (procmaps_next(m, &e))
 *             if (e.perms[2] == 'x' && e.inode == lib_ino)
 *                     ...;
 *     procmaps_close(m);
 *
 * Reading it takes what reading the process's memory takes (ptrace's
 * PTRACE_MODE_READ): root, or CAP_SYS_PTRACE over it.
 */
#ifndef PTBPF_PROCMAPS_H
#define PTBPF_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>

struct procmap {
	uint64_t start, end;  /* [start, end) in the process */
	char perms[8];        /* "r-xp": read, write, execute, private or shared */
	uint64_t offset;      /* the file offset mapped at start */
	uint64_t dev;         /* the file's device, makedev(major, minor) */
	uint64_t inode;       /* the file's inode; 0 for an anonymous mapping */
	const char *path;     /* as the kernel writes it: "/usr/lib/libc.so.6",
			       * "[stack]", "/x (deleted)", "" when anonymous;
			       * valid until the next procmaps_next */
};

struct procmaps;

/* Opens pid's maps; NULL with errno set (ENOENT: no such process, EACCES:
 * not allowed to read it). */
struct procmaps *procmaps_open(int pid);
/* The next mapping in address order into *e; false after the last. */
bool procmaps_next(struct procmaps *m, struct procmap *e);
void procmaps_close(struct procmaps *m);
/* Whether the last component of e's path starts with prefix
 * ("libc.so.6", "libtorch_cpu.so"). */
bool procmap_named(const struct procmap *e, const char *prefix);

#endif /* PTBPF_PROCMAPS_H */
