/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent's op recorder (user/agent_ops.c), inside libptbpf-agent.so:
 * RecordFunction callbacks into per-thread rings that ptbpf reads
 * (include/ptbpf_agent.h). Called by user/agent.c under its state lock.
 */
#ifndef PTBPF_AGENT_OPS_H
#define PTBPF_AGENT_OPS_H

#include <stddef.h>
#include "ptbpf_agent.h"

/* Registers the callbacks (the rings are allocated at the first start and
 * kept). The rings' descriptor, or NULL with a one-line reason in why. */
const struct ptbpf_ops_desc *agent_ops_start(char *why, size_t len);
/* At process exit: stops recording and waits (250 ms at most) until
 * ptbpf has read the rings. */
void agent_ops_exit(void);
/* Stops recording and removes the callbacks. */
void agent_ops_stop(void);

#endif /* PTBPF_AGENT_OPS_H */
