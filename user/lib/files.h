/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Input and output files of every subcommand.
 *
 * Inputs are regular files only (a FIFO, directory or device is refused
 * before anything blocks on it).
 *
 * Outputs, one policy for every subcommand (the trace, --raw, replay
 * -o, merge -o, export --kineto):
 *   - written under a temporary name, FILE.partial, and renamed to FILE once
 *     complete, so a failed run never destroys an older FILE (a killed or
 *     failed run leaves its partial output under FILE.partial, or removes
 *     it when nothing in it is worth keeping: a live capture whose tracing
 *     never started);
 *   - an existing FILE (or FILE.partial) is not replaced unless --force;
 *   - an output that is one of the run's inputs, or another of its outputs,
 *     is refused, as are symbolic links and anything but a regular file.
 * Each refusal or failure prints one line naming the file and what to do.
 */
#ifndef PTBPF_FILES_H
#define PTBPF_FILES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define OUTFILE_SUFFIX ".partial"

/* Opens path for reading if it is a regular file; else -1 with one line
 * printed ("ptbpf: WHO: ..."). */
int infile_open(const char *path, const char *who);

struct outfile {
	char path[PATH_MAX];                             /* FILE */
	char tmp[PATH_MAX + sizeof(OUTFILE_SUFFIX)];     /* FILE.partial */
	int fd;                                          /* on tmp; -1 when closed */
	bool force;
};

/* "ptbpf: WHO: cannot write PATH: REASON", and what to do when the disk
 * is full. */
void outfile_cannot_write(const char *who, const char *path, int err);
/* Whether an output may go to path (an early check, repeated by
 * outfile_open): 0, or -1 with one line printed. */
int outfile_check(const char *path, bool force, const char *who);
/* Creates FILE.partial for writing (fd in o->fd); inputs: the files the run
 * reads. `who` prefixes messages ("export", or "" for the tracer). 0, or
 * -1 with one line printed. */
int outfile_open(struct outfile *o, const char *path, bool force,
		 const char *const *inputs, int ninputs, const char *who);
/* fsyncs and closes the file and renames it to FILE (replacing an existing
 * FILE only with force). 0, or -1 with one line printed (the output then
 * stays under FILE.partial). */
int outfile_commit(struct outfile *o, const char *who);
/* Closes the file and removes FILE.partial (nothing worth keeping). */
void outfile_discard(struct outfile *o);
/* Closes the file, leaving it as FILE.partial (a failed run's output). */
void outfile_keep_partial(struct outfile *o);
/* Whether a and b name the same file (existing or to be created). */
bool outfile_same(const char *a, const char *b);

#endif /* PTBPF_FILES_H */
