/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The link keeper: a small process of ptbpf's own that makes, holds and
 * takes out every uprobe link, so that no probe is ever put into or taken
 * out of a job by a process that is being killed.
 *
 * Why: the kernel writes and restores a probe's breakpoint in the job's
 * text in the context of the process that makes or closes the link. If
 * that process has a fatal signal pending (SIGKILL; or a second Ctrl-C,
 * whose _exit kills ptbpf's other threads mid-detach), the write fails
 * and the breakpoint stays in the job with no one to take it out: on the
 * CI VM (kernel 6.18), a SIGKILL or a second Ctrl-C 20-150 ms into a
 * detach left 140-2,954 breakpoints in a CPU job's libtorch, still there
 * 10 s later, and one during an attach left up to 2,238; the kernel said
 * "failed to unregister, leaking uprobe" for some. The keeper ignores the
 * signals that stop ptbpf, is in a process group of its own, and when
 * ptbpf ends, however it ends, takes out whatever it still holds and
 * exits. It keeps ptbpf's stderr open until then: end of file on it
 * means the probes are out.
 */
#ifndef PTBPF_KEEPER_H
#define PTBPF_KEEPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>

/* argv[0] that runs ptbpf as the keeper (main.c). */
#define KEEPER_ARGV0 "ptbpf-keeper"
/* Its name (comm), without "ptbpf" in it: `pkill -9 ptbpf` or `killall
 * -9 ptbpf` then kills ptbpf alone, and the keeper takes its probes out. */
#define KEEPER_COMM "link-keeper"

/* Attaches prog_fd at offsets (with cookies, or none) of path for pid
 * (a uprobe.multi link; retprobe: at their returns); end: a probe that
 * ends what others begin, taken out after them if ptbpf leaves without
 * keeper_destroy. The link's id, or -errno. Starts the keeper on first
 * use, and another if it died (said once; what it held went with it). */
int keeper_attach(int prog_fd, int pid, const char *path, const unsigned long *offsets,
		  const __u64 *cookies, size_t cnt, bool retprobe, bool end);
/* Takes out the links ids[0..n) (all at once): their probes are gone
 * from the jobs when this returns (those of a keeper that died, with it).
 * 0 or -errno. */
int keeper_destroy(const int *ids, int n);
/* The keeper's CPU time so far (s); 0 before it starts. */
double keeper_cpu_seconds(void);
/* The keeper process itself (main.c, for argv[0] == KEEPER_ARGV0). */
int keeper_main(void);

#endif /* PTBPF_KEEPER_H */
