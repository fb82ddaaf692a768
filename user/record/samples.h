/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU samples of the traced threads (EV_CPU_SAMPLE, bpf/samples.bpf.c) into
 * the trace as Perfetto perf samples: each sample's Python frames (named by
 * record/pystack.c, outermost first) above its native frames (named by
 * record/natsym.c, the leaf last), one callstack, as trace_processor's
 * stack model has it (root first).
 */
#ifndef PTBPF_SAMPLES_H
#define PTBPF_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

struct pf_writer;
struct pystack;
struct sample_view;

struct sample_counts {
	uint64_t samples;       /* written into the trace */
	uint64_t with_python;   /* ... with at least one Python frame */
	uint64_t py_unnamed;    /* Python frames whose code object could not be named */
	uint64_t native_frames; /* native frames kept (up to where the chain broke), and of them ... */
	uint64_t native_named;  /* ... in a function ptbpf could name */
};

struct sample_view *sample_view_new(struct pf_writer *w, struct pystack *py);
void sample_view_free(struct sample_view *sv);
/* A process about to be traced: its native symbols read now (natsym_warm). */
void sample_view_warm(struct sample_view *sv, int pid);
/* Records read back from a raw capture (ptbpf replay): the processes may be
 * gone or their pids reused, so native frames keep their bare addresses
 * (mapping "[not symbolized]"), never another process's names. */
void sample_view_replay(struct sample_view *sv);
/* A code object was named (EV_PY_CODE): frames named before may have
 * named another one at its address, so they are named again. */
void sample_view_code_named(struct sample_view *sv);
/* One EV_CPU_SAMPLE record of size bytes. */
void sample_view_record(struct sample_view *sv, const void *data, size_t size);
/* pid exited: its address space is forgotten. */
void sample_view_process_gone(struct sample_view *sv, int pid);
const struct sample_counts *sample_view_counts(const struct sample_view *sv);

#endif /* PTBPF_SAMPLES_H */
