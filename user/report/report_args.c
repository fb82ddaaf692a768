// SPDX-License-Identifier: BSD-2-Clause
/*
 * The slice arguments the report reads (report_data.h, enum rd_arg): by
 * the names ptbpf gives them, into struct rd_args.
 */
#define _GNU_SOURCE
#include "report/report_data.h"

#include <stdio.h>
#include <string.h>

const char *const rd_arg_names[A_COUNT] = {
	[A_CORRELATION] = "correlation", [A_ALLOC] = "alloc_bytes", [A_DIMS] = "Input Dims",
	[A_TYPES] = "Input type", [A_STACK] = "py_stack", [A_GRID] = "grid", [A_BLOCK] = "block",
	[A_REGISTERS] = "registers", [A_SHARED_MEM] = "shared_mem", [A_BYTES] = "bytes",
	[A_CONTEXT] = "context", [A_SRC_KIND] = "src_kind", [A_DST_KIND] = "dst_kind",
	[A_COPY_KIND] = "copy_kind", [A_MEMORY_KIND] = "memory_kind", [A_CBID] = "cbid",
	[A_SEQ] = "seq", [A_SEQUENCE_NR] = "sequence_nr", [A_FWD_TID] = "fwd_thread_id",
	[A_RF_ID] = "rf_id", [A_QUEUED] = "queued", [A_DEVICE] = "device",
	[A_FILE] = "file", [A_BY] = "by", [A_LOCK] = "lock", [A_TID] = "tid",
	[A_WOKEN_BY] = "woken_by", [A_WOKEN_TID] = "woken_by_tid",
	[A_RETURN_NOT_REPORTED] = "return_not_reported",
	[A_BEGUN_BEFORE] = "begun_before_tracing", [A_UNFINISHED] = "unfinished",
	[A_CAPTURED_BY] = "captured_by", [A_CAPTURED_SEQ] = "captured_seq",
	[A_GRAPH_ID] = "graph_id", [A_GRAPH_NODE] = "graph_node", [A_ATEN_OPS] = "aten_ops",
	[A_SOURCE_NODES] = "source_nodes", [A_INDUCTOR_GRAPH] = "inductor_graph",
	[A_INDUCTOR_MODULE] = "inductor_module",
};

/* The frame of a py_stack (innermost first, one per line) that the user
 * wrote: the innermost outside torch's own package, else the innermost. */
static uint32_t call_site(struct report *r, const char *s, size_t len)
{
	const char *p = s, *end = s + len;
	size_t first = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (p == s)
			first = n;
		if (!memmem(p, n, "/torch/", 7) && !memmem(p, n, "<frozen ", 8))
			return rd_str_id(r, p, n);
		p += n + 1;
	}
	return rd_str_id(r, s, first);
}

/* "x,y,z" (ptbpf's grid and block) */
static void dims3(const struct tr_str *s, uint32_t out[3])
{
	char buf[64];
	size_t len = s->len < sizeof(buf) - 1 ? s->len : sizeof(buf) - 1;
	unsigned x = 0, y = 0, z = 0;

	memcpy(buf, s->s, len);
	buf[len] = 0;
	if (sscanf(buf, "%u,%u,%u", &x, &y, &z) == 3)
		out[0] = x, out[1] = y, out[2] = z;
}

void rd_read_args(struct report *r, const struct tr_event *e, struct rd_args *a)
{
	for (int i = 0; i < e->nargs; i++) {
		const struct tr_arg *g = &e->args[i];
		uint32_t k = rd_rid(r, &g->name) - r->arg_base;

		if (k >= A_COUNT)
			continue;
		if (g->type == TR_ARG_INT)
			a->v[k] = g->i;
		else if (g->type == TR_ARG_UINT || g->type == TR_ARG_BOOL)
			a->v[k] = (int64_t)g->u;
		else if (g->type != TR_ARG_STR)
			continue;
		else if (k == A_DIMS || k == A_TYPES || k == A_FILE || k == A_BY || k == A_LOCK ||
			 k == A_WOKEN_BY || k == A_CAPTURED_BY || k == A_ATEN_OPS ||
			 k == A_SOURCE_NODES || k == A_INDUCTOR_GRAPH || k == A_INDUCTOR_MODULE)
			a->v[k] = rd_str_id(r, g->s.s, g->s.len);
		else if (k == A_STACK)
			a->v[k] = call_site(r, g->s.s, g->s.len);
		else if (k == A_GRID || k == A_BLOCK)
			dims3(&g->s, k == A_GRID ? a->grid : a->block), a->v[k] = 1;
	}
}

void rd_args_clear(struct rd_args *a)
{
	for (int k = 0; k < A_COUNT; k++)
		a->v[k] = RD_UNSET;
	memset(a->grid, 0, sizeof(a->grid));
	memset(a->block, 0, sizeof(a->block));
}

/* An end's arguments join the begin's (alloc_bytes, py_stack, seq, ...). */
void rd_args_merge(struct rd_args *to, const struct rd_args *from)
{
	for (int k = 0; k < A_COUNT; k++)
		if (from->v[k] != RD_UNSET)
			to->v[k] = from->v[k];
}

/* A "device properties" instant: the device's properties, kept as given. */
void rd_device_props(struct report *r, const struct rd_track *t, const struct tr_event *e,
		     const struct rd_args *a)
{
	struct rd_device *d = NULL;

	for (int i = 0; i < r->ndevices && !d; i++)
		if (r->devices[i].pid == t->pid && r->devices[i].id == a->v[A_DEVICE])
			d = &r->devices[i];
	if (!d && r->ndevices == RD_MAX_DEVICES)
		return;
	if (!d)
		d = &r->devices[r->ndevices++];
	*d = (struct rd_device){ .pid = t->pid, .id = a->v[A_DEVICE] != RD_UNSET ?
							a->v[A_DEVICE] : 0 };
	for (int i = 0; i < e->nargs && d->nprops < RD_MAX_DEVICE_PROPS; i++) {
		struct tr_arg g = e->args[i];

		if (rd_rid(r, &g.name) - r->arg_base == A_DEVICE)
			continue;
		g.name.id = rd_rid(r, &g.name);
		g.name.s = NULL;
		if (g.type == TR_ARG_STR) {
			g.s.id = rd_rid(r, &g.s);
			g.s.s = NULL;
		}
		d->props[d->nprops++] = g;
	}
}
