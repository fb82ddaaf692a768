// SPDX-License-Identifier: BSD-2-Clause
/* CPU samples into the trace. See samples.h. */
#include "record/samples.h"

#include <stdlib.h>
#include <string.h>

#include "lib/names.h"
#include "record/natsym.h"
#include "record/pystack.h"
#include "trace/perfetto.h"
#include "ptbpf_events.h"

#define PY_MAPPING "[python]" /* the mapping Python frames are put in */
#define PY_NAME_MAX 512

struct sample_view {
	struct pf_writer *w;
	struct pystack *py;
	struct natsym *nat;
	struct str_set *py_names; /* "file(line): name" strings */
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
	sv->py_names = str_set_new(1u << 20);
	if (!sv->nat || !sv->py_names) {
		sample_view_free(sv);
		return NULL;
	}
	return sv;
}

void sample_view_free(struct sample_view *sv)
{
	if (!sv)
		return;
	natsym_free(sv->nat);
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

/* The sample's Python frames, outermost first, into fr; how many. */
static int python_frames(struct sample_view *sv, const struct ptbpf_cpu_sample *s, int nf,
			 struct pf_frame *fr)
{
	char name[PY_NAME_MAX];
	int n = 0;

	for (int i = nf - 1; i >= 0; i--) {
		const char *v = NULL;

		if (!pystack_frame_name(sv->py, (int)s->ev.pid, &s->f[i], name, sizeof(name)))
			v = str_set_intern(sv->py_names, name);
		if (!v)
			sv->counts.py_unnamed++;
		fr[n++] = (struct pf_frame){ .function = v ? v : "[python frame]",
					     .mapping = PY_MAPPING,
					     .rel_pc = v ? name_pc(v) : 0 };
	}
	return n;
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
	for (int i = nnat - 1; i >= 0; i--) {
		struct natsym_hit h;

		natsym_lookup(sv->nat, (int)s->ev.pid, s->ips[i], &h);
		fr[n++] = (struct pf_frame){ .function = h.function, .mapping = h.path,
					     .rel_pc = h.file_off };
		sv->counts.native_named += h.function != NULL;
	}
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
