/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the link sets (user/attach/links.c): at detach every probe
 * that begins a slice must be gone before any probe that ends one is
 * taken out, whether the whole set goes or one process's links. Built
 * with --wrap for the link keeper's calls and libbpf's: the keeper's
 * "links" are numbered tokens, taken out in batches (keeper_destroy
 * returns once its batch is gone), and one link is ptbpf's own (a
 * tracepoint's), destroyed by libbpf.
 */
#include "attach/links.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <bpf/libbpf.h>

#include "check.h"

#define NLINKS 40 /* per process: 20 begins, 20 ends */

static int next_id, destroyed[2 * NLINKS], batches, end_before_begins, own_destroyed;
static bool end_of[2 * NLINKS];
static int pid_of[2 * NLINKS];

int __wrap_keeper_attach(int prog_fd, int pid, const char *path, const unsigned long *offsets,
			 const __u64 *cookies, size_t cnt, bool retprobe, bool end)
{
	(void)prog_fd, (void)path, (void)offsets, (void)cookies, (void)cnt, (void)retprobe;
	pid_of[next_id] = pid;
	end_of[next_id] = end;
	return next_id++;
}

/* A batch (taken out at once) with an end while a begin of the same
 * process was still in before it: an end taken out before a begin. */
int __wrap_keeper_destroy(const int *ids, int n)
{
	batches++;
	for (int i = 0; i < n; i++)
		for (int j = 0; end_of[ids[i]] && j < next_id; j++)
			if (!end_of[j] && !destroyed[j] && pid_of[j] == pid_of[ids[i]])
				end_before_begins++;
	for (int i = 0; i < n; i++)
		destroyed[ids[i]]++;
	return 0;
}

void __wrap_bpf_link__destroy(struct bpf_link *l)
{
	(void)l;
	own_destroyed++;
}

int __wrap_bpf_program__fd(const struct bpf_program *prog)
{
	(void)prog;
	return 7;
}

/* Links of two processes, each end kept before its begin (as the probes
 * attach: ends first), and one of ptbpf's own. */
static void fill(struct link_set *s)
{
	LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .cnt = 1);

	for (int i = 0; i < 2 * NLINKS; i++) {
		int pid = i < NLINKS ? 100 : 200;
		int rc = link_set_uprobes(s, pid, NULL, "/lib", &o, i % 2 == 0);

		CHECK(rc == 0, "kept", i);
	}
	CHECK(link_set_keep(s, 0, (struct bpf_link *)(uintptr_t)1) == 0, "own kept", 0);
}

int main(void)
{
	struct link_set s = { 0 };

	CHECK(link_set_keep(&s, 1, NULL) < 0, "a NULL link is an error", 0);
	CHECK(s.n == 0, "and not kept", s.n);

	fill(&s);
	CHECK(s.n == 2 * NLINKS + 1, "all kept", s.n);

	/* One process's links: its begins all gone before any of its ends. */
	link_set_destroy_pid(&s, 100);
	CHECK(end_before_begins == 0, "pid 100: no end taken out while a begin remained",
	      end_before_begins);
	CHECK(batches == 2, "pid 100: begins in one batch, ends in the next", batches);
	CHECK(s.n == NLINKS + 1, "pid 200's links and ptbpf's own kept", s.n);
	for (int id = 0; id < NLINKS; id++)
		CHECK(destroyed[id] == 1, "pid 100: each link once", id);
	for (int id = NLINKS; id < 2 * NLINKS; id++)
		CHECK(destroyed[id] == 0, "pid 200: none yet", id);
	CHECK(own_destroyed == 0, "ptbpf's own link kept", own_destroyed);

	/* The rest. */
	link_set_destroy(&s);
	CHECK(end_before_begins == 0, "all: no end taken out while a begin remained",
	      end_before_begins);
	CHECK(s.n == 0 && !s.v && !s.kept, "all destroyed, the set empty", s.n);
	for (int id = 0; id < 2 * NLINKS; id++)
		CHECK(destroyed[id] == 1, "each link once", id);
	CHECK(own_destroyed == 1, "ptbpf's own link destroyed", own_destroyed);
	return check_summary("test_links");
}
