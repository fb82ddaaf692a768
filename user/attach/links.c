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

static int keep(struct link_set *s, int pid, struct bpf_link *l, bool end)
{
	struct bpf_link **v;
	int *p;
	bool *e;

	if (!l)
		return errno ? -errno : -EINVAL; /* never 0 for a link not made */
	v = realloc(s->v, (s->n + 1) * sizeof(*v));
	if (v)
		s->v = v;
	p = v ? realloc(s->pid, (s->n + 1) * sizeof(*p)) : NULL;
	if (p)
		s->pid = p;
	e = p ? realloc(s->ends, (s->n + 1) * sizeof(*e)) : NULL;
	if (!e) {
		bpf_link__destroy(l);
		return -ENOMEM;
	}
	s->ends = e;
	s->v[s->n] = l;
	s->ends[s->n] = end;
	s->pid[s->n++] = pid;
	return 0;
}

int link_set_keep(struct link_set *s, int pid, struct bpf_link *l)
{
	return keep(s, pid, l, false);
}

int link_set_keep_end(struct link_set *s, int pid, struct bpf_link *l)
{
	return keep(s, pid, l, true);
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

/* Destroys the links of s that pid selects (every link for -1): those
 * that begin slices, then those that end them. A call that entered
 * while its entry probe was still there returns to its end probe; ending
 * them together left the calls begun in between open (1,418 GPU calls
 * of a launch loop on the CI VM, nested into "too deep"). */
static void destroy_matching(struct link_set *s, int pid)
{
	struct bpf_link **gone = malloc(s->n * sizeof(*gone) + 1);
	int kept = 0, ngone = 0, nbegin = 0;

	for (int end = 0; end < 2; end++) {
		for (int i = 0; i < s->n; i++) {
			if ((pid >= 0 && s->pid[i] != pid) || s->ends[i] != end)
				continue;
			if (gone)
				gone[ngone++] = s->v[i];
			else
				bpf_link__destroy(s->v[i]);
			s->v[i] = NULL;
		}
		if (!end)
			nbegin = ngone;
	}
	if (gone) {
		destroy_links(gone, nbegin);
		destroy_links(gone + nbegin, ngone - nbegin);
		free(gone);
	}
	for (int i = 0; i < s->n; i++) {
		if (!s->v[i])
			continue;
		s->v[kept] = s->v[i];
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
	free(s->pid);
	free(s->ends);
	s->v = NULL;
	s->pid = NULL;
	s->ends = NULL;
	s->n = 0;
}
