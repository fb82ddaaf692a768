/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * route: where each record goes, in time order, on its way into the trace.
 * Records of one thread (ops, calls, regions, backward nodes, stacks,
 * allocations) go to join, which keeps the thread's frames; the agent's
 * CUPTI records and statuses to the GPU timeline, GPU name lookups to the
 * call decoder, Python code objects to the stack decoder, allocator
 * records to the memory counters as well as to join.
 */
#ifndef PTBPF_ROUTE_H
#define PTBPF_ROUTE_H

#include <stdbool.h>
#include <stdint.h>
#include "record/join.h"

struct route;

struct route_counts {
	uint64_t by_kind[EV_KIND_MAX]; /* records received, by kind */
	uint64_t last_ts;              /* the latest record's time */
};

/* The joiner and its decoders, writing into w. NULL on failure. */
struct route *route_new(struct pf_writer *w, struct op_table *ops, bool entries_only);
void route_free(struct route *r);
/* Hands one record on; returns 0 (records are never refused). */
int route_event(struct route *r, const void *data, uint64_t size);
/* Closes what is still open at ts, or at the last record if later. */
void route_finish(struct route *r, uint64_t ts);
const struct route_counts *route_counts(const struct route *r);
struct join *route_join(const struct route *r);
const struct decoders *route_decoders(const struct route *r);

#endif /* PTBPF_ROUTE_H */
