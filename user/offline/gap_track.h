/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The GPU idle track (issue 20): after a capture, the report's GPU idle
 * gaps go into the trace itself, as a "GPU idle" track under each stream
 * with a slice per gap (10 us or more), named by what it mostly was.
 */
#ifndef PTBPF_GAP_TRACK_H
#define PTBPF_GAP_TRACK_H

#include <stddef.h>

/* Reading a trace again takes about 1 s per 20 MB on a small VM: a larger
 * one gets no track. */
#define GAP_TRACK_MAX_BYTES (256 << 20)

/* Reads the complete trace at path (fd: it, open for writing) and appends
 * the gaps' tracks to it, with an end marker of their own. The number of
 * gaps written, or -1 with one line printed; on failure the file is as it
 * was. */
long gap_track_append(const char *path, int fd);

#endif /* PTBPF_GAP_TRACK_H */
