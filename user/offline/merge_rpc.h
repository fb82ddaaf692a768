/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * merge's torch.distributed.rpc joining: a request handled by a process
 * traced in one input and sent by a caller traced in another gets, in the
 * merged trace, the call's name and the flows request -> handling and
 * response -> call that a single session would have drawn. The first pass
 * notes each input's RPC events by packet (its ordinal among the input's
 * packets); merge_rpc_match pairs them once the inputs' clocks are known;
 * the second pass asks for each packet's edit.
 */
#ifndef PTBPF_MERGE_RPC_H
#define PTBPF_MERGE_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace_read.h"

struct merge_rpc;

/* What to add to one track event. */
struct merge_rpc_edit {
	uint64_t flow, term; /* a flow it starts, one it ends (0: none) */
	const char *name;    /* its new name, or NULL */
};

struct merge_rpc *merge_rpc_new(void);
void merge_rpc_free(struct merge_rpc *m);
/* First pass: input's track descriptors and track events (ord: the
 * packet's ordinal in the input). */
void merge_rpc_track(struct merge_rpc *m, int input, const struct tr_track *t);
void merge_rpc_event(struct merge_rpc *m, int input, uint64_t ord, const struct tr_event *e);
/* Pairs calls with their handling across inputs (offset: each input's
 * REALTIME - MONOTONIC); how many were paired. */
size_t merge_rpc_match(struct merge_rpc *m, const int64_t *offset);
/* Second pass: the packet's edit, or NULL. */
const struct merge_rpc_edit *merge_rpc_edit_of(const struct merge_rpc *m, int input, uint64_t ord);
/* RPC events not noted (past the limit): their requests stay unjoined. */
uint64_t merge_rpc_left_out(const struct merge_rpc *m);

#endif /* PTBPF_MERGE_RPC_H */
