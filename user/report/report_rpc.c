// SPDX-License-Identifier: BSD-2-Clause
/* The report's RPC tables. See report_rpc.h. */
#include "report/report_rpc.h"

#include <stdint.h>

/* t's row of name, or NULL. */
static const struct rd_op *row_of(const struct rd_optable *t, uint32_t name)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].name == name)
			return &t->v[i];
	return NULL;
}

/* A callee's handling of a call whose caller is not in the trace: its
 * row, once, after the callers' rows. */
static void callee_only_text(const struct report *r, int top)
{
	for (size_t i = 0; i < r->rpc_handled.n && (int)i < top; i++) {
		const struct rd_op *h = &r->rpc_handled.v[i];

		if (row_of(&r->rpc_calls, h->name))
			continue;
		printf("  %-60.60s %8lu %11s %11s %11.3f\n", rd_str(r, h->name),
		       (unsigned long)h->calls, "-", "-", h->total / 1e6);
	}
}

void report_rpc_text(const struct report *r, int top)
{
	if (!r->rpc_calls.n && !r->rpc_handled.n)
		return;
	printf("\nRPC calls, named as torch.profiler names them: on the caller from the call to "
	       "its future's end,\non the callee handling it (ms)\n  %-60s %8s %11s %11s %11s\n",
	       "call", "calls", "caller tot", "caller avg", "callee tot");
	for (size_t i = 0; i < r->rpc_calls.n && (int)i < top; i++) {
		const struct rd_op *c = &r->rpc_calls.v[i], *h = row_of(&r->rpc_handled, c->name);

		printf("  %-60.60s %8lu %11.3f %11.3f", rd_str(r, c->name), (unsigned long)c->calls,
		       c->total / 1e6, c->total / 1e6 / c->calls);
		if (h)
			printf(" %11.3f\n", h->total / 1e6);
		else
			printf(" %11s\n", "-");
	}
	callee_only_text(r, top);
	if (!r->rpc_remote.n)
		return;
	printf("\nRemote ops: the ops each call ran on its callee (host ms, inclusive)\n"
	       "  %-80s %8s %10s %10s\n", "op", "calls", "total", "avg us");
	for (size_t i = 0; i < r->rpc_remote.n && (int)i < top; i++) {
		const struct rd_op *o = &r->rpc_remote.v[i];

		printf("  %-80.80s %8lu %10.3f %10.2f\n", rd_str(r, o->name), (unsigned long)o->calls,
		       o->total / 1e6, o->total / 1e3 / o->calls);
	}
}

static void json_rows(FILE *o, const struct report *r, const struct rd_optable *t,
		      const char *total_key)
{
	for (size_t i = 0; i < t->n; i++) {
		fprintf(o, "%s{\"name\": ", i ? ", " : "");
		json_str(o, rd_str(r, t->v[i].name));
		fprintf(o, ", \"calls\": %lu, \"%s\": %lu}", (unsigned long)t->v[i].calls, total_key,
			(unsigned long)t->v[i].total);
	}
}

void report_rpc_json(FILE *o, const struct report *r)
{
	fputs(", \"rpc_calls\": [", o);
	json_rows(o, r, &r->rpc_calls, "caller_total_ns");
	fputs("], \"rpc_handled\": [", o);
	json_rows(o, r, &r->rpc_handled, "callee_total_ns");
	fputs("], \"rpc_remote_ops\": [", o);
	json_rows(o, r, &r->rpc_remote, "callee_total_ns");
	fputs("]", o);
}
