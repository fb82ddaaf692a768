// SPDX-License-Identifier: BSD-2-Clause
/* Bounded name containers. See names.h. */
#include "names.h"

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

/* Capacity: a power of two at least twice the entry limit. */
static uint32_t table_cap(uint32_t max_entries)
{
	uint32_t cap = 16;

	while (cap < 2 * max_entries)
		cap <<= 1;
	return cap;
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
	for (uint32_t h = hash_u64(key) & (m->cap - 1); m->val[h]; h = (h + 1) & (m->cap - 1))
		if (m->key[h] == key)
			return m->val[h];
	return NULL;
}

bool str_map_put(struct str_map *m, uint64_t key, const char *value)
{
	uint32_t h = hash_u64(key) & (m->cap - 1);

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
	for (h = hash_u64(key) & (s->cap - 1); s->slot[h]; h = (h + 1) & (s->cap - 1))
		if (s->slot[h] == key)
			return true;
	if (s->n >= s->max)
		return false;
	s->slot[h] = key;
	s->n++;
	return true;
}

bool u64_set_has(const struct u64_set *s, uint64_t key)
{
	uint32_t h;

	if (!key)
		return s->has_zero;
	for (h = hash_u64(key) & (s->cap - 1); s->slot[h]; h = (h + 1) & (s->cap - 1))
		if (s->slot[h] == key)
			return true;
	return false;
}

bool u64_set_remove(struct u64_set *s, uint64_t key)
{
	uint32_t h, next;

	if (!key) {
		bool had = s->has_zero;

		s->has_zero = false;
		return had;
	}
	for (h = hash_u64(key) & (s->cap - 1); s->slot[h] != key; h = (h + 1) & (s->cap - 1))
		if (!s->slot[h])
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
