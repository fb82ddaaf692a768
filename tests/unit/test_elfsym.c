// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unit test of user/lib/elfsym.c, exitsites.c and opnames.c.
 *
 *   test_elfsym LIBTORCH_CPU_SO
 *
 * Part 1 runs on this test's own executable: hand-written functions (below,
 * in assembly) with known exits, jump tables and probe-site instructions.
 * Part 2 runs on a real libtorch_cpu.so: the op-function set is compared with
 * `nm -D`, exit sites with `objdump -d` on a sample, op names are checked for
 * every op, and statistics on exits and first instructions are printed.
 * Part 3 feeds malformed files to elf_file_open.
 */
#define _GNU_SOURCE
#include <capstone/capstone.h>
#include <errno.h>
#include <fcntl.h>
#include <elf.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/elfsym.h"

static int n_pass, n_fail;

static void __attribute__((format(printf, 4, 5)))
check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	n_fail++;
	fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define CHECK(cond, fmt, ...)                                                        \
	do {                                                                         \
		if (cond)                                                            \
			n_pass++;                                                    \
		else                                                                 \
			check_failed(__FILE__, __LINE__, #cond, fmt, ##__VA_ARGS__); \
	} while (0)
#define CHECK_EQ(a, b) CHECK((long long)(a) == (long long)(b), "%lld != %lld", \
			     (long long)(a), (long long)(b))
#define CHECK_STR(a, b) CHECK(!strcmp((a), (b)), "'%s' != '%s'", (a), (b))

/* ---- Part 1: hand-written functions in this executable ------------------ */

__asm__(
	".text\n"
	".globl t_callee\n.type t_callee,@function\n"
	"t_callee: ret\n.size t_callee, .-t_callee\n"

	/* Three kinds of ret and every prologue instruction class. */
	".globl t_rets\n.type t_rets,@function\n"
	"t_rets:\n"
	"t_endbr: endbr64\n"
	"t_push: push %rbp\n"
	"t_push_r12: push %r12\n"
	"t_mov: mov %rsp,%rbp\n"
	"t_nop1: nop\n"
	"t_nop5: .byte 0x0f,0x1f,0x44,0x00,0x00\n"
	"t_nop66: .byte 0x66,0x90\n"
	"t_csnop: .byte 0x66,0x2e,0x0f,0x1f,0x84,0x00,0x00,0x00,0x00,0x00\n"
	"t_call: call t_callee\n"
	"t_lock: lock incl (%rdi)\n"
	"t_bndjmp: .byte 0xf2,0xe9,0x00,0x00,0x00,0x00\n"
	"t_call66: .byte 0x66,0xe8,0x00,0x00\n"
	"  test %edi,%edi; je 1f; pop %r12; pop %rbp\n"
	"t_ret_plain: ret\n"
	"1: pop %r12; pop %rbp\n"
	"t_ret_rep: repz ret\n"
	"t_ret_imm: ret $8\n"
	".size t_rets, .-t_rets\n"

	/* Tail calls: direct, conditional, through a register and memory, self. */
	".globl t_tails\n.type t_tails,@function\n"
	"t_tails: test %edi,%edi\n"
	"t_tail_jcc: jne t_callee\n"
	"  cmp $1,%edi; je 2f; cmp $2,%edi; je 3f; cmp $3,%edi\n"
	"t_tail_self: je t_tails\n"
	"t_tail_jmp: jmp t_callee\n"
	"2: mov (%rsi),%rax\n"
	"t_tail_reg: jmp *%rax\n"
	"t_tail_notrack: .byte 0x3e,0xff,0xe0\n"
	"3:\nt_tail_mem: jmp *8(%rsi)\n"
	".size t_tails, .-t_tails\n"

	/* A PIC switch (GCC shape, notrack) and an indexed memory table. */
	".globl t_switch\n.type t_switch,@function\n"
	"t_switch: lea t_jtab(%rip),%rdx; movslq (%rdx,%rdi,4),%rax; add %rdx,%rax\n"
	"  notrack jmp *%rax\n"
	"4: mov $1,%eax\n"
	"t_sw_ret1: ret\n"
	"5: jmp *(%rdx,%rdi,8); xor %eax,%eax\n"
	"t_sw_ret2: ret\n"
	".size t_switch, .-t_switch\n"

	/* With CFI: a jump to a cold part keeps the frame and is no exit. */
	".globl t_cfi\n.type t_cfi,@function\n"
	"t_cfi: .cfi_startproc\n"
	"  push %rbx; .cfi_def_cfa_offset 16; .cfi_offset %rbx, -16\n"
	"  test %edi,%edi; jne t_cfi_cold; pop %rbx; .cfi_def_cfa_offset 8\n"
	"t_cfi_tail: jmp t_callee\n"
	"  .cfi_endproc\n.size t_cfi, .-t_cfi\n"
	"t_cfi_cold: .cfi_startproc; .cfi_def_cfa_offset 16\n"
	"  call t_callee; pop %rbx; .cfi_def_cfa_offset 8; ret; .cfi_endproc\n"

	/* push %es is invalid in 64-bit mode: the body cannot be decoded. */
	".globl t_bad\n.type t_bad,@function\n"
	"t_bad: push %rbp\n .byte 0x06\n pop %rbp\n ret\n"
	".size t_bad, .-t_bad\n"

	".section .rodata\n.balign 4\n"
	"t_jtab: .long 4b-t_jtab, 5b-t_jtab\n"
	".text\n");

extern const char t_rets[], t_endbr[], t_push[], t_push_r12[], t_mov[], t_nop1[],
	t_nop5[], t_nop66[], t_csnop[], t_call[], t_lock[], t_bndjmp[], t_call66[],
	t_ret_plain[], t_ret_rep[], t_ret_imm[];
extern const char t_tails[], t_tail_jcc[], t_tail_self[], t_tail_jmp[], t_tail_reg[],
	t_tail_notrack[], t_tail_mem[];
extern const char t_switch[], t_sw_ret1[], t_sw_ret2[], t_cfi[], t_cfi_tail[];

/* Runtime label address -> file offset, through the function's symbol. */
static uint64_t label_off(const struct elf_func *f, const char *func, const char *label)
{
	return f->file_off + (uint64_t)(label - func);
}

static void check_sites(struct elf_file *ef, const char *fname, const char *func,
			const char *const *labels, const enum exit_kind *kinds, int n)
{
	struct exit_site sites[16];
	struct elf_func f;
	int got, i;

	CHECK_EQ(elf_file_find_func(ef, fname, &f), 0);
	got = func_exit_sites(ef, &f, sites, 16);
	CHECK(got == n, "%s: %d exit sites, want %d", fname, got, n);
	for (i = 0; i < n && i < got; i++) {
		CHECK(sites[i].file_off == label_off(&f, func, labels[i]),
		      "%s site %d at %#llx", fname, i, (unsigned long long)sites[i].file_off);
		CHECK(sites[i].kind == kinds[i], "%s site %d kind %d, want %d", fname, i,
		      sites[i].kind, kinds[i]);
	}
}

static void test_own_classes(struct elf_file *ef)
{
	static const struct {
		const char *label, *what;
		enum uprobe_insn_class want;
	} cases[] = {
		{ t_endbr, "endbr64", UPROBE_INSN_SSTEP },
		{ t_push, "push %rbp", UPROBE_INSN_EMULATED },
		{ t_push_r12, "push %r12", UPROBE_INSN_EMULATED },
		{ t_mov, "mov %rsp,%rbp", UPROBE_INSN_SSTEP },
		{ t_nop1, "nop", UPROBE_INSN_EMULATED },
		{ t_nop5, "nopl 5", UPROBE_INSN_EMULATED_NEW },
		{ t_nop66, "66 90", UPROBE_INSN_EMULATED_NEW },
		{ t_csnop, "cs nopw", UPROBE_INSN_REFUSED },
		{ t_call, "call rel32", UPROBE_INSN_EMULATED },
		{ t_lock, "lock incl", UPROBE_INSN_REFUSED },
		{ t_bndjmp, "bnd jmp", UPROBE_INSN_EMULATED },
		{ t_call66, "callw", UPROBE_INSN_REFUSED },
		{ t_ret_plain, "ret", UPROBE_INSN_SSTEP },
	};
	enum uprobe_insn_class got;
	struct elf_func f;
	size_t i;

	CHECK_EQ(elf_file_find_func(ef, "t_rets", &f), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		got = insn_uprobe_class(ef, label_off(&f, t_rets, cases[i].label));
		CHECK(got == cases[i].want, "%s: class %d, want %d", cases[i].what, got,
		      cases[i].want);
	}
	CHECK_EQ(insn_is_emulated(ef, label_off(&f, t_rets, t_push)), 1);
	CHECK_EQ(insn_is_emulated(ef, label_off(&f, t_rets, t_endbr)), 0);
	CHECK_EQ(insn_uprobe_class(ef, elf_file_size(ef)), UPROBE_INSN_REFUSED);
}

static void test_own_exe(void)
{
	static const char *const ret_labels[] = { t_ret_plain, t_ret_rep, t_ret_imm };
	static const enum exit_kind ret_kinds[] = { EXIT_RET, EXIT_RET, EXIT_RET };
	static const char *const tail_labels[] = { t_tail_jcc, t_tail_self, t_tail_jmp,
						   t_tail_reg, t_tail_notrack, t_tail_mem };
	static const enum exit_kind tail_kinds[] = { EXIT_TAILJCC, EXIT_TAILJCC, EXIT_TAILJMP,
						     EXIT_TAILJMP, EXIT_TAILJMP, EXIT_TAILJMP };
	static const char *const sw_labels[] = { t_sw_ret1, t_sw_ret2 };
	static const enum exit_kind sw_kinds[] = { EXIT_RET, EXIT_RET };
	static const char *const cfi_labels[] = { t_cfi_tail };
	static const enum exit_kind cfi_kinds[] = { EXIT_TAILJMP };
	char err[256] = "";
	struct elf_file *ef;
	struct elf_func f;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "open /proc/self/exe: %s", strerror(errno));
	ef = elf_file_open(fd, err, sizeof(err));
	close(fd);
	CHECK(ef != NULL, "elf_file_open(self): %s", err);
	if (!ef)
		return;
	check_sites(ef, "t_rets", t_rets, ret_labels, ret_kinds, 3);
	check_sites(ef, "t_tails", t_tails, tail_labels, tail_kinds, 6);
	check_sites(ef, "t_switch", t_switch, sw_labels, sw_kinds, 2);
	check_sites(ef, "t_cfi", t_cfi, cfi_labels, cfi_kinds, 1);
	CHECK_EQ(elf_file_find_func(ef, "t_bad", &f), 0);
	CHECK_EQ(func_exit_sites(ef, &f, NULL, 0), -EILSEQ);
	CHECK_EQ(elf_file_find_func(ef, "t_rets", &f), 0);
	CHECK_EQ(func_exit_sites(ef, &f, NULL, 0), 3);	/* count without storage */
	CHECK_EQ(elf_file_find_func(ef, "no_such_function", &f), -ENOENT);
	CHECK_EQ(elf_file_vaddr_to_off(ef, f.addr), f.file_off);
	CHECK(elf_file_bytes(ef, elf_file_size(ef) - 1, 2) == NULL, "bytes past EOF");
	CHECK(elf_file_bytes(ef, UINT64_MAX, 2) == NULL, "bytes at UINT64_MAX");
	test_own_classes(ef);
	elf_file_close(ef);
}

static void test_struct_name(void)
{
	static const char *const cases[][2] = {	/* mangled, S or NULL for -EINVAL */
		{ "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE", "add_Tensor" },
		{ "_ZN2at4_ops5addmm4callERKNS_6TensorE", "addmm" },
		{ "_ZN2at4_ops5addmm10redispatchEN3c1014DispatchKeySetE", NULL },
		{ "_ZN2at4_ops05addmm4callE", NULL },
		{ "_ZN2at4_ops9addmm4callE", NULL },
		{ "_ZN2at4_ops99999999999999999999addmm", NULL },
		{ "_ZN2at6native5addmm4callE", NULL },
	};
	char buf[64];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_EQ(op_struct_name(cases[i][0], buf, sizeof(buf)), cases[i][1] ? 0 : -EINVAL);
		if (cases[i][1])
			CHECK_STR(buf, cases[i][1]);
	}
	CHECK_EQ(op_struct_name("_ZN2at4_ops5addmm4callE", buf, 5), -EINVAL);
}

/* ---- Part 2: libtorch_cpu.so ---------------------------------------------- */

struct op_list {
	struct elf_func *v;
	size_t n, cap;
	struct elf_file *ef;
	size_t all_funcs, all_undecodable, all_ret, all_tail;
};

static int collect_ops_cb(const struct elf_func *f, void *ctx)
{
	struct op_list *ol = ctx;
	char s[256];

	struct exit_site sites[64];
	int i, n = func_exit_sites(ol->ef, f, sites, 64);

	ol->all_funcs++;
	ol->all_undecodable += n < 0;
	for (i = 0; i < n && i < 64; i++) {
		ol->all_ret += sites[i].kind == EXIT_RET;
		ol->all_tail += sites[i].kind != EXIT_RET;
	}
	if (op_struct_name(f->name, s, sizeof(s)))
		return 0;
	if (ol->n == ol->cap) {
		ol->cap = ol->cap ? ol->cap * 2 : 1024;
		ol->v = realloc(ol->v, ol->cap * sizeof(*ol->v));
		if (!ol->v)
			return -ENOMEM;
	}
	ol->v[ol->n++] = *f;
	return 0;
}

/* Runs "cmd 'path'" (the test's own tools; the tracer itself never shells out). */
static FILE *popen_path(const char *cmd, const char *path)
{
	char line[4096];

	if (strchr(path, '\''))
		return NULL;
	snprintf(line, sizeof(line), "%s '%s'", cmd, path);
	return popen(line, "r");
}

/* Every `_ZN2at4_ops*4callE*` symbol nm lists must be found, at nm's address. */
static void test_nm_ops(struct elf_file *ef, const char *path, const struct op_list *ol)
{
	FILE *p = popen_path("nm -D --defined-only", path);
	char line[4096], name[4000], type;
	unsigned long long addr;
	size_t nm_ops = 0, missing = 0;
	struct elf_func f;

	CHECK(p != NULL, "popen nm");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p)) {
		if (sscanf(line, "%llx %c %3999s", &addr, &type, name) != 3 ||
		    fnmatch("_ZN2at4_ops*4callE*", name, 0))
			continue;
		nm_ops++;
		if (elf_file_find_func(ef, name, &f) || f.addr != addr) {
			if (missing++ < 5)
				fprintf(stderr, "nm op not found: %s\n", name);
		}
	}
	pclose(p);
	printf("stat: nm -D lists %zu op call functions; elfsym finds %zu\n", nm_ops, ol->n);
	printf("stat: all %zu functions: %zu not linearly decodable; %zu ret and %zu tail "
	       "exit sites in the first 64 of each\n", ol->all_funcs, ol->all_undecodable,
	       ol->all_ret, ol->all_tail);
	CHECK(nm_ops > 0, "nm found no ops");
	CHECK_EQ(ol->n, nm_ops);
	CHECK_EQ(missing, 0);
}

static void test_split_examples(const struct op_namer *nm)
{
	static const char *const cases[][3] = {
		{ "add_Tensor", "aten::add", "Tensor" },
		{ "add__Tensor", "aten::add_", "Tensor" },
		{ "addmm", "aten::addmm", "" },
		{ "addmm_out", "aten::addmm", "out" },
		{ "__and___Tensor", "aten::__and__", "Tensor" },
		{ "scatter_reduce", "aten::scatter", "reduce" },
		{ "scatter_reduce_out", "aten::scatter", "reduce_out" },
		{ "scatter_reduce_two", "aten::scatter_reduce", "two" },
		{ "no_such_op_xyz", "aten::no_such_op_xyz", "" },
	};
	char name[300], ov[300];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		op_namer_split(nm, cases[i][0], name, sizeof(name), ov, sizeof(ov));
		CHECK_STR(name, cases[i][1]);
		CHECK_STR(ov, cases[i][2]);
	}
}

/* Every op: the base is a known "aten::" name, and base[_overload] == S. */
static void test_split_all(const struct op_namer *nm, const struct op_list *ol)
{
	char s[256], name[300], ov[300], back[600];
	size_t i, bad_base = 0, bad_back = 0, with_ov = 0;

	for (i = 0; i < ol->n; i++) {
		op_struct_name(ol->v[i].name, s, sizeof(s));
		op_namer_split(nm, s, name, sizeof(name), ov, sizeof(ov));
		snprintf(back, sizeof(back), "%s%s%s", name + 6, *ov ? "_" : "", ov);
		if (strncmp(name, "aten::", 6) || !op_namer_has(nm, name + 6)) {
			if (bad_base++ < 10)
				fprintf(stderr, "op %s: base %s not an aten:: string\n", s, name);
		}
		bad_back += strcmp(back, s) != 0;
		with_ov += *ov != '\0';
	}
	printf("stat: %zu aten:: base names in .rodata; %zu of %zu ops have an overload; "
	       "%zu fall back to the whole struct name\n", op_namer_count(nm), with_ov, ol->n,
	       bad_base);
	CHECK_EQ(bad_base, 0);
	CHECK_EQ(bad_back, 0);
	CHECK(!op_namer_has(nm, "no_such_op_xyz") && op_namer_has(nm, "addmm"), "op_namer_has");
}

/* Linear decode of one function, for boundaries and neighbouring instructions. */
struct decoded {
	cs_insn *insn;
	size_t n;
};

static int decode_func(csh h, struct elf_file *ef, const struct elf_func *f,
		       struct decoded *d)
{
	const uint8_t *code = elf_file_bytes(ef, f->file_off, f->size);

	d->insn = NULL;
	d->n = code ? cs_disasm(h, code, f->size, f->addr, 0, &d->insn) : 0;
	if (!d->n)
		return -EILSEQ;
	return d->insn[d->n - 1].address + d->insn[d->n - 1].size == f->addr + f->size ?
		       0 : -EILSEQ;
}

static long find_insn(const struct decoded *d, uint64_t addr)
{
	size_t k;

	for (k = 0; k < d->n; k++)
		if (d->insn[k].address == addr)
			return (long)k;
	return -1;
}

/* A small counted histogram of string keys. */
#define HIST_KEYS 64

struct hist {
	char key[HIST_KEYS][64];
	size_t cnt[HIST_KEYS];
	size_t n, other;
};

static void hist_add(struct hist *h, const char *key)
{
	size_t i;

	for (i = 0; i < h->n; i++)
		if (!strcmp(h->key[i], key))
			break;
	if (i == h->n) {
		if (h->n == HIST_KEYS) {
			h->other++;
			return;
		}
		snprintf(h->key[h->n++], sizeof(h->key[0]), "%s", key);
	}
	h->cnt[i]++;
}

static void hist_print(const struct hist *h, const char *title)
{
	bool done[HIST_KEYS] = { false };
	size_t k, i, best;

	printf("stat: %s:%s\n", title, h->n ? "" : " none");
	for (k = 0; k < h->n; k++) {
		best = HIST_KEYS;
		for (i = 0; i < h->n; i++)
			if (!done[i] && (best == HIST_KEYS || h->cnt[i] > h->cnt[best]))
				best = i;
		done[best] = true;
		printf("stat:   %6zu  %s\n", h->cnt[best], h->key[best]);
	}
	if (h->other)
		printf("stat:   %6zu  (other keys)\n", h->other);
}

static const char *class_name(enum uprobe_insn_class c)
{
	static const char *const names[] = { "refused", "single-stepped", "emulated>=6.16",
					      "emulated" };

	return (unsigned int)c < 4 ? names[c] : "?";
}

/* "pop rbp", "leave", "add rsp", "lea rsp" or the bare mnemonic. */
static void insn_kind(const cs_insn *in, char *out, size_t len)
{
	if (!strcmp(in->mnemonic, "pop") || !strncmp(in->op_str, "rsp,", 4))
		snprintf(out, len, "%s %.3s", in->mnemonic, in->op_str);
	else
		snprintf(out, len, "%s", in->mnemonic);
}

struct exit_stats {
	size_t funcs, undecodable, ret0, ret1, ret2, with_tail, with_jcc, sites, off_boundary;
	size_t jumps_out;	/* direct jmp/jcc leaving the function, exits or not */
	size_t tail_direct;	/* tail sites among jumps_out */
	struct hist before_ret, before_tail, first, second, site_class;
};

/* One op function's exit sites, checked against the test's own decode. */
static void exit_stats_add(struct exit_stats *st, csh h, struct elf_file *ef,
			   const struct elf_func *f, struct decoded *d)
{
	struct exit_site sites[256];
	int n = func_exit_sites(ef, f, sites, 256), i, nret = 0, ntail = 0, njcc = 0;
	char key[256];
	size_t k;
	long at;

	st->funcs++;
	if (n < 0 || decode_func(h, ef, f, d)) {
		st->undecodable++;
		return;
	}
	snprintf(key, sizeof(key), "%s %s [%s]", d->insn[0].mnemonic, d->insn[0].op_str,
		 class_name(insn_uprobe_class(ef, f->file_off)));
	hist_add(&st->first, key);
	if (d->n > 1 && d->insn[0].id == X86_INS_ENDBR64) {
		snprintf(key, sizeof(key), "%s %s [%s]", d->insn[1].mnemonic, d->insn[1].op_str,
			 class_name(insn_uprobe_class(ef, f->file_off + d->insn[0].size)));
		hist_add(&st->second, key);
	}
	for (k = 0; k < d->n; k++) {
		const cs_x86_op *op = &d->insn[k].detail->x86.operands[0];

		st->jumps_out += d->insn[k].id >= X86_INS_JAE && d->insn[k].id <= X86_INS_JS &&
				 d->insn[k].detail->x86.op_count == 1 && op->type == X86_OP_IMM &&
				 ((uint64_t)op->imm < f->addr || (uint64_t)op->imm >= f->addr + f->size);
	}
	for (i = 0; i < n && i < 256; i++) {
		at = find_insn(d, f->addr + (sites[i].file_off - f->file_off));
		st->sites++;
		if (at < 0) {
			st->off_boundary++;
			continue;
		}
		nret += sites[i].kind == EXIT_RET;
		st->tail_direct += sites[i].kind != EXIT_RET &&
				   d->insn[at].detail->x86.operands[0].type == X86_OP_IMM;
		ntail += sites[i].kind == EXIT_TAILJMP;
		njcc += sites[i].kind == EXIT_TAILJCC;
		snprintf(key, sizeof(key), "%s: %s", sites[i].kind == EXIT_RET ? "ret" :
			 sites[i].kind == EXIT_TAILJMP ? "tail jmp" : "tail jcc",
			 class_name(insn_uprobe_class(ef, sites[i].file_off)));
		hist_add(&st->site_class, key);
		if (at)
			insn_kind(&d->insn[at - 1], key, sizeof(key));
		else
			snprintf(key, sizeof(key), "(function start)");
		hist_add(sites[i].kind == EXIT_RET ? &st->before_ret : &st->before_tail, key);
	}
	st->ret0 += nret == 0;
	st->ret1 += nret == 1;
	st->ret2 += nret >= 2;
	st->with_tail += ntail > 0;
	st->with_jcc += njcc > 0;
}

static void exit_stats_print(const struct exit_stats *st)
{
	printf("stat: %zu op functions: %zu undecodable; ret sites: %zu with 0, %zu with 1, "
	       "%zu with 2+; %zu with a tail jmp, %zu with a conditional tail jcc; "
	       "%zu exit sites; %zu direct jumps leave a function, %zu of them with the "
	       "frame set up (to .cold parts: no exit)\n", st->funcs, st->undecodable, st->ret0,
	       st->ret1, st->ret2, st->with_tail, st->with_jcc, st->sites, st->jumps_out,
	       st->jumps_out - st->tail_direct);
	hist_print(&st->first, "first instruction of op functions [uprobe handling]");
	hist_print(&st->second, "instruction after a leading endbr64");
	hist_print(&st->before_ret, "instruction before each ret site");
	hist_print(&st->before_tail, "instruction before each tail jmp/jcc site");
	hist_print(&st->site_class, "uprobe handling of exit-site instructions");
}

/* objdump's instruction addresses and text in [f->addr, f->addr + f->size). */
static size_t objdump_func(const char *path, const struct elf_func *f, uint64_t *addrs,
			   char (*text)[64], size_t max)
{
	char cmd[256], line[4096];
	unsigned long long a;
	size_t n = 0;
	int pos;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "objdump -d -w --no-show-raw-insn --start-address=%#llx "
		 "--stop-address=%#llx", (unsigned long long)f->addr,
		 (unsigned long long)(f->addr + f->size));
	p = popen_path(cmd, path);
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p)) {
		pos = 0;
		if (sscanf(line, " %llx:\t%n", &a, &pos) != 1 || !pos || n == max)
			continue;
		addrs[n] = a;
		snprintf(text[n], sizeof(text[0]), "%s", line + pos);
		n++;
	}
	pclose(p);
	return n;
}

/* The mnemonic objdump prints, after notrack/bnd/repz/data16 prefixes. */
static const char *objdump_mnemonic(const char *t)
{
	static const char *const pfx[] = { "notrack ", "bnd ", "repz ", "rep ", "data16 ", "cs " };
	size_t i;

	for (i = 0; i < sizeof(pfx) / sizeof(pfx[0]); i++)
		if (!strncmp(t, pfx[i], strlen(pfx[i])))
			return objdump_mnemonic(t + strlen(pfx[i]));
	return t;
}

/* Decoder agreement and exit sites of one function against objdump. */
static size_t objdump_check(struct elf_file *ef, const char *path, csh h,
			    const struct elf_func *f, uint64_t *addrs, char (*text)[64])
{
	struct exit_site sites[256];
	struct decoded d;
	size_t n = objdump_func(path, f, addrs, text, 65536), i, ndret = 0, nret = 0;
	int ns = func_exit_sites(ef, f, sites, 256), k;
	bool same = true;

	if (decode_func(h, ef, f, &d) || ns < 0) {
		CHECK(false, "%s does not decode", f->name);
		cs_free(d.insn, d.n);
		return 0;
	}
	for (i = 0; i < n && i < d.n; i++)
		same &= addrs[i] == d.insn[i].address;
	CHECK(same && n == d.n, "%s: objdump %zu insns, capstone %zu", f->name, n, d.n);
	for (i = 0; i < n; i++)
		ndret += !strncmp(objdump_mnemonic(text[i]), "ret", 3);
	for (k = 0; k < ns && k < 256; k++) {
		uint64_t a = f->addr + (sites[k].file_off - f->file_off);
		const char *m = NULL;

		for (i = 0; i < n; i++)
			if (addrs[i] == a)
				m = objdump_mnemonic(text[i]);
		CHECK(m != NULL, "%s: site %#llx not an objdump boundary", f->name,
		      (unsigned long long)a);
		if (!m)
			continue;
		nret += sites[k].kind == EXIT_RET;
		CHECK(sites[k].kind == EXIT_RET ? !strncmp(m, "ret", 3) :
		      sites[k].kind == EXIT_TAILJMP ? !strncmp(m, "jmp", 3) : m[0] == 'j',
		      "%s: site kind %d on '%s'", f->name, sites[k].kind, m);
	}
	CHECK(nret == ndret, "%s: %zu ret sites, objdump shows %zu rets", f->name, nret, ndret);
	cs_free(d.insn, d.n);
	return n;
}

static void test_exits(struct elf_file *ef, const char *path, const struct op_list *ol)
{
	static struct exit_stats st;
	static uint64_t addrs[65536];
	static char text[65536][64];
	struct decoded d;
	size_t i, step = ol->n / 40 ? ol->n / 40 : 1, checked = 0, insns = 0;
	csh h;

	CHECK(cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK, "cs_open");
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	for (i = 0; i < ol->n; i++) {
		d.insn = NULL;
		d.n = 0;
		exit_stats_add(&st, h, ef, &ol->v[i], &d);
		cs_free(d.insn, d.n);
	}
	CHECK_EQ(st.off_boundary, 0);
	CHECK_EQ(st.undecodable, 0);
	exit_stats_print(&st);
	for (i = 0; i < ol->n; i += step, checked++)
		insns += objdump_check(ef, path, h, &ol->v[i], addrs, text);
	printf("stat: objdump cross-check: %zu functions, %zu instructions\n", checked, insns);
	cs_close(&h);
}

/* elf_file_find_func_prefix searched (a file opened without an index)
 * against the index's answer, for prefixes of every 61st exported function
 * of a real library, cut at several lengths. */
struct prefix_ctx {
	struct elf_file *idx, *bare;
	size_t i, checked;
};

static int prefix_cb(const struct elf_func *f, void *ctx)
{
	struct prefix_ctx *c = ctx;
	struct elf_func a, b;
	char prefix[256];
	size_t len = strlen(f->name), cut = c->i % 7;
	int ra, rb;

	if (c->i++ % 61 || len >= sizeof(prefix))
		return 0;
	snprintf(prefix, sizeof(prefix), "%.*s", (int)(len > 12 ? len - cut : len), f->name);
	ra = elf_file_find_func_prefix(c->idx, prefix, &a);
	rb = elf_file_find_func_prefix(c->bare, prefix, &b);
	CHECK(ra == 0 && rb == 0, "'%s': index %d, search %d", prefix, ra, rb);
	if (!ra && !rb) {
		CHECK(!strcmp(a.name, b.name) && a.file_off == b.file_off && a.size == b.size,
		      "'%s': index %s at %#llx, search %s at %#llx", prefix, a.name,
		      (unsigned long long)a.file_off, b.name, (unsigned long long)b.file_off);
		c->checked++;
	}
	return 0;
}

static void test_prefix_search(const char *path)
{
	char err[256] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct prefix_ctx c = { .idx = elf_file_open_exported(fd, err, sizeof(err)),
				.bare = elf_file_open_sections(fd, err, sizeof(err)) };
	struct elf_func f;

	close(fd);
	CHECK(c.idx && c.bare, "open %s: %s", path, err);
	if (c.idx && c.bare) {
		CHECK_EQ(elf_file_for_each_func(c.idx, prefix_cb, &c), 0);
		CHECK(c.checked > 100, "only %zu prefixes checked", c.checked);
		CHECK_EQ(elf_file_find_func_prefix(c.bare, "_ZN_no_such_prefix_", &f), -ENOENT);
		printf("stat: prefix search: %zu prefixes, the same function as the index's\n",
		       c.checked);
	}
	elf_file_close(c.idx);
	elf_file_close(c.bare);
}

static void test_libtorch(const char *path)
{
	struct op_list ol = { 0 };
	struct op_namer *nm;
	struct elf_file *ef;
	char err[256] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	if (fd < 0)
		return;
	ef = elf_file_open(fd, err, sizeof(err));
	close(fd);
	CHECK(ef != NULL, "elf_file_open(%s): %s", path, err);
	if (!ef)
		return;
	ol.ef = ef;
	CHECK_EQ(elf_file_for_each_func(ef, collect_ops_cb, &ol), 0);
	test_nm_ops(ef, path, &ol);
	nm = op_namer_new(ef);
	CHECK(nm != NULL, "op_namer_new");
	if (nm) {
		test_split_examples(nm);
		test_split_all(nm, &ol);
		op_namer_free(nm);
	}
	test_exits(ef, path, &ol);
	free(ol.v);
	elf_file_close(ef);
	test_prefix_search(path);
}

/* ---- Part 3: malformed files ---------------------------------------------- */

/* elf_file_open on the given bytes must fail with a reason. */
static void expect_refused(const void *buf, size_t len, const char *what)
{
	char path[] = "/tmp/test_elfsym.XXXXXX", err[256] = "";
	struct elf_file *ef;
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	if (fd < 0)
		return;
	unlink(path);
	CHECK(write(fd, buf, len) == (ssize_t)len, "write %s", what);
	ef = elf_file_open(fd, err, sizeof(err));
	CHECK(ef == NULL, "%s was accepted", what);
	CHECK(err[0] != '\0', "%s: no reason given", what);
	if (ef)
		elf_file_close(ef);
	else
		printf("info: %s refused: %s\n", what, err);
	close(fd);
}

/* A private copy of this executable's bytes. */
static uint8_t *read_self(size_t *len)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	struct elf_file *ef = elf_file_open(fd, NULL, 0);
	uint8_t *buf = NULL;

	close(fd);
	if (!ef)
		return NULL;
	*len = (size_t)elf_file_size(ef);
	buf = malloc(*len);
	if (buf)
		memcpy(buf, elf_file_bytes(ef, 0, *len), *len);
	elf_file_close(ef);
	return buf;
}

/* The copy's .symtab section header, or NULL. */
static Elf64_Shdr *self_symtab(uint8_t *img, size_t len)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	size_t i;

	if (eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len)
		return NULL;
	for (i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr *sh = (Elf64_Shdr *)(img + eh->e_shoff) + i;

		if (sh->sh_type == SHT_SYMTAB)
			return sh;
	}
	return NULL;
}

static void test_malformed(void)
{
	struct { Elf64_Ehdr eh; Elf64_Shdr sh0; } hdr;
	char dir_err[256] = "", garbage[100];
	size_t len = 0;
	uint8_t *img = read_self(&len);
	Elf64_Shdr *symtab;
	int dfd;

	expect_refused("", 0, "empty file");
	memset(garbage, 'x', sizeof(garbage));
	expect_refused(garbage, sizeof(garbage), "garbage");
	CHECK(img != NULL && len > 8192, "read /proc/self/exe");
	if (!img)
		return;
	expect_refused(img, 8192, "truncated ELF");
	memset(&hdr, 0, sizeof(hdr));
	memcpy(&hdr.eh, img, sizeof(hdr.eh));
	hdr.eh.e_phnum = 0;
	hdr.eh.e_shoff = sizeof(hdr.eh);
	hdr.eh.e_shnum = 0;
	hdr.sh0.sh_size = 70000;	/* real count in section 0: too many */
	expect_refused(&hdr, sizeof(hdr), "70000 sections");
	hdr.eh.e_shoff = 1ULL << 40;
	expect_refused(&hdr, sizeof(hdr), "section headers past EOF");
	symtab = self_symtab(img, len);
	CHECK(symtab != NULL, "own .symtab");
	if (symtab) {
		symtab->sh_size = (len / sizeof(Elf64_Sym) + 1) * sizeof(Elf64_Sym);
		expect_refused(img, len, "symbol table larger than the file");
		symtab->sh_size = sizeof(Elf64_Sym);
		symtab->sh_entsize = 7;
		expect_refused(img, len, "symbol entry size 7");
	}
	free(img);
	dfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(elf_file_open(dfd, dir_err, sizeof(dir_err)) == NULL, "directory accepted");
	close(dfd);
}

/* elf_file_find_containing (two chunked passes: names, then name offsets)
 * against a plain walk of this executable's .symtab with strstr: the file
 * offset of the first defined FUNC symbol in table order whose name holds
 * the needle (at: 0), or of one at file offset at; 0 if there is none. */
static uint64_t symtab_walk_find(const uint8_t *img, size_t len, struct elf_file *ef,
				 const char *needle, uint64_t at)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);

	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *str = &sh[sh[i].sh_link];
		const Elf64_Sym *syms = (const Elf64_Sym *)(img + sh[i].sh_offset);

		if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_offset + sh[i].sh_size > len)
			continue;
		for (size_t k = 1; k < sh[i].sh_size / sizeof(*syms); k++) {
			const char *name = (const char *)img + str->sh_offset + syms[k].st_name;
			uint64_t off;

			if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC ||
			    syms[k].st_shndx == SHN_UNDEF || syms[k].st_shndx == SHN_ABS ||
			    !strstr(name, needle))
				continue;
			off = elf_file_vaddr_to_off(ef, syms[k].st_value);
			if (!at || off == at)
				return off;
		}
	}
	return 0;
}

static void test_symtab_search(void)
{
	static const char *const needles[] = { "t_callee", "allee", "check_failed", "test_own_",
						"main", "elf_file_find_contain", "_fini",
						"no_such_name_anywhere", "e" };
	const int n = sizeof(needles) / sizeof(needles[0]);
	uint64_t off[sizeof(needles) / sizeof(needles[0])];
	char err[256] = "";
	struct elf_func f;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	off_t len = lseek(fd, 0, SEEK_END);
	uint8_t *img = malloc(len);
	struct elf_file *ef;

	CHECK(img && pread(fd, img, len, 0) == len, "reading own executable");
	ef = elf_file_open_sections(fd, err, sizeof(err));
	CHECK(ef != NULL, "open_sections: %s", err);
	if (ef && img) {
		CHECK(elf_file_find_func(ef, "main", &f) != 0, "open_sections indexed functions");
		CHECK_EQ(elf_file_find_containing(ef, needles, n, off), 0);
		for (int i = 0; i < n; i++) {
			uint64_t want = symtab_walk_find(img, len, ef, needles[i], 0);

			/* "e" is in more names than the search considers (64, in
			 * string table order): any function holding it will do. */
			if (!strcmp(needles[i], "e"))
				CHECK(off[i] && symtab_walk_find(img, len, ef, "e", off[i]) == off[i],
				      "'e': %#llx is no function holding it", (unsigned long long)off[i]);
			else
				CHECK(off[i] == want, "'%s': %#llx, the walk found %#llx", needles[i],
				      (unsigned long long)off[i], (unsigned long long)want);
			CHECK((off[i] != 0) == (i != 7), "'%s' found: %d", needles[i], off[i] != 0);
		}
	}
	elf_file_close(ef);
	free(img);
	close(fd);
}

int main(int argc, char **argv)
{
	test_struct_name();
	test_symtab_search();
	test_own_exe();
	test_malformed();
	if (argc > 1)
		test_libtorch(argv[1]);
	else
		printf("info: no library given; libtorch checks skipped\n");
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
