/* SPDX-License-Identifier: BSD-2-Clause */
/* An open ELF file's state, shared by elfsym.c (opening, the function
 * index) and elfsym_find.c (the searches without an index). */
#ifndef PTBPF_ELFSYM_INT_H
#define PTBPF_ELFSYM_INT_H

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/elfsym.h"

#define ELF_MAX_FILE (4ULL << 30)    /* 4 GiB */
#define ELF_MAX_SECTIONS 65535
#define ELF_MAX_PHDRS 4096
#define ELF_MAX_SYMS (16U << 20)     /* per symbol table */
#define ELF_MAX_RODATA 64            /* .rodata* sections scanned */

struct load_seg {
	uint64_t vaddr, off, filesz;
	bool exec;
};

/* One FUNC symbol; seq keeps .dynsym before .symtab when sorting. */
struct func_ent {
	const char *name;
	uint64_t addr, size, file_off;
	uint32_t seq;
};

struct rodata_sec {
	uint64_t off, size;
};

enum elf_open {
	OPEN_ALL,      /* functions of .dynsym and .symtab indexed */
	OPEN_EXPORTED, /* of .dynsym only, where there is one */
	OPEN_SECTIONS, /* none */
};

struct elf_file {
	int fd;
	Elf *elf;
	const uint8_t *map;
	uint64_t size;
	uint16_t machine;
	struct load_seg *segs;
	size_t nsegs;
	uint64_t eh_hdr_vaddr, eh_hdr_size;	/* PT_GNU_EH_FRAME, size 0 if none */
	Elf_Scn *symscn[2];      /* .dynsym, .symtab (either may be NULL) */
	Elf_Scn *symtab;         /* .symtab, indexed or not */
	struct func_ent *funcs;  /* sorted by (addr, seq) */
	size_t nfuncs;
	uint32_t *uniq;          /* first entry of each address */
	size_t nuniq;
	uint32_t *by_name;       /* all entries, sorted by name */
	struct rodata_sec rodata[ELF_MAX_RODATA];
	size_t nrodata;
	enum elf_open how;
};

/* The PT_LOAD segment holding vaddr, or NULL. */
const struct load_seg *elfsym_seg_of(const struct elf_file *ef, uint64_t vaddr);
/* The segment of a function whose whole body is file-backed code, or NULL. */
const struct load_seg *elfsym_code_seg(const struct elf_file *ef, uint64_t addr, uint64_t size);
/* Drops the pages of the file's mappings (they stay in the page cache). */
void elfsym_drop_pages(struct elf_file *ef);
/* elf_file_find_func_prefix on a file opened without an index. */
int elfsym_find_prefix_unindexed(struct elf_file *ef, const char *prefix, struct elf_func *out);

#endif /* PTBPF_ELFSYM_INT_H */
