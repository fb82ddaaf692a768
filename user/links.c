// SPDX-License-Identifier: BSD-2-Clause
/* A set of BPF links. See links.h. */
#include "links.h"

#include <errno.h>
#include <stdlib.h>
#include <bpf/libbpf.h>

int link_set_keep(struct link_set *s, int pid, struct bpf_link *l)
{
	struct bpf_link **v;
	int *p;

	if (!l)
		return -errno;
	v = realloc(s->v, (s->n + 1) * sizeof(*v));
	if (v)
		s->v = v;
	p = v ? realloc(s->pid, (s->n + 1) * sizeof(*p)) : NULL;
	if (!p) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	s->pid = p;
	s->v[s->n] = l;
	s->pid[s->n++] = pid;
	return 0;
}

void link_set_destroy_pid(struct link_set *s, int pid)
{
	int kept = 0;

	for (int i = 0; i < s->n; i++) {
		if (s->pid[i] == pid) {
			bpf_link__destroy(s->v[i]);
			continue;
		}
		s->v[kept] = s->v[i];
		s->pid[kept++] = s->pid[i];
	}
	s->n = kept;
}

void link_set_destroy(struct link_set *s)
{
	for (int i = s->n - 1; i >= 0; i--)
		bpf_link__destroy(s->v[i]);
	free(s->v);
	free(s->pid);
	s->v = NULL;
	s->pid = NULL;
	s->n = 0;
}
