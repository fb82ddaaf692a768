/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Native code addresses of a traced process to what they are: the mapped
 * file (from /proc/PID/maps, read again when an address falls outside what
 * was read), the offset in it, and the function (ELF symbols of the file
 * opened through /proc/PID/map_files, exported ones: .dynsym, as
 * elf_file_open_exported says why; demangled). For CPU samples
 * (record/samples.c), while the process lives.
 */
#ifndef PTBPF_NATSYM_H
#define PTBPF_NATSYM_H

#include <stdint.h>

struct natsym;

struct natsym_hit {
	const char *path;     /* the mapped file, or "[anon]" (JIT code, stubs) */
	uint64_t file_off;    /* the address's offset in that file */
	const char *function; /* demangled; NULL if no symbol covers it */
};

struct natsym *natsym_new(void);
void natsym_free(struct natsym *ns);
/* Names ip in process pid; strings live as long as ns. */
void natsym_lookup(struct natsym *ns, int pid, uint64_t ip, struct natsym_hit *out);
/* Reads pid's mappings and their files' symbols now (tens to hundreds
 * of ms for libtorch), not at its first sample, when the loader has
 * rings to drain. Again for a pid already read: its mappings anew (a
 * library it loaded since, e.g. ptbpf's agent), files read once. */
void natsym_warm(struct natsym *ns, int pid);
/* Forgets pid (it exited: its pid may be reused). */
void natsym_forget(struct natsym *ns, int pid);

#endif /* PTBPF_NATSYM_H */
