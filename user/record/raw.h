/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Raw captures: the ring buffer's records as they arrived, with what is
 * needed to read them again (op names, traced processes), so that a trace
 * can be re-made later (`ptbpf replay RAW -o FILE`) and recordings from a
 * GPU machine can drive the join in CI. Little-endian, x86-64 only:
 *   "PTBPFRAW1\n", then items: u8 tag, u32 length, payload
 *   'O' u32 op index, name NUL, overload NUL
 *   'P' struct raw_process
 *   'R' one ring record, as BPF wrote it
 *   'I' a Triton kernel's sources (record/inductor.h): i32 pid, then its
 *       name, ATen ops, source nodes, module and graph, each NUL-terminated
 *       (empty: none; captures before the graph have four), after the ring
 *       record that named the kernel
 */
#ifndef PTBPF_RAW_H
#define PTBPF_RAW_H

#include <stdbool.h>
#include <stdint.h>

struct inductor_kernel;
struct op_table;
struct target;

struct raw_process {
	int32_t pid, ns_pid;
	char comm[64];
	char cmdline[1024];
};

struct raw_writer;

/* Opens path as every output is opened (files.h: written as PATH.partial,
 * renamed when complete; an existing PATH replaced only with force). */
struct raw_writer *raw_open(const char *path, bool force);
/* Writes the ops added to the table since the last call. */
void raw_ops(struct raw_writer *r, const struct op_table *ops);
void raw_process(struct raw_writer *r, const struct target *t);
void raw_record(struct raw_writer *r, const void *data, uint64_t size);
/* An inductor_found_fn: ctx is the raw_writer. */
void raw_inductor(void *ctx, int pid, const char *name, const struct inductor_kernel *k);
/* Completes the capture (keep) or removes it; 0, or -1 with the failure
 * printed (the capture then stays as PATH.partial). */
int raw_close(struct raw_writer *r, bool keep);

/* Re-makes a trace from a capture: 0, or 1 with one line printed. A
 * capture cut short (its ptbpf was killed) is replayed up to the cut, with
 * a warning. A trace with a GPU timeline is handed to on_gpu_trace (if
 * given) once written, before it takes its name: the GPU idle track. */
int raw_replay(const char *raw_path, const char *out_path, bool force,
	       long (*on_gpu_trace)(const char *path, int fd));

#endif /* PTBPF_RAW_H */
