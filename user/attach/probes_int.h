/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * probes' insides, shared by attach/probes.c and attach/rpc_probes.c only:
 * the probe set of a session and the entry-site rule both use.
 */
#ifndef PTBPF_PROBES_INT_H
#define PTBPF_PROBES_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "attach/links.h"
#include "attach/probes.h"
#include "lib/elfsym.h"

/* The sites of one group of entry probes (the memory report's) in one
 * library inode, looked up once per inode. */
enum { SITES_MEM };

struct lib_sites {
	uint64_t dev, ino;
	int what;             /* SITES_* */
	unsigned long off[2];
	int n;                /* 0: the library lacks them */
};

/* torch.distributed.rpc's probe sites in one libtorch inode (rpc_probes.c);
 * plain memory, freed with the set. */
struct rpc_sites;

struct probes {
	struct ptbpf_bpf *skel;
	struct op_table *ops;
	struct plan *plans;
	int nplans;
	struct lib_sites *sites;
	int nsites;
	struct rpc_sites *rpc_sites;
	int nrpc_sites;
	struct link_set links;
	bool entries_only;
};

/* The entry probe's offset for f: past an endbr64 when the instruction
 * after it is emulated (*emulated says whether the probed one is). */
uint64_t probes_entry_site(struct elf_file *ef, const struct elf_func *f, int *emulated);

#endif /* PTBPF_PROBES_INT_H */
