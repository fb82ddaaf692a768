// SPDX-License-Identifier: BSD-2-Clause
/*
 * The trace reader's decoders (trace_read.h): a packet's track event, track
 * descriptor, trace attributes and ClockSnapshot, from the spans tr_next
 * found in it. Interned ids are resolved through the reader's tables
 * (trace_read_int.h); a packet whose contents are malformed is counted as
 * undecodable there.
 */
#include "trace/trace_read.h"

#include <string.h>

#include "trace/pbread.h"
#include "trace/trace_read_int.h"

static void inline_str(struct tr_str *s, const struct field *f)
{
	*s = (struct tr_str){ (const char *)f->d, (uint32_t)f->len, TR_INLINE };
}

static bool decode_arg(struct tr_reader *r, uint32_t seq, const struct field *fa,
		       struct tr_arg *a)
{
	const uint8_t *q = fa->d;
	struct field f;
	bool bad = false;

	a->name = (struct tr_str){ "", 0, TR_INLINE };
	a->type = TR_ARG_OTHER;
	while (pb_next_field(&q, fa->d + fa->len, &f, &bad)) {
		if (f.wt == PB_VARINT) {
			switch (f.num) {
			case F_DA_NAME_IID: tr_lookup(r, seq, F_ID_ARG_NAMES, f.v, &a->name); break;
			case F_DA_INT: a->type = TR_ARG_INT, a->i = (int64_t)f.v; break;
			case F_DA_UINT: a->type = TR_ARG_UINT, a->u = f.v; break;
			case F_DA_BOOL: a->type = TR_ARG_BOOL, a->u = f.v; break;
			case F_DA_POINTER: a->type = TR_ARG_PTR, a->u = f.v; break;
			case F_DA_STRING_IID:
				a->type = TR_ARG_STR;
				tr_lookup(r, seq, F_ID_STRING_VALUES, f.v, &a->s);
				break;
			}
		} else if (f.wt == PB_LEN && f.num == F_DA_NAME) {
			inline_str(&a->name, &f);
		} else if (f.wt == PB_LEN && f.num == F_DA_STRING) {
			a->type = TR_ARG_STR;
			inline_str(&a->s, &f);
		} else if (f.wt == PB_FIXED64 && f.num == F_DA_DOUBLE) {
			a->type = TR_ARG_DOUBLE;
			memcpy(&a->d, &f.v, sizeof(a->d));
		}
	}
	return !bad;
}

bool tr_event(struct tr_reader *r, const struct tr_packet *p, struct tr_event *e)
{
	const uint8_t *q = p->event.d;
	struct field f;
	bool bad = false;

	if (!p->event.n)
		return false;
	e->type = 0;
	e->track = p->track;
	e->ts = p->ts;
	e->seq = p->seq;
	e->has_name = e->has_cat = e->has_counter = false;
	e->nargs = e->nflows = e->nterm = 0;
	while (pb_next_field(&q, p->event.d + p->event.n, &f, &bad)) {
		switch (f.num) {
		case F_TE_TYPE: e->type = (int)f.v; break;
		case F_TE_TRACK: e->track = f.v; break;
		case F_TE_NAME_IID:
			if (f.wt == PB_VARINT)
				tr_lookup(r, p->seq, F_ID_NAMES, f.v, &e->name), e->has_name = true;
			break;
		case F_TE_NAME:
			if (f.wt == PB_LEN)
				inline_str(&e->name, &f), e->has_name = true;
			break;
		case F_TE_CAT_IIDS:
			if (f.wt == PB_VARINT && !e->has_cat)
				tr_lookup(r, p->seq, F_ID_CATEGORIES, f.v, &e->cat), e->has_cat = true;
			break;
		case F_TE_CATEGORIES:
			if (f.wt == PB_LEN && !e->has_cat)
				inline_str(&e->cat, &f), e->has_cat = true;
			break;
		case F_TE_ARGS:
			if (f.wt == PB_LEN && e->nargs < TR_MAX_ARGS)
				bad |= !decode_arg(r, p->seq, &f, &e->args[e->nargs++]);
			break;
		case F_TE_FLOWS:
		case F_TE_FLOWS_V:
			if (f.wt == (f.num == F_TE_FLOWS ? PB_FIXED64 : PB_VARINT) &&
			    e->nflows < TR_MAX_FLOWS)
				e->flows[e->nflows++] = f.v;
			break;
		case F_TE_TERM_FLOWS:
		case F_TE_TERM_FLOWS_V:
			if (f.wt == (f.num == F_TE_TERM_FLOWS ? PB_FIXED64 : PB_VARINT) &&
			    e->nterm < TR_MAX_FLOWS)
				e->term[e->nterm++] = f.v;
			break;
		case F_TE_COUNTER:
			if (f.wt == PB_VARINT)
				e->counter = (int64_t)f.v, e->has_counter = true;
			break;
		}
	}
	if (bad)
		tr_count_undecodable(r);
	return !bad;
}

/* A ProcessDescriptor or ThreadDescriptor's pid, tid and name. */
static bool decode_owner(const struct field *fo, struct tr_track *t, bool *bad)
{
	const uint8_t *q = fo->d;
	struct field f;
	bool thread = t->kind == TR_TRACK_THREAD;

	while (pb_next_field(&q, fo->d + fo->len, &f, bad)) {
		if (f.num == F_PD_PID && f.wt == PB_VARINT) /* = F_THD_PID */
			t->pid = (int32_t)f.v;
		else if (thread && f.num == F_THD_TID && f.wt == PB_VARINT)
			t->tid = (int64_t)f.v;
		else if ((f.num == (thread ? F_THD_NAME : F_PD_NAME)) && f.wt == PB_LEN)
			inline_str(&t->proc_name, &f);
		else if (!thread && f.num == F_PD_LABELS && f.wt == PB_LEN &&
			 t->nlabels < TR_MAX_LABELS)
			inline_str(&t->labels[t->nlabels++], &f);
	}
	return !*bad;
}

bool tr_track(struct tr_reader *r, const struct tr_packet *p, struct tr_track *t)
{
	const uint8_t *q = p->desc.d;
	struct field f;
	bool bad = false;

	if (!p->desc.n)
		return false;
	memset(t, 0, sizeof(*t));
	t->pid = t->tid = -1;
	t->name.id = t->proc_name.id = TR_INLINE;
	t->name.s = t->proc_name.s = "";
	while (pb_next_field(&q, p->desc.d + p->desc.n, &f, &bad)) {
		if (f.num == F_TD_UUID && f.wt == PB_VARINT) {
			t->uuid = f.v;
		} else if (f.num == F_TD_PARENT && f.wt == PB_VARINT) {
			t->parent = f.v;
		} else if (f.num == F_TD_NAME && f.wt == PB_LEN) {
			inline_str(&t->name, &f);
		} else if ((f.num == F_TD_PROCESS || f.num == F_TD_THREAD) && f.wt == PB_LEN) {
			t->kind = f.num == F_TD_THREAD ? TR_TRACK_THREAD : TR_TRACK_PROCESS;
			decode_owner(&f, t, &bad);
		} else if (f.num == F_TD_COUNTER && f.wt == PB_LEN) {
			t->kind = TR_TRACK_COUNTER;
		}
	}
	if (bad)
		tr_count_undecodable(r);
	return !bad;
}

int tr_attrs(struct tr_reader *r, const struct tr_packet *p, struct tr_attr *out, int max)
{
	const uint8_t *q = p->attrs.d;
	struct field f, g;
	bool bad = false;
	int n = 0;

	while (pb_next_field(&q, p->attrs.d + p->attrs.n, &f, &bad)) {
		const uint8_t *a = f.d;
		struct tr_attr at = { .key = { "", 0, TR_INLINE } };
		bool has_value = false;

		if (f.num != F_TA_ATTR || f.wt != PB_LEN)
			continue;
		while (pb_next_field(&a, f.d + f.len, &g, &bad)) {
			if (g.num == F_ATTR_KEY && g.wt == PB_LEN) {
				inline_str(&at.key, &g);
			} else if (g.num == F_ATTR_LONG && g.wt == PB_VARINT) {
				at.i = (int64_t)g.v;
				at.is_str = false;
				has_value = true;
			} else if (g.num == F_ATTR_STR && g.wt == PB_LEN) {
				inline_str(&at.s, &g);
				at.is_str = true;
				has_value = true;
			}
		}
		if (has_value && at.key.len && n < max)
			out[n++] = at;
	}
	if (bad) {
		tr_count_undecodable(r);
		return 0;
	}
	return n;
}

/* REALTIME - clock `from` in the packet's ClockSnapshot, if it has both
 * and they are within int64 of each other. */
static bool clock_offset(const struct tr_packet *p, uint64_t from, int64_t *off)
{
	const uint8_t *q = p->snapshot.d;
	uint64_t base = 0, real = 0;
	bool has_base = false, has_real = false, bad = false;
	struct field f, g;

	while (pb_next_field(&q, p->snapshot.d + p->snapshot.n, &f, &bad)) {
		const uint8_t *c;
		uint64_t id = 0, ts = 0;

		if (f.num != F_CS_CLOCKS || f.wt != PB_LEN)
			continue;
		c = f.d;
		while (pb_next_field(&c, f.d + f.len, &g, &bad)) {
			if (g.num == F_CLK_ID && g.wt == PB_VARINT)
				id = g.v;
			else if (g.num == F_CLK_TS && g.wt == PB_VARINT)
				ts = g.v;
		}
		if (id == from)
			base = ts, has_base = true;
		else if (id == CLOCK_ID_REALTIME)
			real = ts, has_real = true;
	}
	if (bad || !has_base || !has_real || base > INT64_MAX || real > INT64_MAX)
		return false;
	*off = (int64_t)real - (int64_t)base; /* both in 0..INT64_MAX: no overflow */
	return true;
}

bool tr_clock_offset(const struct tr_packet *p, int64_t *off)
{
	return clock_offset(p, CLOCK_ID_MONOTONIC, off);
}

bool tr_clock_offset_boot(const struct tr_packet *p, int64_t *off)
{
	return clock_offset(p, CLOCK_ID_BOOTTIME, off);
}
