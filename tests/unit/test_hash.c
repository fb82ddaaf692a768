/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the hash table (user/lib/hash.c) against a brute-force
 * model (an array searched in full): random inserts, removals and lookups
 * up to and past each table's limit, with keys that crowd a few slots
 * (long probe runs that wrap around the end), key 0, and hashed keys whose
 * hashes collide (equality decides), and removals of many at once. After every step the table must hold
 * what the model holds: the same count, every key found with its value or
 * not, iteration visiting each entry once. Also the str_set, str_map and
 * u64_set built on it.
 */
#include "lib/hash.h"
#include "lib/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define UNIVERSE 600

struct val {
	uint64_t id;  /* what the key stands for */
	uint64_t pay; /* the value written */
};

struct model {
	bool held[UNIVERSE];
	uint64_t pay[UNIVERSE];
	uint32_t n;
};

static uint64_t rnd_state = 0x1234567;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Exact keys of id: crowded into three home slots at any size (one of
 * them the next to last, so runs wrap around the end); id 0 is key 0. */
static uint64_t exact_key(uint64_t id)
{
	static const uint64_t low[] = { 0xfffffffe, 0, 63 };

	return id ? id << 32 | low[id % 3] : 0;
}

/* Hashed keys: many ids per hash, and ids 0..9 hash to 0. */
static uint64_t weak_hash(uint64_t id)
{
	return (id / 10) * (HASH_SLOTS_MIN + 1);
}

static bool val_eq(const void *val, const void *key)
{
	return ((const struct val *)val)->id == *(const uint64_t *)key;
}

static struct val *find(const struct hash_table *t, bool hashed, uint64_t id)
{
	return hashed ? hash_get_eq(t, weak_hash(id), val_eq, &id) : hash_get(t, exact_key(id));
}

static void compare(const struct hash_table *t, const struct model *m, bool hashed)
{
	uint32_t seen[UNIVERSE] = { 0 }, visits = 0;
	struct val *v;
	bool ok = true;

	CHECK(hash_count(t) == m->n, "count", m->n);
	for (uint64_t id = 0; id < UNIVERSE; id++) {
		v = find(t, hashed, id);
		if (m->held[id])
			ok &= v && v->id == id && v->pay == m->pay[id];
		else
			ok &= !v;
	}
	CHECK(ok, "every key as the model has it", m->n);
	for (uint32_t pos = 0; (v = hash_next(t, &pos)); visits++)
		if (v->id < UNIVERSE)
			seen[v->id]++;
	ok = visits == m->n;
	for (uint64_t id = 0; id < UNIVERSE; id++)
		ok &= seen[id] == (m->held[id] ? 1u : 0u);
	CHECK(ok, "iteration visits each entry once", visits);
}

static void insert(struct hash_table *t, struct model *m, bool hashed, uint32_t max, uint64_t id)
{
	struct val *v = find(t, hashed, id);
	uint64_t pay = rnd();

	if (!v) {
		/* Hashed, a second id of hash 0 is refused (key 0's one slot). */
		bool any_zero = false;

		for (uint64_t k = 0; hashed && k < 10; k++)
			any_zero |= m->held[k];
		v = hash_add(t, hashed ? weak_hash(id) : exact_key(id));
		if (m->n >= max || (hashed && !weak_hash(id) && any_zero)) {
			CHECK(!v, "an insert past the limit fails", id);
			return;
		}
		CHECK(v && v->id == 0 && v->pay == 0, "a new value is zeroed", id);
		if (!v)
			return;
		m->held[id] = true;
		m->n++;
	}
	*v = (struct val){ id, pay };
	m->pay[id] = pay;
}

static void remove_one(struct hash_table *t, struct model *m, uint64_t id)
{
	struct val v = { 0 };
	bool had = hash_remove(t, exact_key(id), rnd() & 1 ? &v : NULL);

	CHECK(had == m->held[id], "remove says whether it held the key", id);
	CHECK(!v.id || (had && v.id == id && v.pay == m->pay[id]), "the removed value", id);
	if (m->held[id]) {
		m->held[id] = false;
		m->n--;
	}
}

static bool drop_mod(void *val, void *arg)
{
	const uint64_t *mod = arg;

	return ((struct val *)val)->id % mod[0] == mod[1];
}

/* hash_drop_if: every id of one residue, at once. */
static void drop_some(struct hash_table *t, struct model *m, uint64_t r)
{
	uint64_t mod[2] = { 2 + r % 5, r % (2 + r % 5) };

	hash_drop_if(t, drop_mod, mod);
	for (uint64_t id = 0; id < UNIVERSE; id++) {
		if (m->held[id] && id % mod[0] == mod[1]) {
			m->held[id] = false;
			m->n--;
		}
	}
}

/* Random steps on one table; removals of one key only with exact keys. */
static void run(bool hashed, uint32_t max, int steps)
{
	struct hash_table t;
	struct model m = { 0 };
	uint64_t universe = max + max / 2 + 5 < UNIVERSE ? max + max / 2 + 5 : UNIVERSE;

	hash_init(&t, max, sizeof(struct val));
	compare(&t, &m, hashed);
	for (int s = 0; s < steps; s++) {
		uint64_t id = rnd() % universe, r = rnd() % 10;

		/* Phases: fill (past the limit), then churn, then drain. */
		if (s < steps / 3 ? r < 8 : s < 2 * steps / 3 ? r < 5 : r < 2)
			insert(&t, &m, hashed, max, id);
		else if (rnd() % 50 == 0)
			drop_some(&t, &m, rnd());
		else if (!hashed)
			remove_one(&t, &m, id);
		else
			CHECK(!find(&t, hashed, id) == !m.held[id], "lookup", id);
		if (s % 7 == 0 || s == steps - 1)
			compare(&t, &m, hashed);
	}
	hash_clear(&t);
	memset(&m, 0, sizeof(m));
	compare(&t, &m, hashed);
	insert(&t, &m, hashed, max, 1);
	compare(&t, &m, hashed);
	hash_free(&t);
}

/* The containers of names.h, briefly: their limits and their semantics. */
static void containers(void)
{
	struct str_set *s = str_set_new(3);
	struct str_map *m = str_map_new(2);
	struct u64_set *u = u64_set_new(2);
	const char *a = str_set_add_n(s, "abc\0zz", 6);

	CHECK(a && !strcmp(a, "abc"), "str_set keeps a key up to its NUL", 0);
	CHECK(str_set_add_n(s, "abcd", 3) == a, "the same string, the same copy", 0);
	CHECK(str_set_has_n(s, "abc", 3) && !str_set_has_n(s, "ab", 2), "str_set_has_n", 0);
	CHECK(str_set_add_n(s, "", 0) && str_set_add_n(s, "x", 1), "room for three", 0);
	CHECK(!str_set_add_n(s, "y", 1) && str_set_count(s) == 3, "str_set full", 0);
	CHECK(!strcmp(str_set_intern(s, "y"), "(name table full)"), "intern when full", 0);
	CHECK(str_map_put(m, 0, "zero") && str_map_put(m, 7, "seven"), "str_map puts", 0);
	CHECK(!str_map_put(m, 8, "eight") && str_map_put(m, 7, "SEVEN"), "str_map full", 0);
	CHECK(!strcmp(str_map_get(m, 0), "zero") && !strcmp(str_map_get(m, 7), "SEVEN") &&
		      !str_map_get(m, 8), "str_map_get", 0);
	CHECK(u64_set_add(u, 0) && u64_set_add(u, 5) && u64_set_add(u, 5), "u64_set adds", 0);
	CHECK(!u64_set_add(u, 6) && u64_set_has(u, 0) && !u64_set_has(u, 6), "u64_set full", 0);
	CHECK(u64_set_remove(u, 0) && !u64_set_remove(u, 0) && u64_set_add(u, 6), "removal", 0);
	str_set_free(s);
	str_map_free(m);
	u64_set_free(u);
}

int main(void)
{
	static const uint32_t limits[] = { 1, 2, 31, 32, 33, 100, 400 };

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		run(false, limits[i], 6000);
		run(true, limits[i], 6000);
	}
	containers();
	return check_summary("test_hash");
}
