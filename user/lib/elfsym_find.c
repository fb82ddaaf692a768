// SPDX-License-Identifier: BSD-2-Clause
/*
 * Name searches over a symbol table without an index: elf_file_find_containing,
 * and elf_file_find_func_prefix on a file opened with elf_file_open_sections.
 * torch 2.11's libtorch_cpu has 553k symbols in .symtab (~100 MB of names),
 * and indexing its .dynsym takes tens of milliseconds of an attach. Two
 * passes over the mapped file instead, a chunk at a time, each chunk's
 * pages dropped after it (the loader's RSS grows by a chunk at most):
 * memmem finds a needle in the string table, each match giving the name
 * offsets whose names hold it (its string's start to the match; for a
 * prefix, the match alone); then symbols are compared by name offset.
 */
#define _GNU_SOURCE /* memmem */
#include "lib/elfsym_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FIND_CHUNK (8u << 20)
#define FIND_RANGES 64 /* names per needle considered */

struct name_range {
	uint32_t lo, hi; /* st_name in [lo, hi]: the name holds the needle */
};

static int needle_ranges(struct elf_file *ef, const GElf_Shdr *str, const char *needle,
			 bool prefix, struct name_range *r)
{
	const char *base = (const char *)ef->map + str->sh_offset;
	size_t nlen = strlen(needle), size = str->sh_size;
	int n = 0;

	if (!nlen)
		return 0;
	for (size_t at = 0; at < size && n < FIND_RANGES; at += FIND_CHUNK) {
		size_t end = at + FIND_CHUNK + nlen - 1 < size ? at + FIND_CHUNK + nlen - 1 : size;
		const char *p = base + at, *m;

		while (n < FIND_RANGES && (m = memmem(p, (size_t)(base + end - p), needle, nlen))) {
			const char *start = m;

			/* A name may also begin inside a string (a linker shares
			 * one's tail with another): a prefix is a name at m. */
			while (!prefix && start > base && start[-1])
				start--;
			r[n++] = (struct name_range){ (uint32_t)(start - base), (uint32_t)(m - base) };
			p = m + 1;
		}
		elfsym_drop_pages(ef);
	}
	return n;
}

static bool in_ranges(uint32_t name, const struct name_range *r, int n)
{
	for (int j = 0; j < n; j++)
		if (name >= r[j].lo && name <= r[j].hi)
			return true;
	return false;
}

/* For each needle, a defined FUNC symbol of scn whose name holds it:
 * the first in the table; with prefix, the smallest name starting with it
 * among those whose body is file-backed code (what a probe can take), as
 * the index's lookup gives. out[i].st_name is 0 where none is found. */
static int search(struct elf_file *ef, Elf_Scn *scn, const char *const *needles, int n,
		  bool prefix, Elf64_Sym *out)
{
	struct name_range (*ranges)[FIND_RANGES] = NULL;
	GElf_Shdr sh, str;
	int *nr = NULL, found = 0;
	const char *names;

	memset(out, 0, n * sizeof(*out));
	if (!scn || !gelf_getshdr(scn, &sh) || /* both checked at open */
	    !gelf_getshdr(elf_getscn(ef->elf, sh.sh_link), &str))
		return -ENOENT;
	if (!(ranges = calloc(n, sizeof(*ranges))) || !(nr = calloc(n, sizeof(*nr)))) {
		free(ranges);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		nr[i] = needle_ranges(ef, &str, needles[i], prefix, ranges[i]);
	names = (const char *)ef->map + str.sh_offset;
	for (size_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym) && (prefix || found < n); k++) {
		Elf64_Sym sym;

		if (k % (FIND_CHUNK / sizeof(sym)) == 0)
			elfsym_drop_pages(ef);
		memcpy(&sym, ef->map + sh.sh_offset + k * sizeof(sym), sizeof(sym));
		if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
		    sym.st_shndx == SHN_ABS || sym.st_shndx == SHN_COMMON || !sym.st_name ||
		    (prefix && !elfsym_code_seg(ef, sym.st_value, sym.st_size)))
			continue;
		for (int i = 0; i < n; i++) {
			if (!in_ranges(sym.st_name, ranges[i], nr[i]))
				continue;
			if (!out[i].st_name)
				out[i] = sym, found++;
			else if (prefix && strcmp(names + sym.st_name, names + out[i].st_name) < 0)
				out[i] = sym;
		}
	}
	elfsym_drop_pages(ef);
	free(ranges);
	free(nr);
	return 0;
}

int elf_file_find_containing(struct elf_file *ef, const char *const *needles, int n,
			     uint64_t *file_off)
{
	Elf64_Sym *syms = calloc(n, sizeof(*syms));
	int ret = -ENOENT, missing = n;

	if (!syms)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		file_off[i] = 0;
	/* .dynsym first: small, and kept by a stripped library. */
	for (int t = 0; t < 2 && missing; t++) {
		if (!ef->symscn[t] || search(ef, ef->symscn[t], needles, n, false, syms))
			continue;
		ret = 0;
		for (int i = 0; i < n; i++)
			if (!file_off[i] && syms[i].st_name) {
				file_off[i] = elf_file_vaddr_to_off(ef, syms[i].st_value);
				missing--;
			}
	}
	free(syms);
	return ret;
}

int elfsym_find_prefix_unindexed(struct elf_file *ef, const char *prefix, struct elf_func *out)
{
	GElf_Shdr sh, str;
	Elf64_Sym sym;
	Elf_Scn *scn = ef->symscn[0] ? ef->symscn[0] : ef->symtab;
	int ret = search(ef, scn, &prefix, 1, true, &sym);
	const struct load_seg *s;

	if (ret || !sym.st_name)
		return ret ? ret : -ENOENT;
	gelf_getshdr(scn, &sh);
	gelf_getshdr(elf_getscn(ef->elf, sh.sh_link), &str);
	s = elfsym_code_seg(ef, sym.st_value, sym.st_size);
	*out = (struct elf_func){ .name = (const char *)ef->map + str.sh_offset + sym.st_name,
				  .addr = sym.st_value, .size = sym.st_size,
				  .file_off = sym.st_value - s->vaddr + s->off };
	return 0;
}
