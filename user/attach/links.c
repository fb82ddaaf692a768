// SPDX-License-Identifier: BSD-2-Clause
/* A set of BPF links. See links.h. */
#include "attach/links.h"
#include "attach/keeper.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

/* Adds a slot for a link of pid: ptbpf's own l, or the keeper's id. */
static int add(struct link_set *s, int pid, struct bpf_link *l, int id, bool end)
{
	struct bpf_link **v = realloc(s->v, (s->n + 1) * sizeof(*v));
	int *k = v ? realloc(s->kept, (s->n + 1) * sizeof(*k)) : NULL;
	int *p = k ? realloc(s->pid, (s->n + 1) * sizeof(*p)) : NULL;
	bool *e = p ? realloc(s->ends, (s->n + 1) * sizeof(*e)) : NULL;

	if (v)
		s->v = v;
	if (k)
		s->kept = k;
	if (p)
		s->pid = p;
	if (!e)
		return -ENOMEM;
	s->ends = e;
	s->v[s->n] = l;
	s->kept[s->n] = id;
	s->ends[s->n] = end;
	s->pid[s->n++] = pid;
	return 0;
}

int link_set_uprobes(struct link_set *s, int pid, const struct bpf_program *prog,
		     const char *path, const struct bpf_uprobe_multi_opts *o, bool end)
{
	int id = keeper_attach(bpf_program__fd(prog), pid, path, o->offsets, o->cookies, o->cnt,
			       o->retprobe, end);
	int err = id < 0 ? id : add(s, pid, NULL, id, end);

	if (id >= 0 && err)
		keeper_destroy(&id, 1);
	return err;
}

int link_set_keep(struct link_set *s, int pid, struct bpf_link *l)
{
	int err;

	if (!l)
		return errno ? -errno : -EINVAL; /* never 0 for a link not made */
	err = add(s, pid, l, -1, false);
	if (err)
		bpf_link__destroy(l);
	return err;
}

/* Destroys the links of s that pid selects (every link for -1): those
 * that begin slices, then those that end them. A call that entered
 * while its entry probe was still there returns to its end probe; ending
 * them together left the calls begun in between open (1,418 GPU calls
 * of a launch loop on the CI VM, nested into "too deep"). */
static void destroy_matching(struct link_set *s, int pid)
{
	int *ids = malloc(s->n * sizeof(*ids) + 1);
	int kept = 0;

	for (int end = 0; end < 2; end++) {
		int n = 0;

		for (int i = 0; i < s->n; i++) {
			if ((pid >= 0 && s->pid[i] != pid) || s->ends[i] != end)
				continue;
			if (s->v[i])
				bpf_link__destroy(s->v[i]);
			else if (ids)
				ids[n++] = s->kept[i];
			else
				keeper_destroy(&s->kept[i], 1);
			s->v[i] = NULL;
			s->kept[i] = -1;
		}
		if (n)
			keeper_destroy(ids, n);
	}
	free(ids);
	for (int i = 0; i < s->n; i++) {
		if (!s->v[i] && s->kept[i] < 0)
			continue;
		s->v[kept] = s->v[i];
		s->kept[kept] = s->kept[i];
		s->ends[kept] = s->ends[i];
		s->pid[kept++] = s->pid[i];
	}
	s->n = kept;
}

void link_set_destroy_pid(struct link_set *s, int pid)
{
	destroy_matching(s, pid);
}

void link_set_destroy(struct link_set *s)
{
	destroy_matching(s, -1);
	free(s->v);
	free(s->kept);
	free(s->pid);
	free(s->ends);
	memset(s, 0, sizeof(*s));
}
