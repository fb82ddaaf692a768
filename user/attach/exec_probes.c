// SPDX-License-Identifier: BSD-2-Clause
/* The exec tracepoint's object. See exec_probes.h. */
#include "attach/exec_probes.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <bpf/libbpf.h>

#include "attach/probes.h"
#include "ptbpf.skel.h"
#include "exec.skel.h"

struct exec_probes {
	struct exec_bpf *skel;
};

struct exec_probes *exec_probes_new(struct ptbpf_bpf *ops, bool all_procs)
{
	struct exec_probes *x = calloc(1, sizeof(*x));
	uint64_t again = 0;
	int err;

	if (!x)
		return NULL;
	do {
		exec_bpf__destroy(x->skel);
		if (!(x->skel = exec_bpf__open())) {
			err = -errno;
			break;
		}
		x->skel->rodata->all_procs = all_procs;
		if (!(err = probes_share_maps(ops, x->skel->obj)))
			err = exec_bpf__load(x->skel);
	} while (probes_load_again(err, &again));
	if (!err)
		err = exec_bpf__attach(x->skel);
	if (err) {
		exec_probes_free(x);
		errno = -err;
		return NULL;
	}
	return x;
}

void exec_probes_detach(struct exec_probes *x)
{
	if (x)
		exec_bpf__detach(x->skel);
}

void exec_probes_free(struct exec_probes *x)
{
	if (!x)
		return;
	exec_bpf__destroy(x->skel);
	free(x);
}

const struct bpf_object *exec_probes_obj(const struct exec_probes *x)
{
	return x ? x->skel->obj : NULL;
}
