// SPDX-License-Identifier: BSD-2-Clause
/* The op table. See op_table.h. */
#include "lib/op_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int op_table_add(struct op_table *ops, const char *name, const char *overload)
{
	char **n = realloc(ops->name, (ops->n + 1) * sizeof(*n));
	char **o = n ? realloc(ops->overload, (ops->n + 1) * sizeof(*o)) : NULL;

	if (n)
		ops->name = n;
	if (!o)
		return -ENOMEM;
	ops->overload = o;
	ops->name[ops->n] = strdup(name);
	ops->overload[ops->n] = strdup(overload);
	if (!ops->name[ops->n] || !ops->overload[ops->n])
		return -ENOMEM;
	ops->n++;
	return 0;
}

void op_table_free(struct op_table *ops)
{
	for (uint32_t i = 0; i < ops->n; i++) {
		free(ops->name[i]);
		free(ops->overload[i]);
	}
	free(ops->name);
	free(ops->overload);
	memset(ops, 0, sizeof(*ops));
}
