/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The CPU sampler (bpf/samples.bpf.c): a cpu-clock perf event on every
 * online CPU at hz samples per second, each running the program, which
 * keeps the samples of the traced processes' threads. Per CPU rather than
 * per thread: a fixed number of events whatever threads the processes
 * start, none to follow; the cost is the program running (and returning at
 * once) on every CPU hz times a second. Shares the op programs' ring,
 * counters and Python layouts, and the kernel view's bitmap of traced
 * processes where the kernel view is loaded.
 */
#ifndef PTBPF_SAMPLE_PROBES_H
#define PTBPF_SAMPLE_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ptbpf_bpf;
struct sched_probes;
struct sample_probes;

#define SAMPLE_HZ_DEFAULT 99
#define SAMPLE_HZ_MAX 10000

/* Loads the program (sharing ops' maps, and sched's bitmap unless NULL)
 * and opens and attaches the events. NULL with one line in err. */
struct sample_probes *sample_probes_new(struct ptbpf_bpf *ops, struct sched_probes *sched,
					uint32_t hz, char *err, size_t errlen);
/* Starts (on) or stops sampling process pid's threads; 0 or -errno. A
 * no-op where the bitmap is the kernel view's (it does this itself). */
int sample_probes_watch(struct sample_probes *p, int pid, bool on);
/* CPUs sampled. */
int sample_probes_cpus(const struct sample_probes *p);
/* Closes the events: nothing runs after this. */
void sample_probes_detach(struct sample_probes *p);
void sample_probes_free(struct sample_probes *p);
/* Its BPF object, for --bpf-stats (NULL: none). */
const struct bpf_object *sample_probes_obj(const struct sample_probes *p);

#endif /* PTBPF_SAMPLE_PROBES_H */
