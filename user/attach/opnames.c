// SPDX-License-Identifier: BSD-2-Clause
/*
 * Op names from `at::_ops::<S>::call` symbols.
 *
 * torchgen names the struct S = base, or base "_" overload (the schema's
 * unambiguous_name), and the profiler shows "aten::<base>". Both parts may
 * contain '_', so S is split by base names that the library itself spells
 * out: the "aten::<base>" string literals in .rodata (the struct's `name`
 * member). The longest such base alone is wrong for scatter_reduce[_out]
 * (= scatter.reduce[_out], next to scatter_reduce.two), so a split whose
 * "base.overload" string is in .rodata too (operator registrations spell
 * schemas that way) wins over a longer base. On Debian's libtorch 1.13 all
 * 1674 overloaded ops then have a split confirmed by such a string.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/elfsym.h"
#include "lib/names.h"

#define OP_SYM_PREFIX "_ZN2at4_ops"
#define OP_SYM_CALL "4callE"
#define OP_NAME_MAX 255		/* longer struct or base names are refused */
#define ATEN_PREFIX "aten::"
#define NAMER_MAX (1U << 20)	/* base names kept from one file */

static bool is_ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

int op_struct_name(const char *mangled, char *buf, size_t len)
{
	const size_t plen = sizeof(OP_SYM_PREFIX) - 1, clen = sizeof(OP_SYM_CALL) - 1;
	const char *p;
	size_t n = 0, i;

	if (!mangled || strncmp(mangled, OP_SYM_PREFIX, plen))
		return -EINVAL;
	p = mangled + plen;
	if (*p < '1' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (size_t)(*p - '0');
		if (n > OP_NAME_MAX)
			return -EINVAL;
	}
	if (strnlen(p, n) < n || strncmp(p + n, OP_SYM_CALL, clen) || n + 1 > len)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (!is_ident_char(p[i]))
			return -EINVAL;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return 0;
}

struct op_namer {
	struct str_set *base;	/* "add", from "aten::add" */
	struct str_set *dotted;	/* "add.Tensor", for bases in .base only */
};

/* Adds a copy of s[0..len); past NAMER_MAX strings the rest are left out. */
static int set_add(struct str_set *set, const char *s, size_t len)
{
	if (str_set_count(set) >= NAMER_MAX)
		return 0;
	return str_set_add_n(set, s, len) ? 0 : -ENOMEM;
}

static size_t ident_len(const char *s)
{
	size_t len = 0;

	while (s[len] && is_ident_char(s[len]))
		len++;
	return len;
}

/* Adds the base of an "aten::<base>" string if base is [A-Za-z0-9_]+. */
static int base_add_cb(const char *s, void *ctx)
{
	struct op_namer *nm = ctx;
	const char *base = s + sizeof(ATEN_PREFIX) - 1;
	size_t len = ident_len(base);

	if (!len || base[len] || len > OP_NAME_MAX)
		return 0;
	return set_add(nm->base, base, len);
}

/*
 * Adds "<base>.<overload>" strings. The linker may have merged one into the
 * tail of a longer string ("cos.out" into "acos.out"), so every suffix of
 * the first part that is a known base counts.
 */
static int dotted_add_cb(const char *s, void *ctx)
{
	struct op_namer *nm = ctx;
	size_t blen = ident_len(s), olen, k;
	int ret;

	if (!blen || s[blen] != '.' || blen > OP_NAME_MAX)
		return 0;
	olen = ident_len(s + blen + 1);
	if (!olen || s[blen + 1 + olen] || olen > OP_NAME_MAX)
		return 0;
	for (k = 0; k < blen; k++) {
		if (!str_set_has_n(nm->base, s + k, blen - k))
			continue;
		ret = set_add(nm->dotted, s + k, blen - k + 1 + olen);
		if (ret)
			return ret;
	}
	return 0;
}

struct op_namer *op_namer_new(struct elf_file *ef)
{
	struct op_namer *nm = calloc(1, sizeof(*nm));

	if (!nm)
		return NULL;
	nm->base = str_set_new(NAMER_MAX);
	nm->dotted = str_set_new(NAMER_MAX);
	if (!nm->base || !nm->dotted ||
	    elf_file_for_each_rodata_string(ef, ATEN_PREFIX, base_add_cb, nm) ||
	    elf_file_for_each_rodata_string(ef, "", dotted_add_cb, nm)) {
		op_namer_free(nm);
		return NULL;
	}
	return nm;
}

void op_namer_free(struct op_namer *nm)
{
	if (!nm)
		return;
	str_set_free(nm->base);
	str_set_free(nm->dotted);
	free(nm);
}

size_t op_namer_count(const struct op_namer *nm)
{
	return str_set_count(nm->base);
}

bool op_namer_has(const struct op_namer *nm, const char *base)
{
	return str_set_has_n(nm->base, base, strlen(base));
}

/* Whether s[0..blen) "." s[blen+1..] is a known "base.overload" string. */
static bool dotted_has(const struct op_namer *nm, const char *s, size_t blen)
{
	char key[2 * OP_NAME_MAX + 2];
	size_t len = strlen(s);

	if (len >= sizeof(key))
		return false;
	memcpy(key, s, len + 1);
	key[blen] = '.';
	return str_set_has_n(nm->dotted, key, len);
}

/* Length of the base S splits at; 0 if no known base fits. */
static size_t split_point(const struct op_namer *nm, const char *s)
{
	size_t len = strlen(s), i, best = 0;

	/* Candidates, longest first: all of s, then each prefix ending before a '_'. */
	if (str_set_has_n(nm->base, s, len))
		best = len;
	for (i = len; i-- > 1;) {
		if (s[i] != '_' || !str_set_has_n(nm->base, s, i))
			continue;
		if (dotted_has(nm, s, i))
			return i;
		if (!best)
			best = i;
	}
	return best;
}

void op_namer_split(const struct op_namer *nm, const char *s,
		    char *name, size_t name_len, char *overload, size_t ov_len)
{
	size_t b = split_point(nm, s);

	if (!b)
		b = strlen(s);
	snprintf(name, name_len, ATEN_PREFIX "%.*s", (int)b, s);
	snprintf(overload, ov_len, "%s", s[b] ? s + b + 1 : "");
}
