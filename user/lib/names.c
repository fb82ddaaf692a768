// SPDX-License-Identifier: BSD-2-Clause
/* Bounded name containers. See names.h. */
#include "lib/names.h"

#include <stdlib.h>
#include <string.h>

/* libstdc++'s demangler (linked statically). */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static uint64_t hash_str_n(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

/* Copies of the strings, hashed; the values are the copies. */
struct str_set {
	struct hash_table t;
};

struct str_key {
	const char *s;
	size_t len;
};

static bool str_eq(const void *val, const void *key)
{
	const char *v = *(char *const *)val;
	const struct str_key *k = key;

	return !strncmp(v, k->s, k->len) && v[k->len] == '\0';
}

struct str_set *str_set_new(uint32_t max_entries)
{
	struct str_set *s = malloc(sizeof(*s));

	if (s)
		hash_init(&s->t, max_entries, sizeof(char *));
	return s;
}

void str_set_free(struct str_set *s)
{
	char **v;

	if (!s)
		return;
	for (uint32_t i = 0; (v = hash_next(&s->t, &i));)
		free(*v);
	hash_free(&s->t);
	free(s);
}

/* The stored copies end at a NUL, so a key does too (a name read from a
 * trace may hold one). */
bool str_set_has_n(const struct str_set *s, const char *str, size_t len)
{
	struct str_key k = { str, strnlen(str, len) };

	return hash_get_eq(&s->t, hash_str_n(str, k.len), str_eq, &k) != NULL;
}

const char *str_set_add_n(struct str_set *s, const char *str, size_t len)
{
	struct str_key k = { str, strnlen(str, len) };
	uint64_t h = hash_str_n(str, k.len);
	char **v = hash_get_eq(&s->t, h, str_eq, &k);
	char *copy;

	if (v)
		return *v;
	if (hash_full(&s->t) || !(copy = strndup(str, k.len)))
		return NULL;
	if (!(v = hash_add(&s->t, h))) {
		free(copy);
		return NULL;
	}
	return *v = copy;
}

uint32_t str_set_count(const struct str_set *s)
{
	return hash_count(&s->t);
}

const char *str_set_intern(struct str_set *s, const char *str)
{
	const char *v = str_set_add_n(s, str, strlen(str));

	return v ? v : "(name table full)";
}

/* Keys hashed exactly (hash_u64 is a bijection); the values are the
 * caller's interned strings. */
struct str_map {
	struct hash_table t;
};

struct str_map *str_map_new(uint32_t max_entries)
{
	struct str_map *m = malloc(sizeof(*m));

	if (m)
		hash_init(&m->t, max_entries, sizeof(const char *));
	return m;
}

void str_map_free(struct str_map *m)
{
	if (!m)
		return;
	hash_free(&m->t);
	free(m);
}

const char *str_map_get(const struct str_map *m, uint64_t key)
{
	const char **v = hash_get(&m->t, hash_u64(key));

	return v ? *v : NULL;
}

bool str_map_put(struct str_map *m, uint64_t key, const char *value)
{
	uint64_t h = hash_u64(key);
	const char **v = hash_get(&m->t, h);

	if (!v && !(v = hash_add(&m->t, h)))
		return false;
	*v = value;
	return true;
}

/* Keys hashed exactly, no values. */
struct u64_set {
	struct hash_table t;
};

struct u64_set *u64_set_new(uint32_t max_entries)
{
	struct u64_set *s = malloc(sizeof(*s));

	if (s)
		hash_init(&s->t, max_entries, 0);
	return s;
}

void u64_set_free(struct u64_set *s)
{
	if (!s)
		return;
	hash_free(&s->t);
	free(s);
}

bool u64_set_add(struct u64_set *s, uint64_t key)
{
	uint64_t h = hash_u64(key);

	return hash_get(&s->t, h) || hash_add(&s->t, h);
}

bool u64_set_has(const struct u64_set *s, uint64_t key)
{
	return hash_get(&s->t, hash_u64(key)) != NULL;
}

bool u64_set_remove(struct u64_set *s, uint64_t key)
{
	return hash_remove(&s->t, hash_u64(key), NULL);
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
