// SPDX-License-Identifier: BSD-2-Clause
/*
 * Entry points that outlive the agent, and GOT hooks. See agent.h.
 *
 * torch keeps the RecordFunction callbacks it was given inside every
 * RecordFunction still alive, and CUPTI keeps the buffer callbacks last
 * registered for as long as nobody registers others: pointers into the
 * agent that the agent cannot take back. So the agent never hands out its
 * own addresses. It hands out stubs: two anonymous pages, S (r-x) of
 * `jmp *T[i](%rip)` and a few inert functions, and T (rw-) of the
 * targets. Before the library is unloaded every T[i] is pointed at an
 * inert end (a start callback that returns no context, a `ret`, a buffer
 * request that gets no buffer, a hooked function itself), so whatever
 * calls a stub later does nothing. The pages stay (8 KiB); a later copy
 * of the agent finds them by their magic and reuses them. T also holds
 * what Python keeps pointers to (regions.c: method definitions, a text
 * to run), and Python functions' stubs end in PyObject_Type(self), which
 * returns a new reference as a Python function must.
 *
 * GOT hooks: Kineto (torch.profiler) calls libcupti through its GOT. The
 * slots of the functions the agent must see first are pointed at hook
 * stubs, whose targets are the agent's wrappers while it is loaded and
 * the functions themselves once retired; hooks_remove() puts the slots
 * back. A slot is one aligned 8-byte store: a call through it goes either
 * way, never astray.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define STUB_MAGIC "ptbpf-stubs-v3\0" /* 16 bytes with its NUL */
#define STUB_AT(i) (16 + 8 * (i))
#define NULL_RET      (STUB_AT(STUB_MAX))
#define NULL_RF_START (NULL_RET + 8)
#define NULL_BUF_REQ  (NULL_RF_START + 16)
#define NULL_ZERO     (NULL_BUF_REQ + 24)
#define PY_RUN        (NULL_ZERO + 8)
#define CODE_END      (PY_RUN + 24)

static uint8_t *S;     /* the code page, NULL without stubs */
static uint64_t *T;    /* its targets */
static uint64_t inert[STUB_MAX];
static void *py_type, *py_run;

/* The code page as this version of the agent writes it. */
static void stub_image(uint8_t *img)
{
	/* movq $0,(%rdi); mov %rdi,%rax; ret: a StartCallback's null
	 * unique_ptr, returned through its hidden pointer. */
	static const uint8_t rf_start[] = { 0x48, 0xc7, 0x07, 0, 0, 0, 0, 0x48, 0x89, 0xf8, 0xc3 };
	/* *buffer = 0, *size = 0, *maxNumRecords = 0: CUPTI drops and counts. */
	static const uint8_t buf_req[] = { 0x48, 0xc7, 0x07, 0, 0, 0, 0, 0x48, 0xc7, 0x06, 0, 0, 0,
					   0, 0x48, 0xc7, 0x02, 0, 0, 0, 0, 0xc3 };

	memset(img, 0xcc, PAGE);
	memcpy(img, STUB_MAGIC, 16);
	for (int i = 0; i < STUB_MAX; i++) {
		int32_t rel = (int32_t)(PAGE + 8 * i - (STUB_AT(i) + 6));

		img[STUB_AT(i)] = 0xff; /* jmp *rel32(%rip) */
		img[STUB_AT(i) + 1] = 0x25;
		memcpy(img + STUB_AT(i) + 2, &rel, 4);
	}
	img[NULL_RET] = 0xc3;
	img[NULL_ZERO] = 0x31; /* xor %eax,%eax; ret: a pending call that did its work */
	img[NULL_ZERO + 1] = 0xc0;
	img[NULL_ZERO + 2] = 0xc3;
	/* sub $8,%rsp; call *T[STUB_PY_RUN](%rip); xor %eax,%eax; add $8,%rsp;
	 * ret: PyRun_SimpleString(text), then 0 (stubs_py_run). */
	{
		static const uint8_t run[] = { 0x48, 0x83, 0xec, 0x08, 0xff, 0x15, 0, 0, 0, 0,
					       0x31, 0xc0, 0x48, 0x83, 0xc4, 0x08, 0xc3 };
		int32_t rel = (int32_t)(PAGE + 8 * STUB_PY_RUN - (PY_RUN + 10));

		memcpy(img + PY_RUN, run, sizeof(run));
		memcpy(img + PY_RUN + 6, &rel, 4);
	}
	memcpy(img + NULL_RF_START, rf_start, sizeof(rf_start));
	memcpy(img + NULL_BUF_REQ, buf_req, sizeof(buf_req));
}

/* Stub pages of an earlier agent: an anonymous r-x page holding exactly
 * this image, followed by a writable page. */
static uint8_t *find_stubs(const uint8_t *img)
{
	char line[512];
	uint8_t *found = NULL;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, ino;
		char perms[8];
		int pos = 0;

		if (sscanf(line, "%lx-%lx %7s %*x %*x:%*x %lu %n", &lo, &hi, perms, &ino, &pos) < 4 ||
		    ino || strcmp(perms, "r-xp") || line[pos] || hi - lo > 64 * PAGE)
			continue;
		for (unsigned long p = lo; p < hi && !found; p += PAGE)
			if (!memcmp((const void *)p, img, CODE_END))
				found = (uint8_t *)p;
	}
	fclose(f);
	return found;
}

bool stubs_init(void)
{
	static uint8_t img[PAGE];
	uint8_t *p;

	if (S)
		return true;
	stub_image(img);
	p = find_stubs(img);
	if (!p) {
		p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return false;
		memcpy(p, img, PAGE);
		for (int i = 0; i < STUB_MAX; i++)
			((uint64_t *)(p + PAGE))[i] = (uint64_t)(uintptr_t)(p + NULL_RET);
		if (mprotect(p, PAGE, PROT_READ | PROT_EXEC)) {
			munmap(p, 2 * PAGE);
			return false;
		}
	}
	/* A Python function (regions.c) ends in PyObject_Type(self): a new
	 * reference to an object's type, which its caller drops. Without
	 * Python in the process there are no Python functions. */
	py_type = dlsym(RTLD_DEFAULT, "PyObject_Type");
	py_run = dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
	for (int i = 0; i < STUB_MAX; i++)
		inert[i] = (uint64_t)(uintptr_t)(p + (i <= STUB_RF_GRAPHS ? NULL_RF_START :
						     i == STUB_BUF_REQUESTED ? NULL_BUF_REQ :
						     i == STUB_PY_CALL ? NULL_ZERO : NULL_RET));
	if (py_type)
		inert[STUB_PY_BEGIN] = inert[STUB_PY_END] = (uint64_t)(uintptr_t)py_type;
	T = (uint64_t *)(p + PAGE);
	if (py_run) /* the same function in every copy of the agent, loaded or not */
		__atomic_store_n(&T[STUB_PY_RUN], inert[STUB_PY_RUN] = (uint64_t)(uintptr_t)py_run,
				 __ATOMIC_RELEASE);
	S = p;
	return true;
}

bool stubs_available(void)
{
	return S != NULL;
}

void *stub_entry(int i, void *target)
{
	if (!S)
		return target;
	__atomic_store_n(&T[i], (uint64_t)(uintptr_t)target, __ATOMIC_RELEASE);
	return S + STUB_AT(i);
}

/* The kept words sit in the targets' page after the targets, past room
 * for more of those, at a place every agent of this page format (its
 * magic) agrees on: a word's index never changes meaning. */
#define KEEP_AT 480
_Static_assert(STUB_MAX <= KEEP_AT, "stub targets and kept words overlap");
_Static_assert(KEEP_AT + KEEP_MAX <= PAGE / 8, "kept words past the page");

uint64_t *stubs_keep(int i)
{
	return S && i >= 0 && i < KEEP_MAX ? &T[KEEP_AT + i] : NULL;
}

/* Python's area: between the targets and the kept words. */
#define PY_AT 1024
_Static_assert(STUB_MAX * 8 <= PY_AT && PY_AT + STUB_PY_AREA <= KEEP_AT * 8,
	       "Python's area overlaps targets or kept words");

void *stubs_py_area(void)
{
	return S && py_type && py_run ? (uint8_t *)T + PY_AT : NULL;
}

void *stubs_py_run(void)
{
	return S && py_run ? S + PY_RUN : NULL;
}

void stubs_retire(void)
{
	for (int i = 0; S && i < STUB_MAX; i++)
		__atomic_store_n(&T[i], inert[i], __ATOMIC_RELEASE);
}

/* --- GOT hooks --- */

#define MAX_PATCHED 256

static struct {
	uint64_t *slot;
	uint64_t orig;
} patched[MAX_PATCHED];
static int npatched;

struct hook_scan {
	const struct hook *h;
	int n;
	uintptr_t self;
};

static bool is_patched(uint64_t *slot)
{
	for (int i = 0; i < npatched; i++)
		if (patched[i].slot == slot)
			return true;
	return false;
}

/* Writes an 8-byte GOT slot, making a RELRO page writable for the store
 * (as ld.so does when it relocates). */
static bool write_slot(uint64_t *slot, uint64_t v, uintptr_t relro_lo, uintptr_t relro_hi)
{
	uintptr_t page = (uintptr_t)slot & ~(uintptr_t)(PAGE - 1);
	bool ro = (uintptr_t)slot >= relro_lo && page + PAGE <= relro_hi;

	if (ro && mprotect((void *)page, PAGE, PROT_READ | PROT_WRITE))
		return false;
	__atomic_store_n(slot, v, __ATOMIC_SEQ_CST);
	if (ro)
		mprotect((void *)page, PAGE, PROT_READ);
	return true;
}

/* d_ptr of an adjusted dynamic section is an address; the vDSO's, and an
 * unadjusted one, is relative to the load base. */
static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

static void hook_relocs(const struct hook_scan *hs, const struct dl_phdr_info *info,
			const ElfW(Rela) *rel, size_t n, const ElfW(Sym) *syms, const char *strs,
			uintptr_t relro_lo, uintptr_t relro_hi)
{
	for (size_t r = 0; r < n && npatched < MAX_PATCHED; r++) {
		uint32_t type = ELF64_R_TYPE(rel[r].r_info);
		const char *name = strs + syms[ELF64_R_SYM(rel[r].r_info)].st_name;
		uint64_t *slot = (uint64_t *)(info->dlpi_addr + rel[r].r_offset);

		if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !ELF64_R_SYM(rel[r].r_info))
			continue;
		for (int i = 0; i < hs->n; i++) {
			uint64_t orig;

			if (strcmp(name, hs->h[i].name) || is_patched(slot))
				continue;
			orig = *slot;
			if (write_slot(slot, (uint64_t)(uintptr_t)stub_entry(STUB_HOOK0 + i,
									     hs->h[i].wrapper),
				       relro_lo, relro_hi))
				patched[npatched++] = (typeof(patched[0])){ slot, orig };
			break;
		}
	}
}

static int hook_object(struct dl_phdr_info *info, size_t size, void *ctx)
{
	const struct hook_scan *hs = ctx;
	const ElfW(Dyn) *dyn = NULL;
	uintptr_t relro_lo = 0, relro_hi = 0;
	const ElfW(Sym) *syms = NULL;
	const char *strs = NULL;
	const ElfW(Rela) *jmprel = NULL, *rela = NULL;
	size_t jmprel_sz = 0, rela_sz = 0;
	const char *base = strrchr(info->dlpi_name, '/');

	base = base ? base + 1 : info->dlpi_name;
	if (info->dlpi_addr == hs->self || !strncmp(base, "libcupti", 8) ||
	    !strncmp(base, "linux-vdso", 10))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			relro_lo = info->dlpi_addr + ph->p_vaddr;
			relro_hi = (relro_lo + ph->p_memsz) & ~(uintptr_t)(PAGE - 1);
		}
	}
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: syms = (const ElfW(Sym) *)dyn_addr(info, dyn->d_un.d_ptr); break;
		case DT_STRTAB: strs = (const char *)dyn_addr(info, dyn->d_un.d_ptr); break;
		case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_addr(info, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: jmprel_sz = dyn->d_un.d_val; break;
		case DT_RELA: rela = (const ElfW(Rela) *)dyn_addr(info, dyn->d_un.d_ptr); break;
		case DT_RELASZ: rela_sz = dyn->d_un.d_val; break;
		}
	}
	if (!syms || !strs)
		return 0;
	if (jmprel)
		hook_relocs(hs, info, jmprel, jmprel_sz / sizeof(*jmprel), syms, strs, relro_lo,
			    relro_hi);
	if (rela)
		hook_relocs(hs, info, rela, rela_sz / sizeof(*rela), syms, strs, relro_lo, relro_hi);
	return 0;
}

static int relro_of(struct dl_phdr_info *info, size_t size, void *ctx)
{
	uintptr_t *r = ctx; /* in: a slot; out: [lo, hi) of its object's RELRO */

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_GNU_RELRO && r[0] >= lo && r[0] < lo + ph->p_memsz) {
			r[1] = lo;
			r[2] = (lo + ph->p_memsz) & ~(uintptr_t)(PAGE - 1);
			return 1;
		}
	}
	return 0;
}

/* The dynamic linker's counts of objects ever loaded and unloaded: the
 * set of objects is the same while both are. */
struct dl_counts {
	unsigned long long adds, subs;
};

static int dl_counts_of(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct dl_counts *c = ctx;

	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		return 1; /* a glibc without them: counts stay 0, always walked */
	c->adds = info->dlpi_adds;
	c->subs = info->dlpi_subs;
	return 1; /* the first object tells */
}

/* The counts as of the last walk (walked: something was hooked since the
 * last hooks_remove). */
static struct dl_counts hooked_at;
static bool walked;

int hooks_install(const struct hook *h, int n)
{
	Dl_info di;
	struct hook_scan hs = { .h = h, .n = n < STUB_MAX - STUB_HOOK0 ? n : STUB_MAX - STUB_HOOK0 };
	struct dl_counts now = { 0, 0 };

	/* Without stubs a hooked slot could keep pointing into an unloaded
	 * library: no hooks then. */
	if (!S || !dladdr((void *)hooks_install, &di))
		return 0;
	/* Walking every object's relocations took a torch CUDA process 25 ms:
	 * only when an object came or went since the last walk. */
	dl_iterate_phdr(dl_counts_of, &now);
	if (walked && now.adds && now.adds == hooked_at.adds && now.subs == hooked_at.subs)
		return npatched;
	hooked_at = now;
	walked = true;
	hs.self = (uintptr_t)di.dli_fbase;
	for (int i = 0; i < hs.n; i++)
		inert[STUB_HOOK0 + i] = (uint64_t)(uintptr_t)h[i].real;
	dl_iterate_phdr(hook_object, &hs);
	return npatched;
}

void hooks_remove(void)
{
	walked = false;
	for (int i = 0; i < npatched; i++) {
		uintptr_t r[3] = { (uintptr_t)patched[i].slot, 0, 0 };

		dl_iterate_phdr(relro_of, r);
		write_slot(patched[i].slot, patched[i].orig, r[1], r[2]);
	}
	npatched = 0;
	for (int i = STUB_HOOK0; S && i < STUB_MAX; i++)
		if (inert[i])
			__atomic_store_n(&T[i], inert[i], __ATOMIC_RELEASE);
}
