// SPDX-License-Identifier: BSD-2-Clause
/* CPU samples into the trace. See samples.h. */
#include "record/samples.h"

#include <stdlib.h>
#include <string.h>

#include "lib/hash.h"
#include "lib/names.h"
#include "record/natsym.h"
#include "record/pystack.h"
#include "trace/perfetto.h"
#include "ptbpf_events.h"

#define PY_MAPPING "[python]" /* the mapping Python frames are put in */
#define PY_NAME_MAX 512
#define PY_CACHE_MAX (1u << 20) /* frames named, remembered (then forgotten at once) */

/* A Python frame named: (process, code object, instruction) -> its name
 * (NULL: could not be named), so the line table is decoded once. */
struct py_named {
	int pid;
	uint64_t code, lasti;
	const char *name;
};

struct sample_view {
	struct pf_writer *w;
	struct pystack *py;
	struct natsym *nat;
	struct str_set *py_names; /* "file(line): name" strings */
	struct hash_table py_cache; /* struct py_named */
	bool replay;              /* sample_view_replay */
	struct sample_counts counts;
};

struct sample_view *sample_view_new(struct pf_writer *w, struct pystack *py)
{
	struct sample_view *sv = calloc(1, sizeof(*sv));

	if (!sv)
		return NULL;
	sv->w = w;
	sv->py = py;
	sv->nat = natsym_new();
	hash_init(&sv->py_cache, PY_CACHE_MAX, sizeof(struct py_named));
	sv->py_names = str_set_new(1u << 20);
	if (!sv->nat || !sv->py_names) {
		sample_view_free(sv);
		return NULL;
	}
	return sv;
}

void sample_view_warm(struct sample_view *sv, int pid)
{
	if (sv && !sv->replay)
		natsym_warm(sv->nat, pid);
}

void sample_view_free(struct sample_view *sv)
{
	if (!sv)
		return;
	natsym_free(sv->nat);
	hash_free(&sv->py_cache);
	str_set_free(sv->py_names);
	free(sv);
}

/* A Python frame's rel_pc in its mapping: the name's hash (the frame is
 * its name; trace_processor keeps frames apart by mapping and rel_pc). */
static uint64_t name_pc(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static bool py_named_eq(const void *val, const void *key)
{
	const struct py_named *a = val, *b = key;

	return a->pid == b->pid && a->code == b->code && a->lasti == b->lasti;
}

/* Frame f of process pid as "file(line): name", or NULL. */
static const char *py_name(struct sample_view *sv, int pid, const struct ptbpf_py_frame *f)
{
	struct py_named k = { .pid = pid, .code = f->code, .lasti = f->lasti }, *e;
	uint64_t h = hash_pair(hash_pair((uint64_t)pid, f->code), f->lasti);
	char name[PY_NAME_MAX];

	if ((e = hash_get_eq(&sv->py_cache, h, py_named_eq, &k)))
		return e->name;
	k.name = pystack_frame_name(sv->py, pid, f, name, sizeof(name)) ? NULL :
		 str_set_intern(sv->py_names, name);
	if (hash_full(&sv->py_cache))
		hash_clear(&sv->py_cache);
	if (k.name && (e = hash_add(&sv->py_cache, h))) /* unnamed: tried again */
		*e = k;
	return k.name;
}

/* The sample's Python frames, outermost first, into fr; how many. */
static int python_frames(struct sample_view *sv, const struct ptbpf_cpu_sample *s, int nf,
			 struct pf_frame *fr)
{
	int n = 0;

	for (int i = nf - 1; i >= 0; i--) {
		const char *v = py_name(sv, (int)s->ev.pid, &s->f[i]);

		if (!v)
			sv->counts.py_unnamed++;
		fr[n++] = (struct pf_frame){ .function = v ? v : "[python frame]",
					     .mapping = PY_MAPPING,
					     .rel_pc = v ? name_pc(v) : 0 };
	}
	return n;
}

/* The sample's native frames, outermost first, into fr; how many. A
 * caller's address in no mapping means the frame-pointer chain broke
 * there (code built without them): the frames from it on are left out. */
static int native_frames(struct sample_view *sv, const struct ptbpf_cpu_sample *s, int nnat,
			 struct pf_frame *fr)
{
	struct natsym_hit h[SAMPLE_NATIVE_MAX];
	int n = 0;

	for (int i = 0; i < nnat; i++, n++) {
		h[i] = (struct natsym_hit){ .path = "[not symbolized]", .file_off = s->ips[i] };
		if (sv->replay)
			continue;
		natsym_lookup(sv->nat, (int)s->ev.pid, s->ips[i], &h[i]);
		if (i && !strcmp(h[i].path, "[unknown]"))
			break;
	}
	for (int i = 0; i < n; i++) {
		const struct natsym_hit *x = &h[n - 1 - i];

		fr[i] = (struct pf_frame){ .function = x->function, .mapping = x->path,
					   .rel_pc = x->file_off };
		sv->counts.native_named += x->function != NULL;
	}
	return n;
}

void sample_view_code_named(struct sample_view *sv)
{
	hash_clear(&sv->py_cache);
}

void sample_view_replay(struct sample_view *sv)
{
	sv->replay = true;
}

void sample_view_record(struct sample_view *sv, const void *data, size_t size)
{
	const struct ptbpf_cpu_sample *s = data;
	struct pf_frame fr[PY_MAX_FRAMES + SAMPLE_NATIVE_MAX];
	size_t head = offsetof(struct ptbpf_cpu_sample, f);
	int npy = 0, nnat, n;

	if (size < head)
		return;
	nnat = s->ev.arg[2] < SAMPLE_NATIVE_MAX ? (int)s->ev.arg[2] : SAMPLE_NATIVE_MAX;
	if (s->ev.arg[1] == PY_STACK_OK) {
		npy = (int)((size - head) / sizeof(s->f[0]));
		npy = npy < (int)s->ev.id ? npy : (int)s->ev.id;
		npy = npy < PY_MAX_FRAMES ? npy : PY_MAX_FRAMES;
	}
	n = python_frames(sv, s, npy, fr);
	nnat = native_frames(sv, s, nnat, fr + n);
	n += nnat;
	sv->counts.native_frames += (uint64_t)nnat;
	sv->counts.with_python += npy > 0;
	sv->counts.samples++;
	pf_perf_sample(sv->w, &(struct pf_sample){ .ts = s->ev.ts, .cpu = (uint32_t)s->ev.key,
						   .pid = (int32_t)s->ev.pid,
						   .tid = (int32_t)s->ev.tid,
						   .frames = fr, .nframes = n });
}

void sample_view_process_gone(struct sample_view *sv, int pid)
{
	if (sv)
		natsym_forget(sv->nat, pid);
}

const struct sample_counts *sample_view_counts(const struct sample_view *sv)
{
	return &sv->counts;
}
