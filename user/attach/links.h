/* SPDX-License-Identifier: BSD-2-Clause */
/* A growing set of BPF links, each of one process, destroyed together or
 * by process: the probes that begin a slice first, then those that end
 * one, so that no call begun during the detach is left without its end.
 * Uprobes are made and held by the link keeper (keeper.h), never by
 * ptbpf itself; other links (a tracepoint) are ptbpf's. */
#ifndef PTBPF_LINKS_H
#define PTBPF_LINKS_H

#include <stdbool.h>

struct bpf_link;
struct bpf_program;
struct bpf_uprobe_multi_opts;

struct link_set {
	struct bpf_link **v; /* ptbpf's own link, or NULL: */
	int *kept;           /* the keeper's id of a uprobe link */
	int *pid;
	bool *ends; /* an end probe: destroyed after the others */
	int n;
};

/* Attaches prog at o's offsets (cookies, retprobe) of path for pid, a
 * uprobe.multi link made by the keeper, and keeps it; end: a probe that
 * ends what another begins (a uretprobe, an op's exit sites), attached
 * before and destroyed after them. 0 or -errno. */
int link_set_uprobes(struct link_set *s, int pid, const struct bpf_program *prog,
		     const char *path, const struct bpf_uprobe_multi_opts *o, bool end);
/* Keeps l (the result of a bpf_program__attach_* call for pid that is no
 * uprobe); 0, or -errno when l is NULL (errno from libbpf) or memory ran
 * out (l is then destroyed). */
int link_set_keep(struct link_set *s, int pid, struct bpf_link *l);
/* Destroys pid's links: its probes are gone when this returns. */
void link_set_destroy_pid(struct link_set *s, int pid);
/* Destroys every link: the probes are gone when this returns. */
void link_set_destroy(struct link_set *s);

#endif /* PTBPF_LINKS_H */
