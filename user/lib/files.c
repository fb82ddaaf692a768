// SPDX-License-Identifier: BSD-2-Clause
/* Inputs: regular files only. Outputs: a temporary name, renamed when
 * complete, no clobbering. See files.h. */
#define _GNU_SOURCE
#include "lib/files.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"

/* One line: "ptbpf: WHO: ..." (or "ptbpf: ..." without who). */
static void say(const char *who, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg("%s%s%s\n", who ? who : "", who && *who ? ": " : "", msg);
}

int infile_open(const char *path, const char *who)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	if (fd < 0) {
		say(who, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st)) {
		say(who, "cannot read %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		say(who, "%s is %s, not a regular file: give a file", path,
		    S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" :
		    S_ISSOCK(st.st_mode) ? "a socket" : "a device");
		close(fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, 0)) {
		say(who, "cannot read %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The directory's real path and the base name: a name for a file that may
 * not exist yet. */
static void canonical(const char *path, char *out, size_t len)
{
	char d[PATH_MAX], b[PATH_MAX], *real;

	snprintf(d, sizeof(d), "%s", path);
	snprintf(b, sizeof(b), "%s", path);
	real = realpath(dirname(d), NULL);
	snprintf(out, len, "%s/%s", real ? real : dirname(d), basename(b));
	free(real);
}

bool outfile_same(const char *a, const char *b)
{
	struct stat sa, sb;
	char ca[2 * PATH_MAX + 2], cb[2 * PATH_MAX + 2];

	if (!stat(a, &sa) && !stat(b, &sb))
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	canonical(a, ca, sizeof(ca));
	canonical(b, cb, sizeof(cb));
	return !strcmp(ca, cb);
}

/* 0 if an output may go to path: not an input, and (unless force) not
 * there yet; else -1 with the reason printed. */
static int check_target(const char *path, bool force, const char *const *inputs, int ninputs,
			const char *who)
{
	struct stat st;

	for (int i = 0; i < ninputs; i++) {
		if (inputs[i] && outfile_same(path, inputs[i])) {
			say(who, "refusing to write %s: it is the input %s; give the output "
			    "another name", path, inputs[i]);
			return -1;
		}
	}
	if (lstat(path, &st)) {
		if (errno == ENOENT)
			return 0;
		say(who, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		say(who, "refusing to write %s: it is a symbolic link", path);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		say(who, "refusing to write %s: not a regular file", path);
		return -1;
	}
	if (!force) {
		say(who, "%s exists; not replaced (--force replaces it)", path);
		return -1;
	}
	return 0;
}

void outfile_cannot_write(const char *who, const char *path, int err)
{
	say(who, "cannot write %s: %s%s", path, strerror(err),
	    err == ENOSPC || err == EDQUOT ? ": free space there or write elsewhere" : "");
}

int outfile_check(const char *path, bool force, const char *who)
{
	return check_target(path, force, NULL, 0, who);
}

int outfile_open(struct outfile *o, const char *path, bool force,
		 const char *const *inputs, int ninputs, const char *who)
{
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->force = force;
	if (!*path || strlen(path) >= sizeof(o->path)) {
		say(who, "invalid output path");
		return -1;
	}
	snprintf(o->path, sizeof(o->path), "%s", path);
	snprintf(o->tmp, sizeof(o->tmp), "%s" OUTFILE_SUFFIX, path);
	if (check_target(o->path, force, inputs, ninputs, who) ||
	    check_target(o->tmp, force, inputs, ninputs, who))
		return -1;
	if (force)
		unlink(o->tmp);
	o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (o->fd < 0) {
		if (errno == EEXIST)
			say(who, "%s exists; not replaced (--force replaces it)", o->tmp);
		else
			outfile_cannot_write(who, o->tmp, errno);
		return -1;
	}
	return 0;
}

/* tmp -> path, never replacing an existing path: renameat2's NOREPLACE, or
 * link + unlink where the file system lacks it. */
static int rename_noreplace(const char *tmp, const char *path)
{
	if (!renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(tmp, path))
		return -1;
	unlink(tmp);
	return 0;
}

int outfile_commit(struct outfile *o, const char *who)
{
	int err = 0;

	/* A device such as /dev/null takes no fsync (EINVAL): nothing to keep. */
	if (fsync(o->fd) && errno != EINVAL && errno != EROFS)
		err = errno;
	if (close(o->fd) && !err)
		err = errno;
	o->fd = -1;
	if (err) {
		say(who, "writing %s failed: %s (what was written stays there)", o->tmp,
		    strerror(err));
		return -1;
	}
	if (o->force ? rename(o->tmp, o->path) : rename_noreplace(o->tmp, o->path)) {
		if (errno == EEXIST)
			say(who, "%s appeared while writing and is not replaced (--force replaces "
			    "it): the output is in %s", o->path, o->tmp);
		else
			say(who, "cannot rename %s to %s: %s; the output is in %s", o->tmp, o->path,
			    strerror(errno), o->tmp);
		return -1;
	}
	return 0;
}

void outfile_discard(struct outfile *o)
{
	if (o->fd < 0)
		return;
	close(o->fd);
	o->fd = -1;
	unlink(o->tmp);
}

void outfile_keep_partial(struct outfile *o)
{
	if (o->fd < 0)
		return;
	fsync(o->fd);
	close(o->fd);
	o->fd = -1;
}
