// SPDX-License-Identifier: BSD-2-Clause
/* Bounded name containers. See names.h. */
#include "lib/names.h"

#include <stdlib.h>
#include <string.h>

/* libstdc++'s demangler (linked statically). */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

uint64_t hash_pair(uint64_t a, uint64_t b)
{
	return hash_u64(a * 0x9e3779b97f4a7c15ULL ^ b);
}

static uint64_t hash_str_n(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

/* Open addressing on (pointer, length) keys; grows up to its limit. */
struct str_set {
	char **slot;
	uint32_t cap, n, max;
};

struct str_set *str_set_new(uint32_t max_entries)
{
	struct str_set *s = calloc(1, sizeof(*s));

	if (s)
		s->max = max_entries;
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

/* The slot holding str[0..len), or the empty slot where it would go. */
static char **set_slot(const struct str_set *s, const char *str, size_t len)
{
	uint32_t h = hash_str_n(str, len) & (s->cap - 1);

	for (; s->slot[h]; h = (h + 1) & (s->cap - 1))
		if (!strncmp(s->slot[h], str, len) && s->slot[h][len] == '\0')
			return &s->slot[h];
	return &s->slot[h];
}

static int set_grow(struct str_set *s)
{
	struct str_set bigger = { .cap = s->cap ? s->cap * 2 : 1024 };

	bigger.slot = calloc(bigger.cap, sizeof(*bigger.slot));
	if (!bigger.slot)
		return -1;
	for (uint32_t i = 0; i < s->cap; i++)
		if (s->slot[i])
			*set_slot(&bigger, s->slot[i], strlen(s->slot[i])) = s->slot[i];
	free(s->slot);
	s->slot = bigger.slot;
	s->cap = bigger.cap;
	return 0;
}

/* The stored copies end at a NUL, so a key does too (a name read from a
 * trace may hold one). */
bool str_set_has_n(const struct str_set *s, const char *str, size_t len)
{
	len = strnlen(str, len);
	return s->cap && *set_slot(s, str, len) != NULL;
}

const char *str_set_add_n(struct str_set *s, const char *str, size_t len)
{
	char **slot;

	len = strnlen(str, len);
	if (s->cap && *(slot = set_slot(s, str, len)))
		return *slot;
	if (s->n >= s->max || ((s->n + 1) * 2 > s->cap && set_grow(s)))
		return NULL;
	slot = set_slot(s, str, len);
	if (!(*slot = strndup(str, len)))
		return NULL;
	s->n++;
	return *slot;
}

uint32_t str_set_count(const struct str_set *s)
{
	return s->n;
}

const char *str_set_intern(struct str_set *s, const char *str)
{
	const char *v = str_set_add_n(s, str, strlen(str));

	return v ? v : "(name table full)";
}

/* Open addressing on 64-bit keys; the table grows (doubling, from 1024
 * slots) as entries come, up to twice the limit: memory follows what is
 * held, not the limit. */
struct str_map {
	uint64_t *key;
	const char **val;
	uint32_t cap, n, max;
};

struct str_map *str_map_new(uint32_t max_entries)
{
	struct str_map *m = calloc(1, sizeof(*m));

	if (m)
		m->max = max_entries;
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

static uint32_t map_slot(const struct str_map *m, uint64_t key)
{
	uint32_t h = hash_u64(key) & (m->cap - 1);

	while (m->val[h] && m->key[h] != key)
		h = (h + 1) & (m->cap - 1);
	return h;
}

const char *str_map_get(const struct str_map *m, uint64_t key)
{
	return m->cap ? m->val[map_slot(m, key)] : NULL;
}

static bool map_grow(struct str_map *m)
{
	struct str_map g = { .cap = m->cap ? 2 * m->cap : 1024 };

	g.key = calloc(g.cap, sizeof(*g.key));
	g.val = calloc(g.cap, sizeof(*g.val));
	if (!g.key || !g.val) {
		free(g.key);
		free(g.val);
		return false;
	}
	for (uint32_t i = 0; i < m->cap; i++) {
		if (m->val[i]) {
			uint32_t h = map_slot(&g, m->key[i]);

			g.key[h] = m->key[i];
			g.val[h] = m->val[i];
		}
	}
	free(m->key);
	free(m->val);
	m->key = g.key;
	m->val = g.val;
	m->cap = g.cap;
	return true;
}

bool str_map_put(struct str_map *m, uint64_t key, const char *value)
{
	uint32_t h;

	if (m->cap) {
		h = map_slot(m, key);
		if (m->val[h]) {
			m->val[h] = value;
			return true;
		}
	}
	if (m->n >= m->max || ((m->n + 1) * 2 > m->cap && !map_grow(m)))
		return false;
	h = map_slot(m, key);
	m->key[h] = key;
	m->val[h] = value;
	m->n++;
	return true;
}

/* Linear probing with backward-shift deletion; 0 is stored out of band.
 * Grows as str_map does. */
struct u64_set {
	uint64_t *slot;
	uint32_t cap, n, max;
	bool has_zero;
};

struct u64_set *u64_set_new(uint32_t max_entries)
{
	struct u64_set *s = calloc(1, sizeof(*s));

	if (s)
		s->max = max_entries;
	return s;
}

void u64_set_free(struct u64_set *s)
{
	if (!s)
		return;
	free(s->slot);
	free(s);
}

/* The slot holding key, or the empty one where it would go. */
static uint32_t set_home(const struct u64_set *s, uint64_t key)
{
	uint32_t h = hash_u64(key) & (s->cap - 1);

	while (s->slot[h] && s->slot[h] != key)
		h = (h + 1) & (s->cap - 1);
	return h;
}

static bool u64_grow(struct u64_set *s)
{
	uint32_t cap = s->cap ? 2 * s->cap : 1024;
	struct u64_set g = { .cap = cap, .slot = calloc(cap, sizeof(uint64_t)) };

	if (!g.slot)
		return false;
	for (uint32_t i = 0; i < s->cap; i++)
		if (s->slot[i])
			g.slot[set_home(&g, s->slot[i])] = s->slot[i];
	free(s->slot);
	s->slot = g.slot;
	s->cap = cap;
	return true;
}

bool u64_set_add(struct u64_set *s, uint64_t key)
{
	if (!key)
		return s->has_zero = true;
	if (s->cap && s->slot[set_home(s, key)])
		return true;
	if (s->n >= s->max || ((s->n + 1) * 2 > s->cap && !u64_grow(s)))
		return false;
	s->slot[set_home(s, key)] = key;
	s->n++;
	return true;
}

bool u64_set_has(const struct u64_set *s, uint64_t key)
{
	if (!key)
		return s->has_zero;
	return s->cap && s->slot[set_home(s, key)];
}

bool u64_set_remove(struct u64_set *s, uint64_t key)
{
	uint32_t h, next;

	if (!key) {
		bool had = s->has_zero;

		s->has_zero = false;
		return had;
	}
	if (!s->cap || !s->slot[h = set_home(s, key)])
		return false;
	s->slot[h] = 0;
	s->n--;
	/* Shift back the entries of the probe run that follows. */
	for (next = (h + 1) & (s->cap - 1); s->slot[next]; next = (next + 1) & (s->cap - 1)) {
		uint32_t home = hash_u64(s->slot[next]) & (s->cap - 1);

		if ((next > h && (home <= h || home > next)) ||
		    (next < h && home <= h && home > next)) {
			s->slot[h] = s->slot[next];
			s->slot[next] = 0;
			h = next;
		}
	}
	return true;
}

const char *demangle_intern(struct str_set *s, const char *raw)
{
	int status = 0;
	char *d = !strncmp(raw, "_Z", 2) ? __cxa_demangle(raw, NULL, NULL, &status) : NULL;
	const char *v = str_set_intern(s, d && !status ? d : raw);

	free(d);
	return v;
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
