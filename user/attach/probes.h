/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * probes: decides where every probe goes in a target's libtorch and
 * libstdc++ (a "plan", computed once per library inode) and attaches the
 * BPF programs there for one process. All links are FD-based: if ptbpf dies,
 * the kernel removes every probe.
 */
#ifndef PTBPF_PROBES_H
#define PTBPF_PROBES_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/op_table.h"
#include "ptbpf_events.h"

struct ptbpf_bpf;
struct target;
struct probes;

struct attach_report {
	uint32_t ops;          /* op functions probed */
	uint32_t ops_skipped;  /* op functions whose exits could not be found */
	uint32_t ret_sites;    /* ret instructions probed */
	uint32_t tail_sites;   /* tail jumps probed as exits */
	uint32_t emulated_entries; /* entry probes on an emulated instruction */
	int catch_probe, bwd_probe, seq_probe, user_probes; /* 1 if attached */
	double plan_ms, attach_ms;
};

/* Opens the op object (bpf/ptbpf.bpf.c: the ring of ring_bytes, the loss
 * counters and the traced-process set that every other object shares),
 * loads it and attaches its process tracepoints (exits, forks); its
 * uprobes go on with probes_attach. NULL with one line in err. */
struct ptbpf_bpf *probes_load(uint32_t ring_bytes, bool py_stacks, char *err, size_t errlen);
/* entries_only: no exit probes (ret sites, __cxa_begin_catch, backward exits). */
struct probes *probes_new(struct ptbpf_bpf *skel, struct op_table *ops, bool entries_only);
/* Plans t's libtorch now, attaching nothing: its forked children, traced
 * by uprobes, are then attached within milliseconds. 0 or -errno (err). */
int probes_prepare(struct probes *p, const struct target *t, char *err, size_t errlen);
/* Attaches everything for t. Stops early (returns -EINTR) once *stop is set.
 * On error writes one line into err; links attached so far stay owned by
 * p and are removed by probes_free. */
int probes_attach(struct probes *p, const struct target *t, struct attach_report *rep,
		  volatile sig_atomic_t *stop, char *err, size_t errlen);
/* Probes torch.distributed.rpc's message sends and request handling in t
 * (either op source). 1 if attached, 0 if its torch has no TensorPipe
 * agent, -errno. */
int probes_attach_rpc(struct probes *p, const struct target *t);
/* c10::reportMemoryUsageToProfiler in t's libc10 (the CUDA caching
 * allocator's block allocations and frees): 0, or -errno with err set. */
int probes_attach_mem(struct probes *p, const struct target *t, char *err, size_t errlen);
/* Only marks pid as traced (its thread exits, forks and GPU calls are
 * reported): for a process whose ops come from its agent. 0 or -errno. */
int probes_trace_pid(struct probes *p, int pid);
/* Removes pid's probes and its mark as traced (its image exec'd away). */
void probes_forget_pid(struct probes *p, int pid);
/* Detaches every link (no new events after this returns). */
void probes_detach(struct probes *p);
void probes_free(struct probes *p);

/* Makes another BPF object (the GPU and agent ones) use the op object's
 * ring buffer, loss counters and traced-process set; before it is loaded.
 * 0 or -errno. */
struct bpf_object;
int probes_share_maps(struct ptbpf_bpf *ops, struct bpf_object *obj);

/* Whether a load that failed with err should be tried again from a fresh
 * open. The verifier gives up with EAGAIN whenever a signal is pending (job
 * control stopping ptbpf, say) and libbpf tries only five times; a loaded
 * object cannot load again. Yes for EAGAIN for 10 s from the first failure;
 * *first_ns starts at 0 and keeps that time. */
bool probes_load_again(int err, uint64_t *first_ns);

#endif /* PTBPF_PROBES_H */
