/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The one hash table of the loader and the offline tools: open addressing
 * with linear probing on 64-bit keys the caller has already hashed, values
 * of a fixed size kept inline, beside the keys.
 *
 * A key is used in one of two ways. Exact: the key is a bijection of what
 * it stands for (hash_u64(pid << 48 ^ seq), splitmix64 of a track), so
 * equal keys mean equal entries and no value is looked at (hash_get,
 * hash_remove). Hashed: the key is a hash of a string or a compound, and
 * an equality callback compares the value with what is looked up
 * (hash_get_eq); hash_get_eq is inline, so the callback is too.
 *
 * The slot of a key is its low bits; key 0, which marks an empty slot, has
 * a slot of its own past the others (hashed, a second key 0 finds it taken
 * and is refused as if the table were full: 1 in 2^64).
 *
 * Each table has a limit chosen by its owner: past it (or out of memory)
 * hash_add fails and the caller counts or falls back, so memory stays
 * bounded at any trace length. Below it, the table doubles (from
 * HASH_SLOTS_MIN slots) to keep at most half of its slots used: memory
 * follows what it holds. Removal shifts the rest of the probe run back
 * (no tombstones). Values move as the table grows or entries are removed:
 * a value pointer is good until the next hash_add or hash_remove.
 */
#ifndef PTBPF_HASH_H
#define PTBPF_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HASH_SLOTS_MIN 64u
#define HASH_MAX_ENTRIES (1u << 30) /* the largest limit (2^31 slots) */

/* 64-bit mixing (murmur3's finalizer, a bijection), for exact keys and
 * flow ids. */
static inline uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

/* A key for a pair (pid and handle, tid and stack pointer, ...). */
static inline uint64_t hash_pair(uint64_t a, uint64_t b)
{
	return hash_u64(a * 0x9e3779b97f4a7c15ULL ^ b);
}

struct hash_table {
	uint64_t *keys;    /* cap + 1 slots; 0: empty (the last one: key 0's) */
	uint8_t *vals;     /* val_size bytes per slot */
	uint32_t cap;      /* a power of two, or 0 until the first hash_add */
	uint32_t n, max;   /* entries, and at most */
	uint32_t val_size; /* at least 1: a found entry's value is never NULL */
	bool has_zero;     /* key 0 is held (in slot cap) */
};

/* Compares a held value with what is looked up (hashed keys). */
typedef bool hash_eq_fn(const void *val, const void *key);

/* An empty table of at most max_entries (<= HASH_MAX_ENTRIES) values of
 * val_size bytes (0: a set). Allocates nothing until the first entry. */
void hash_init(struct hash_table *t, uint32_t max_entries, uint32_t val_size);
void hash_free(struct hash_table *t);
/* Empties t, keeping its slots. */
void hash_clear(struct hash_table *t);

/* A new entry for key, its value zeroed; NULL when t is full or out of
 * memory. The caller knows key is not held (exact), or no equal entry is
 * (hashed). */
void *hash_add(struct hash_table *t, uint64_t key);
/* True if key (exact) was held, and is now removed; its value copied to
 * val unless that is NULL. */
bool hash_remove(struct hash_table *t, uint64_t key, void *val);
/* Removes every entry for which drop(value, arg) holds (drop may free
 * what the value owns; it may see an entry it kept once more). */
void hash_drop_if(struct hash_table *t, bool (*drop)(void *val, void *arg), void *arg);
/* The next value from slot *pos on (start at 0), *pos moved past it; NULL
 * after the last. Entries come in slot order, not in the order added. */
void *hash_next(const struct hash_table *t, uint32_t *pos);

static inline void *hash_val(const struct hash_table *t, uint32_t slot)
{
	return t->vals + (size_t)slot * t->val_size;
}

/* The value of key (exact), or NULL. */
static inline void *hash_get(const struct hash_table *t, uint64_t key)
{
	uint32_t mask = t->cap - 1, i;

	if (!key)
		return t->has_zero ? hash_val(t, t->cap) : NULL;
	if (!t->cap)
		return NULL;
	for (i = (uint32_t)key & mask; t->keys[i]; i = (i + 1) & mask)
		if (t->keys[i] == key)
			return hash_val(t, i);
	return NULL;
}

/* The value held under hash for which eq(value, key) holds, or NULL. */
static inline void *hash_get_eq(const struct hash_table *t, uint64_t hash, hash_eq_fn *eq,
				const void *key)
{
	uint32_t mask = t->cap - 1, i;

	if (!hash)
		return t->has_zero && eq(hash_val(t, t->cap), key) ? hash_val(t, t->cap) : NULL;
	if (!t->cap)
		return NULL;
	for (i = (uint32_t)hash & mask; t->keys[i]; i = (i + 1) & mask)
		if (t->keys[i] == hash && eq(hash_val(t, i), key))
			return hash_val(t, i);
	return NULL;
}

static inline uint32_t hash_count(const struct hash_table *t)
{
	return t->n;
}

/* No room for another entry (hash_add may still fail: out of memory). */
static inline bool hash_full(const struct hash_table *t)
{
	return t->n >= t->max;
}

#endif /* PTBPF_HASH_H */
