// SPDX-License-Identifier: BSD-2-Clause
/*
 * The trace reader's decoder of CPU samples (trace_read.h): a PerfSample
 * and the leaf frames of its interned callstack, through the frames,
 * mappings and names the reader keeps per sequence (trace_read.c keeps
 * frames, callstacks and mappings as their messages' bytes).
 */
#include "trace/trace_read.h"

#include <string.h>

#include "trace/pbread.h"
#include "trace/trace_read_int.h"

#define PY_MAPPING "[python]" /* record/samples.c puts Python frames there */

/* Frame iid's function name and its mapping's path. */
static bool frame_of(struct tr_reader *r, uint32_t seq, uint64_t iid, struct tr_str *name,
		     struct tr_str *path)
{
	struct tr_str raw;
	const uint8_t *p;
	uint64_t name_id = 0, map_id = 0, path_id = 0;
	struct field f;
	bool bad = false;

	*name = *path = (struct tr_str){ "", 0, TR_INLINE };
	if (!tr_lookup_quiet(r, seq, F_ID_FRAMES, iid, &raw))
		return false;
	for (p = (const uint8_t *)raw.s;
	     pb_next_field(&p, (const uint8_t *)raw.s + raw.len, &f, &bad);)
		if (f.wt == PB_VARINT && f.num == F_FRAME_NAME)
			name_id = f.v;
		else if (f.wt == PB_VARINT && f.num == F_FRAME_MAPPING)
			map_id = f.v;
	if (name_id)
		tr_lookup(r, seq, F_ID_FUNCTION_NAMES, name_id, name);
	if (bad || !tr_lookup_quiet(r, seq, F_ID_MAPPINGS, map_id, &raw))
		return !bad;
	for (p = (const uint8_t *)raw.s;
	     pb_next_field(&p, (const uint8_t *)raw.s + raw.len, &f, &bad);)
		if (f.wt == PB_VARINT && f.num == F_MAP_PATHS && !path_id)
			path_id = f.v;
	if (path_id)
		tr_lookup(r, seq, F_ID_MAPPING_PATHS, path_id, path);
	return !bad;
}

/* The callstack's frames, leaf last: the innermost native and Python ones. */
static bool leaves(struct tr_reader *r, uint32_t seq, uint64_t iid, struct tr_sample *s)
{
	uint64_t ids[256];
	struct tr_str raw, name, path;
	const uint8_t *p;
	struct field f;
	bool bad = false;
	int n = 0;

	if (!tr_lookup_quiet(r, seq, F_ID_CALLSTACKS, iid, &raw))
		return false;
	for (p = (const uint8_t *)raw.s;
	     pb_next_field(&p, (const uint8_t *)raw.s + raw.len, &f, &bad);)
		if (f.wt == PB_VARINT && f.num == F_STACK_FRAMES && n < 256)
			ids[n++] = f.v;
	s->nframes = n;
	for (int i = n - 1; i >= 0 && !bad && !s->has_py; i--) {
		if (!frame_of(r, seq, ids[i], &name, &path))
			return false;
		if (path.len == strlen(PY_MAPPING) && !memcmp(path.s, PY_MAPPING, path.len)) {
			s->py_leaf = name;
			s->has_py = true;
		} else if (!s->has_native) {
			s->native_leaf = name;
			s->native_file = path;
			s->has_native = true;
		}
	}
	return !bad;
}

bool tr_sample(struct tr_reader *r, const struct tr_packet *p, struct tr_sample *s)
{
	const uint8_t *q = p->sample.d;
	uint64_t stack = 0;
	struct field f;
	bool bad = false;

	if (!p->sample.n)
		return false;
	memset(s, 0, sizeof(*s));
	s->ts = p->ts;
	while (pb_next_field(&q, p->sample.d + p->sample.n, &f, &bad)) {
		if (f.wt != PB_VARINT)
			continue;
		switch (f.num) {
		case F_PS_CPU: s->cpu = (uint32_t)f.v; break;
		case F_PS_PID: s->pid = (int64_t)(uint32_t)f.v; break;
		case F_PS_TID: s->tid = (int64_t)(uint32_t)f.v; break;
		case F_PS_CALLSTACK: stack = f.v; break;
		}
	}
	if (!bad && stack && !leaves(r, p->seq, stack, s))
		bad = true;
	if (bad)
		tr_count_undecodable(r);
	return !bad;
}
