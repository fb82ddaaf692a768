// SPDX-License-Identifier: BSD-2-Clause
/* A process's mappings from /proc/PID/maps. See procmaps.h. */
#define _GNU_SOURCE
#include "lib/procmaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

struct procmaps {
	FILE *f;
	char *line; /* getline's: a path may be as long as PATH_MAX */
	size_t cap;
};

struct procmaps *procmaps_open(int pid)
{
	struct procmaps *m = calloc(1, sizeof(*m));
	char path[64];

	if (!m)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	m->f = fopen(path, "re");
	if (!m->f) {
		int e = errno;

		free(m);
		errno = e;
		return NULL;
	}
	return m;
}

/* "START-END PERMS OFFSET MAJOR:MINOR INODE [PATH]": the path is the rest
 * of the line after the blanks that pad it (it may hold blanks itself). */
bool procmaps_next(struct procmaps *m, struct procmap *e)
{
	unsigned long start, end, off, ino;
	unsigned int major, minor;
	ssize_t n;
	int pos;

	while ((n = getline(&m->line, &m->cap, m->f)) > 0) {
		pos = 0;
		if (sscanf(m->line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, e->perms, &off,
			   &major, &minor, &ino, &pos) < 7 || !pos)
			continue;
		if (m->line[n - 1] == '\n')
			m->line[n - 1] = 0;
		e->start = start;
		e->end = end;
		e->offset = off;
		e->dev = makedev(major, minor);
		e->inode = ino;
		e->path = m->line + pos;
		return true;
	}
	return false;
}

void procmaps_close(struct procmaps *m)
{
	if (!m)
		return;
	fclose(m->f);
	free(m->line);
	free(m);
}

bool procmap_named(const struct procmap *e, const char *prefix)
{
	const char *base = strrchr(e->path, '/');

	return !strncmp(base ? base + 1 : e->path, prefix, strlen(prefix));
}
