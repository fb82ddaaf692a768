/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * reorder: puts events of two sources (the BPF ring, the agent's op rings)
 * into timestamp order before join sees them. A launch is attributed to the
 * op open on its thread at that instant, so per thread the two streams
 * must interleave as they happened. Events are held until no earlier one
 * can still arrive, then released in (ts, arrival) order.
 */
#ifndef PTBPF_REORDER_H
#define PTBPF_REORDER_H

#include <stddef.h>
#include <stdint.h>

struct reorder;

typedef int (*reorder_fn)(void *ctx, void *data, size_t size);

struct reorder *reorder_new(void);
void reorder_free(struct reorder *r);
/* Copies an event (it starts with struct ptbpf_event). 0 or -ENOMEM (then
 * the caller hands it on at once). */
int reorder_push(struct reorder *r, const void *data, size_t size);
/* Hands on, in order, every held event with ts <= upto (all of them with
 * UINT64_MAX). */
void reorder_release(struct reorder *r, uint64_t upto, reorder_fn fn, void *ctx);
/* Events held now. */
size_t reorder_held(const struct reorder *r);

#endif /* PTBPF_REORDER_H */
