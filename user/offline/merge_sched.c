// SPDX-License-Identifier: BSD-2-Clause
/*
 * An input's scheduler bundles, moved for `ptbpf merge` (merge_sched.h).
 * The compact arrays are packed varints: timestamps are delta-encoded, so
 * only each array's first one moves; pids move, except the idle task's 0.
 * Everything else is copied as it is.
 */
#include "offline/merge_sched.h"

#include "trace/pbread.h"
#include "trace/pf_fields.h"

bool merge_sched_cpu(const uint8_t *d, size_t n, uint32_t *cpu)
{
	const uint8_t *p = d;
	struct field f;
	bool bad = false;

	while (pb_next_field(&p, d + n, &f, &bad))
		if (f.num == F_FB_CPU && f.wt == PB_VARINT && f.v <= UINT32_MAX) {
			*cpu = (uint32_t)f.v;
			return true;
		}
	return false;
}

/* A packed array of varints, each moved by move(value, index). */
static bool repack(const struct field *f, const struct merge_sched_shift *sh,
		   bool (*move)(const struct merge_sched_shift *, uint64_t *, int), struct pb *out)
{
	size_t at = pb_begin(out, f->num), off = 0;

	for (int i = 0; off < f->len; i++) {
		uint64_t v;
		int k = pb_varint_get(f->d + off, f->len - off, &v);

		if (k <= 0 || !move(sh, &v, i))
			return false;
		pb_varint(out, v);
		off += (size_t)k;
	}
	pb_end(out, at);
	return true;
}

static bool move_ts(const struct merge_sched_shift *sh, uint64_t *v, int i)
{
	int64_t t;

	if (i > 0) /* a delta */
		return true;
	if (*v > INT64_MAX || __builtin_add_overflow((int64_t)*v, sh->ts_off, &t) || t < 0)
		return false;
	*v = (uint64_t)t;
	return true;
}

static bool move_pid(const struct merge_sched_shift *sh, uint64_t *v, int i)
{
	int32_t pid = (int32_t)(uint32_t)*v;

	if (pid)
		*v = (uint64_t)(int64_t)(pid + (int32_t)sh->pid_off);
	return true;
}

static bool rewrite_compact(const struct merge_sched_shift *sh, const uint8_t *d, size_t n,
			    struct pb *out)
{
	const uint8_t *p = d;
	struct field f;
	bool bad = false, ok = true;

	while (ok && pb_next_field(&p, d + n, &f, &bad)) {
		bool ts = f.num == F_SCHED_SW_TS || f.num == F_SCHED_WK_TS;
		bool pid = f.num == F_SCHED_SW_PID || f.num == F_SCHED_WK_PID;

		if ((ts || pid) && f.wt == PB_LEN)
			ok = repack(&f, sh, ts ? move_ts : move_pid, out);
		else
			pb_raw(out, f.raw, f.rawlen);
	}
	return ok && !bad;
}

bool merge_sched_bundle(const struct merge_sched_shift *sh, const uint8_t *d, size_t n,
			struct pb *out)
{
	const uint8_t *p = d;
	struct field f;
	bool bad = false, ok = true;

	while (ok && pb_next_field(&p, d + n, &f, &bad)) {
		if (f.num == F_FB_CPU && f.wt == PB_VARINT) {
			pb_uint(out, f.num, f.v + sh->cpu_off);
		} else if (f.num == F_FB_COMPACT && f.wt == PB_LEN) {
			size_t at = pb_begin(out, f.num);

			ok = rewrite_compact(sh, f.d, f.len, out);
			pb_end(out, at);
		} else {
			pb_raw(out, f.raw, f.rawlen);
		}
	}
	return ok && !bad;
}

bool merge_sample_cpu(const uint8_t *d, size_t n, uint32_t *cpu)
{
	const uint8_t *p = d;
	struct field f;
	bool bad = false;

	while (pb_next_field(&p, d + n, &f, &bad))
		if (f.num == F_PS_CPU && f.wt == PB_VARINT && f.v <= UINT32_MAX) {
			*cpu = (uint32_t)f.v;
			return true;
		}
	return false;
}

bool merge_perf_sample(const struct merge_sched_shift *sh, const uint8_t *d, size_t n,
		       struct pb *out)
{
	const uint8_t *p = d;
	struct field f;
	bool bad = false;

	while (pb_next_field(&p, d + n, &f, &bad)) {
		uint64_t v = f.v;

		if (f.wt == PB_VARINT && f.num == F_PS_CPU)
			pb_uint(out, f.num, v + sh->cpu_off);
		else if (f.wt == PB_VARINT && (f.num == F_PS_PID || f.num == F_PS_TID) &&
			 move_pid(sh, &v, 0))
			pb_uint(out, f.num, (uint32_t)v);
		else
			pb_raw(out, f.raw, f.rawlen);
	}
	return !bad;
}
