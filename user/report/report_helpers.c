// SPDX-License-Identifier: BSD-2-Clause
/* The report's helpers: a u64 map, growable arrays, interned strings,
 * memory curves, JSON strings, output files. See report_data.h. */
#define _GNU_SOURCE
#include "lib/log.h"
#include "report/report_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/files.h"
#include "lib/names.h"

/* ---- containers ---- */

uint64_t *rd_map_slot(struct rd_map *m, uint64_t key, bool add)
{
	uint64_t h = hash_u64(key), *v;

	if (!m->h.val_size) /* zeroed: no limit but the table's own */
		hash_init(&m->h, HASH_MAX_ENTRIES, sizeof(uint64_t));
	v = hash_get(&m->h, h);
	return v || !add ? v : hash_add(&m->h, h);
}

void rd_map_del(struct rd_map *m, uint64_t key)
{
	hash_remove(&m->h, hash_u64(key), NULL);
}

void rd_map_free(struct rd_map *m)
{
	hash_free(&m->h);
}

bool rd_room(void **p, size_t *cap, size_t n, size_t unit)
{
	size_t c = *cap ? *cap * 2 : 256;
	void *g;

	if (n < *cap)
		return true;
	g = realloc(*p, c * unit);
	if (!g)
		return false;
	*p = g;
	*cap = c;
	return true;
}

void *rd_keyed(struct rd_map *m, uint64_t key, void **v, size_t *n, size_t *cap,
		   size_t unit, bool *added)
{
	uint64_t *slot = rd_map_slot(m, key, true);

	*added = false;
	if (!slot)
		return NULL;
	if (!*slot) {
		if (!rd_room(v, cap, *n, unit))
			return NULL;
		memset((char *)*v + *n * unit, 0, unit);
		*slot = ++*n;
		*added = true;
	}
	return (char *)*v + (*slot - 1) * unit;
}

/* ---- strings ---- */

uint32_t rd_str_id(struct report *r, const char *s, size_t len)
{
	const char *p = str_set_add_n(r->set, s, len);
	uint64_t *slot;

	if (!p)
		p = "(names full)";
	slot = rd_map_slot(&r->s_index, (uint64_t)(uintptr_t)p, true);
	if (!slot)
		return 0;
	if (!*slot) {
		if (!rd_room((void **)&r->s, &r->s_cap, r->ns, sizeof(*r->s)))
			return 0;
		r->s[r->ns++] = p;
		*slot = r->ns;
	}
	return (uint32_t)*slot - 1;
}

const char *rd_str(const struct report *r, uint32_t id)
{
	return id < r->ns ? r->s[id] : "";
}

uint32_t rd_rid(struct report *r, const struct tr_str *s)
{
	if (s->id == TR_INLINE)
		return rd_str_id(r, s->s, s->len);
	if (s->id >= r->nrids) {
		size_t n = r->nrids ? r->nrids : 256;
		uint32_t *g;

		while (n <= s->id)
			n *= 2;
		g = realloc(r->rids, n * sizeof(*g));
		if (!g)
			return rd_str_id(r, s->s, s->len);
		memset(g + r->nrids, 0, (n - r->nrids) * sizeof(*g));
		r->rids = g;
		r->nrids = n;
	}
	if (!r->rids[s->id])
		r->rids[s->id] = rd_str_id(r, s->s, s->len) + 1;
	return r->rids[s->id] - 1;
}

FILE *rd_output_open(struct outfile *out, const char *path, bool force, const char *input,
		     const char *who)
{
	FILE *o;
	int fd;

	if (outfile_open(out, path, force, (const char *const[]){ input }, input ? 1 : 0, who))
		return NULL;
	fd = dup(out->fd);
	if (fd < 0 || !(o = fdopen(fd, "w"))) {
		outfile_cannot_write(who, out->tmp, errno);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	return o;
}

int rd_output_commit(struct outfile *out, FILE *o, const char *who)
{
	int err = 0;

	if (ferror(o))
		err = EIO;
	if (fclose(o) && !err)
		err = errno;
	if (err) {
		log_msg("%s: writing %s failed: %s\n", who, out->tmp, strerror(err));
		return -1;
	}
	return outfile_commit(out, who) ? -1 : 0;
}

void json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20)
			fprintf(o, "\\u%04x", c);
		else if (c == '<') /* never "</script>" in a page that embeds it */
			fputs("\\u003c", o);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

/* ---- memory curves ---- */

static bool curve_push(struct rd_curve *c, uint64_t ts, int64_t v)
{
	if (!c->ts) {
		c->ts = malloc(RD_CURVE_POINTS * sizeof(*c->ts));
		c->v = malloc(RD_CURVE_POINTS * sizeof(*c->v));
		if (!c->ts || !c->v)
			return false;
	}
	if (c->n == RD_CURVE_POINTS) { /* each 4 points -> their min and max, in time order */
		size_t n = 0;

		for (size_t i = 0; i < c->n; i += 4) {
			size_t lo = i, hi = i;

			for (size_t k = i; k < i + 4 && k < c->n; k++) {
				lo = c->v[k] < c->v[lo] ? k : lo;
				hi = c->v[k] >= c->v[hi] ? k : hi;
			}
			for (size_t k = 0; k < 2; k++) {
				size_t pick = (k == 0) == (lo < hi) ? lo : hi;

				if (k == 1 && lo == hi)
					break;
				c->ts[n] = c->ts[pick], c->v[n++] = c->v[pick];
			}
		}
		c->n = n;
		c->stride = c->stride ? c->stride * 2 : 2;
	}
	c->ts[c->n] = ts;
	c->v[c->n++] = v;
	return true;
}

static void curve_group(struct rd_curve *c)
{
	if (!c->pending)
		return;
	c->pending = 0;
	if (c->lo_ts == c->hi_ts) {
		curve_push(c, c->lo_ts, c->lo);
	} else if (c->lo_ts < c->hi_ts) {
		if (curve_push(c, c->lo_ts, c->lo))
			curve_push(c, c->hi_ts, c->hi);
	} else if (curve_push(c, c->hi_ts, c->hi)) {
		curve_push(c, c->lo_ts, c->lo);
	}
}

void rd_curve_add(struct rd_curve *c, uint64_t ts, int64_t v)
{
	if (!c->stride)
		c->stride = 1;
	if (!c->pending || v < c->lo)
		c->lo = v, c->lo_ts = ts;
	if (!c->pending || v >= c->hi)
		c->hi = v, c->hi_ts = ts;
	c->last = v;
	c->last_ts = ts;
	if (++c->pending >= c->stride)
		curve_group(c);
}

/* The curve's last group, and its last value. */
void rd_curve_finish(struct rd_curve *c)
{
	curve_group(c);
	if (c->n && (c->ts[c->n - 1] != c->last_ts || c->v[c->n - 1] != c->last))
		curve_push(c, c->last_ts, c->last);
}
