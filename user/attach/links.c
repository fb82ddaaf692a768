// SPDX-License-Identifier: BSD-2-Clause
/* A set of BPF links. See links.h. */
#include "attach/links.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <bpf/libbpf.h>

/* Links destroyed at once, each on a thread of its own. */
#define PARALLEL_MAX 64

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

static void *destroy_one(void *l)
{
	bpf_link__destroy(l);
	return NULL;
}

/*
 * Destroys v[0..n), newest first. Taking a uprobe out waits for an RCU
 * grace period: on kernel 6.18 (CI VM) 8 uprobe.multi links took 459 ms
 * one after another and 84 ms when destroyed at once, each on a thread
 * (perf-event uprobes: 903 and 655 ms; the kernel serializes most of
 * their wait).
 */
static void destroy_links(struct bpf_link **v, int n)
{
	while (n > 0) {
		pthread_t th[PARALLEL_MAX];
		bool started[PARALLEL_MAX];
		int k = n < PARALLEL_MAX ? n : PARALLEL_MAX;

		for (int i = 0; i < k; i++) {
			struct bpf_link *l = v[n - 1 - i];

			started[i] = k > 1 && !pthread_create(&th[i], NULL, destroy_one, l);
			if (!started[i])
				bpf_link__destroy(l);
		}
		for (int i = 0; i < k; i++)
			if (started[i])
				pthread_join(th[i], NULL);
		n -= k;
	}
}

void link_set_destroy_pid(struct link_set *s, int pid)
{
	struct bpf_link **gone = malloc(s->n * sizeof(*gone) + 1);
	int kept = 0, ngone = 0;

	for (int i = 0; i < s->n; i++) {
		if (s->pid[i] == pid) {
			if (gone)
				gone[ngone++] = s->v[i];
			else
				bpf_link__destroy(s->v[i]);
			continue;
		}
		s->v[kept] = s->v[i];
		s->pid[kept++] = s->pid[i];
	}
	s->n = kept;
	destroy_links(gone, ngone);
	free(gone);
}

void link_set_destroy(struct link_set *s)
{
	destroy_links(s->v, s->n);
	free(s->v);
	free(s->pid);
	s->v = NULL;
	s->pid = NULL;
	s->n = 0;
}
