// SPDX-License-Identifier: BSD-2-Clause
/* Native addresses to files and functions. See natsym.h. */
#define _GNU_SOURCE
#include "record/natsym.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/elfsym.h"
#include "lib/hash.h"
#include "lib/names.h"
#include "lib/procmaps.h"

#define MAX_PROCS 4096
#define MAX_FILES 4096
#define MAX_MAPS 8192 /* executable mappings of one process */
#define REREAD_NS 1000000000ull /* a miss reads the maps again at most this often */
#define MAX_HITS (1u << 20) /* addresses named, remembered (then forgotten at once) */

struct func {
	uint64_t addr, size;
	const char *name; /* the symbol's (in the ELF file), demangled once asked for */
	bool demangled;
};

/* A mapped file's functions, by address; ef NULL: could not be read. */
struct file {
	const char *path; /* in ns->names */
	struct func *funcs;
	uint32_t n, cap;
	struct elf_file *ef;
};

struct map {
	uint64_t start, end, off;
	struct file *file; /* NULL: anonymous */
};

struct proc {
	int pid;
	struct map *maps;
	uint32_t n;
	uint64_t read_ns;
};

/* An address of a process, named: samples hit the same ones over and over. */
struct hit {
	int pid;
	uint64_t ip;
	struct natsym_hit h;
};

struct natsym {
	struct hash_table hits;  /* hash_pair(pid, ip) -> struct hit */
	struct hash_table procs; /* pid -> struct proc */
	struct hash_table files; /* hash of path -> struct file * */
	struct str_set *names;
};

struct natsym *natsym_new(void)
{
	struct natsym *ns = calloc(1, sizeof(*ns));

	if (!ns)
		return NULL;
	hash_init(&ns->hits, MAX_HITS, sizeof(struct hit));
	hash_init(&ns->procs, MAX_PROCS, sizeof(struct proc));
	hash_init(&ns->files, MAX_FILES, sizeof(struct file *));
	ns->names = str_set_new(1u << 22);
	if (!ns->names) {
		free(ns);
		return NULL;
	}
	return ns;
}

void natsym_free(struct natsym *ns)
{
	struct proc *p;
	struct file **f;

	if (!ns)
		return;
	for (uint32_t i = 0; (p = hash_next(&ns->procs, &i));)
		free(p->maps);
	for (uint32_t i = 0; (f = hash_next(&ns->files, &i));) {
		free((*f)->funcs);
		elf_file_close((*f)->ef);
		free(*f);
	}
	hash_free(&ns->hits);
	hash_free(&ns->procs);
	hash_free(&ns->files);
	str_set_free(ns->names);
	free(ns);
}

static int add_func(const struct elf_func *f, void *ctx)
{
	struct file *file = ctx;

	if (file->n == file->cap) {
		uint32_t cap = file->cap ? 2 * file->cap : 1024;
		struct func *g = realloc(file->funcs, cap * sizeof(*g));

		if (!g)
			return -1;
		file->funcs = g;
		file->cap = cap;
	}
	/* Names are demangled when first asked for: most are never sampled. */
	file->funcs[file->n++] = (struct func){ .addr = f->addr, .size = f->size, .name = f->name };
	return 0;
}

static bool str_eq(const void *val, const void *key)
{
	return !strcmp((*(struct file *const *)val)->path, key);
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* The file at path, its symbols read through pid's map_files entry. */
static struct file *file_of(struct natsym *ns, int pid, const char *path, uint64_t start,
			    uint64_t end)
{
	uint64_t h = str_hash(path);
	struct file **slot = hash_get_eq(&ns->files, h, str_eq, path), *f;
	char mf[96], err[256];
	int fd;

	if (slot)
		return *slot;
	if (!(f = calloc(1, sizeof(*f))) || !(slot = hash_add(&ns->files, h))) {
		free(f);
		return NULL;
	}
	*slot = f;
	f->path = str_set_intern(ns->names, path);
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
	fd = open(mf, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		f->ef = elf_file_open_exported(fd, err, sizeof(err));
		close(fd);
	}
	if (f->ef)
		elf_file_for_each_func(f->ef, add_func, f);
	return f;
}

/* Reads pid's executable mappings. */
static void read_maps(struct natsym *ns, struct proc *p)
{
	struct procmaps *m;
	struct procmap e;

	p->n = 0;
	p->read_ns = clock_mono_ns();
	if (!(m = procmaps_open(p->pid)))
		return;
	if (!p->maps && !(p->maps = malloc(MAX_MAPS * sizeof(*p->maps)))) {
		procmaps_close(m);
		return;
	}
	while (p->n < MAX_MAPS && procmaps_next(m, &e)) {
		if (e.perms[2] != 'x')
			continue;
		p->maps[p->n++] = (struct map){ .start = e.start, .end = e.end, .off = e.offset,
			.file = e.path[0] == '/' ? file_of(ns, p->pid, e.path, e.start, e.end) :
						   NULL };
	}
	procmaps_close(m);
}

static struct map *map_of(struct proc *p, uint64_t ip)
{
	for (uint32_t i = 0; i < p->n; i++)
		if (ip >= p->maps[i].start && ip < p->maps[i].end)
			return &p->maps[i];
	return NULL;
}

static const char *func_of(struct natsym *ns, struct file *f, uint64_t off)
{
	uint64_t va;
	uint32_t lo = 0, hi;

	if (!f->ef || !f->n || (va = elf_file_off_to_vaddr(f->ef, off)) == UINT64_MAX)
		return NULL;
	hi = f->n;
	while (hi - lo > 1) { /* the last function starting at or before va */
		uint32_t mid = lo + (hi - lo) / 2;

		if (f->funcs[mid].addr <= va)
			lo = mid;
		else
			hi = mid;
	}
	if (va < f->funcs[lo].addr || va >= f->funcs[lo].addr + f->funcs[lo].size)
		return NULL;
	if (!f->funcs[lo].demangled) {
		const char *d = demangle_intern(ns->names, f->funcs[lo].name);

		f->funcs[lo].name = d ? d : f->funcs[lo].name;
		f->funcs[lo].demangled = true;
	}
	return f->funcs[lo].name;
}

/* pid's mappings, read (their files' symbols too) when first asked for. */
static struct proc *proc_of(struct natsym *ns, int pid)
{
	struct proc *p = hash_get(&ns->procs, hash_u64((uint64_t)pid));

	if (!p) {
		if (!(p = hash_add(&ns->procs, hash_u64((uint64_t)pid))))
			return NULL;
		*p = (struct proc){ .pid = pid };
		read_maps(ns, p);
	}
	return p;
}

void natsym_warm(struct natsym *ns, int pid)
{
	struct proc *p = hash_get(&ns->procs, hash_u64((uint64_t)pid));

	if (p)
		read_maps(ns, p);
	else
		proc_of(ns, pid);
}

/* Names ip in pid's mappings (read again, at most every REREAD_NS, when
 * ip is in none of them). */
static void resolve(struct natsym *ns, int pid, uint64_t ip, struct natsym_hit *out)
{
	struct proc *p = proc_of(ns, pid);
	struct map *m;

	*out = (struct natsym_hit){ .path = "[unknown]", .file_off = ip };
	if (!p)
		return;
	m = map_of(p, ip);
	if (!m && clock_mono_ns() - p->read_ns >= REREAD_NS) {
		read_maps(ns, p);
		m = map_of(p, ip);
	}
	if (!m)
		return;
	out->file_off = ip - m->start + m->off;
	if (!m->file) {
		out->path = "[anon]";
		return;
	}
	out->path = m->file->path;
	out->function = func_of(ns, m->file, out->file_off);
}

static bool hit_eq(const void *val, const void *key)
{
	const struct hit *a = val, *b = key;

	return a->pid == b->pid && a->ip == b->ip;
}

void natsym_lookup(struct natsym *ns, int pid, uint64_t ip, struct natsym_hit *out)
{
	struct hit k = { .pid = pid, .ip = ip }, *e;
	uint64_t h = hash_pair((uint64_t)pid, ip);

	if ((e = hash_get_eq(&ns->hits, h, hit_eq, &k))) {
		*out = e->h;
		return;
	}
	resolve(ns, pid, ip, out);
	if (hash_full(&ns->hits))
		hash_clear(&ns->hits);
	if ((e = hash_add(&ns->hits, h)))
		*e = (struct hit){ .pid = pid, .ip = ip, .h = *out };
}

void natsym_forget(struct natsym *ns, int pid)
{
	struct proc p;

	if (hash_remove(&ns->procs, hash_u64((uint64_t)pid), &p))
		free(p.maps);
	hash_clear(&ns->hits); /* its addresses among them: rare enough to start over */
}
