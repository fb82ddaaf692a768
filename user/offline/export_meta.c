// SPDX-License-Identifier: BSD-2-Clause
/* The Kineto export's formats: timestamps, ptbpf's JSON-shaped arguments,
 * the trace-level metadata. See export.h. */
#include "offline/export.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "report/report_data.h"

/* Kineto's "123.456": microseconds with nanosecond decimals. */
void put_us(FILE *o, uint64_t ns)
{
	fprintf(o, "%lu.%03lu", (unsigned long)(ns / 1000), (unsigned long)(ns % 1000));
}

/* One list item at *p, advanced past it: a list of integers ("Input
 * Dims"), or a quoted name without quotes or backslashes ("Input type"). */
bool int_list(const char **p)
{
	const char *q = *p;

	if (*q++ != '[')
		return false;
	while (*q == '-' || (*q >= '0' && *q <= '9') || *q == ',' || *q == ' ')
		q++;
	*p = q + 1;
	return *q == ']';
}

bool export_plain_name(const char **p)
{
	const char *q = *p;

	if (*q++ != '"')
		return false;
	while (*q && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
		q++;
	*p = q + 1;
	return *q == '"';
}

/* "[item, item, ...]" and nothing after it, each item as item() reads. */
static bool is_list(const char *s, bool (*item)(const char **))
{
	const char *p = s;

	if (*p++ != '[')
		return false;
	while (*p != ']') {
		if (!item(&p))
			return false;
		if (*p == ',' && p[1] == ' ')
			p += 2;
		else if (*p != ']')
			return false;
	}
	return !p[1];
}

/* s, which ptbpf wrote as JSON, verbatim if it has the form item() reads,
 * else as a JSON string. */
void json_raw(FILE *o, const char *s, bool (*item)(const char **))
{
	if (is_list(s, item))
		fputs(s, o);
	else
		json_str(o, s);
}

void device_properties(struct report *r, FILE *o)
{
	fputs(",\n  \"deviceProperties\": [", o);
	for (int i = 0, n = 0; i < r->ndevices; i++) {
		const struct rd_device *d = &r->devices[i];
		bool seen = false;

		for (int k = 0; k < i; k++) /* one entry per device id */
			seen |= r->devices[k].id == d->id;
		if (seen)
			continue;
		fprintf(o, "%s\n    {\"id\": %ld", n++ ? "," : "", (long)d->id);
		for (int k = 0; k < d->nprops; k++) {
			const struct tr_arg *a = &d->props[k];

			fputs(", ", o);
			json_str(o, rd_str(r, a->name.id));
			fputs(": ", o);
			if (a->type == TR_ARG_STR)
				json_str(o, rd_str(r, a->s.id));
			else if (a->type == TR_ARG_INT)
				fprintf(o, "%ld", (long)a->i);
			else if (a->type == TR_ARG_DOUBLE)
				fprintf(o, "%.17g", a->d);
			else
				fprintf(o, "%lu", (unsigned long)a->u);
		}
		fputs("}", o);
	}
	fputs("\n  ]", o);
}

/* distributedInfo from the first process with a RANK. */
void distributed_info(const struct report *r, FILE *o)
{
	for (int i = 0; i < r->nprocs; i++) {
		const struct rd_proc *p = &r->procs[i];

		if (p->rank < 0)
			continue;
		fprintf(o, ",\n  \"distributedInfo\": {\"rank\": %ld", (long)p->rank);
		if (p->world_size >= 0)
			fprintf(o, ", \"world_size\": %ld", (long)p->world_size);
		if (p->local_rank >= 0)
			fprintf(o, ", \"local_rank\": %ld", (long)p->local_rank);
		fputs("}", o);
		return;
	}
}

