// SPDX-License-Identifier: BSD-2-Clause
/* Triton kernels -> what they fuse, from Inductor's output code. See inductor.h. */
#define _GNU_SOURCE
#include "record/inductor.h"

#include <dirent.h>
#include <linux/openat2.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/hash.h"
#include "lib/names.h"
#include "attach/target.h"

#define MAX_PIDS 64                /* processes whose cache is read */
#define MAX_MODULES 16384          /* output code modules kept, all processes */
#define MAX_CANDS (1u << 20)       /* (module, kernel) pairs kept */
#define MAX_MODULE_BYTES (16u << 20)
#define MAX_FILES_SEEN 65536       /* files looked at, per process */
#define MAX_DIRS_SEEN 4096         /* cache directories read whole, per process */
#define MAX_BYTES_READ (256ull << 20) /* read, per process */

struct module {
	const char *path; /* as the job names it */
	const char *graph; /* its AOT ID, or NULL */
	int pid;
	int64_t mtime;
	uint32_t uses;    /* kernels of pid taken from it */
};

struct cand {
	int pid;
	uint32_t module;
	const char *name;
	struct inductor_kernel k;
};

struct found {
	int pid;
	bool miss; /* looked for, not found */
	const char *name;
	struct inductor_kernel k;
};

struct pid_cache {
	int pid;
	uint64_t started;      /* its start time: a pid used again is another cache */
	uid_t uid;             /* the job's: files of another user are not read */
	char dir[PATH_MAX];    /* as the job names it (absolute); "" when it has none */
	int root;              /* /proc/PID/root, O_PATH: every path opened inside it */
	bool scanned;          /* read once already */
	uint64_t bytes;        /* read so far */
	struct u64_set *seen;  /* files looked at: (path, mtime, size) */
	struct u64_set *dirs;  /* directories read whole: (inode, ctime) */
};

struct inductor {
	bool read_files;
	struct str_set *strings;
	struct module *modules;
	uint32_t nmodules;
	struct cand *cands;
	uint32_t ncands, cap;
	struct hash_table found; /* hashed (pid, interned name) -> struct found */
	struct pid_cache pids[MAX_PIDS];
	int npids, evict;
	struct inductor_counts counts;
	inductor_found_fn *fn;
	void *ctx;
};

struct inductor *inductor_new(void)
{
	struct inductor *ix = calloc(1, sizeof(*ix));

	if (!ix)
		return NULL;
	ix->read_files = true;
	ix->strings = str_set_new(1 << 20);
	ix->modules = calloc(MAX_MODULES, sizeof(*ix->modules));
	hash_init(&ix->found, 1 << 20, sizeof(struct found));
	if (!ix->strings || !ix->modules) {
		inductor_free(ix);
		return NULL;
	}
	return ix;
}

void inductor_free(struct inductor *ix)
{
	if (!ix)
		return;
	for (int i = 0; i < ix->npids; i++) {
		u64_set_free(ix->pids[i].seen);
		u64_set_free(ix->pids[i].dirs);
		if (ix->pids[i].root >= 0)
			close(ix->pids[i].root);
	}
	hash_free(&ix->found);
	free(ix->cands);
	free(ix->modules);
	str_set_free(ix->strings);
	free(ix);
}

void inductor_replay(struct inductor *ix)
{
	ix->read_files = false;
}

void inductor_on_found(struct inductor *ix, inductor_found_fn *fn, void *ctx)
{
	ix->fn = fn;
	ix->ctx = ctx;
}

const struct inductor_counts *inductor_counts(const struct inductor *ix)
{
	return &ix->counts;
}

/* ---- the job's cache directory ---- */

/* path inside the job's root (symlinks and ".." stay in it: a job cannot
 * point ptbpf at the host's files), never blocking on a FIFO or a device:
 * a regular file (or, with O_DIRECTORY, a directory) or -1. */
static int open_in_root(int root, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = root >= 0 ? (int)syscall(SYS_openat2, root, path, &how, sizeof(how)) : -1;
	struct stat st;

	if (fd >= 0 && (fstat(fd, &st) ||
			!((flags & O_DIRECTORY) ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The user name of uid in the job's own /etc/passwd (getpass.getuser's
 * last resort), into buf; false if none. */
static bool user_name(int root, uid_t uid, char *buf, size_t len)
{
	int fd = open_in_root(root, "/etc/passwd", O_RDONLY);
	char *text = fd >= 0 ? malloc(1 << 20) : NULL, *p, *line;
	ssize_t n = text ? read(fd, text, (1 << 20) - 1) : -1;
	bool found = false;

	if (fd >= 0)
		close(fd);
	for (p = n > 0 ? (text[n] = 0, text) : NULL; !found && p && (line = strsep(&p, "\n"));) {
		char *name = strsep(&line, ":"), *id, *end;

		strsep(&line, ":"); /* the password field */
		id = strsep(&line, ":");
		if (name && *name && id && *id && strtoul(id, &end, 10) == uid && !*end) {
			snprintf(buf, len, "%s", name);
			found = true;
		}
	}
	free(text);
	return found;
}

/* Where pid's Inductor writes (torch._inductor.runtime.cache_dir_utils):
 * TORCHINDUCTOR_CACHE_DIR, else tempfile.gettempdir()/torchinductor_USER
 * with USER as getpass.getuser() finds it. */
static void find_dir(struct pid_cache *c)
{
	char path[64], user[256] = "", *env = NULL;
	const char *dir, *tmp, *u = NULL;
	size_t len = 0;
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", c->pid);
	if (stat(path, &st))
		return;
	c->uid = st.st_uid;
	snprintf(path, sizeof(path), "/proc/%d/root", c->pid);
	c->root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	env = malloc(1 << 20);
	len = env ? target_environ(c->pid, env, 1 << 20) : 0;
	dir = env ? target_env_get(env, len, "TORCHINDUCTOR_CACHE_DIR") : NULL;
	if (dir && *dir) {
		snprintf(c->dir, sizeof(c->dir), "%s", dir);
	} else {
		static const char *const users[] = { "LOGNAME", "USER", "LNAME", "USERNAME" };

		for (size_t i = 0; env && !u && i < sizeof(users) / sizeof(users[0]); i++)
			if ((u = target_env_get(env, len, users[i])) && !*u)
				u = NULL;
		if (!u && user_name(c->root, c->uid, user, sizeof(user)))
			u = user;
		tmp = env ? target_env_get(env, len, "TMPDIR") : NULL;
		if (u)
			snprintf(c->dir, sizeof(c->dir), "%s/torchinductor_%s",
				 tmp && *tmp == '/' ? tmp : "/tmp", u);
	}
	free(env);
	if (c->dir[0] != '/') /* relative to the job's working directory: not read */
		c->dir[0] = 0;
}

/* ---- reading output code ---- */

/* "[aten.addmm, aten.add]" (from just after '[') as "aten::addmm, aten::add". */
static const char *aten_list(struct inductor *ix, const char *s, const char *end)
{
	char out[4096];
	size_t o = 0;
	bool dotted = false;

	for (; s < end && *s != ']' && o + 3 < sizeof(out); s++) {
		if (*s == '.' && !dotted) {
			out[o++] = ':';
			out[o++] = ':';
			dotted = true;
			continue;
		}
		if (*s == ',')
			dotted = false;
		out[o++] = *s;
	}
	return o ? str_set_add_n(ix->strings, out, o) : NULL;
}

/* "[linear_7, input_4]" (from just after '[') as "linear_7, input_4". */
static const char *node_list(struct inductor *ix, const char *s, const char *end)
{
	const char *e = memchr(s, ']', end - s);

	return e && e > s ? str_set_add_n(ix->strings, s, e - s) : NULL;
}

static void add_cand(struct inductor *ix, int pid, uint32_t module, const char *name,
		     size_t len, const struct inductor_kernel *k)
{
	if (ix->ncands == ix->cap) {
		uint32_t cap = ix->cap ? ix->cap * 2 : 1024;
		struct cand *c = cap <= MAX_CANDS ? realloc(ix->cands, cap * sizeof(*c)) : NULL;

		if (!c)
			return;
		ix->cands = c;
		ix->cap = cap;
	}
	ix->cands[ix->ncands++] = (struct cand){ .pid = pid, .module = module,
						  .name = str_set_add_n(ix->strings, name, len),
						  .k = *k };
}

/* The module's first line, "# AOT ID: ['0_forward']": "0_forward". */
static const char *aot_id(struct inductor *ix, const char *text, size_t len)
{
	static const char tag[] = "# AOT ID: ['";
	const char *id = text + sizeof(tag) - 1, *q;

	if (len < sizeof(tag) || memcmp(text, tag, sizeof(tag) - 1))
		return NULL;
	q = memchr(id, '\'', len - (sizeof(tag) - 1));
	return q && q > id && !memchr(id, '\n', q - id) ? str_set_add_n(ix->strings, id, q - id) :
							    NULL;
}

/* One module's kernels: each `NAME = async_compile.triton('NAME', ...`
 * line at the left margin, with the comment above it that names what it
 * fuses (the last one since the previous kernel). */
static void parse_module(struct inductor *ix, int pid, uint32_t module, const char *text,
			 size_t len)
{
	static const char nodes_tag[] = "# Topologically Sorted Source Nodes: [",
			  aten_tag[] = "Original ATen: [", def[] = " = async_compile.triton('";
	const char *end = text + len, *line = text;
	struct inductor_kernel k = { .module = ix->modules[module].path,
				     .graph = ix->modules[module].graph };

	while (line < end) {
		const char *eol = memchr(line, '\n', end - line), *a, *d;

		eol = eol ? eol : end;
		if (!strncmp(line, nodes_tag, sizeof(nodes_tag) - 1)) {
			k.nodes = node_list(ix, line + sizeof(nodes_tag) - 1, eol);
			a = memmem(line, eol - line, aten_tag, sizeof(aten_tag) - 1);
			k.aten = a ? aten_list(ix, a + sizeof(aten_tag) - 1, eol) : NULL;
		} else if (line[0] != '#' && line[0] != ' ' &&
			   (d = memmem(line, eol - line, def, sizeof(def) - 1))) {
			const char *name = d + sizeof(def) - 1, *q = memchr(name, '\'', eol - name);

			/* the variable and the kernel are one name */
			if (q && (size_t)(q - name) == (size_t)(d - line) &&
			    !memcmp(name, line, q - name) && (k.aten || k.nodes))
				add_cand(ix, pid, module, name, q - name, &k);
			k.aten = k.nodes = NULL;
		}
		line = eol + 1;
	}
}

/* Reads one file if it is new, the job's user's, and output code; false
 * when it could not be opened (then its directory is looked in again). */
static bool read_module(struct inductor *ix, struct pid_cache *c, const char *path)
{
	int fd = open_in_root(c->root, path, O_RDONLY);
	struct stat st;
	uint64_t key;
	char *text;
	ssize_t n;

	if (fd < 0)
		return false;
	if (fstat(fd, &st)) {
		close(fd);
		return false;
	}
	key = hash_pair(hash_pair(st.st_dev, st.st_ino),
			(uint64_t)st.st_mtime ^ (uint64_t)st.st_size << 32);
	if (u64_set_has(c->seen, key)) { /* read before, unchanged */
		close(fd);
		return true;
	}
	if (!u64_set_add(c->seen, key) || st.st_uid != c->uid || st.st_size > MAX_MODULE_BYTES ||
	    c->bytes + (uint64_t)st.st_size > MAX_BYTES_READ || ix->nmodules == MAX_MODULES) {
		ix->counts.modules_skipped++;
		close(fd);
		return true;
	}
	text = malloc(st.st_size + 1);
	n = text ? read(fd, text, st.st_size) : -1;
	close(fd);
	c->bytes += n > 0 ? (uint64_t)n : 0;
	if (n > 0 && (text[n] = 0, memmem(text, n, "async_compile.triton(", 21))) {
		ix->modules[ix->nmodules] = (struct module){
			.path = str_set_intern(ix->strings, path), .pid = c->pid,
			.graph = aot_id(ix, text, n), .mtime = st.st_mtime };
		parse_module(ix, c->pid, ix->nmodules++, text, n);
		ix->counts.modules++;
	}
	free(text);
	return true;
}

/* Every *.py in the cache's two-letter directories not read before. */
static void scan(struct inductor *ix, struct pid_cache *c)
{
	int fd = c->dir[0] ? open_in_root(c->root, c->dir, O_RDONLY | O_DIRECTORY) : -1;
	DIR *top = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	c->scanned = true;
	if (!top) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(top))) {
		char sub[PATH_MAX + 8];
		struct dirent *f;
		uint64_t key = 0;
		bool whole = true;
		struct stat st;
		DIR *d;

		if (strlen(e->d_name) != 2 || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", c->dir, e->d_name);
		fd = open_in_root(c->root, sub, O_RDONLY | O_DIRECTORY);
		/* Unchanged since it was read whole (its ctime, taken before
		 * the read, moves with every file made or renamed in it, and no
		 * tool can set it back): a rescan looks at none of its files
		 * again. A directory changed in the last 2 s is always looked
		 * in: some filesystems keep times in whole seconds, where a file
		 * made in the same second leaves it as it was. */
		if (fd >= 0 && !fstat(fd, &st) && st.st_ctim.tv_sec + 2 <= time(NULL))
			key = hash_pair(hash_pair(st.st_dev, st.st_ino),
					(uint64_t)st.st_ctim.tv_sec * 1000000000ull + st.st_ctim.tv_nsec);
		if (fd < 0 || (key && u64_set_has(c->dirs, key)) || !(d = fdopendir(fd))) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((f = readdir(d))) {
			size_t n = strlen(f->d_name);
			char path[PATH_MAX * 2];

			if (n < 4 || strcmp(f->d_name + n - 3, ".py"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", sub, f->d_name);
			whole &= read_module(ix, c, path);
		}
		closedir(d);
		if (key && whole)
			u64_set_add(c->dirs, key);
	}
	closedir(top);
}

static struct pid_cache *cache_of(struct inductor *ix, int pid)
{
	uint64_t started = target_start_time(pid);
	struct pid_cache *c;

	for (int i = 0; i < ix->npids; i++)
		if (ix->pids[i].pid == pid && ix->pids[i].started == started)
			return &ix->pids[i];
	/* past MAX_PIDS, the earliest make room (processes of the past) */
	c = &ix->pids[ix->npids < MAX_PIDS ? ix->npids++ : ix->evict++ % MAX_PIDS];
	for (int i = 0; i < ix->npids; i++) /* a process of the pid before: gone */
		if (ix->pids[i].pid == pid && &ix->pids[i] != c)
			ix->pids[i].pid = -1;
	u64_set_free(c->seen);
	u64_set_free(c->dirs);
	if (c->pid && c->root >= 0)
		close(c->root);
	memset(c, 0, sizeof(*c));
	c->root = -1;
	c->pid = pid;
	c->started = started;
	c->seen = u64_set_new(MAX_FILES_SEEN);
	c->dirs = u64_set_new(MAX_DIRS_SEEN);
	find_dir(c);
	return c;
}

/* ---- lookups ---- */

struct found_key {
	int pid;
	const char *name;
};

static bool found_eq(const void *val, const void *key)
{
	const struct found *f = val;
	const struct found_key *k = key;

	return f->pid == k->pid && f->name == k->name;
}

static uint64_t found_hash(int pid, const char *name)
{
	return hash_pair((uint64_t)pid, (uint64_t)(uintptr_t)name);
}

static struct found *found_of(struct inductor *ix, int pid, const char *name)
{
	struct found_key key = { pid, name };

	return hash_get_eq(&ix->found, found_hash(pid, name), found_eq, &key);
}

/* k NULL: looked for, and not found. */
static void keep(struct inductor *ix, int pid, const char *name, const struct inductor_kernel *k)
{
	struct found *f = found_of(ix, pid, name);

	if (!f && !(f = hash_add(&ix->found, found_hash(pid, name))))
		return;
	*f = (struct found){ .pid = pid, .name = name, .miss = !k };
	if (k)
		f->k = *k;
}

/* The candidate for (pid, name) from the module most of pid's kernels
 * came from, then the newest; or NULL. */
static const struct cand *best(struct inductor *ix, int pid, const char *name)
{
	const struct cand *b = NULL;

	for (uint32_t i = 0; i < ix->ncands; i++) {
		const struct cand *c = &ix->cands[i];
		const struct module *m = &ix->modules[c->module], *bm;

		if (c->pid != pid || c->name != name)
			continue;
		bm = b ? &ix->modules[b->module] : NULL;
		if (!b || m->uses > bm->uses || (m->uses == bm->uses && m->mtime > bm->mtime))
			b = c;
	}
	return b;
}

void inductor_name(struct inductor *ix, int pid, const char *raw)
{
	const struct cand *c;
	struct pid_cache *pc;
	const char *name;
	bool fresh;

	if (!ix->read_files || strncmp(raw, "triton", 6))
		return;
	name = str_set_intern(ix->strings, raw);
	if (found_of(ix, pid, name)) /* a name CUPTI gave again */
		return;
	ix->counts.names++;
	pc = cache_of(ix, pid);
	if ((fresh = !pc->scanned))
		scan(ix, pc);
	if (!(c = best(ix, pid, name)) && !fresh) {
		scan(ix, pc); /* modules written since (a graph compiled later) */
		c = best(ix, pid, name);
	}
	if (!c) {
		keep(ix, pid, name, NULL);
		return;
	}
	ix->counts.found++;
	ix->modules[c->module].uses++;
	keep(ix, pid, name, &c->k);
	if (ix->fn)
		ix->fn(ix->ctx, pid, name, &c->k);
}

const struct inductor_kernel *inductor_get(struct inductor *ix, int pid, const char *name)
{
	const struct found *f;

	if (strncmp(name, "triton", 6) || !str_set_has_n(ix->strings, name, strlen(name)))
		return NULL;
	f = found_of(ix, pid, str_set_intern(ix->strings, name));
	return f && !f->miss ? &f->k : NULL;
}

void inductor_add(struct inductor *ix, int pid, const char *name, const struct inductor_kernel *k)
{
	struct inductor_kernel in = {
		.aten = k->aten ? str_set_intern(ix->strings, k->aten) : NULL,
		.nodes = k->nodes ? str_set_intern(ix->strings, k->nodes) : NULL,
		.module = k->module ? str_set_intern(ix->strings, k->module) : NULL,
		.graph = k->graph ? str_set_intern(ix->strings, k->graph) : NULL,
	};

	ix->counts.names++;
	ix->counts.found++;
	keep(ix, pid, str_set_intern(ix->strings, name), &in);
}
