/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reading a target's ELF shared object (opened by the caller, usually through
 * /proc/PID/map_files so the mapped inode is what gets parsed): function
 * symbols, vtables, .rodata strings and code bytes. Untrusted input: every
 * size and offset is bounds-checked; limits refuse absurd files.
 */
#ifndef PTBPF_ELFSYM_H
#define PTBPF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file;

struct elf_func {
	const char *name;  /* valid while the elf_file is open */
	uint64_t addr;     /* st_value (virtual address) */
	uint64_t size;     /* st_size */
	uint64_t file_off; /* offset in the file of addr: what uprobes take */
};

/* Takes a dup of fd (kept until close). On error returns NULL and writes a
 * one-line reason. Refuses anything but a little-endian 64-bit ET_DYN or
 * ET_EXEC file, files over 4 GiB, more than 65535 sections or 4096 program
 * headers, PT_LOAD segments or symbol tables that reach past the end of the
 * file, and symbol tables of more than 16M entries. */
struct elf_file *elf_file_open(int fd, char *err, size_t errlen);
/* The same, but functions come from .dynsym alone when it exists: all that
 * ptbpf probes in a shared object is exported, and the .symtab of an
 * unstripped wheel is ~20x larger (553k symbols in torch 2.11's
 * libtorch_cpu), costing a second and 100+ MB to index. */
struct elf_file *elf_file_open_exported(int fd, char *err, size_t errlen);
/* No function index: elf_file_find_containing, elf_file_find_func_prefix
 * (searched then, elfsym_find.c) and the lookups of objects, strings and
 * addresses; opening torch's takes no time then. */
struct elf_file *elf_file_open_sections(int fd, char *err, size_t errlen);
void elf_file_close(struct elf_file *ef);

/* Calls cb for each defined FUNC symbol with size > 0 in .symtab and
 * .dynsym whose whole body lies in an executable, file-backed PT_LOAD
 * segment, each address once (under its .dynsym name if it has one), in
 * address order. A non-zero return from cb stops the walk and is returned. */
int elf_file_for_each_func(struct elf_file *ef,
			   int (*cb)(const struct elf_func *f, void *ctx), void *ctx);
/* Exact lookup by symbol name, aliases included; 0 on success, -ENOENT if
 * absent. */
int elf_file_find_func(struct elf_file *ef, const char *name, struct elf_func *out);
/* The first function (by name order) whose name starts with prefix; 0 or
 * -ENOENT. For symbols whose mangled argument list varies by version. On a
 * file opened with elf_file_open_sections: the same, from .dynsym (else
 * .symtab), searched. */
int elf_file_find_func_prefix(struct elf_file *ef, const char *prefix, struct elf_func *out);
/* The file offsets of the first FUNC symbols (of .dynsym, then of .symtab
 * for the needles .dynsym lacks; searched, not indexed: cheap even for
 * torch's) whose names contain needles[i]; 0 for a needle none matched (of
 * the first 64 names holding it). 0, or -ENOENT without either table. */
int elf_file_find_containing(struct elf_file *ef, const char *const *needles, int n,
			     uint64_t *file_off);
/* The address (st_value) of the defined OBJECT symbol name, and its size
 * (size may be NULL); 0 if there is none. */
uint64_t elf_file_object_addr(struct elf_file *ef, const char *name, uint64_t *size);
/* Calls cb for each defined OBJECT symbol whose name starts with prefix
 * (e.g. "_ZTV" for vtables), with its virtual address and size. */
int elf_file_for_each_object(struct elf_file *ef, const char *prefix,
			     int (*cb)(const char *name, uint64_t addr, uint64_t size, void *ctx),
			     void *ctx);
/* Calls cb for each NUL-terminated string in .rodata* that starts with
 * prefix, tail-merged suffixes of longer strings included. An empty prefix
 * calls cb for each string that follows a NUL (suffixes not included). */
int elf_file_for_each_rodata_string(struct elf_file *ef, const char *prefix,
				    int (*cb)(const char *s, void *ctx), void *ctx);
/* Pointer to size bytes of the file at file_off (mapped), or NULL if out of range. */
const uint8_t *elf_file_bytes(struct elf_file *ef, uint64_t file_off, uint64_t size);
/* Virtual address -> file offset through the PT_LOAD segments; 0 if unmapped. */
uint64_t elf_file_vaddr_to_off(struct elf_file *ef, uint64_t vaddr);
/* File offset -> virtual address through the PT_LOAD segments; UINT64_MAX if none. */
uint64_t elf_file_off_to_vaddr(struct elf_file *ef, uint64_t off);
/* Size of the file in bytes (what elf_file_bytes can reach). */
uint64_t elf_file_size(struct elf_file *ef);
/* e_machine of the ELF header (EM_X86_64 = 62). */
uint16_t elf_file_machine(struct elf_file *ef);
/* Where .eh_frame_hdr lies (the PT_GNU_EH_FRAME segment): 0, or -ENOENT. */
int elf_file_eh_frame_hdr(struct elf_file *ef, uint64_t *vaddr, uint64_t *size);

/*
 * Exit sites of one function, found by disassembling it with capstone.
 * A `ret` ends the function; a `jmp` whose target leaves [addr, addr+size)
 * or is addr itself (or an indirect jmp that is not a jump table inside the
 * function) is a tail call. A conditional jump that leaves the function is
 * a conditional tail call: a probe on it also fires when the jump is not
 * taken and the function goes on. Where .eh_frame describes the function, a
 * jump is a tail call only if the frame is gone there (CFA = %rsp+8, so
 * %rsp is what it was at entry); GCC's jumps to the function's .cold part
 * (landing pads, unlikely paths) keep the frame and are not exits. Without
 * call-frame information every jump that leaves the function counts.
 * Probes go on instruction boundaries only; file_off is the first byte of
 * the instruction, prefixes included. A site is not necessarily probeable:
 * ask insn_uprobe_class() (the kernel refuses e.g. a notrack jmp).
 */
enum exit_kind { EXIT_RET = 1, EXIT_TAILJMP = 2, EXIT_TAILJCC = 3 };

struct exit_site {
	uint64_t file_off;
	enum exit_kind kind;
};

/* Fills up to max sites; returns how many exist (may exceed max), or a
 * negative errno: -EILSEQ if the code could not be decoded linearly to
 * exactly addr+size (data in text, bad bytes), -ERANGE if the body lies
 * outside the file, -EOPNOTSUPP if the file is not x86-64. */
int func_exit_sites(struct elf_file *ef, const struct elf_func *f,
		    struct exit_site *out, int max);

/*
 * What the Linux x86 uprobe code (arch/x86/kernel/uprobes.c) does with the
 * instruction at file_off, ordered from worst to best.
 */
enum uprobe_insn_class {
	UPROBE_INSN_REFUSED = 0,  /* registration fails (lock/es/cs/ss/ds prefix,
				   * 66-prefixed branch, invalid opcode), or the
				   * bytes do not decode */
	UPROBE_INSN_SSTEP,        /* single-stepped out of line (slow path) */
	UPROBE_INSN_EMULATED_NEW, /* multi-byte nop (x86_nops[2..8]): emulated
				   * since Linux 6.16, single-stepped before
				   * (66 90: refused before 6.2) */
	UPROBE_INSN_EMULATED,     /* emulated on every kernel since 4.16: nop
				   * (90), push reg, call rel32, jmp, jcc */
};
enum uprobe_insn_class insn_uprobe_class(struct elf_file *ef, uint64_t file_off);
/* One decoded instruction: its length, how a uprobe on it is handled, and
 * whether it only writes flags (cmp, test) or is an endbr64: such an
 * instruction can be stepped over by moving a probe to the next one. */
struct insn_info {
	uint8_t len;
	enum uprobe_insn_class cls;
	bool emulated;   /* cls == UPROBE_INSN_EMULATED */
	bool is_endbr;
	bool flags_only;
};
/* 0, or a negative errno if the bytes at file_off do not decode. */
int insn_decode(struct elf_file *ef, uint64_t file_off, struct insn_info *out);
/* Whether the kernel's x86 uprobe code emulates the instruction at file_off
 * (nop, push reg, call rel32, jmp, jcc) rather than single-stepping it, on
 * every supported kernel: insn_uprobe_class() == UPROBE_INSN_EMULATED. */
int insn_is_emulated(struct elf_file *ef, uint64_t file_off);

/*
 * Op naming. `at::_ops::<S>::call` is mangled _ZN2at4_ops<len><S>4callE...;
 * S is torchgen's unambiguous name: base name, or base "_" overload.
 */
/* Extracts S from a mangled call symbol into buf; 0 or -EINVAL. */
int op_struct_name(const char *mangled, char *buf, size_t len);

struct op_namer; /* the set of base names ("aten::X" strings in .rodata) */
/* Copies the names out: the namer does not need ef afterwards. NULL if out
 * of memory. At most 2^20 names are kept. */
struct op_namer *op_namer_new(struct elf_file *ef);
void op_namer_free(struct op_namer *n);
/* How many base names the namer holds. */
size_t op_namer_count(const struct op_namer *n);
/* Whether "aten::<base>" is one of them. */
bool op_namer_has(const struct op_namer *n, const char *base);
/* Splits S into "aten::<base>" and overload by a known base name that S
 * starts with (S == base, or S == base "_" overload): the longest one whose
 * "base.overload" string is also in .rodata, else the longest one. Unknown
 * S: "aten::<S>" and "". */
void op_namer_split(const struct op_namer *n, const char *s,
		    char *name, size_t name_len, char *overload, size_t ov_len);

#endif /* PTBPF_ELFSYM_H */
