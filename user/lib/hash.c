// SPDX-License-Identifier: BSD-2-Clause
/* The hash table's growth, insertion, removal and iteration. See hash.h. */
#include "lib/hash.h"

#include <stdlib.h>
#include <string.h>

void hash_init(struct hash_table *t, uint32_t max_entries, uint32_t val_size)
{
	*t = (struct hash_table){
		.max = max_entries < HASH_MAX_ENTRIES ? max_entries : HASH_MAX_ENTRIES,
		.val_size = val_size ? val_size : 1,
	};
}

void hash_free(struct hash_table *t)
{
	free(t->keys);
	free(t->vals);
	t->keys = NULL;
	t->vals = NULL;
	t->cap = t->n = 0;
	t->has_zero = false;
}

void hash_clear(struct hash_table *t)
{
	if (t->cap)
		memset(t->keys, 0, t->cap * sizeof(*t->keys));
	t->n = 0;
	t->has_zero = false;
}

/* The first empty slot of key's probe run. */
static uint32_t free_slot(const struct hash_table *t, uint64_t key)
{
	uint32_t mask = t->cap - 1, i = (uint32_t)key & mask;

	while (t->keys[i])
		i = (i + 1) & mask;
	return i;
}

/* Twice the slots (HASH_SLOTS_MIN at first), every entry moved over. */
static int grow(struct hash_table *t)
{
	struct hash_table g = *t;

	g.cap = t->cap ? 2 * t->cap : HASH_SLOTS_MIN;
	g.keys = calloc((size_t)g.cap + 1, sizeof(*g.keys));
	g.vals = malloc(((size_t)g.cap + 1) * t->val_size);
	if (!g.keys || !g.vals) {
		free(g.keys);
		free(g.vals);
		return -1;
	}
	for (uint32_t i = 0; i < t->cap; i++) {
		if (t->keys[i]) {
			uint32_t j = free_slot(&g, t->keys[i]);

			g.keys[j] = t->keys[i];
			memcpy(hash_val(&g, j), hash_val(t, i), t->val_size);
		}
	}
	if (t->has_zero)
		memcpy(hash_val(&g, g.cap), hash_val(t, t->cap), t->val_size);
	free(t->keys);
	free(t->vals);
	*t = g;
	return 0;
}

void *hash_add(struct hash_table *t, uint64_t key)
{
	uint32_t i;

	if (t->n >= t->max || (!key && t->has_zero))
		return NULL;
	if ((t->n + 1) * 2 > t->cap && grow(t))
		return NULL;
	if (key) {
		i = free_slot(t, key);
		t->keys[i] = key;
	} else {
		i = t->cap;
		t->has_zero = true;
	}
	t->n++;
	return memset(hash_val(t, i), 0, t->val_size);
}

/* Empties slot i, moving back each later entry of its probe run whose own
 * slot does not lie between i and where it is (exclusive), so that every
 * run stays unbroken. */
static void shift_back(struct hash_table *t, uint32_t i)
{
	uint32_t mask = t->cap - 1, j, home;

	for (j = (i + 1) & mask; t->keys[j]; j = (j + 1) & mask) {
		home = (uint32_t)t->keys[j] & mask;
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			t->keys[i] = t->keys[j];
			memcpy(hash_val(t, i), hash_val(t, j), t->val_size);
			i = j;
		}
	}
	t->keys[i] = 0;
}

bool hash_remove(struct hash_table *t, uint64_t key, void *val)
{
	uint32_t mask = t->cap - 1, i;

	if (!key) {
		if (!t->has_zero)
			return false;
		i = t->cap;
		t->has_zero = false;
	} else {
		if (!t->cap)
			return false;
		for (i = (uint32_t)key & mask; t->keys[i] != key; i = (i + 1) & mask)
			if (!t->keys[i])
				return false;
	}
	if (val)
		memcpy(val, hash_val(t, i), t->val_size);
	if (key)
		shift_back(t, i);
	t->n--;
	return true;
}

/* An entry moved into slot i by the shift is looked at there; one moved
 * around the end, into a slot already passed, was kept already. */
void hash_drop_if(struct hash_table *t, bool (*drop)(void *val, void *arg), void *arg)
{
	for (uint32_t i = 0; i < t->cap; i++) {
		while (t->keys[i] && drop(hash_val(t, i), arg)) {
			shift_back(t, i);
			t->n--;
		}
	}
	if (t->has_zero && drop(hash_val(t, t->cap), arg)) {
		t->has_zero = false;
		t->n--;
	}
}

void *hash_next(const struct hash_table *t, uint32_t *pos)
{
	for (; *pos < t->cap; ++*pos)
		if (t->keys[*pos])
			return hash_val(t, (*pos)++);
	if (*pos == t->cap && t->has_zero) {
		++*pos;
		return hash_val(t, t->cap);
	}
	return NULL;
}
