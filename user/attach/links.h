/* SPDX-License-Identifier: BSD-2-Clause */
/* A growing set of BPF links, each of one process, destroyed together or
 * by process: the probes that begin a slice first, then those that end
 * one, so that no call begun during the detach is left without its end. */
#ifndef PTBPF_LINKS_H
#define PTBPF_LINKS_H

#include <stdbool.h>

struct bpf_link;

struct link_set {
	struct bpf_link **v;
	int *pid;
	bool *ends; /* an end probe: destroyed after the others */
	int n;
};

/* Keeps l (the result of a bpf_program__attach_* call for pid); 0, or
 * -errno when l is NULL (errno from libbpf) or memory ran out (l is then
 * destroyed). */
int link_set_keep(struct link_set *s, int pid, struct bpf_link *l);
/* The same for a probe that ends what another begins (a uretprobe, an
 * op's exit sites): it is attached before and destroyed after them. */
int link_set_keep_end(struct link_set *s, int pid, struct bpf_link *l);
/* Destroys pid's links: its probes are gone when this returns. */
void link_set_destroy_pid(struct link_set *s, int pid);
/* Destroys every link: the probes are gone when this returns. */
void link_set_destroy(struct link_set *s);

#endif /* PTBPF_LINKS_H */
