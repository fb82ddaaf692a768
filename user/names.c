// SPDX-License-Identifier: BSD-2-Clause
/* Bounded name containers. See names.h. */
#include "names.h"

#include <stdlib.h>
#include <string.h>

/* libstdc++'s demangler (linked statically). */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

/* Capacity: a power of two at least twice the entry limit. */
static uint32_t table_cap(uint32_t max_entries)
{
	uint32_t cap = 16;

	while (cap < 2 * max_entries)
		cap <<= 1;
	return cap;
}

struct str_set {
	char **slot;
	uint32_t cap, n, max;
};

struct str_set *str_set_new(uint32_t max_entries)
{
	struct str_set *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->max = max_entries;
	s->cap = table_cap(max_entries);
	s->slot = calloc(s->cap, sizeof(*s->slot));
	if (!s->slot) {
		free(s);
		return NULL;
	}
	return s;
}

void str_set_free(struct str_set *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	free(s);
}

const char *str_set_intern(struct str_set *s, const char *str)
{
	uint32_t h = hash_str(str) & (s->cap - 1);

	for (; s->slot[h]; h = (h + 1) & (s->cap - 1))
		if (!strcmp(s->slot[h], str))
			return s->slot[h];
	if (s->n >= s->max || !(s->slot[h] = strdup(str)))
		return "(name table full)";
	s->n++;
	return s->slot[h];
}

struct str_map {
	uint64_t *key;
	const char **val;
	uint32_t cap, n, max;
};

struct str_map *str_map_new(uint32_t max_entries)
{
	struct str_map *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->max = max_entries;
	m->cap = table_cap(max_entries);
	m->key = calloc(m->cap, sizeof(*m->key));
	m->val = calloc(m->cap, sizeof(*m->val));
	if (!m->key || !m->val) {
		str_map_free(m);
		return NULL;
	}
	return m;
}

void str_map_free(struct str_map *m)
{
	if (!m)
		return;
	free(m->key);
	free(m->val);
	free(m);
}

const char *str_map_get(const struct str_map *m, uint64_t key)
{
	for (uint32_t h = hash64(key) & (m->cap - 1); m->val[h]; h = (h + 1) & (m->cap - 1))
		if (m->key[h] == key)
			return m->val[h];
	return NULL;
}

bool str_map_put(struct str_map *m, uint64_t key, const char *value)
{
	uint32_t h = hash64(key) & (m->cap - 1);

	for (; m->val[h]; h = (h + 1) & (m->cap - 1)) {
		if (m->key[h] == key) {
			m->val[h] = value;
			return true;
		}
	}
	if (m->n >= m->max)
		return false;
	m->key[h] = key;
	m->val[h] = value;
	m->n++;
	return true;
}

/* Linear probing with backward-shift deletion; 0 is stored out of band. */
struct u64_set {
	uint64_t *slot;
	uint32_t cap, n, max;
	bool has_zero;
};

struct u64_set *u64_set_new(uint32_t max_entries)
{
	struct u64_set *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->max = max_entries;
	s->cap = table_cap(max_entries);
	s->slot = calloc(s->cap, sizeof(*s->slot));
	if (!s->slot) {
		free(s);
		return NULL;
	}
	return s;
}

void u64_set_free(struct u64_set *s)
{
	if (!s)
		return;
	free(s->slot);
	free(s);
}

bool u64_set_add(struct u64_set *s, uint64_t key)
{
	uint32_t h;

	if (!key)
		return s->has_zero = true;
	for (h = hash64(key) & (s->cap - 1); s->slot[h]; h = (h + 1) & (s->cap - 1))
		if (s->slot[h] == key)
			return true;
	if (s->n >= s->max)
		return false;
	s->slot[h] = key;
	s->n++;
	return true;
}

bool u64_set_remove(struct u64_set *s, uint64_t key)
{
	uint32_t h, next;

	if (!key) {
		bool had = s->has_zero;

		s->has_zero = false;
		return had;
	}
	for (h = hash64(key) & (s->cap - 1); s->slot[h] != key; h = (h + 1) & (s->cap - 1))
		if (!s->slot[h])
			return false;
	s->slot[h] = 0;
	s->n--;
	/* Shift back the entries of the probe run that follows. */
	for (next = (h + 1) & (s->cap - 1); s->slot[next]; next = (next + 1) & (s->cap - 1)) {
		uint32_t home = hash64(s->slot[next]) & (s->cap - 1);

		if ((next > h && (home <= h || home > next)) ||
		    (next < h && home <= h && home > next)) {
			s->slot[h] = s->slot[next];
			s->slot[next] = 0;
			h = next;
		}
	}
	return true;
}

int demangle_type(const char *mangled, char *out, size_t len)
{
	int status = 0;
	char *s = __cxa_demangle(mangled, NULL, NULL, &status);

	if (!s || status)
		return -1;
	strncpy(out, s, len - 1);
	out[len - 1] = 0;
	free(s);
	return 0;
}
