/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The trampoline that makes an injected call, and the memory it uses
 * (user/attach/inject.c runs the ptrace side; its header comment tells the whole
 * story). The code goes into a slot of the zero padding after libc's (or
 * ld.so's) code, its data block D onto the borrowed thread's own stack.
 * Nothing here stops or resumes a thread.
 */
#ifndef PTBPF_INJECT_TRAMP_H
#define PTBPF_INJECT_TRAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#define TRAMP_MSG_LEN 256

/* One call, and its outcome. */
struct tramp_call {
	uint64_t fn, arg0, arg1;
	uint64_t errfn;        /* called when fn returns 0; its string is kept */
	const char *path;      /* NULL, or copied into D and passed as arg0 */
	uint64_t result;
	char msg[TRAMP_MSG_LEN];
};

/* A seized thread of the target. */
struct inj_thread {
	int tid;               /* 0 once it has exited */
	bool stopped;
	bool have_regs;        /* regs hold its registers at this stop */
	bool in_call;          /* it runs an earlier injected call */
	bool blocked;          /* it did not stop in time: blocked in the kernel */
	int sig;               /* to hand back on release: a signal-delivery stop */
	struct user_regs_struct regs;
};

/* The zero padding after one executable segment; lo = hi = 0 if none. */
struct tramp_pad {
	uint64_t lo, hi;
};

/* A prepared call: where its code and data are. */
struct tramp_ticket {
	int tid;
	uint64_t slot, d, nonce;
};

/* Whether this CPU has XSAVE and the saved components fit in D. */
bool tramp_cpu_ok(void);
/* The padding after the executable PT_LOAD segment that ends in pid's
 * mapping [lo, hi) of file offset off (read through map_files). */
void tramp_find_padding(int pid, uint64_t lo, uint64_t hi, uint64_t off, struct tramp_pad *pad);
/* With every thread stopped and its registers read: the first free slot in
 * pads. Marks the threads that run an earlier call still going (in_call).
 * 0; -EBUSY if every slot is taken by such calls; -ENOSPC if there is no
 * usable padding. */
int tramp_find_slot(int pid, const struct tramp_pad *pads, int npads, struct inj_thread *th,
		    int nth, uint64_t *slot);
/* Whether the stack holding rsp is a thread stack with room for D (of a
 * call with this path, or NULL) and for the call below it. */
bool tramp_stack_ok(int pid, uint64_t rsp, const char *path);
/* Writes D onto t's stack and the code into the slot (through mem_fd, a
 * /proc mem file of a thread we trace) and fills entry: t's registers for
 * the one PTRACE_SETREGS that starts the call. Changes nothing the target
 * uses. 0, or -errno with one line in err. */
int tramp_prepare(int pid, int mem_fd, const struct inj_thread *t, uint64_t slot,
		  const struct tramp_call *c, struct user_regs_struct *entry,
		  struct tramp_ticket *tk, char *err, size_t errlen);
/* Polls D until the call is done (CALL_TIMEOUT_MS at most); fills
 * c->result and c->msg. 0, -ETIMEDOUT (the call goes on), -ESRCH, -EIO. */
int tramp_wait(int pid, int mem_fd, const struct tramp_ticket *tk, struct tramp_call *c,
	       char *err, size_t errlen);
/* Zeroes the slot, given the call's thread t stopped (registers read):
 * -EBUSY while t may still run it; nothing if another call has taken the
 * slot since. */
int tramp_erase(int pid, int mem_fd, const struct tramp_ticket *tk, const struct inj_thread *t);
/* Zeroes the slot of a call that was prepared but never started. */
int tramp_discard(int mem_fd, const struct tramp_ticket *tk);

#endif /* PTBPF_INJECT_TRAMP_H */
