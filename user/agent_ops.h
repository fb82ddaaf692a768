/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent's op recorder (user/agent_ops.c), inside libptbpf-agent.so:
 * RecordFunction callbacks into per-thread rings that ptbpf reads
 * (include/ptbpf_agent.h). Called by user/agent.c under its state lock.
 */
#ifndef PTBPF_AGENT_OPS_H
#define PTBPF_AGENT_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ptbpf_agent.h"

/* Registers the callbacks (the rings are allocated at the first start and
 * kept). The rings' descriptor, or NULL with a one-line reason in why. */
/* shapes: also record the input shapes of aten ops (record_shapes). */
/* stacks_every: call ptbpf_agent_pystack for one op or CUDA call in that
 * many on each thread (0: never). */
const struct ptbpf_ops_desc *agent_ops_start(char *why, size_t len, bool shapes,
					     unsigned stacks_every);
/* agent.c's probe point for Python stacks. */
void ptbpf_agent_pystack(uint64_t ts);
/* At process exit: stops recording and waits (250 ms at most) until
 * ptbpf has read the rings. */
void agent_ops_exit(void);
/* A CUDA API call's entry or exit (CUPTI callback on the calling thread),
 * recorded in the thread's ring while ops are recorded: true if it was. */
bool agent_ops_api(bool enter, uint32_t domain, uint32_t correlation, const char *name);
/* Stops recording and removes the callbacks. */
void agent_ops_stop(void);

#endif /* PTBPF_AGENT_OPS_H */
