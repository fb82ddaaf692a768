/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The op table: the names of the ops that probe cookies and the agent's op
 * records index (attach fills it from libtorch's symbols, record reads it).
 */
#ifndef PTBPF_OP_TABLE_H
#define PTBPF_OP_TABLE_H

#include <stdint.h>

/* Names of the ops the cookies index. Owned by the caller, outlive join. */
struct op_table {
	char **name;     /* "aten::addmm" */
	char **overload; /* "" or "out" */
	uint32_t n;
};

/* Appends an op (copies the strings); 0 or -ENOMEM. */
int op_table_add(struct op_table *ops, const char *name, const char *overload);
void op_table_free(struct op_table *ops);

#endif /* PTBPF_OP_TABLE_H */
