/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Execs (bpf/exec.bpf.c on the sched_process_exec tracepoint): a traced
 * process's exec, and with all_procs (--all, the daemon) every exec on the
 * host, as EV_EXEC records in the op object's ring. A separate object, so
 * that a kernel refusing it leaves the rest loaded: then new processes are
 * found by scanning /proc, and an exec is noticed at the next read.
 */
#ifndef PTBPF_EXEC_PROBES_H
#define PTBPF_EXEC_PROBES_H

#include <stdbool.h>

struct ptbpf_bpf;
struct exec_probes;

/* Opens, loads (on the maps of the op object, ops) and attaches it. NULL
 * with errno set on failure. */
struct exec_probes *exec_probes_new(struct ptbpf_bpf *ops, bool all_procs);
/* Nothing runs after this. */
void exec_probes_detach(struct exec_probes *x);
void exec_probes_free(struct exec_probes *x);
/* Its BPF object, for --bpf-stats (NULL: none). */
const struct bpf_object *exec_probes_obj(const struct exec_probes *x);

#endif /* PTBPF_EXEC_PROBES_H */
