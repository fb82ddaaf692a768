// SPDX-License-Identifier: BSD-2-Clause
/*
 * The trampoline and its memory. See inject_tramp.h and, for the whole
 * design, the comment at the top of inject.c.
 */
#define _GNU_SOURCE
#include "attach/inject_tramp.h"

#include "attach/target.h"
#include "lib/procmaps.h"

#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CALL_TIMEOUT_MS 10000
/* D is read every POLL_US for the first POLL_FAST_US (a dlopen takes a few
 * ms): the thread reuses its stack once the call returns, and the sooner
 * D is read the likelier it still holds the result. Where it does not,
 * the caller asks the target itself (agent_load_outcome). */
#define POLL_US 25
#define POLL_FAST_US 250000
#define RED_ZONE 128
#define D_GAP (32 * 1024)          /* between the red zone and D */
#define STACK_ROOM (128 * 1024)    /* below rsp, in a thread's own stack */
#define PAGE 4096ULL
#define SCAN_MAX (512 * 1024)    /* of a thread's live stack, for slot addresses */

/* Kernel-internal syscall return values a stop can leave in rax. */
#define ERESTARTSYS 512
#define ERESTARTNOINTR 513
#define ERESTARTNOHAND 514
#define ERESTART_RESTARTBLOCK 516

#define PTRACE_GET_RSEQ_CONF 0x420f

/* The data block D's layout, shared by the struct and the asm. */
#define D_FN 0
#define D_ARG0 8
#define D_ARG1 16
#define D_ERRFN 24
#define D_RESULT 32
#define D_STATE 40
#define D_OLDMASK 48
#define D_BLKMASK 56
#define D_RAX 64
#define D_RCX 72
#define D_RDX 80
#define D_RSI 88
#define D_RDI 96
#define D_RBP 104
#define D_RSP 112
#define D_R8 120
#define D_R9 128
#define D_R10 136
#define D_R11 144
#define D_R12 152
#define D_R13 160
#define D_R14 168
#define D_R15 176
#define D_RFLAGS 184
#define D_MSG 192
#define D_XSAVE 448
#define MSG_LEN TRAMP_MSG_LEN
#define XSAVE_SIZE 4096
/* x87, SSE, AVX, AVX-512: never AMX tile data, which XFD can make fault. */
#define XSAVE_MASK 0xe7
/* D's state word: distinctive values that stack garbage does not fake. */
#define INJ_ARMED 0x5054425041524d44
#define INJ_STARTED 0x5054425053545254
#define INJ_DONE 0x50544250444f4e45

struct inj_data {
	uint64_t fn, arg0, arg1, errfn, result, state, oldmask, blkmask;
	uint64_t rax, rcx, rdx, rsi, rdi, rbp, rsp, r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rflags;
	char msg[MSG_LEN];
	uint8_t xsave[XSAVE_SIZE] __attribute__((aligned(64)));
	char path[PATH_MAX];
};

_Static_assert(offsetof(struct inj_data, state) == D_STATE, "D layout");
_Static_assert(offsetof(struct inj_data, blkmask) == D_BLKMASK, "D layout");
_Static_assert(offsetof(struct inj_data, rax) == D_RAX, "D layout");
_Static_assert(offsetof(struct inj_data, r15) == D_R15, "D layout");
_Static_assert(offsetof(struct inj_data, rflags) == D_RFLAGS, "D layout");
_Static_assert(offsetof(struct inj_data, msg) == D_MSG, "D layout");
_Static_assert(offsetof(struct inj_data, xsave) == D_XSAVE, "D layout");

/* What ptbpf reads back: everything up to the message's end. */
#define D_HEAD (D_MSG + MSG_LEN)

#define STR_(x) #x
#define STR(x) STR_(x)
#define D_(f) STR(D_##f) "(%rbx)"

/*
 * The trampoline: entered with rsp = the scratch stack (16-aligned, just
 * below D) and rbx = D; position-independent, never run in ptbpf itself.
 * SIGCANCEL (32) and SIGSETXID (33) stay unblocked, as glibc's own
 * sigprocmask keeps them: a thread the call creates inherits the mask, and
 * a setuid() in the process waits for every thread to take SIGSETXID.
 */
asm(".pushsection .text.ptbpf_inj, \"ax\", @progbits\n"
    ".balign 64\n"
    ".globl ptbpf_inj_start, ptbpf_inj_final_rbx, ptbpf_inj_final_rip\n"
    ".globl ptbpf_inj_owner, ptbpf_inj_end\n"
    ".hidden ptbpf_inj_start, ptbpf_inj_final_rbx, ptbpf_inj_final_rip\n"
    ".hidden ptbpf_inj_owner, ptbpf_inj_end\n"
    "ptbpf_inj_start:\n"
    "	movabs $" STR(INJ_STARTED) ", %rax\n"
    "	mov %rax, " D_(STATE) "\n"
    "	mov $" STR(SYS_rt_sigprocmask) ", %eax\n"
    "	xor %edi, %edi\n" /* SIG_BLOCK */
    "	lea " D_(BLKMASK) ", %rsi\n"
    "	lea " D_(OLDMASK) ", %rdx\n"
    "	mov $8, %r10d\n"
    "	syscall\n"
    "	mov $" STR(XSAVE_MASK) ", %eax\n"
    "	xor %edx, %edx\n"
    "	xsave64 " D_(XSAVE) "\n"
    "	cld\n"
    "	fninit\n"
    "	ldmxcsr ptbpf_inj_mxcsr(%rip)\n"
    "	mov " D_(ARG0) ", %rdi\n"
    "	mov " D_(ARG1) ", %rsi\n"
    "	call *" D_(FN) "\n"
    "	mov %rax, " D_(RESULT) "\n"
    "	test %rax, %rax\n"
    "	jnz 2f\n"
    "	mov " D_(ERRFN) ", %rax\n"
    "	test %rax, %rax\n"
    "	jz 2f\n"
    "	call *%rax\n"
    "	test %rax, %rax\n"
    "	jz 2f\n"
    "	lea " D_(MSG) ", %rdi\n"
    "	mov $" STR(MSG_LEN) " - 1, %ecx\n"
    "1:	movzbl (%rax), %edx\n"
    "	mov %dl, (%rdi)\n"
    "	test %dl, %dl\n"
    "	jz 2f\n"
    "	inc %rax\n"
    "	inc %rdi\n"
    "	dec %ecx\n"
    "	jnz 1b\n"
    "	movb $0, (%rdi)\n"
    "2:	mov $" STR(SYS_rt_sigprocmask) ", %eax\n"
    "	mov $2, %edi\n" /* SIG_SETMASK */
    "	lea " D_(OLDMASK) ", %rsi\n"
    "	xor %edx, %edx\n"
    "	mov $8, %r10d\n"
    "	syscall\n"
    "	mov $" STR(XSAVE_MASK) ", %eax\n"
    "	xor %edx, %edx\n"
    "	xrstor64 " D_(XSAVE) "\n"
    "	movabs $" STR(INJ_DONE) ", %rax\n"
    "	mov %rax, " D_(STATE) "\n"
    "	pushq " D_(RFLAGS) "\n"
    "	popfq\n"
    "	mov " D_(RAX) ", %rax\n"
    "	mov " D_(RCX) ", %rcx\n"
    "	mov " D_(RDX) ", %rdx\n"
    "	mov " D_(RSI) ", %rsi\n"
    "	mov " D_(RDI) ", %rdi\n"
    "	mov " D_(RBP) ", %rbp\n"
    "	mov " D_(R8) ", %r8\n"
    "	mov " D_(R9) ", %r9\n"
    "	mov " D_(R10) ", %r10\n"
    "	mov " D_(R11) ", %r11\n"
    "	mov " D_(R12) ", %r12\n"
    "	mov " D_(R13) ", %r13\n"
    "	mov " D_(R14) ", %r14\n"
    "	mov " D_(R15) ", %r15\n"
    "	mov " D_(RSP) ", %rsp\n"
    "	mov ptbpf_inj_final_rbx(%rip), %rbx\n"
    "	jmp *ptbpf_inj_final_rip(%rip)\n"
    "	.balign 8\n"
    "ptbpf_inj_mxcsr: .long 0x1f80, 0\n"
    "ptbpf_inj_final_rbx: .quad 0\n"
    "ptbpf_inj_final_rip: .quad 0\n"
    "ptbpf_inj_owner: .quad 0, 0, 0, 0\n" /* struct slot_owner */
    "ptbpf_inj_end:\n"
    ".popsection\n");

extern const uint8_t ptbpf_inj_start[], ptbpf_inj_final_rbx[], ptbpf_inj_final_rip[],
	ptbpf_inj_owner[], ptbpf_inj_end[];

#define TRAMP_LEN ((size_t)(ptbpf_inj_end - ptbpf_inj_start))
#define TRAMP_CODE_LEN ((size_t)(ptbpf_inj_final_rbx - ptbpf_inj_start))
#define OFF_FINAL_RBX ((size_t)(ptbpf_inj_final_rbx - ptbpf_inj_start))
#define OFF_FINAL_RIP ((size_t)(ptbpf_inj_final_rip - ptbpf_inj_start))
#define OFF_OWNER ((size_t)(ptbpf_inj_owner - ptbpf_inj_start))
#define SLOT_LEN ((TRAMP_LEN + 63) & ~(size_t)63)

/* Who last used a slot: the thread, its D and rsp, and a nonce per call. */
struct slot_owner {
	uint64_t tid, d, nonce, rsp;
};


struct inj_rseq_conf {
	uint64_t rseq_abi_pointer;
	uint32_t rseq_abi_size, signature, flags, pad;
};

struct inj_rseq_cs {
	uint32_t version, flags;
	uint64_t start_ip, post_commit_offset, abort_ip;
};

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

bool tramp_cpu_ok(void)
{
	unsigned int a, b, c, d, xcr0, xcr0_hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return false;
	asm volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
	for (int i = 2; i < 8; i++) {
		if (!(XSAVE_MASK & xcr0 & (1u << i)))
			continue;
		__cpuid_count(0xd, i, a, b, c, d); /* a: size, b: offset */
		if (a + b > XSAVE_SIZE)
			return false;
	}
	return true;
}

void tramp_find_padding(int pid, uint64_t lo, uint64_t hi, uint64_t off, struct tramp_pad *pad)
{
	char path[96];
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, (unsigned long)lo,
		 (unsigned long)hi);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
	    eh.e_phnum <= 64 &&
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), eh.e_phoff) ==
	    (ssize_t)(eh.e_phnum * sizeof(ph[0]))) {
		for (int i = 0; i < eh.e_phnum; i++) {
			uint64_t end_off = ph[i].p_offset + ph[i].p_filesz, end;

			if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
			    end_off <= off || end_off - off > hi - lo)
				continue;
			end = lo + (end_off - off);
			pad->lo = (end + 63) & ~63ULL;
			pad->hi = (end + PAGE - 1) & ~(PAGE - 1);
			if (pad->hi > hi || pad->lo >= pad->hi)
				pad->lo = pad->hi = 0;
		}
	}
	close(fd);
}


static bool in_slot(uint64_t slot, uint64_t rip)
{
	return rip >= slot && rip - slot < SLOT_LEN;
}

/* The mapping of pid that holds addr, and the end and permissions of the
 * one before it. 0, or -ENOENT. */
struct inj_mapping {
	uint64_t start, end, ino, prev_end;
	char perms[8], prev_perms[8], name[64];
};

static int find_mapping(int pid, uint64_t addr, struct inj_mapping *m)
{
	struct procmaps *maps = procmaps_open(pid);
	struct procmap e;
	int ret = -ENOENT;

	if (!maps)
		return -errno;
	memset(m, 0, sizeof(*m));
	while (procmaps_next(maps, &e)) {
		if (addr < e.start || addr >= e.end) {
			m->prev_end = e.end;
			memcpy(m->prev_perms, e.perms, sizeof(e.perms));
			continue;
		}
		m->start = e.start;
		m->end = e.end;
		m->ino = e.inode;
		memcpy(m->perms, e.perms, sizeof(e.perms));
		snprintf(m->name, sizeof(m->name), "%s", e.path);
		ret = 0;
		break;
	}
	procmaps_close(maps);
	return ret;
}

/* Whether t (stopped) may still execute a slot o used: it is inside it,
 * its call has not returned (D says STARTED), or a word of its live stack
 * below the call's rsp points into the slot: the return address of the
 * call, or the frame of a signal that came during the trampoline's last
 * instructions (its RIP is then in the handler, outside the slot). A
 * thread on another stack, or too deep to scan, counts as inside. */
static bool slot_may_run(int pid, uint64_t slot, const struct slot_owner *o,
			 const struct inj_thread *t)
{
	uint64_t state, lo = t->regs.rsp & ~7ULL, *words;
	struct inj_mapping m;
	bool hit = false;

	if (!t->have_regs || in_slot(slot, t->regs.rip))
		return true;
	if (!target_read(pid, o->d + D_STATE, &state, sizeof(state)) && state == INJ_STARTED)
		return true;
	if (find_mapping(pid, o->rsp - 1, &m) || lo < m.start || lo > m.end)
		return true;
	if (lo >= o->rsp)
		return false;
	if (o->rsp - lo > SCAN_MAX)
		return true;
	words = malloc(o->rsp - lo);
	if (!words || target_read(pid, lo, words, o->rsp - lo)) {
		free(words);
		return true;
	}
	for (size_t i = 0; !hit && i < (o->rsp - lo) / 8; i++)
		hit = in_slot(slot, words[i]);
	free(words);
	return hit;
}

enum slot_kind { SLOT_FREE, SLOT_BUSY, SLOT_FOREIGN };

static enum slot_kind classify_slot(int pid, uint64_t slot, const uint8_t *b,
				    struct inj_thread *th, int nth)
{
	struct slot_owner o;

	for (int i = 0; i < nth; i++)
		if (th[i].tid && th[i].have_regs && in_slot(slot, th[i].regs.rip))
			return SLOT_BUSY;
	for (size_t i = TRAMP_LEN; i < SLOT_LEN; i++)
		if (b[i])
			return SLOT_FOREIGN;
	if (memcmp(b, ptbpf_inj_start, TRAMP_CODE_LEN)) {
		for (size_t i = 0; i < TRAMP_LEN; i++)
			if (b[i])
				return SLOT_FOREIGN;
		return SLOT_FREE;
	}
	memcpy(&o, b + OFF_OWNER, sizeof(o));
	for (int i = 0; i < nth; i++) {
		if (!th[i].tid || (uint64_t)th[i].tid != o.tid ||
		    !slot_may_run(pid, slot, &o, &th[i]))
			continue;
		th[i].in_call = true;
		return SLOT_BUSY;
	}
	return SLOT_FREE;
}

int tramp_find_slot(int pid, const struct tramp_pad *pads, int npads, struct inj_thread *th,
		    int nth, uint64_t *slot)
{
	uint8_t buf[PAGE];
	bool busy = false;

	*slot = 0;
	for (int i = 0; i < nth; i++)
		th[i].in_call = false;
	for (int p = 0; p < npads; p++) {
		uint64_t len = pads[p].hi - pads[p].lo, free_slot = 0;
		size_t n = len / SLOT_LEN;
		bool foreign = false, pad_busy = false;

		if (!pads[p].lo || len > sizeof(buf) || target_read(pid, pads[p].lo, buf, len))
			continue;
		for (size_t i = n * SLOT_LEN; i < len; i++)
			foreign |= buf[i] != 0;
		/* Every slot is looked at: each may name a thread still in a call. */
		for (size_t k = 0; k < n; k++) {
			uint64_t addr = pads[p].lo + k * SLOT_LEN;
			enum slot_kind kind = classify_slot(pid, addr, buf + k * SLOT_LEN, th, nth);

			foreign |= kind == SLOT_FOREIGN;
			pad_busy |= kind == SLOT_BUSY;
			if (kind == SLOT_FREE && !free_slot)
				free_slot = addr;
		}
		if (foreign)
			continue;
		busy |= pad_busy;
		if (free_slot && !*slot)
			*slot = free_slot;
	}
	return *slot ? 0 : busy ? -EBUSY : -ENOSPC;
}

static size_t d_len(const char *path)
{
	return offsetof(struct inj_data, path) + (path ? strlen(path) + 1 : 0);
}

static uint64_t d_addr(uint64_t rsp, const char *path)
{
	return (rsp - RED_ZONE - D_GAP - d_len(path)) & ~63ULL;
}

bool tramp_stack_ok(int pid, uint64_t rsp, const char *path)
{
	struct inj_mapping m;

	if (find_mapping(pid, rsp - 1, &m))
		return false;
	if (!strcmp(m.name, "[stack]"))
		return d_addr(rsp, path) >= m.start; /* below, it grows as the call runs */
	/* A thread stack: anonymous, above its guard page. */
	return !m.ino && !m.name[0] && !strcmp(m.perms, "rw-p") && m.prev_end == m.start &&
	       !strcmp(m.prev_perms, "---p") && rsp - m.start >= STACK_ROOM;
}

/* A thread stopped inside an rseq critical section resumes at its abort
 * handler: the stop preempted it. */
static void rseq_fixup(int pid, int tid, unsigned long long *rip)
{
	struct inj_rseq_conf conf;
	struct inj_rseq_cs cs;
	uint64_t cs_addr;

	if (ptrace(PTRACE_GET_RSEQ_CONF, tid, (void *)sizeof(conf), &conf) != sizeof(conf) ||
	    !conf.rseq_abi_pointer ||
	    target_read(pid, conf.rseq_abi_pointer + 8, &cs_addr, sizeof(cs_addr)) || !cs_addr ||
	    target_read(pid, cs_addr, &cs, sizeof(cs)))
		return;
	if (*rip >= cs.start_ip && *rip - cs.start_ip < cs.post_commit_offset)
		*rip = cs.abort_ip;
}

/* The registers the kernel would resume t with, had nothing been injected:
 * a system call the stop interrupted is restarted. */
static void resume_regs(int pid, const struct inj_thread *t, struct user_regs_struct *r)
{
	long rax = (long)t->regs.rax;

	*r = t->regs;
	if ((long)r->orig_rax >= 0) {
		if (rax == -ERESTARTSYS || rax == -ERESTARTNOINTR || rax == -ERESTARTNOHAND) {
			r->rax = r->orig_rax;
			r->rip -= 2;
		} else if (rax == -ERESTART_RESTARTBLOCK) {
			r->rax = SYS_restart_syscall;
			r->rip -= 2;
		}
	}
	rseq_fixup(pid, t->tid, &r->rip);
}

static uint64_t make_nonce(void)
{
	static uint64_t seq;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 40) +
	       ++seq;
}

static void fill_data(struct inj_data *d, const struct tramp_call *c,
		      const struct user_regs_struct *r)
{
	d->fn = c->fn;
	d->arg0 = c->arg0;
	d->arg1 = c->arg1;
	d->errfn = c->errfn;
	d->state = INJ_ARMED;
	d->blkmask = ~(3ULL << 31); /* all but SIGCANCEL and SIGSETXID */
	d->rax = r->rax;
	d->rcx = r->rcx;
	d->rdx = r->rdx;
	d->rsi = r->rsi;
	d->rdi = r->rdi;
	d->rbp = r->rbp;
	d->rsp = r->rsp;
	d->r8 = r->r8;
	d->r9 = r->r9;
	d->r10 = r->r10;
	d->r11 = r->r11;
	d->r12 = r->r12;
	d->r13 = r->r13;
	d->r14 = r->r14;
	d->r15 = r->r15;
	d->rflags = r->eflags;
	if (c->path)
		memcpy(d->path, c->path, strlen(c->path) + 1);
}

int tramp_prepare(int pid, int mem_fd, const struct inj_thread *t, uint64_t slot,
		  const struct tramp_call *c, struct user_regs_struct *entry,
		  struct tramp_ticket *tk, char *err, size_t errlen)
{
	struct user_regs_struct r;
	struct slot_owner o;
	uint8_t code[PAGE] = { 0 };
	size_t len = d_len(c->path);
	struct inj_data *d;
	ssize_t n;

	if (c->path && strlen(c->path) >= PATH_MAX)
		return -ENAMETOOLONG;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	resume_regs(pid, t, &r);
	fill_data(d, c, &r);
	tk->tid = t->tid;
	tk->slot = slot;
	tk->d = d_addr(t->regs.rsp, c->path);
	tk->nonce = make_nonce();
	if (c->path)
		d->arg0 = tk->d + offsetof(struct inj_data, path);
	n = pwrite(mem_fd, d, len, tk->d);
	free(d);
	if (n != (ssize_t)len) {
		snprintf(err, errlen, "pid %d: writing the call's data to thread %d's stack at "
			 "0x%llx: %s", pid, t->tid, (unsigned long long)tk->d,
			 n < 0 ? strerror(errno) : "short write");
		return -EFAULT;
	}
	memcpy(code, ptbpf_inj_start, TRAMP_LEN);
	memcpy(code + OFF_FINAL_RBX, &r.rbx, sizeof(r.rbx));
	memcpy(code + OFF_FINAL_RIP, &r.rip, sizeof(r.rip));
	o = (struct slot_owner){ t->tid, tk->d, tk->nonce, r.rsp };
	memcpy(code + OFF_OWNER, &o, sizeof(o));
	n = pwrite(mem_fd, code, SLOT_LEN, slot);
	if (n != (ssize_t)SLOT_LEN) {
		snprintf(err, errlen, "pid %d: writing the trampoline at 0x%llx: %s", pid,
			 (unsigned long long)slot, n < 0 ? strerror(errno) : "short write");
		return -EFAULT;
	}
	*entry = t->regs;
	entry->rip = slot;
	entry->rsp = tk->d;
	entry->rbx = tk->d;
	entry->orig_rax = -1;               /* no syscall restart into the trampoline */
	entry->eflags &= ~0x40400ULL;       /* AC and DF clear, as the ABI wants */
	return 0;
}

int tramp_wait(int pid, int mem_fd, const struct tramp_ticket *tk, struct tramp_call *c,
	       char *err, size_t errlen)
{
	struct inj_data a, b;
	long waited_us = 0, step_us = POLL_US;

	for (;;) {
		if (pread(mem_fd, &a, D_HEAD, tk->d) != D_HEAD) {
			snprintf(err, errlen, "pid %d exited during the call", pid);
			return -ESRCH;
		}
		/* The thread reuses its stack afterwards: a result counts only if
		 * a second read agrees. */
		if (a.state == INJ_DONE && pread(mem_fd, &b, D_HEAD, tk->d) == D_HEAD &&
		    !memcmp(&a, &b, D_HEAD)) {
			c->result = a.result;
			memcpy(c->msg, a.msg, sizeof(c->msg));
			c->msg[sizeof(c->msg) - 1] = 0;
			return 0;
		}
		if (a.state != INJ_ARMED && a.state != INJ_STARTED && a.state != INJ_DONE) {
			snprintf(err, errlen, "pid %d: thread %d finished the call but reused its "
				 "stack before the result could be read", pid, tk->tid);
			return -EIO;
		}
		if (waited_us >= CALL_TIMEOUT_MS * 1000L) {
			snprintf(err, errlen, "pid %d: the call on thread %d did not finish within "
				 "%d ms; it goes on and restores the thread when it returns", pid,
				 tk->tid, CALL_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		sleep_us(step_us);
		waited_us += step_us;
		if (waited_us >= POLL_FAST_US && step_us < 1000)
			step_us *= 2;
	}
}

int tramp_discard(int mem_fd, const struct tramp_ticket *tk)
{
	static const uint8_t zero[PAGE];

	return pwrite(mem_fd, zero, SLOT_LEN, tk->slot) == (ssize_t)SLOT_LEN ? 0 : -EFAULT;
}

int tramp_erase(int pid, int mem_fd, const struct tramp_ticket *tk, const struct inj_thread *t)
{
	struct slot_owner o;

	if (pread(mem_fd, &o, sizeof(o), tk->slot + OFF_OWNER) != sizeof(o) ||
	    o.nonce != tk->nonce)
		return 0; /* another call has it now */
	if (slot_may_run(pid, tk->slot, &o, t))
		return -EBUSY;
	return tramp_discard(mem_fd, tk);
}
