// SPDX-License-Identifier: BSD-2-Clause
/*
 * Python stacks: CPython layouts and frame naming. See pystack.h.
 *
 * The offsets below were measured with offsetof() against each version's
 * own headers (CPython 3.10.13, 3.11.7, 3.12.1, 3.13.0, x86-64, default
 * build) and checked on live processes. On 3.13+ the interpreter publishes
 * them itself in _Py_DebugOffsets at the start of _PyRuntime, which is
 * what is used there (the table is the fallback for a matching layout).
 */
#define _GNU_SOURCE
#include "record/pystack.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/elfsym.h"
#include "lib/hash.h"
#include "lib/names.h"
#include "attach/target.h"
#include "lib/text.h"

/* One version's layout: what the BPF side walks and reads (its code
 * object fields are read here too), and where bytecode starts. */
struct py_layout {
	int minor;
	struct ptbpf_py_proc bpf;
	uint16_t code_adaptive; /* co_code_adaptive; 0 in 3.10 (f_lasti counts units) */
};

/* PyThreadState.native_thread_id (3.11+: right after thread_id; 3.10 has
 * none), for pystack_thread, which walks from outside the thread. */
static uint16_t native_tid_off(const struct py_layout *l)
{
	return l->minor >= 11 ? (uint16_t)(l->bpf.ts_thread_id + 8) : 0;
}

#define NO PY_NO_FIELD
static const struct py_layout layouts[] = {
	{ 10, { .interp_head = 32, .threads_head = 8, .ts_next = 8, .ts_thread_id = 176,
		.ts_frame = 24, .cframe_frame = NO, .f_back = 24, .f_code = 32, .f_lasti = 96,
		.f_owner = NO, .lasti_is_int = 1, .co_filename = 104,
		.co_qualname = 112 /* co_name */, .co_firstlineno = 40, .co_linetable = 120,
		.ascii_data = 48, .compact_data = 72 }, 0 },
	{ 11, { .interp_head = 40, .threads_head = 16, .ts_next = 8, .ts_thread_id = 152,
		.ts_frame = 56, .cframe_frame = 8, .f_back = 48, .f_code = 32, .f_lasti = 56,
		.f_owner = NO, .co_filename = 112, .co_qualname = 128, .co_firstlineno = 72,
		.co_linetable = 136, .ascii_data = 48, .compact_data = 72 }, 184 },
	{ 12, { .interp_head = 40, .threads_head = 72, .ts_next = 8, .ts_thread_id = 136,
		.ts_frame = 56, .cframe_frame = 0, .f_back = 8, .f_code = 0, .f_lasti = 56,
		.f_owner = 70, .owner_cstack = 3, .co_filename = 112, .co_qualname = 128,
		.co_firstlineno = 68, .co_linetable = 136, .ascii_data = 40,
		.compact_data = 56 }, 192 },
	{ 13, { .interp_head = 632, .threads_head = 7344, .ts_next = 8, .ts_thread_id = 152,
		.ts_frame = 72, .cframe_frame = NO, .f_back = 8, .f_code = 0, .f_lasti = 56,
		.f_owner = 70, .owner_cstack = 3, .co_filename = 112, .co_qualname = 128,
		.co_firstlineno = 68, .co_linetable = 136, .ascii_data = 40,
		.compact_data = 56 }, 200 },
};

/* _Py_DebugOffsets of 3.13 (Include/internal/pycore_debug_offsets.h), as
 * 8-byte fields after the 8-byte cookie "xdebugpy": the index of each. */
enum {
	DO_VERSION = 1, DO_FREE_THREADED = 2, DO_INTERP_HEAD = 5, DO_THREADS_HEAD = 9, DO_TS_NEXT = 21,
	DO_TS_CURRENT_FRAME = 23, DO_TS_THREAD_ID = 24, DO_F_PREVIOUS = 29,
	DO_F_EXECUTABLE = 30, DO_F_INSTR_PTR = 31, DO_F_OWNER = 33, DO_CO_FILENAME = 35,
	DO_CO_QUALNAME = 37, DO_CO_LINETABLE = 38, DO_CO_FIRSTLINENO = 39,
	DO_CO_ADAPTIVE = 43, DO_ASCII_SIZE = 70, DO_COUNT = 71,
};

static const int do_used[] = {
	DO_INTERP_HEAD, DO_THREADS_HEAD, DO_TS_NEXT, DO_TS_CURRENT_FRAME, DO_TS_THREAD_ID,
	DO_F_PREVIOUS, DO_F_EXECUTABLE, DO_F_INSTR_PTR, DO_F_OWNER, DO_CO_FILENAME,
	DO_CO_QUALNAME, DO_CO_LINETABLE, DO_CO_FIRSTLINENO, DO_CO_ADAPTIVE, DO_ASCII_SIZE,
};

#define MAX_PROCS 256
#define CODE_CACHE_MAX (1u << 19) /* code objects; past it, start over */
#define CODE_READ 256 /* bytes of a code object read: all fields above */

struct proc {
	int pid;
	struct py_layout l; /* l.bpf.code_type: &PyCode_Type */
};

struct code_ent {
	const char *file, *name; /* interned; NULL: not a code object */
	int firstlineno;
	uint8_t *linetable;
	uint32_t nlinetable;
	bool truncated;
};

struct pystack {
	struct proc procs[MAX_PROCS];
	int nprocs;
	struct hash_table cache; /* hash_u64(pid << 48 ^ code address) -> struct code_ent */
	struct str_set *strings;
};

struct pystack *pystack_new(void)
{
	struct pystack *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	hash_init(&ps->cache, CODE_CACHE_MAX, sizeof(struct code_ent));
	ps->strings = str_set_new(1 << 14);
	if (!ps->strings) {
		pystack_free(ps);
		return NULL;
	}
	return ps;
}

static void cache_clear(struct pystack *ps)
{
	struct code_ent *e;

	for (uint32_t i = 0; (e = hash_next(&ps->cache, &i));)
		free(e->linetable);
	hash_clear(&ps->cache);
}

void pystack_free(struct pystack *ps)
{
	if (!ps)
		return;
	cache_clear(ps);
	hash_free(&ps->cache);
	str_set_free(ps->strings);
	free(ps);
}

static const char *basename_of(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* "3.12" in "libpython3.12.so.1.0" or "python3.12": the minor, or -1. */
static int minor_from_name(const char *base)
{
	const char *p = strstr(base, "python3.");
	int minor;

	if (!p || sscanf(p + 8, "%d", &minor) != 1)
		return -1;
	return minor;
}

/* The interpreter file pid maps whose name starts with prefix, its
 * symbols open, and where it is loaded (*base); NULL if there is none. */
static struct elf_file *open_interp(int pid, const char *prefix, struct target_lib *lib,
				    uint64_t *base)
{
	struct elf_file *ef;
	uint64_t v0;
	char why[256];

	*lib = (struct target_lib){ .fd = -1 };
	if (target_find_lib(pid, prefix, lib))
		return NULL;
	ef = elf_file_open_exported(lib->fd, why, sizeof(why));
	close(lib->fd);
	if (ef && (v0 = elf_file_off_to_vaddr(ef, lib->map_off)) == UINT64_MAX) {
		elf_file_close(ef);
		ef = NULL;
	}
	if (ef)
		*base = lib->map_start - v0;
	return ef;
}

/* _PyRuntime in the interpreter file pid maps whose name starts with
 * prefix: 0, or -1 if it is not there. */
static int runtime_in(int pid, const char *prefix, uint64_t *start, uint64_t *size)
{
	struct target_lib lib;
	uint64_t rt, base;
	struct elf_file *ef = open_interp(pid, prefix, &lib, &base);

	if (!ef)
		return -1;
	rt = elf_file_object_addr(ef, "_PyRuntime", size);
	elf_file_close(ef);
	if (!rt || !*size)
		return -1;
	*start = base + rt;
	return 0;
}

int pystack_runtime(int pid, uint64_t *start, uint64_t *size)
{
	if (!runtime_in(pid, "libpython3", start, size) || !runtime_in(pid, "python3", start, size))
		return 0;
	return -1;
}

/* 3.13+: the layout from the interpreter's own _Py_DebugOffsets. */
static int from_debug_offsets(int pid, uint64_t runtime, struct py_layout *l, char *err,
			      size_t errlen)
{
	uint64_t d[DO_COUNT];
	unsigned major, minor;

	if (target_read(pid, runtime, d, sizeof(d)) || memcmp(d, "xdebugpy", 8)) {
		snprintf(err, errlen, "pid %d: no _Py_DebugOffsets at _PyRuntime", pid);
		return -EINVAL;
	}
	major = (unsigned)(d[DO_VERSION] >> 24);
	minor = (unsigned)(d[DO_VERSION] >> 16) & 0xff;
	if (major != 3 || minor != 13) {
		/* Its own layout of _Py_DebugOffsets changed after 3.13. */
		snprintf(err, errlen, "pid %d runs Python %u.%u: stacks support 3.10 to 3.13",
			 pid, major, minor);
		return -ENOTSUP;
	}
	if (d[DO_FREE_THREADED]) {
		snprintf(err, errlen, "pid %d runs a free-threaded Python 3.13 (3.13t): stacks "
			 "support the default (GIL) build", pid);
		return -ENOTSUP;
	}
	for (size_t i = 0; i < sizeof(do_used) / sizeof(do_used[0]); i++) {
		/* Every offset used is 16-bit, and those of a code object fall
		 * in the bytes read of one (CODE_READ). */
		int f = do_used[i];
		uint64_t max = f >= DO_CO_FILENAME && f <= DO_CO_ADAPTIVE ? CODE_READ - 8 : 0xffff;

		if (d[f] > max) {
			snprintf(err, errlen, "pid %d: implausible _Py_DebugOffsets (field %d = %llu)",
				 pid, f, (unsigned long long)d[f]);
			return -EINVAL;
		}
	}
	l->bpf.interp_head = (uint16_t)d[DO_INTERP_HEAD];
	l->bpf.threads_head = (uint16_t)d[DO_THREADS_HEAD];
	l->bpf.ts_next = (uint16_t)d[DO_TS_NEXT];
	l->bpf.ts_frame = (uint16_t)d[DO_TS_CURRENT_FRAME];
	l->bpf.ts_thread_id = (uint16_t)d[DO_TS_THREAD_ID];
	l->bpf.f_back = (uint16_t)d[DO_F_PREVIOUS];
	l->bpf.f_code = (uint16_t)d[DO_F_EXECUTABLE];
	l->bpf.f_lasti = (uint16_t)d[DO_F_INSTR_PTR];
	l->bpf.f_owner = (uint16_t)d[DO_F_OWNER];
	l->bpf.co_filename = (uint16_t)d[DO_CO_FILENAME];
	l->bpf.co_qualname = (uint16_t)d[DO_CO_QUALNAME];
	l->bpf.co_linetable = (uint16_t)d[DO_CO_LINETABLE];
	l->bpf.co_firstlineno = (uint16_t)d[DO_CO_FIRSTLINENO];
	l->code_adaptive = (uint16_t)d[DO_CO_ADAPTIVE];
	l->bpf.ascii_data = (uint16_t)d[DO_ASCII_SIZE];
	l->bpf.compact_data = (uint16_t)(d[DO_ASCII_SIZE] + 16); /* + utf8_length, utf8 */
	return 0;
}

/* One mapped file: is it the interpreter? 1 (found, *l and the
 * addresses filled), 0 (not this one), or -errno with err. */
static int try_lib(int pid, const char *prefix, struct py_layout *l, uint64_t *runtime,
		   uint64_t *code_type, char *err, size_t errlen)
{
	struct target_lib lib;
	uint64_t rt, ct, vv, base;
	struct elf_file *ef = open_interp(pid, prefix, &lib, &base);
	int minor, ret = 0;

	if (!ef)
		return 0;
	rt = elf_file_object_addr(ef, "_PyRuntime", NULL);
	ct = elf_file_object_addr(ef, "PyCode_Type", NULL);
	vv = elf_file_object_addr(ef, "Py_Version", NULL);
	elf_file_close(ef);
	if (!rt || !ct)
		return 0;
	minor = minor_from_name(basename_of(lib.path));
	if (minor < 0 && vv) { /* Py_Version (3.11+): 0x030c03f0 */
		uint32_t hex;

		if (!target_read(pid, base + vv, &hex, sizeof(hex)) && hex >> 24 == 3)
			minor = (hex >> 16) & 0xff;
	}
	*runtime = base + rt;
	*code_type = base + ct;
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor)
			*l = layouts[i], ret = 1;
	if (minor >= 13) {
		*l = layouts[sizeof(layouts) / sizeof(layouts[0]) - 1];
		l->minor = minor;
		ret = from_debug_offsets(pid, *runtime, l, err, errlen) ?: 1;
	} else if (!ret) {
		snprintf(err, errlen, "pid %d: %s is Python 3.%d: stacks support 3.10 to 3.13",
			 pid, lib.path, minor);
		ret = -ENOTSUP;
	}
	return ret;
}

int pystack_find(struct pystack *ps, int pid, struct ptbpf_py_proc *out, char *err,
		 size_t errlen)
{
	struct py_layout l;
	uint64_t runtime = 0, code_type = 0;
	struct proc *p = NULL;
	int ret;

	ret = try_lib(pid, "libpython3", &l, &runtime, &code_type, err, errlen);
	if (!ret)
		ret = try_lib(pid, "python3", &l, &runtime, &code_type, err, errlen);
	if (!ret) {
		snprintf(err, errlen, "pid %d: no CPython with _PyRuntime mapped (libpython3.X "
			 "or python3.X)", pid);
		return -ENOENT;
	}
	if (ret < 0)
		return ret;
	for (int i = 0; i < ps->nprocs; i++)
		if (ps->procs[i].pid == pid)
			p = &ps->procs[i];
	if (!p && ps->nprocs < MAX_PROCS)
		p = &ps->procs[ps->nprocs++];
	if (!p) {
		snprintf(err, errlen, "pid %d: more than %d Python processes", pid, MAX_PROCS);
		return -E2BIG;
	}
	l.bpf.runtime = runtime;
	l.bpf.code_type = code_type;
	*p = (struct proc){ .pid = pid, .l = l };
	*out = l.bpf;
	return 0;
}

/* 3.10's line table (PEP 626): (bytecode byte delta, line delta) pairs;
 * a line delta of -128 has no line. lasti_bytes = f_lasti * 2. */
int pystack_line_310(const uint8_t *t, size_t n, int line, int lasti_bytes)
{
	int end = 0;

	if (lasti_bytes < 0)
		return line;
	for (size_t i = 0; i + 1 < n; i += 2) {
		int start = end, delta = (int8_t)t[i + 1];

		end += t[i];
		if (delta != -128)
			line += delta;
		if (lasti_bytes >= start && lasti_bytes < end)
			return delta == -128 ? -1 : line;
	}
	return -1;
}

/* 6-bit little-endian varint (bit 6: more follows). */
static unsigned varint(const uint8_t *p, const uint8_t *lim)
{
	unsigned v, shift = 0, b;

	if (p >= lim)
		return 0;
	b = *p++;
	v = b & 63;
	while ((b & 64) && p < lim && shift < 24) {
		b = *p++;
		shift += 6;
		v |= (b & 63) << shift;
	}
	return v;
}

/* 3.11+'s location table (Objects/locations.md): entries start with a
 * byte with bit 7 set: bits 3-6 the form, bits 0-2 the code units - 1.
 * Form 15 has no location; 13 and 14 start with a signed varint line
 * delta; 10-12 are one-line forms with delta form - 10; 0-9 keep the
 * line. instr: the instruction's index in code units. */
int pystack_line_311(const uint8_t *t, size_t n, int line, int instr)
{
	const uint8_t *p = t, *lim = t + n;
	int end = 0;

	if (instr < 0)
		return line;
	while (p < lim) {
		int form = (*p >> 3) & 15, start = end, delta = 0;

		end += (*p & 7) + 1;
		if (form == 13 || form == 14) {
			unsigned u = varint(p + 1, lim);

			delta = u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
		} else if (form >= 10 && form <= 12) {
			delta = form - 10;
		}
		line += delta;
		if (instr >= start && instr < end)
			return form == 15 ? -1 : line;
		do
			p++;
		while (p < lim && !(*p & 0x80));
	}
	return -1;
}

/* Text as the trace keeps it: Latin-1 converted to UTF-8, control
 * characters escaped. */
static const char *intern_text(struct pystack *ps, const char *text, bool latin1)
{
	char utf8[2 * PY_FILE_LEN + 1], out[4 * PY_FILE_LEN + 1];
	size_t n = 0;

	for (const unsigned char *c = (const unsigned char *)text; *c && n + 2 < sizeof(utf8); c++) {
		if (latin1 && *c >= 0x80) {
			utf8[n++] = (char)(0xc0 | *c >> 6);
			utf8[n++] = (char)(0x80 | (*c & 0x3f));
		} else {
			utf8[n++] = (char)*c;
		}
	}
	utf8[n] = 0;
	text_escape(out, sizeof(out), utf8, n);
	return str_set_intern(ps->strings, out);
}

/* A str object's text if it is compact ASCII or Latin-1 (file and
 * function names are); "?" otherwise. */
static const char *read_str(struct pystack *ps, const struct proc *p, uint64_t obj)
{
	uint8_t hdr[64];
	char text[512];
	uint64_t len;
	uint8_t state;

	if (!obj || target_read(p->pid, obj, hdr, sizeof(hdr)))
		return "?";
	memcpy(&len, hdr + 16, 8);
	state = hdr[32];
	if (!(state & 0x20) || ((state >> 2) & 7) != 1) /* compact, 1 byte a char */
		return "?";
	if (len >= sizeof(text))
		len = sizeof(text) - 1;
	/* ASCII text follows PyASCIIObject; Latin-1 the compact object, which
	 * adds utf8_length and utf8 (16 bytes). */
	if (target_read(p->pid, obj + (state & 0x40 ? p->l.bpf.ascii_data : p->l.bpf.compact_data),
			text, len))
		return "?";
	text[len] = 0;
	return intern_text(ps, text, !(state & 0x40));
}

/* The cache entry of (pid, code): found, or new and empty (*added). */
static struct code_ent *cache_slot(struct pystack *ps, int pid, uint64_t code, bool *added)
{
	uint64_t key = ((uint64_t)pid << 48) ^ code, h = hash_u64(key);
	struct code_ent *e;

	*added = false;
	if (!key)
		return NULL;
	if ((e = hash_get(&ps->cache, h)))
		return e;
	/* Names BPF sent once are kept: the table grows (and only past
	 * CODE_CACHE_MAX starts over, naming from the process). */
	if (!(e = hash_add(&ps->cache, h))) {
		cache_clear(ps);
		if (!(e = hash_add(&ps->cache, h)))
			return NULL;
	}
	*added = true;
	return e;
}

void pystack_code(struct pystack *ps, const struct ptbpf_py_code *c, size_t size)
{
	struct code_ent *e;
	char file[PY_FILE_LEN + 1], name[PY_NAME_LEN + 1];
	uint64_t n = c->ev.arg[1];
	bool added;

	if (size < sizeof(*c) || n > PY_LINETABLE_LEN ||
	    !(e = cache_slot(ps, (int)c->ev.pid, c->ev.key, &added)))
		return;
	free(e->linetable);
	memcpy(file, c->file, PY_FILE_LEN);
	file[PY_FILE_LEN] = 0;
	memcpy(name, c->name, PY_NAME_LEN);
	name[PY_NAME_LEN] = 0;
	e->file = intern_text(ps, file, c->ev.id & 1);
	e->name = intern_text(ps, name, c->ev.id & 2);
	e->firstlineno = (int)(int32_t)c->ev.arg[0];
	e->linetable = n ? malloc(n) : NULL;
	e->nlinetable = e->linetable ? (uint32_t)n : 0;
	if (e->linetable)
		memcpy(e->linetable, c->linetable, n);
	/* A table cut short is decoded only where it is whole. */
	e->truncated = c->ev.arg[2] > n;
}

/* From the BPF record, or (a code object it did not name: an older
 * capture, or a full ring) read from the process now. */
static const struct code_ent *code_of(struct pystack *ps, const struct proc *p, uint64_t code)
{
	uint64_t type, obj, lt;
	uint8_t raw[CODE_READ];
	struct code_ent *e;
	int32_t first;
	bool added;

	e = cache_slot(ps, p->pid, code, &added);
	if (!e || !added)
		return e;
	if (target_read(p->pid, code, raw, sizeof(raw)))
		return e;
	memcpy(&type, raw + 8, 8);
	if (type != p->l.bpf.code_type)
		return e; /* not a code object (a shim frame's executable) */
	memcpy(&obj, raw + p->l.bpf.co_filename, 8);
	e->file = read_str(ps, p, obj);
	memcpy(&obj, raw + p->l.bpf.co_qualname, 8);
	e->name = read_str(ps, p, obj);
	memcpy(&first, raw + p->l.bpf.co_firstlineno, 4);
	e->firstlineno = first;
	memcpy(&lt, raw + p->l.bpf.co_linetable, 8);
	if (lt) {
		uint64_t n = 0;

		if (!target_read(p->pid, lt + 16, &n, 8) && n && n < (1u << 20) &&
		    (e->linetable = malloc(n)) && !target_read(p->pid, lt + 32, e->linetable, n))
			e->nlinetable = (uint32_t)n;
	}
	return e;
}

static const struct proc *proc_of(const struct pystack *ps, int pid)
{
	for (int i = 0; i < ps->nprocs; i++)
		if (ps->procs[i].pid == pid)
			return &ps->procs[i];
	return NULL;
}

/* "file(line): qualname" of frame f of process p into buf; its length, or
 * -1 (not named, or not room for it). */
static int frame_name(struct pystack *ps, const struct proc *p, const struct ptbpf_py_frame *f,
		      char *buf, size_t len)
{
	const struct code_ent *c = code_of(ps, p, f->code);
	int line, w;

	if (!c || !c->file)
		return -1;
	if (!c->nlinetable)
		line = c->firstlineno;
	else if (!p->l.code_adaptive) /* 3.10: f_lasti in code units */
		line = pystack_line_310(c->linetable, c->nlinetable, c->firstlineno,
					(int)f->lasti * 2);
	else
		line = pystack_line_311(c->linetable, c->nlinetable, c->firstlineno,
					(int)(((int64_t)f->lasti - (int64_t)f->code -
					       p->l.code_adaptive) / 2));
	if (line < 0 && c->truncated)
		line = c->firstlineno;
	w = snprintf(buf, len, "%s(%d): %s", c->file, line, c->name);
	return w < 0 || (size_t)w >= len ? -1 : w;
}

int pystack_frame_name(struct pystack *ps, int pid, const struct ptbpf_py_frame *f, char *buf,
		       size_t len)
{
	const struct proc *p = proc_of(ps, pid);

	buf[0] = 0;
	return p && frame_name(ps, p, f, buf, len) >= 0 ? 0 : -1;
}

/* Frame f's name after the n frames in buf (used bytes, one per line):
 * true; false, buf as it was, if it cannot be named or has no room. */
static bool add_frame(struct pystack *ps, const struct proc *p, const struct ptbpf_py_frame *f,
		      char *buf, size_t len, size_t *used, int *n)
{
	size_t at = *used;
	int w;

	if (*n && at + 1 < len)
		buf[at++] = '\n';
	w = frame_name(ps, p, f, buf + at, len - at);
	if (w < 0) {
		buf[*used] = 0;
		return false;
	}
	*used = at + (size_t)w;
	(*n)++;
	return true;
}

int pystack_format(struct pystack *ps, const struct ptbpf_py_stack *s, size_t size, char *buf,
		   size_t len)
{
	const struct proc *p = proc_of(ps, (int)s->ev.pid);
	size_t used = 0;
	int n = 0, nf;

	buf[0] = 0;
	if (!p || size < sizeof(s->ev))
		return 0;
	nf = (int)((size - sizeof(s->ev)) / sizeof(s->f[0]));
	nf = nf < (int)s->ev.id ? nf : (int)s->ev.id;
	for (int i = 0; i < nf && i < PY_MAX_FRAMES; i++)
		if (!add_frame(ps, p, &s->f[i], buf, len, &used, &n) && used + 1 >= len)
			break;
	return n;
}

/* A pointer-sized word of pid at addr; 0 if it cannot be read. */
static uint64_t word(int pid, uint64_t addr)
{
	uint64_t v = 0;

	return addr && !target_read(pid, addr, &v, sizeof(v)) ? v : 0;
}

int pystack_thread(struct pystack *ps, int pid, int tid, char *buf, size_t len)
{
	const struct proc *p = proc_of(ps, pid);
	const struct ptbpf_py_proc *l;
	uint64_t ts, frame;
	size_t used = 0;
	bool found = false;
	int n = 0;

	buf[0] = 0;
	if (!p || !native_tid_off(&p->l))
		return 0;
	l = &p->l.bpf;
	/* interpreters.head -> threads.head -> the thread state of tid (the
	 * bounds: as the BPF walk's, a list changing under the read) */
	ts = word(pid, word(pid, l->runtime + l->interp_head) + l->threads_head);
	for (int i = 0; ts && i < PY_MAX_THREADS && !found; i++) {
		uint32_t native = 0;

		found = !target_read(pid, ts + native_tid_off(&p->l), &native, sizeof(native)) &&
			native == (uint32_t)tid;
		if (!found)
			ts = word(pid, ts + l->ts_next);
	}
	if (!found)
		return 0;
	frame = word(pid, ts + l->ts_frame);
	if (frame && l->cframe_frame != PY_NO_FIELD)
		frame = word(pid, frame + l->cframe_frame);
	for (int i = 0; frame && i < PY_MAX_FRAMES + 8 && n < PY_MAX_FRAMES; i++) {
		struct ptbpf_py_frame f;
		uint8_t owner = 0;

		if (l->f_owner != PY_NO_FIELD &&
		    (target_read(pid, frame + l->f_owner, &owner, 1) || owner == l->owner_cstack)) {
			frame = word(pid, frame + l->f_back); /* a C-stack shim */
			continue;
		}
		f.code = word(pid, frame + l->f_code);
		f.lasti = word(pid, frame + l->f_lasti) & (l->lasti_is_int ? 0xffffffffull : ~0ull);
		frame = word(pid, frame + l->f_back);
		/* Not a code object (the chain moved), or no room: what was read stands. */
		if (!add_frame(ps, p, &f, buf, len, &used, &n))
			break;
	}
	return n;
}
