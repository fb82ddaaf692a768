/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's torch.distributed.rpc tables (report_data.c collects them),
 * in the shape of torch.profiler's RPC recipe: each call name's count and
 * time on the caller and on the callee, and the ops each ran on the
 * callee as "CALL#remote_op: OP", as text and as JSON.
 */
#ifndef PTBPF_REPORT_RPC_H
#define PTBPF_REPORT_RPC_H

#include <stdio.h>

#include "report/report_data.h"

void report_rpc_text(const struct report *r, int top);
/* `, "rpc_calls": [...], "rpc_remote_ops": [...]` */
void report_rpc_json(FILE *o, const struct report *r);

#endif /* PTBPF_REPORT_RPC_H */
