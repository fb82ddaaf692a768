/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GPU API calls in the trace, for join: the API probes' records ->
 * slice names and arguments; kernel names, per-stream work counters,
 * stream-capture state.
 */
#ifndef PTBPF_GPU_CALLS_H
#define PTBPF_GPU_CALLS_H

#include <stdbool.h>
#include <stdint.h>
#include "attach/gpu_probes.h"
#include "trace/perfetto.h"
#include "ptbpf_events.h"

struct gpu_state;

/* pf_track_counter needs a process track: join supplies it. */
typedef uint64_t (*gpu_process_track_fn)(void *ctx, int pid);

struct gpu_state *gpu_state_new(struct pf_writer *w, gpu_process_track_fn fn, void *ctx);
void gpu_state_free(struct gpu_state *g);

#define GPU_MAX_ARGS 12

/* What a call's begin writes: name, category, and its arguments. String
 * arguments point into `buf` or into long-lived tables. */
struct gpu_slice {
	const char *name, *category;
	struct pf_arg args[GPU_MAX_ARGS];
	int nargs;
	bool launch;  /* a kernel or graph launch */
	char buf[6][64];
};

/* A name that a cuModuleGetFunction-like call is looking up (before it returns). */
void gpu_note_name(struct gpu_state *g, const struct ptbpf_named_event *e);
/* Decodes a call's entry. `in_op` says whether an ATen op is open on its
 * thread (launches outside any op are labelled). */
void gpu_call_begin(struct gpu_state *g, const struct ptbpf_gpu_call *c, bool in_op,
		    struct gpu_slice *out);
/* Decodes a call's return into end arguments (return code, results). */
void gpu_call_end(struct gpu_state *g, const struct ptbpf_event *ret, struct gpu_slice *out);
/* Calls by API, for the summary. */
uint64_t gpu_calls_of(const struct gpu_state *g, unsigned api);

#endif /* PTBPF_GPU_CALLS_H */
