/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Small bounded containers for names: an interning string set, a map from
 * addresses to interned names, and a set of 64-bit keys. Each has a limit
 * chosen by its owner, and a table (lib/hash.h) that grows with what it
 * holds up to that limit; when full, inserts fail (and callers count or
 * fall back), so memory stays bounded at any trace length.
 */
#ifndef PTBPF_NAMES_H
#define PTBPF_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/hash.h"

struct str_set;
struct str_map;
struct u64_set;

struct str_set *str_set_new(uint32_t max_entries);
void str_set_free(struct str_set *s);
/* The stored copy of str; once full, a fixed "(name table full)". */
const char *str_set_intern(struct str_set *s, const char *str);
/* The stored copy of str[0..len), added if absent; NULL when full or out
 * of memory. */
const char *str_set_add_n(struct str_set *s, const char *str, size_t len);
bool str_set_has_n(const struct str_set *s, const char *str, size_t len);
uint32_t str_set_count(const struct str_set *s);

struct str_map *str_map_new(uint32_t max_entries);
void str_map_free(struct str_map *m);
const char *str_map_get(const struct str_map *m, uint64_t key);
/* The value is not copied: pass an interned string. False when full. */
bool str_map_put(struct str_map *m, uint64_t key, const char *value);

struct u64_set *u64_set_new(uint32_t max_entries);
void u64_set_free(struct u64_set *s);
bool u64_set_add(struct u64_set *s, uint64_t key);
bool u64_set_has(const struct u64_set *s, uint64_t key);
/* True if key was present (and is now removed). */
bool u64_set_remove(struct u64_set *s, uint64_t key);

/* raw demangled if it is a mangled C++ name ("_Z..."), interned in s. */
const char *demangle_intern(struct str_set *s, const char *raw);

/* Demangles a C++ type name ("N5torch8autograd14AccumulateGradE") with
 * libstdc++'s __cxa_demangle. 0 or -1. */
int demangle_type(const char *mangled, char *out, size_t len);

#endif /* PTBPF_NAMES_H */
