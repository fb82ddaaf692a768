// SPDX-License-Identifier: BSD-2-Clause
/* A set of BPF links. See links.h. */
#include "links.h"

#include <errno.h>
#include <stdlib.h>
#include <bpf/libbpf.h>

int link_set_keep(struct link_set *s, struct bpf_link *l)
{
	struct bpf_link **v;

	if (!l)
		return -errno;
	v = realloc(s->v, (s->n + 1) * sizeof(*v));
	if (!v) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	s->v = v;
	s->v[s->n++] = l;
	return 0;
}

void link_set_destroy(struct link_set *s)
{
	for (int i = s->n - 1; i >= 0; i--)
		bpf_link__destroy(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}
