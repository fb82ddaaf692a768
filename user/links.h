/* SPDX-License-Identifier: BSD-2-Clause */
/* A growing set of BPF links, destroyed together (newest first). */
#ifndef PTBPF_LINKS_H
#define PTBPF_LINKS_H

struct bpf_link;

struct link_set {
	struct bpf_link **v;
	int n;
};

/* Keeps l (the result of a bpf_program__attach_* call); 0, or -errno when
 * l is NULL (errno from libbpf) or memory ran out (l is then destroyed). */
int link_set_keep(struct link_set *s, struct bpf_link *l);
/* Destroys every link: the probes are gone when this returns. */
void link_set_destroy(struct link_set *s);

#endif /* PTBPF_LINKS_H */
