/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One ptbpf per process: two would both switch its agent and read each
 * other's records. A ptbpf claims a process before it touches it, with
 * an abstract UNIX socket named after the process's pid and start time,
 * made in the initial network namespace so that ptbpfs in containers with
 * networks of their own see it too: no file, and the kernel releases it
 * however ptbpf ends.
 */
#ifndef PTBPF_CLAIM_H
#define PTBPF_CLAIM_H

#include <stddef.h>

struct target;

/* Claims t, held in t->claimfd until target_close. 0, or -EBUSY with one
 * line naming the ptbpf that traces it. */
int target_claim(struct target *t, char *err, size_t errlen);
/* Lets go of the ptbpfs that asked who holds t's claim (each leaves a
 * connection queued on it, to read its holder's pid): call it every
 * 0.5 s, so that the queue never fills and every refusal names the
 * holder. Never blocks. */
void target_claim_answer(struct target *t);

#endif /* PTBPF_CLAIM_H */
