/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the /proc/PID/maps reader (user/lib/procmaps.c) on this
 * process's own mappings, checked against what made them: its executable
 * (the inode and path of /proc/self/exe), an anonymous mapping, files
 * mapped at an offset whose names hold blanks, one that was deleted, and
 * one whose path is near PATH_MAX (a line longer than any fixed buffer).
 * Also: a process that does not exist.
 */
#define _GNU_SOURCE
#include "lib/procmaps.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* The mapping of this process that holds addr; false if none. */
static bool mapping_of(const void *addr, struct procmap *out, char *path, size_t len)
{
	struct procmaps *m = procmaps_open(getpid());
	struct procmap e;
	bool found = false;

	while (m && !found && procmaps_next(m, &e)) {
		found = (uintptr_t)addr >= e.start && (uintptr_t)addr < e.end;
		if (found) {
			*out = e;
			snprintf(path, len, "%s", e.path);
		}
	}
	procmaps_close(m);
	return found;
}

static void check_exe(void)
{
	char exe[PATH_MAX], path[PATH_MAX];
	struct procmap e;
	struct stat st;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	exe[n > 0 ? n : 0] = 0;
	CHECK(!stat("/proc/self/exe", &st), "stat of /proc/self/exe", errno);
	CHECK(mapping_of((const void *)check_exe, &e, path, sizeof(path)), "code found", 0);
	CHECK(e.perms[2] == 'x' && e.perms[0] == 'r', "code is r-x", 0);
	CHECK(e.inode == st.st_ino && e.dev == st.st_dev, "its inode and device", e.inode);
	CHECK(!strcmp(path, exe), "its path", 0);
	CHECK(procmap_named(&e, "test_procmaps"), "named by its last component", 0);
	CHECK(!procmap_named(&e, "procmaps"), "a prefix of the last component only", 0);
}

static void check_anonymous(void)
{
	char path[PATH_MAX];
	struct procmap e;
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "anonymous mmap", errno);
	CHECK(mapping_of(p, &e, path, sizeof(path)), "anonymous mapping found", 0);
	CHECK(e.inode == 0 && !strcmp(path, "") && !strcmp(e.perms, "r--p"),
	      "no inode, no path, r--p", e.inode);
	munmap(p, 4096);
}

/* Maps page 1 of a two-page file at path and checks what the reader says;
 * deleted: the file is removed first. */
static void check_file(const char *path, bool deleted)
{
	char got[PATH_MAX + 16], want[PATH_MAX + 16];
	static char page[8192];
	struct procmap e;
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	void *p;

	CHECK(fd >= 0 && write(fd, page, sizeof(page)) == sizeof(page) && !fstat(fd, &st),
	      "file written", errno);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 4096);
	close(fd);
	CHECK(p != MAP_FAILED, "file mmap at offset 4096", errno);
	if (deleted)
		unlink(path);
	snprintf(want, sizeof(want), "%s%s", path, deleted ? " (deleted)" : "");
	CHECK(mapping_of(p, &e, got, sizeof(got)), "file mapping found", 0);
	CHECK(!strcmp(got, want), "the path whole, blanks kept", strlen(got));
	CHECK(e.offset == 4096 && e.inode == st.st_ino && e.dev == st.st_dev &&
	      !strcmp(e.perms, "r--s"), "offset, inode, device, r--s", e.offset);
	munmap(p, 4096);
	if (!deleted)
		unlink(path);
}

/* A path of about PATH_MAX - 100 bytes under dir: directories of 200. */
static void check_long_path(const char *dir)
{
	char path[PATH_MAX], part[201];
	size_t o = snprintf(path, sizeof(path), "%s", dir);

	memset(part, 'd', 200);
	part[200] = 0;
	while (o + 201 + 100 < PATH_MAX - 100) {
		o += snprintf(path + o, sizeof(path) - o, "/%s", part);
		CHECK(!mkdir(path, 0700), "mkdir", errno);
	}
	snprintf(path + o, sizeof(path) - o, "/f");
	check_file(path, false);
}

int main(void)
{
	char dir[] = "/tmp/test_procmaps.XXXXXX", path[PATH_MAX];
	char cmd[PATH_MAX + 16];
	struct procmaps *none;
	int e;

	CHECK(mkdtemp(dir), "mkdtemp", errno);
	check_exe();
	check_anonymous();
	snprintf(path, sizeof(path), "%s/a b  c", dir);
	check_file(path, false);
	snprintf(path, sizeof(path), "%s/gone", dir);
	check_file(path, true);
	check_long_path(dir);
	none = procmaps_open(INT_MAX);
	e = errno;
	CHECK(!none && e == ENOENT, "no such process: ENOENT", e);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(!system(cmd), "temporary files removed", 0);
	return check_summary("test_procmaps");
}
