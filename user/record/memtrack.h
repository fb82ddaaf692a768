/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The memory timeline (--memory): each EV_MEM record (a block PyTorch's
 * allocator handed out or took back, with its running totals) moves two
 * counter tracks of the process, "<device> memory allocated" and
 * "<device> memory reserved", in bytes; their peaks are kept for the
 * summary.
 */
#ifndef PTBPF_MEMTRACK_H
#define PTBPF_MEMTRACK_H

#include <stdint.h>

#include "trace/perfetto.h"
#include "ptbpf_events.h"

struct mem_state;

/* process_track(ctx, pid): the process's track uuid, made if need be. */
struct mem_state *mem_state_new(struct pf_writer *w, uint64_t (*process_track)(void *, int),
				void *ctx);
void mem_state_free(struct mem_state *m);
void mem_event(struct mem_state *m, const struct ptbpf_event *e);
/* Peak allocated and reserved bytes over all devices and processes, and
 * how many records were seen. */
void mem_peaks(const struct mem_state *m, uint64_t *allocated, uint64_t *reserved,
	       uint64_t *records);

#endif /* PTBPF_MEMTRACK_H */
