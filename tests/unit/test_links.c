/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the link sets (user/attach/links.c): at detach every probe
 * that begins a slice must be gone before any probe that ends one is
 * taken out, whether the whole set goes or one process's links. Built
 * with --wrap=bpf_link__destroy: the "links" are numbered tokens, and each
 * destroy of a begin probe takes 2 ms (the kernel's grace period, shortened),
 * so that an end destroyed beside it shows.
 */
#include "attach/links.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

#define NLINKS 40 /* per process: 20 begins, 20 ends */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int norder;                          /* destroys ended */
static int end_before_begins;               /* ends started while begins remained */
static int begins_left;                     /* begins of this wave not yet destroyed */
static int destroyed[4 * NLINKS + 1];

/* A token is 1 + its index in fill(), where even indices are ends. */
static bool is_end(int tok)
{
	return (tok - 1) % 2 == 0;
}

void __wrap_bpf_link__destroy(struct bpf_link *l)
{
	int tok = (int)(uintptr_t)l;

	pthread_mutex_lock(&mu);
	if (is_end(tok) && begins_left > 0)
		end_before_begins++;
	pthread_mutex_unlock(&mu);
	if (!is_end(tok))
		usleep(2000);
	pthread_mutex_lock(&mu);
	if (!is_end(tok))
		begins_left--;
	destroyed[tok]++;
	norder++;
	pthread_mutex_unlock(&mu);
}

/* Links of two processes, each end kept before its begin (as the probes
 * attach: ends first). */
static void fill(struct link_set *s)
{
	for (int i = 0; i < 2 * NLINKS; i++) {
		int pid = i < NLINKS ? 100 : 200;
		struct bpf_link *l = (struct bpf_link *)(uintptr_t)(i + 1);
		int rc = is_end(i + 1) ? link_set_keep_end(s, pid, l) : link_set_keep(s, pid, l);

		CHECK(rc == 0, "kept", i);
	}
}

int main(void)
{
	struct link_set s = { 0 };

	CHECK(link_set_keep(&s, 1, NULL) < 0, "a NULL link is an error", 0);
	CHECK(s.n == 0, "and not kept", s.n);

	fill(&s);
	CHECK(s.n == 2 * NLINKS, "all kept", s.n);

	/* One process's links: its begins all gone before any of its ends. */
	begins_left = NLINKS / 2;
	link_set_destroy_pid(&s, 100);
	CHECK(end_before_begins == 0, "pid 100: no end taken out while a begin remained",
	      end_before_begins);
	CHECK(norder == NLINKS, "pid 100: its links destroyed", norder);
	CHECK(s.n == NLINKS, "pid 200's links kept", s.n);
	for (int tok = 1; tok <= NLINKS; tok++)
		CHECK(destroyed[tok] == 1, "pid 100: each link once", tok);
	for (int tok = NLINKS + 1; tok <= 2 * NLINKS; tok++)
		CHECK(destroyed[tok] == 0, "pid 200: none yet", tok);

	/* The rest. */
	begins_left = NLINKS / 2;
	link_set_destroy(&s);
	CHECK(end_before_begins == 0, "all: no end taken out while a begin remained",
	      end_before_begins);
	CHECK(norder == 2 * NLINKS && s.n == 0 && !s.v, "all destroyed, the set empty", norder);
	for (int tok = 1; tok <= 2 * NLINKS; tok++)
		CHECK(destroyed[tok] == 1, "each link once", tok);
	return check_summary("test_links");
}
