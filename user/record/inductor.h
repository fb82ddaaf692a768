/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a Triton kernel of torch.compile fuses, read from the module
 * Inductor generated for its graph (the "output code"): above each
 * `NAME = async_compile.triton('NAME', ...)` it writes
 *     # Topologically Sorted Source Nodes: [linear_7], Original ATen: [aten.addmm]
 * naming the model's FX nodes and the ATen ops the kernel replaces.
 *
 * A job's modules lie in its Inductor cache: TORCHINDUCTOR_CACHE_DIR from
 * its environment (an absolute path), else $TMPDIR (or /tmp)/torchinductor_$USER,
 * as torch makes it; opened inside the job's root (/proc/PID/root, with
 * openat2's RESOLVE_IN_ROOT: its symlinks and ".." cannot lead out of it),
 * regular files only (never blocking on a FIFO), only those the job's own
 * user owns, at most 16 MB each and 256 MB per process. They are read when
 * the first kernel name of that process that starts with "triton" arrives
 * (the agent sends each name once, before the first kernel that has it),
 * and again, for the modules written since, whenever a later name is not
 * found (only the directories whose ctime moved since they were read:
 * Inductor writes each file by a rename into its directory). A name
 * several modules define (graphs compiled apart reuse names) is taken
 * from the module most of the process's other kernels came from, then
 * the newest. A pid used again by a new process is a new cache.
 *
 * A raw capture keeps what was found (raw.h, 'I'): replay reads no files.
 */
#ifndef PTBPF_INDUCTOR_H
#define PTBPF_INDUCTOR_H

#include <stdbool.h>
#include <stdint.h>

struct inductor;

/* One kernel's sources; strings interned, NULL where the module said none. */
struct inductor_kernel {
	const char *aten;   /* "aten::addmm, aten::add" */
	const char *nodes;  /* "linear_7, input_4" */
	const char *module; /* the output code's path, as the job names it */
	const char *graph;  /* its AOT ID: "0_forward", "1_backward", ... */
};

struct inductor_counts {
	uint64_t names;          /* Triton kernel names looked up */
	uint64_t found;          /* of them, found in the job's modules */
	uint64_t modules;        /* output code modules read */
	uint64_t modules_skipped; /* past the limits, or not the job's user's */
};

typedef void inductor_found_fn(void *ctx, int pid, const char *name,
			       const struct inductor_kernel *k);

struct inductor *inductor_new(void);
/* Replay: no files are read; kernels come from inductor_add only. */
void inductor_replay(struct inductor *ix);
void inductor_free(struct inductor *ix);
/* Called with each kernel found in the job's files (a raw capture keeps it). */
void inductor_on_found(struct inductor *ix, inductor_found_fn *fn, void *ctx);
/* A kernel name pid sent: found in its modules now (if it names a Triton
 * kernel, and files are read), and kept for inductor_get. */
void inductor_name(struct inductor *ix, int pid, const char *name);
/* What was found for (pid, name), or NULL; good until the next
 * inductor_name or inductor_add. */
const struct inductor_kernel *inductor_get(struct inductor *ix, int pid, const char *name);
/* A kernel a raw capture recorded as found. */
void inductor_add(struct inductor *ix, int pid, const char *name, const struct inductor_kernel *k);
const struct inductor_counts *inductor_counts(const struct inductor *ix);

#endif /* PTBPF_INDUCTOR_H */
