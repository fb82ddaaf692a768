// SPDX-License-Identifier: BSD-2-Clause
/*
 * Exit sites of a function (x86-64), and how the kernel handles a uprobe on
 * a given instruction. Both decode with capstone; a probe must sit on the
 * first byte of an instruction, so a function that does not decode cleanly
 * from its first to its last byte yields no sites at all.
 */
#include <capstone/capstone.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "lib/elfsym.h"

#define X86_INSN_MAX 15
#define JT_WINDOW 8	/* instructions looked back for a jump-table load */

static int x86_open(csh *h)
{
	if (cs_open(CS_ARCH_X86, CS_MODE_64, h) != CS_ERR_OK)
		return -ENOMEM;
	if (cs_option(*h, CS_OPT_DETAIL, CS_OPT_ON) != CS_ERR_OK) {
		cs_close(h);
		return -ENOMEM;
	}
	return 0;
}

/* What the jump-table check needs to remember of a recent instruction. */
struct insn_note {
	x86_reg dst;		/* register written (operand 0), or X86_REG_INVALID */
	bool add;		/* add reg, ... */
	bool table_load;	/* movsxd reg, [base + index*4]: a relative table */
};

static struct insn_note note_of(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	struct insn_note n = { .dst = X86_REG_INVALID };

	if (x->op_count >= 1 && x->operands[0].type == X86_OP_REG)
		n.dst = x->operands[0].reg;
	n.add = insn->id == X86_INS_ADD;
	n.table_load = insn->id == X86_INS_MOVSXD && x->op_count == 2 &&
		       x->operands[1].type == X86_OP_MEM &&
		       x->operands[1].mem.index != X86_REG_INVALID &&
		       x->operands[1].mem.scale == 4;
	return n;
}

/*
 * Whether an indirect jmp dispatches through a switch table inside the
 * function rather than tail-calling. The heuristic recognises what GCC and
 * Clang emit for x86-64:
 *   PIC:      lea tbl(%rip),%B; movslq (%B,%I,4),%R; add %B,%R; jmp *%R
 *             (the jmp may carry a notrack prefix)
 *   non-PIC:  jmp *tbl(,%I,8)
 * So: a register jmp counts as a table jump when one of the last JT_WINDOW
 * instructions is a movsxd from [base + index*4] and the jump register was
 * written by it or by an add in that window; a memory jmp counts when the
 * operand is indexed with scale 8. Everything else (jmp *%rax after a
 * vtable load, jmp *GOT(%rip)) is a tail call.
 */
static bool is_table_jump(const cs_insn *insn, const struct insn_note *win, int nwin)
{
	const cs_x86_op *op = &insn->detail->x86.operands[0];
	bool load = false, written = false;
	int i;

	if (op->type == X86_OP_MEM)
		return op->mem.index != X86_REG_INVALID && op->mem.scale == 8;
	if (op->type != X86_OP_REG)
		return false;
	for (i = 0; i < nwin; i++) {
		load |= win[i].table_load;
		if (win[i].dst == op->reg && (win[i].add || win[i].table_load))
			written = true;
	}
	return load && written;
}

/*
 * Call-frame information: the CFA rule at one address, from .eh_frame found
 * through .eh_frame_hdr's search table. Only what GNU toolchains emit is
 * read (version 1 header with a datarel sdata4 table, CIE versions 1 and 3,
 * "z" augmentations); anything else counts as "no information".
 */
#define EH_ENTRY_MAX (1U << 20)	/* bytes in one CIE or FDE */
#define CFA_STACK_MAX 16	/* DW_CFA_remember_state depth */
#define DWARF_X86_64_RSP 7

/* A bounded reader over file bytes that sit at a known virtual address. */
struct rd {
	const uint8_t *p, *end;
	uint64_t vaddr;		/* virtual address of p */
	bool bad;
};

static bool rd_at(struct elf_file *ef, uint64_t vaddr, uint64_t len, struct rd *r)
{
	uint64_t off = elf_file_vaddr_to_off(ef, vaddr);
	const uint8_t *b = off ? elf_file_bytes(ef, off, len) : NULL;

	*r = (struct rd){ .p = b, .end = b ? b + len : NULL, .vaddr = vaddr, .bad = !b };
	return b != NULL;
}

static void rd_skip(struct rd *r, uint64_t n)
{
	if (r->bad || (uint64_t)(r->end - r->p) < n) {
		r->bad = true;
		return;
	}
	r->p += n;
	r->vaddr += n;
}

/* n little-endian bytes, n <= 8. */
static uint64_t rd_fixed(struct rd *r, unsigned int n)
{
	uint64_t v = 0;
	unsigned int i;

	if (r->bad || (uint64_t)(r->end - r->p) < n) {
		r->bad = true;
		return 0;
	}
	for (i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	rd_skip(r, n);
	return v;
}

static uint64_t rd_leb(struct rd *r, bool is_signed)
{
	unsigned int shift = 0;
	uint64_t v = 0;
	uint8_t b;

	do {
		b = (uint8_t)rd_fixed(r, 1);
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while ((b & 0x80) && !r->bad);
	if (is_signed && shift < 64 && (b & 0x40))
		v |= ~0ULL << shift;
	return v;
}

/* A DW_EH_PE_* encoded pointer; pcrel is relative to the field itself. */
static uint64_t rd_encoded(struct rd *r, uint8_t enc, uint64_t datarel)
{
	uint64_t field = r->vaddr, v;

	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c: v = rd_fixed(r, 8); break;
	case 0x01: v = rd_leb(r, false); break;
	case 0x02: v = rd_fixed(r, 2); break;
	case 0x03: v = rd_fixed(r, 4); break;
	case 0x09: v = rd_leb(r, true); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4); break;
	default: r->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case 0x00: return v;
	case 0x10: return v + field;
	case 0x30: return v + datarel;
	default: r->bad = true; return 0;
	}
}

/* The body of the length-prefixed CIE or FDE at vaddr. */
static bool eh_entry_at(struct elf_file *ef, uint64_t vaddr, struct rd *body)
{
	struct rd r;
	uint64_t len;

	if (!rd_at(ef, vaddr, 4, &r))
		return false;
	len = rd_fixed(&r, 4);
	if (len == 0 || len > EH_ENTRY_MAX)	/* also refuses 64-bit lengths */
		return false;
	return rd_at(ef, vaddr + 4, len, body);
}

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	bool has_z;
	struct rd insns;	/* initial instructions */
};

/* Walks a "z" augmentation's data; only R (FDE pointer encoding) is kept. */
static bool cie_aug_parse(struct rd *r, const char *aug, struct cie *c)
{
	uint64_t alen = rd_leb(r, false);
	struct rd a = *r;

	if (r->bad || alen > (uint64_t)(r->end - r->p))
		return false;
	a.end = r->p + alen;
	for (aug++; *aug && !a.bad; aug++) {
		if (*aug == 'R')
			c->fde_enc = (uint8_t)rd_fixed(&a, 1);
		else if (*aug == 'P')
			rd_encoded(&a, (uint8_t)rd_fixed(&a, 1), 0);
		else if (*aug == 'L')
			rd_fixed(&a, 1);
		else if (*aug != 'S' && *aug != 'B' && *aug != 'G')
			break;	/* unknown: the rest is skipped by length */
	}
	rd_skip(r, alen);
	return !a.bad;
}

static bool cie_parse(struct elf_file *ef, uint64_t vaddr, struct cie *c)
{
	char aug[8];
	size_t n = 0;
	struct rd r;
	uint8_t ver;

	if (!eh_entry_at(ef, vaddr, &r) || rd_fixed(&r, 4) != 0)
		return false;
	ver = (uint8_t)rd_fixed(&r, 1);
	do {
		if (n == sizeof(aug))
			return false;
		aug[n] = (char)rd_fixed(&r, 1);
	} while (aug[n++] && !r.bad);
	c->code_align = rd_leb(&r, false);
	c->data_align = (int64_t)rd_leb(&r, true);
	if (ver == 1)
		rd_fixed(&r, 1);
	else
		rd_leb(&r, false);
	c->fde_enc = 0;
	c->has_z = aug[0] == 'z';
	if ((ver != 1 && ver != 3) || r.bad || c->code_align > 0xffff ||
	    c->data_align > 0xffff || c->data_align < -0xffff ||
	    (c->has_z ? !cie_aug_parse(&r, aug, c) : aug[0] != '\0'))
		return false;
	c->insns = r;
	return true;
}

/* The FDE whose search-table entry is the last one at or below pc. */
static bool fde_find(struct elf_file *ef, uint64_t pc, uint64_t *fde)
{
	uint64_t hv, hsz, count, lo = 0, hi;
	uint8_t ver, ptr_enc, cnt_enc, tab_enc;
	struct rd r, e;

	if (elf_file_eh_frame_hdr(ef, &hv, &hsz) || !rd_at(ef, hv, hsz, &r))
		return false;
	ver = (uint8_t)rd_fixed(&r, 1);
	ptr_enc = (uint8_t)rd_fixed(&r, 1);
	cnt_enc = (uint8_t)rd_fixed(&r, 1);
	tab_enc = (uint8_t)rd_fixed(&r, 1);
	rd_encoded(&r, ptr_enc, hv);
	count = rd_encoded(&r, cnt_enc, hv);
	if (r.bad || ver != 1 || tab_enc != 0x3b || count > (uint64_t)(r.end - r.p) / 8)
		return false;
	hi = count;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		e = r;
		rd_skip(&e, mid * 8);
		if (hv + (uint64_t)(int64_t)(int32_t)rd_fixed(&e, 4) <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	e = r;
	rd_skip(&e, (lo - 1) * 8 + 4);
	*fde = hv + (uint64_t)(int64_t)(int32_t)rd_fixed(&e, 4);
	return !e.bad;
}

struct cfa_machine {
	uint64_t loc, pc;
	uint64_t reg[CFA_STACK_MAX + 1];	/* [depth]: current CFA rule */
	int64_t off[CFA_STACK_MAX + 1];
	bool expr[CFA_STACK_MAX + 1];
	int depth;
};

/* Moves loc on by delta; 1 once the row holding pc has been passed. */
static int cfa_advance(struct cfa_machine *m, uint64_t delta)
{
	if (delta > m->pc - m->loc)
		return 1;
	m->loc += delta;
	return 0;
}

/* Runs one CFA instruction: 0 to go on, 1 to stop (pc's row), -1 on error. */
static int cfa_step(struct cfa_machine *m, const struct cie *c, struct rd *r)
{
	uint8_t op = (uint8_t)rd_fixed(r, 1);
	int d = m->depth;

	if (op >> 6 == 1)
		return cfa_advance(m, (op & 0x3f) * c->code_align);
	if (op >> 6 == 2)
		rd_leb(r, false);
	if (op >> 6)
		return r->bad ? -1 : 0;
	switch (op) {
	case 0x00: break;
	case 0x02: return cfa_advance(m, rd_fixed(r, 1) * c->code_align);
	case 0x03: return cfa_advance(m, rd_fixed(r, 2) * c->code_align);
	case 0x04: return cfa_advance(m, rd_fixed(r, 4) * c->code_align);
	case 0x05: case 0x09: case 0x14: case 0x2f: rd_leb(r, false); rd_leb(r, false); break;
	case 0x06: case 0x07: case 0x08: case 0x2e: rd_leb(r, false); break;
	case 0x11: case 0x15: rd_leb(r, false); rd_leb(r, true); break;
	case 0x10: case 0x16: rd_leb(r, false); rd_skip(r, rd_leb(r, false)); break;
	case 0x0a:
		if (d == CFA_STACK_MAX)
			return -1;
		m->reg[d + 1] = m->reg[d];
		m->off[d + 1] = m->off[d];
		m->expr[d + 1] = m->expr[d];
		m->depth++;
		break;
	case 0x0b:
		if (!d)
			return -1;
		m->depth--;
		break;
	case 0x0c: m->reg[d] = rd_leb(r, false); m->off[d] = (int64_t)rd_leb(r, false);
		   m->expr[d] = false; break;
	case 0x0d: m->reg[d] = rd_leb(r, false); m->expr[d] = false; break;
	case 0x0e: m->off[d] = (int64_t)rd_leb(r, false); break;
	case 0x0f: rd_skip(r, rd_leb(r, false)); m->expr[d] = true; break;
	case 0x12: m->reg[d] = rd_leb(r, false); m->expr[d] = false; /* fallthrough */
	case 0x13: m->off[d] = (int64_t)(rd_leb(r, true) * (uint64_t)c->data_align); break;
	default: return -1;	/* DW_CFA_set_loc and unknown opcodes */
	}
	return r->bad ? -1 : 0;
}

static int cfa_run(struct cfa_machine *m, const struct cie *c, struct rd r)
{
	int ret = 0;

	while (!ret && r.p < r.end)
		ret = cfa_step(m, c, &r);
	return ret < 0 ? -1 : 0;
}

/*
 * Whether the frame is still set up at pc (CFA is not %rsp+8): 1 yes, 0 no,
 * -1 when pc has no usable call-frame information.
 */
static int frame_kept_at(struct elf_file *ef, uint64_t pc)
{
	struct cfa_machine m = { .pc = pc };
	uint64_t fde, cie_field, cie_id, start, range;
	struct cie c;
	struct rd r;

	if (!fde_find(ef, pc, &fde) || !eh_entry_at(ef, fde, &r))
		return -1;
	cie_field = r.vaddr;
	cie_id = rd_fixed(&r, 4);
	if (r.bad || !cie_id || !cie_parse(ef, cie_field - cie_id, &c))
		return -1;
	start = rd_encoded(&r, c.fde_enc, 0);
	range = rd_encoded(&r, c.fde_enc & 0x0f, 0);
	if (c.has_z)
		rd_skip(&r, rd_leb(&r, false));
	if (r.bad || pc < start || pc - start >= range)
		return -1;
	m.loc = start;
	if (cfa_run(&m, &c, c.insns) || cfa_run(&m, &c, r) || m.expr[m.depth])
		return -1;
	return m.reg[m.depth] != DWARF_X86_64_RSP || m.off[m.depth] != 8;
}

/* The exit kind of one instruction of [lo, hi), or 0 if it is not an exit. */
static int exit_kind_of(csh h, const cs_insn *insn, uint64_t lo, uint64_t hi,
			const struct insn_note *win, int nwin)
{
	const cs_x86 *x = &insn->detail->x86;
	uint64_t target;

	if (insn->id == X86_INS_RET)
		return EXIT_RET;
	if (!cs_insn_group(h, insn, X86_GRP_JUMP) || x->op_count != 1)
		return 0;
	if (x->operands[0].type != X86_OP_IMM) {
		if (insn->id != X86_INS_JMP)
			return 0;
		return is_table_jump(insn, win, nwin) ? 0 : EXIT_TAILJMP;
	}
	target = (uint64_t)x->operands[0].imm;
	/* A jump back to the entry re-runs the entry probe: a tail call to itself. */
	if (target > lo && target < hi)
		return 0;
	return insn->id == X86_INS_JMP ? EXIT_TAILJMP : EXIT_TAILJCC;
}

int func_exit_sites(struct elf_file *ef, const struct elf_func *f,
		    struct exit_site *out, int max)
{
	struct insn_note win[JT_WINDOW];
	const uint8_t *code = elf_file_bytes(ef, f->file_off, f->size);
	uint64_t addr = f->addr;
	size_t left = f->size;
	int nsites = 0, nwin = 0, kind, ret;
	cs_insn *insn;
	csh h;

	if (elf_file_machine(ef) != EM_X86_64)
		return -EOPNOTSUPP;
	if (!code || f->size > SIZE_MAX)
		return -ERANGE;
	ret = x86_open(&h);
	if (ret)
		return ret;
	insn = cs_malloc(h);
	if (!insn) {
		cs_close(&h);
		return -ENOMEM;
	}
	while (left) {
		uint64_t at = addr;

		if (!cs_disasm_iter(h, &code, &left, &addr, insn))
			break;
		kind = exit_kind_of(h, insn, f->addr, f->addr + f->size, win, nwin);
		if (kind != EXIT_RET && kind && frame_kept_at(ef, at) == 1)
			kind = 0;
		if (kind) {
			if (nsites < max)
				out[nsites] = (struct exit_site){
					.file_off = f->file_off + (at - f->addr),
					.kind = (enum exit_kind)kind,
				};
			if (nsites < INT_MAX)
				nsites++;
		}
		if (nwin == JT_WINDOW)
			memmove(win, win + 1, sizeof(win[0]) * (JT_WINDOW - 1));
		else
			nwin++;
		win[nwin - 1] = note_of(insn);
	}
	cs_free(insn, 1);
	cs_close(&h);
	return left ? -EILSEQ : nsites;
}

/* ES, CS, SS, DS and LOCK: the kernel refuses a probe (is_prefix_bad()). */
static bool is_bad_prefix(uint8_t b)
{
	return b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0xf0;
}

static bool is_legacy_prefix(uint8_t b)
{
	return is_bad_prefix(b) || b == 0x64 || b == 0x65 || b == 0x66 || b == 0x67 ||
	       b == 0xf2 || b == 0xf3;
}

/* One-byte opcodes outside the kernel's good_insns_64 table. */
static bool is_bad_opcode64(uint8_t op)
{
	static const uint8_t bad[] = {
		0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f,
		0x60, 0x61, 0x6c, 0x6d, 0x6e, 0x6f, 0x82, 0x9a, 0xcc, 0xcd, 0xce,
		0xcf, 0xd4, 0xd5, 0xd6, 0xe4, 0xe5, 0xe6, 0xe7, 0xea, 0xec, 0xed,
		0xee, 0xef, 0xf1, 0xf4, 0xfa, 0xfb,
	};

	return memchr(bad, op, sizeof(bad)) != NULL;
}

/* x86_nops[2..8] of arch/x86/include/asm/nops.h (64-bit); 9-11 carry a CS prefix. */
static bool is_kernel_nop(const uint8_t *b, size_t len)
{
	static const uint8_t nops[][8] = {
		{ 0x66, 0x90 },
		{ 0x0f, 0x1f, 0x00 },
		{ 0x0f, 0x1f, 0x40, 0x00 },
		{ 0x0f, 0x1f, 0x44, 0x00, 0x00 },
		{ 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 },
		{ 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 },
		{ 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 },
	};

	return len >= 2 && len <= 8 && !memcmp(b, nops[len - 2], len);
}

/*
 * Mirrors arch/x86/kernel/uprobes.c (read at Linux 6.18/6.19):
 * - uprobe_init_insn(): any ES/CS/SS/DS or LOCK prefix, an opcode outside
 *   good_insns_64 or `mov ...,%ss` makes registration fail. (The 0x0f escape
 *   byte is in good_insns_64, so every two-byte opcode passes.)
 * - branch_setup_xol_ops(): call rel32 (e8), jmp rel8/rel32 (eb/e9) and
 *   jcc rel8/rel32 (70-7f, 0f 80-8f) are emulated since 3.15; with a 66
 *   prefix they are refused. Other prefixes (f2 `bnd`, REX) are allowed.
 *   Plain nop (90) is emulated since 3.15. `66 90` is emulated since 6.2
 *   (before: refused). The byte sequences of x86_nops[] (0f 1f NOPL forms)
 *   are emulated since 6.16 ("uprobes/x86: Add support to emulate nop
 *   instructions"); before, they are single-stepped.
 * - push_setup_xol_ops(): push %reg (50-57 alone, or 41 50-57) is emulated
 *   since 4.16 ("uprobes/x86: Emulate push insns for uprobe on x86").
 * - Everything else, endbr64 (f3 0f 1e fa) included, is single-stepped.
 */
static enum uprobe_insn_class classify(const cs_insn *insn)
{
	const uint8_t *b = insn->bytes;
	size_t len = insn->size, i = 0;
	bool has66 = false;
	uint8_t op, op2;

	while (i < len && is_legacy_prefix(b[i])) {
		if (is_bad_prefix(b[i]))
			return UPROBE_INSN_REFUSED;
		has66 |= b[i] == 0x66;
		i++;
	}
	if (i < len && (b[i] & 0xf0) == 0x40)
		i++;
	if (i >= len)
		return UPROBE_INSN_REFUSED;
	op = b[i];
	op2 = i + 1 < len ? b[i + 1] : 0;
	if (op == 0xc4 || op == 0xc5 || op == 0x62)	/* VEX/EVEX: opcode is further on */
		return UPROBE_INSN_SSTEP;
	if (is_bad_opcode64(op) || (op == 0x8e && ((op2 >> 3) & 7) == 2))
		return UPROBE_INSN_REFUSED;
	if (op == 0xe8 || op == 0xe9 || op == 0xeb || (op >= 0x70 && op <= 0x7f) ||
	    (op == 0x0f && op2 >= 0x80 && op2 <= 0x8f))
		return has66 ? UPROBE_INSN_REFUSED : UPROBE_INSN_EMULATED;
	if (len == 1 && op == 0x90)
		return UPROBE_INSN_EMULATED;
	if (is_kernel_nop(b, len))
		return UPROBE_INSN_EMULATED_NEW;
	if (op >= 0x50 && op <= 0x57 && (len == 1 || (len == 2 && b[0] == 0x41)))
		return UPROBE_INSN_EMULATED;
	return UPROBE_INSN_SSTEP;
}

int insn_decode(struct elf_file *ef, uint64_t file_off, struct insn_info *out)
{
	uint64_t fsize = elf_file_size(ef);
	size_t n = X86_INSN_MAX;
	const uint8_t *code;
	uint64_t addr = file_off;
	cs_insn *insn;
	int err = -EILSEQ;
	csh h;

	memset(out, 0, sizeof(*out));
	if (elf_file_machine(ef) != EM_X86_64 || file_off >= fsize)
		return -EOPNOTSUPP;
	if (fsize - file_off < n)
		n = (size_t)(fsize - file_off);
	code = elf_file_bytes(ef, file_off, n);
	if (!code || x86_open(&h))
		return -ERANGE;
	insn = cs_malloc(h);
	if (insn && cs_disasm_iter(h, &code, &n, &addr, insn)) {
		out->len = insn->size;
		out->cls = classify(insn);
		out->emulated = out->cls == UPROBE_INSN_EMULATED;
		out->is_endbr = insn->id == X86_INS_ENDBR64;
		out->flags_only = insn->id == X86_INS_CMP || insn->id == X86_INS_TEST;
		err = 0;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&h);
	return err;
}

enum uprobe_insn_class insn_uprobe_class(struct elf_file *ef, uint64_t file_off)
{
	struct insn_info in;

	return insn_decode(ef, file_off, &in) ? UPROBE_INSN_REFUSED : in.cls;
}

int insn_is_emulated(struct elf_file *ef, uint64_t file_off)
{
	return insn_uprobe_class(ef, file_off) == UPROBE_INSN_EMULATED;
}
