/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Input shapes (--shapes) as torch.profiler shows them: the agent's bytes
 * (OPS_IN_* in include/ptbpf_agent.h) become "Input Dims", e.g.
 * "[[16, 32], [64, 32], []]", and "Input type", e.g.
 * "[\"float\", \"float\", \"Scalar\"]" (Kineto's strings; both are JSON).
 */
#ifndef PTBPF_SHAPES_H
#define PTBPF_SHAPES_H

#include <stddef.h>
#include <stdint.h>

/* 0, or -1 if the bytes are malformed or the text does not fit (dims and
 * types are then empty). */
int shapes_format(const uint8_t *b, size_t n, char *dims, size_t dlen, char *types,
		  size_t tlen);
/* Kineto's name of a c10::ScalarType ("float", "c10::Half", ...). */
const char *shapes_dtype_name(unsigned scalar_type);

#endif /* PTBPF_SHAPES_H */
