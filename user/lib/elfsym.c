// SPDX-License-Identifier: BSD-2-Clause
/*
 * ELF symbols, vtables and .rodata strings of a target's shared object.
 *
 * The file is untrusted (a container can map anything), so the raw header is
 * checked before libelf sees it, and every offset and size taken from the
 * file is bounded by the file's size. Limits refuse absurd files outright.
 *
 * The file is mmap'ed read-only for elf_file_bytes(); libelf works on a dup
 * of the caller's fd with ELF_C_READ_MMAP. Both map the inode the caller
 * opened. A file truncated by someone else while mapped raises SIGBUS on
 * access, as with every mmap-based ELF reader.
 */
#define _GNU_SOURCE /* memmem, qsort_r */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/elfsym.h"
#include "lib/elfsym_int.h"

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* off + len <= limit, without overflow. */
static bool in_bounds(uint64_t off, uint64_t len, uint64_t limit)
{
	return off <= limit && len <= limit - off;
}

/*
 * Checks the raw ELF header, counting sections and program headers from the
 * file itself, before libelf allocates anything from those counts.
 */
static int raw_header_check(struct elf_file *ef, char *err, size_t errlen)
{
	const uint8_t *m = ef->map;
	uint64_t size = ef->size;
	Elf64_Ehdr eh;
	Elf64_Shdr sh0;
	uint64_t shnum, phnum;

	if (size < sizeof(eh)) {
		set_err(err, errlen, "file too small for an ELF header");
		return -EINVAL;
	}
	memcpy(&eh, m, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		set_err(err, errlen, "not a little-endian 64-bit ELF file");
		return -EINVAL;
	}
	if (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) {
		set_err(err, errlen, "ELF type %u is not an executable or shared object",
			eh.e_type);
		return -EINVAL;
	}
	ef->machine = eh.e_machine;
	shnum = eh.e_shnum;
	phnum = eh.e_phnum;
	if (eh.e_shoff) {
		if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
		    !in_bounds(eh.e_shoff, sizeof(sh0), size)) {
			set_err(err, errlen, "bad section header table");
			return -EINVAL;
		}
		memcpy(&sh0, m + eh.e_shoff, sizeof(sh0));
		if (shnum == 0)
			shnum = sh0.sh_size;
		if (phnum == PN_XNUM)
			phnum = sh0.sh_info;
	}
	if (shnum > ELF_MAX_SECTIONS || phnum > ELF_MAX_PHDRS) {
		set_err(err, errlen, "too many sections (%llu) or program headers (%llu)",
			(unsigned long long)shnum, (unsigned long long)phnum);
		return -E2BIG;
	}
	if ((shnum && !in_bounds(eh.e_shoff, shnum * sizeof(Elf64_Shdr), size)) ||
	    (phnum && (eh.e_phentsize != sizeof(Elf64_Phdr) ||
		       !in_bounds(eh.e_phoff, phnum * sizeof(Elf64_Phdr), size)))) {
		set_err(err, errlen, "section or program headers beyond end of file");
		return -EINVAL;
	}
	return 0;
}

static int load_segments(struct elf_file *ef, char *err, size_t errlen)
{
	size_t phnum, i;
	GElf_Phdr ph;

	if (elf_getphdrnum(ef->elf, &phnum) || phnum > ELF_MAX_PHDRS) {
		set_err(err, errlen, "cannot read program headers: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	ef->segs = calloc(phnum ? phnum : 1, sizeof(*ef->segs));
	if (!ef->segs) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < phnum; i++) {
		if (!gelf_getphdr(ef->elf, (int)i, &ph)) {
			set_err(err, errlen, "bad program header %zu", i);
			return -EINVAL;
		}
		if (ph.p_type == PT_GNU_EH_FRAME && in_bounds(ph.p_offset, ph.p_filesz, ef->size)) {
			ef->eh_hdr_vaddr = ph.p_vaddr;
			ef->eh_hdr_size = ph.p_filesz;
		}
		if (ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		if (!in_bounds(ph.p_offset, ph.p_filesz, ef->size) ||
		    !in_bounds(ph.p_vaddr, ph.p_filesz, UINT64_MAX)) {
			set_err(err, errlen, "PT_LOAD %zu lies beyond end of file", i);
			return -EINVAL;
		}
		ef->segs[ef->nsegs++] = (struct load_seg){
			.vaddr = ph.p_vaddr, .off = ph.p_offset,
			.filesz = ph.p_filesz, .exec = ph.p_flags & PF_X,
		};
	}
	return 0;
}

const struct load_seg *elfsym_seg_of(const struct elf_file *ef, uint64_t vaddr)
{
	size_t i;

	for (i = 0; i < ef->nsegs; i++) {
		const struct load_seg *s = &ef->segs[i];

		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz)
			return s;
	}
	return NULL;
}

/* Probes go into code: a function's whole body must be file-backed and
 * executable. */
const struct load_seg *elfsym_code_seg(const struct elf_file *ef, uint64_t addr, uint64_t size)
{
	const struct load_seg *s = elfsym_seg_of(ef, addr);

	return s && s->exec && size && size <= s->filesz - (addr - s->vaddr) ? s : NULL;
}

uint64_t elf_file_off_to_vaddr(struct elf_file *ef, uint64_t off)
{
	for (size_t i = 0; i < ef->nsegs; i++)
		if (off >= ef->segs[i].off && off - ef->segs[i].off < ef->segs[i].filesz)
			return ef->segs[i].vaddr + (off - ef->segs[i].off);
	return UINT64_MAX;
}

uint64_t elf_file_vaddr_to_off(struct elf_file *ef, uint64_t vaddr)
{
	const struct load_seg *s = elfsym_seg_of(ef, vaddr);

	return s ? vaddr - s->vaddr + s->off : 0;
}

/* A symbol table's section, validated: entry size, bounds, count limit. */
static int symtab_check(struct elf_file *ef, const GElf_Shdr *sh, char *err,
			size_t errlen)
{
	size_t shnum;
	GElf_Shdr strsh;

	if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size % sizeof(Elf64_Sym) ||
	    !in_bounds(sh->sh_offset, sh->sh_size, ef->size)) {
		set_err(err, errlen, "malformed symbol table");
		return -EINVAL;
	}
	if (sh->sh_size / sizeof(Elf64_Sym) > ELF_MAX_SYMS) {
		set_err(err, errlen, "symbol table too large");
		return -E2BIG;
	}
	if (elf_getshdrnum(ef->elf, &shnum) || sh->sh_link == 0 || sh->sh_link >= shnum ||
	    !gelf_getshdr(elf_getscn(ef->elf, sh->sh_link), &strsh) ||
	    strsh.sh_type != SHT_STRTAB || !in_bounds(strsh.sh_offset, strsh.sh_size, ef->size)) {
		set_err(err, errlen, "symbol table without a valid string table");
		return -EINVAL;
	}
	return 0;
}

/*
 * Calls cb for each defined symbol of the table in scn with a readable name.
 * libelf's elf_strptr checks that the name lies, NUL-terminated, inside the
 * string table.
 */
/* A walk over a big symbol table touches its pages, and file pages mapped
 * count in the loader's RSS (libtorch_cpu.so's .symtab and .strtab run to
 * ~100 MB): dropped as the walk goes (they stay in the page cache), the
 * loader's peak stays small. */
#define DROP_EVERY (1u << 16)

void elfsym_drop_pages(struct elf_file *ef)
{
	size_t raw_size = 0;
	char *raw = elf_rawfile(ef->elf, &raw_size);

	if (ef->map)
		madvise((void *)ef->map, ef->size, MADV_DONTNEED);
	if (raw && raw != (const char *)ef->map)
		madvise(raw, raw_size, MADV_DONTNEED);
}

static int symtab_walk(struct elf_file *ef, Elf_Scn *scn,
		       int (*cb)(struct elf_file *ef, const GElf_Sym *sym, const char *name,
				 void *ctx),
		       void *ctx)
{
	GElf_Shdr sh;
	Elf_Data *data;
	GElf_Sym sym;
	size_t i, n;
	const char *name;
	int ret;

	if (!gelf_getshdr(scn, &sh))
		return -EINVAL;
	data = elf_getdata(scn, NULL);
	if (!data)
		return -EINVAL;
	n = data->d_size / sizeof(Elf64_Sym);
	if (n > sh.sh_size / sizeof(Elf64_Sym))
		return -EINVAL;
	for (i = 1; i < n; i++) {
		if (i % DROP_EVERY == 0)
			elfsym_drop_pages(ef);
		if (!gelf_getsym(data, (int)i, &sym))
			return -EINVAL;
		if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS ||
		    sym.st_shndx == SHN_COMMON || !sym.st_name)
			continue;
		name = elf_strptr(ef->elf, sh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		ret = cb(ef, &sym, name, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

struct func_collect {
	size_t cap;
};

static int func_collect_cb(struct elf_file *ef, const GElf_Sym *sym, const char *name,
			   void *ctx)
{
	struct func_collect *fc = ctx;
	const struct load_seg *s;
	struct func_ent *grown;

	if (GELF_ST_TYPE(sym->st_info) != STT_FUNC || !(s = elfsym_code_seg(ef, sym->st_value,
									 sym->st_size)))
		return 0;
	if (ef->nfuncs == fc->cap) {
		fc->cap = fc->cap ? fc->cap * 2 : 4096;
		grown = realloc(ef->funcs, fc->cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		ef->funcs = grown;
	}
	ef->funcs[ef->nfuncs] = (struct func_ent){
		.name = name, .addr = sym->st_value, .size = sym->st_size,
		.file_off = sym->st_value - s->vaddr + s->off, .seq = (uint32_t)ef->nfuncs,
	};
	ef->nfuncs++;
	return 0;
}

static int cmp_addr_seq(const void *a, const void *b)
{
	const struct func_ent *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_name_idx(const void *a, const void *b, void *base)
{
	const struct func_ent *x = (const struct func_ent *)base + *(const uint32_t *)a;
	const struct func_ent *y = (const struct func_ent *)base + *(const uint32_t *)b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts the collected symbols and builds the per-address and by-name indexes. */
static int func_index_build(struct elf_file *ef)
{
	size_t i;

	if (ef->nfuncs)
		qsort(ef->funcs, ef->nfuncs, sizeof(*ef->funcs), cmp_addr_seq);
	ef->uniq = calloc(ef->nfuncs + 1, sizeof(*ef->uniq));
	ef->by_name = calloc(ef->nfuncs + 1, sizeof(*ef->by_name));
	if (!ef->uniq || !ef->by_name)
		return -ENOMEM;
	for (i = 0; i < ef->nfuncs; i++) {
		ef->by_name[i] = (uint32_t)i;
		if (i == 0 || ef->funcs[i].addr != ef->funcs[i - 1].addr)
			ef->uniq[ef->nuniq++] = (uint32_t)i;
	}
	qsort_r(ef->by_name, ef->nfuncs, sizeof(*ef->by_name), cmp_name_idx, ef->funcs);
	return 0;
}

static bool is_rodata_name(const char *name)
{
	return name && !strncmp(name, ".rodata", 7) && (name[7] == '\0' || name[7] == '.');
}

/* Finds .dynsym, .symtab and the .rodata sections, then collects FUNC symbols. */
static int scan_sections(struct elf_file *ef, enum elf_open how, char *err, size_t errlen)
{
	struct func_collect fc = { 0 };
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx, i;
	int ret;

	if (elf_getshdrstrndx(ef->elf, &shstrndx))
		shstrndx = 0;
	while ((scn = elf_nextscn(ef->elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) {
			ret = symtab_check(ef, &sh, err, errlen);
			if (ret)
				return ret;
			ef->symscn[sh.sh_type == SHT_SYMTAB] = scn;
		} else if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_ALLOC) &&
			   shstrndx && is_rodata_name(elf_strptr(ef->elf, shstrndx, sh.sh_name)) &&
			   in_bounds(sh.sh_offset, sh.sh_size, ef->size) &&
			   ef->nrodata < ELF_MAX_RODATA) {
			ef->rodata[ef->nrodata++] = (struct rodata_sec){ sh.sh_offset, sh.sh_size };
		}
	}
	ef->symtab = ef->symscn[1];
	ef->how = how;
	if (how == OPEN_SECTIONS)
		return 0;
	if (how == OPEN_EXPORTED && ef->symscn[0])
		ef->symscn[1] = NULL;
	for (i = 0; i < 2; i++) {
		if (!ef->symscn[i])
			continue;
		ret = symtab_walk(ef, ef->symscn[i], func_collect_cb, &fc);
		if (ret) {
			set_err(err, errlen, "cannot read symbols: %s", strerror(-ret));
			return ret;
		}
	}
	ret = func_index_build(ef);
	if (ret)
		set_err(err, errlen, "out of memory");
	return ret;
}

/* Maps the file and checks its size and raw header. */
static int map_file(struct elf_file *ef, int fd, char *err, size_t errlen)
{
	struct stat st;
	void *m;
	int e;

	ef->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ef->fd < 0 || fstat(ef->fd, &st)) {
		e = errno;
		set_err(err, errlen, "cannot use fd: %s", strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > ELF_MAX_FILE) {
		set_err(err, errlen, "not a regular file of 1 byte to 4 GiB");
		return -EINVAL;
	}
	ef->size = (uint64_t)st.st_size;
	m = mmap(NULL, ef->size, PROT_READ, MAP_PRIVATE, ef->fd, 0);
	if (m == MAP_FAILED) {
		e = errno;
		set_err(err, errlen, "mmap: %s", strerror(e));
		return -e;
	}
	ef->map = m;
	return raw_header_check(ef, err, errlen);
}

static struct elf_file *open_elf(int fd, enum elf_open how, char *err, size_t errlen)
{
	struct elf_file *ef = calloc(1, sizeof(*ef));

	if (!ef) {
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	ef->fd = -1;
	if (map_file(ef, fd, err, errlen))
		goto fail;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		set_err(err, errlen, "libelf: %s", elf_errmsg(-1));
		goto fail;
	}
	ef->elf = elf_begin(ef->fd, ELF_C_READ_MMAP, NULL);
	if (!ef->elf || elf_kind(ef->elf) != ELF_K_ELF) {
		set_err(err, errlen, "libelf: %s", elf_errmsg(-1));
		goto fail;
	}
	if (load_segments(ef, err, errlen) || scan_sections(ef, how, err, errlen))
		goto fail;
	/* The by-name sort read every name again: dropped too (they come
	 * back from the page cache when asked for). Without this, naming CPU
	 * samples took the loader's peak RSS from 46 to 140-156 MB on torch
	 * 1.13's libtorch_cpu.so (CI VM, 2026-11-29). */
	elfsym_drop_pages(ef);
	return ef;
fail:
	elf_file_close(ef);
	return NULL;
}

struct elf_file *elf_file_open(int fd, char *err, size_t errlen)
{
	return open_elf(fd, OPEN_ALL, err, errlen);
}

struct elf_file *elf_file_open_exported(int fd, char *err, size_t errlen)
{
	return open_elf(fd, OPEN_EXPORTED, err, errlen);
}

struct elf_file *elf_file_open_sections(int fd, char *err, size_t errlen)
{
	return open_elf(fd, OPEN_SECTIONS, err, errlen);
}

void elf_file_close(struct elf_file *ef)
{
	if (!ef)
		return;
	free(ef->by_name);
	free(ef->uniq);
	free(ef->funcs);
	free(ef->segs);
	if (ef->elf)
		elf_end(ef->elf);
	if (ef->map)
		munmap((void *)ef->map, ef->size);
	if (ef->fd >= 0)
		close(ef->fd);
	free(ef);
}

static void func_out(const struct func_ent *e, struct elf_func *out)
{
	out->name = e->name;
	out->addr = e->addr;
	out->size = e->size;
	out->file_off = e->file_off;
}

int elf_file_for_each_func(struct elf_file *ef,
			   int (*cb)(const struct elf_func *f, void *ctx), void *ctx)
{
	struct elf_func f;
	size_t i;
	int ret;

	for (i = 0; i < ef->nuniq; i++) {
		func_out(&ef->funcs[ef->uniq[i]], &f);
		ret = cb(&f, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

int elf_file_find_func(struct elf_file *ef, const char *name, struct elf_func *out)
{
	size_t lo = 0, hi = ef->nfuncs;

	/* Lower bound, so that among equal names the .dynsym one wins. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ef->funcs[ef->by_name[mid]].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ef->nfuncs || strcmp(ef->funcs[ef->by_name[lo]].name, name))
		return -ENOENT;
	func_out(&ef->funcs[ef->by_name[lo]], out);
	return 0;
}

int elf_file_find_func_prefix(struct elf_file *ef, const char *prefix, struct elf_func *out)
{
	size_t lo = 0, hi = ef->nfuncs, plen = strlen(prefix);

	if (ef->how == OPEN_SECTIONS)
		return elfsym_find_prefix_unindexed(ef, prefix, out);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ef->funcs[ef->by_name[mid]].name, prefix) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ef->nfuncs || strncmp(ef->funcs[ef->by_name[lo]].name, prefix, plen))
		return -ENOENT;
	func_out(&ef->funcs[ef->by_name[lo]], out);
	return 0;
}

struct obj_ent {
	const char *name;
	uint64_t addr, size;
};

struct obj_collect {
	const char *prefix;
	size_t plen, n, cap;
	struct obj_ent *v;
};

static int obj_collect_cb(struct elf_file *ef, const GElf_Sym *sym, const char *name,
			  void *ctx)
{
	struct obj_collect *oc = ctx;
	struct obj_ent *grown;

	(void)ef;
	if (GELF_ST_TYPE(sym->st_info) != STT_OBJECT || strncmp(name, oc->prefix, oc->plen))
		return 0;
	if (oc->n == oc->cap) {
		oc->cap = oc->cap ? oc->cap * 2 : 256;
		grown = realloc(oc->v, oc->cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		oc->v = grown;
	}
	oc->v[oc->n++] = (struct obj_ent){ name, sym->st_value, sym->st_size };
	return 0;
}

static int cmp_obj(const void *a, const void *b)
{
	const struct obj_ent *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return strcmp(x->name, y->name);
}

int elf_file_for_each_object(struct elf_file *ef, const char *prefix,
			     int (*cb)(const char *name, uint64_t addr, uint64_t size, void *ctx),
			     void *ctx)
{
	struct obj_collect oc = { .prefix = prefix, .plen = strlen(prefix) };
	size_t i;
	int ret = 0;

	for (i = 0; i < 2 && !ret; i++)
		if (ef->symscn[i])
			ret = symtab_walk(ef, ef->symscn[i], obj_collect_cb, &oc);
	if (!ret && oc.n)
		qsort(oc.v, oc.n, sizeof(*oc.v), cmp_obj);
	/* A symbol in both .dynsym and .symtab is reported once. */
	for (i = 0; i < oc.n && !ret; i++) {
		if (i && oc.v[i].addr == oc.v[i - 1].addr &&
		    !strcmp(oc.v[i].name, oc.v[i - 1].name))
			continue;
		ret = cb(oc.v[i].name, oc.v[i].addr, oc.v[i].size, ctx);
	}
	free(oc.v);
	return ret;
}

struct obj_find {
	const char *name;
	uint64_t addr, size;
};

static int obj_find_cb(const char *name, uint64_t addr, uint64_t size, void *ctx)
{
	struct obj_find *f = ctx;

	if (strcmp(name, f->name))
		return 0;
	f->addr = addr;
	f->size = size;
	return 1;
}

uint64_t elf_file_object_addr(struct elf_file *ef, const char *name, uint64_t *size)
{
	struct obj_find f = { .name = name };

	elf_file_for_each_object(ef, name, obj_find_cb, &f);
	if (size)
		*size = f.size;
	return f.addr;
}

/* Each non-empty NUL-terminated run of bytes of the .rodata* sections. */
static int for_each_rodata_run(struct elf_file *ef, int (*cb)(const char *s, void *ctx),
			       void *ctx)
{
	size_t i;
	int ret;

	for (i = 0; i < ef->nrodata; i++) {
		const char *p = (const char *)ef->map + ef->rodata[i].off;
		const char *end = p + ef->rodata[i].size, *nul;

		for (; p < end && (nul = memchr(p, '\0', (size_t)(end - p))); p = nul + 1) {
			if (nul == p)
				continue;
			ret = cb(p, ctx);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * Every position in a .rodata* section where prefix begins a string that is
 * NUL-terminated inside the section. The position need not follow a NUL: the
 * linker merges a string into the tail of a longer one ("cos" inside "acos"),
 * and such suffixes are reported too. An empty prefix reports each string
 * that follows a NUL (not its suffixes).
 */
int elf_file_for_each_rodata_string(struct elf_file *ef, const char *prefix,
				    int (*cb)(const char *s, void *ctx), void *ctx)
{
	size_t plen = strlen(prefix), i;
	int ret;

	if (!plen)
		return for_each_rodata_run(ef, cb, ctx);
	for (i = 0; i < ef->nrodata; i++) {
		const char *base = (const char *)ef->map + ef->rodata[i].off;
		const char *p = base, *end = base + ef->rodata[i].size;

		while ((p = memmem(p, (size_t)(end - p), prefix, plen))) {
			const char *nul = memchr(p, '\0', (size_t)(end - p));

			if (!nul)
				break;
			ret = cb(p, ctx);
			if (ret)
				return ret;
			p += plen;
		}
	}
	return 0;
}

const uint8_t *elf_file_bytes(struct elf_file *ef, uint64_t file_off, uint64_t size)
{
	if (!in_bounds(file_off, size, ef->size))
		return NULL;
	return ef->map + file_off;
}

uint64_t elf_file_size(struct elf_file *ef)
{
	return ef->size;
}

uint16_t elf_file_machine(struct elf_file *ef)
{
	return ef->machine;
}

int elf_file_eh_frame_hdr(struct elf_file *ef, uint64_t *vaddr, uint64_t *size)
{
	if (!ef->eh_hdr_size)
		return -ENOENT;
	*vaddr = ef->eh_hdr_vaddr;
	*size = ef->eh_hdr_size;
	return 0;
}
