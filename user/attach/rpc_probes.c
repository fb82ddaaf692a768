// SPDX-License-Identifier: BSD-2-Clause
/*
 * torch.distributed.rpc's probes (bpf/rpc.bpf.h): entry probes on the
 * TensorPipe agent's own functions in libtorch_cpu, one uprobe.multi link
 * per process, the cookie saying which function (enum ptbpf_rpc_probe).
 * The agent's RecordFunction callbacks cannot do this: torch opens its
 * `rpc_async#...` RecordFunctions only under the legacy autograd profiler
 * (torch/distributed/rpc/api.py, _get_should_profile), so without it an
 * RPC makes none. Symbols by mangled prefix, the argument lists varying
 * between versions; the first six are needed, the others add the Python
 * begin, handler ends and failures where a torch has them.
 */
#define _GNU_SOURCE
#include "attach/probes_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "attach/target.h"
#include "lib/log.h"
#include "ptbpf.skel.h"

#define TP "_ZN5torch11distributed3rpc15TensorPipeAgent"
#define TPK "_ZNK5torch11distributed3rpc15TensorPipeAgent"
#define RPC_REQUIRED 5

static const struct {
	int probe;
	const char *prefix;
} rpc_syms[] = {
	{ RPC_SEND, TP "9pipeWriteE" },
	{ RPC_RECEIVE, "_ZNK5torch11distributed3rpc15RequestCallbackclE" },
	{ RPC_CALL, TP "4sendE" },
	{ RPC_RESPONSE, TP "20markFutureAsCompleteE" },
	{ RPC_COMPLETING, "_ZNK5torch11distributed3rpc7Message11getStoragesE" },
	/* optional */
	{ RPC_LOOKUP, TPK "13getWorkerInfoERKNSt7__cxx1112basic_string" },
	{ RPC_BUSY, TP "17increaseCallCountE" },
	{ RPC_FAIL, TP "19markFutureWithErrorE" },
	{ RPC_UNTIMEOUT, TP "20removeFromTimeoutMapE" },
	{ RPC_CLIENT_ERROR, TP "17handleClientErrorE" },
	{ RPC_AUTOGRAD_SEND, "_ZN5torch11distributed8autograd10DistEngine24executeSendFunctionAsyncE" },
};
#define NSYMS (sizeof(rpc_syms) / sizeof(rpc_syms[0]))

struct rpc_sites {
	uint64_t dev, ino;
	unsigned long off[NSYMS];
	uint64_t cookie[NSYMS];
	int n; /* 0: not the TensorPipe agent (or too little of it) */
};

/* lib's sites, looked up once per inode; NULL if its ELF cannot be read. */
static const struct rpc_sites *find_rpc_sites(struct probes *p, const struct target_lib *lib)
{
	struct rpc_sites *r;
	struct elf_file *ef;
	struct elf_func f;
	char why[256];
	int emulated, required = 0;

	for (int i = 0; i < p->nrpc_sites; i++)
		if (p->rpc_sites[i].dev == lib->dev && p->rpc_sites[i].ino == lib->ino)
			return &p->rpc_sites[i];
	ef = elf_file_open_sections(lib->fd, why, sizeof(why));
	if (!ef)
		return NULL;
	r = realloc(p->rpc_sites, (p->nrpc_sites + 1) * sizeof(*r));
	if (!r) {
		elf_file_close(ef);
		return NULL;
	}
	p->rpc_sites = r;
	r = &p->rpc_sites[p->nrpc_sites++];
	*r = (struct rpc_sites){ .dev = lib->dev, .ino = lib->ino };
	for (size_t i = 0; i < NSYMS; i++) {
		if (elf_file_find_func_prefix(ef, rpc_syms[i].prefix, &f)) {
			log_debug("%s: no %s: its rpc probe is left out\n", lib->path,
				  rpc_syms[i].prefix);
			continue;
		}
		required += i < RPC_REQUIRED;
		r->off[r->n] = probes_entry_site(ef, &f, &emulated);
		r->cookie[r->n++] = rpc_syms[i].probe;
	}
	if (required < RPC_REQUIRED)
		r->n = 0;
	elf_file_close(ef);
	return r;
}

int probes_attach_rpc(struct probes *p, const struct target *t)
{
	const struct rpc_sites *r;

	if (t->torch.fd < 0)
		return 0;
	r = find_rpc_sites(p, &t->torch);
	if (!r)
		return -EINVAL;
	if (!r->n)
		return 0; /* a torch without the TensorPipe agent */
	{
		LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = r->off, .cookies = (__u64 *)r->cookie,
			    .cnt = r->n);

		return link_set_uprobes(&p->links, t->pid, p->skel->progs.rpc_probe,
					t->torch.attach_path, &o, false) ?: 1;
	}
}
