/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report's views of compiled and graph-replayed GPU time, from what
 * the loader wrote on kernels: each CUDA graph's replayed kernels
 * (graph_id) and the ops that captured them (captured_by), and each
 * torch.compile graph's Triton kernels (inductor_graph) by the ATen ops
 * they fuse (aten_ops); as text and as JSON.
 */
#ifndef PTBPF_REPORT_GRAPHS_H
#define PTBPF_REPORT_GRAPHS_H

#include <stdio.h>

#include "report/report_data.h"

/* What collects them: set as a report's gview. */
extern const struct rd_graph_view report_graph_view;
void report_graphs_text(const struct report *r, int top);
/* `, "cuda_graphs": [...], "compiled_graphs": [...]` */
void report_graphs_json(FILE *o, const struct report *r);

#endif /* PTBPF_REPORT_GRAPHS_H */
