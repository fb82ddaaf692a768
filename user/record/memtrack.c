// SPDX-License-Identifier: BSD-2-Clause
/* The memory timeline's counter tracks. See memtrack.h. */
#include "record/memtrack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/c10_device.h"

#define MAX_MEM_TRACKS 256

struct mem_track {
	int pid;
	uint32_t device;
	uint64_t allocated, reserved; /* counter track uuids; reserved 0 for CPU */
	uint64_t last_reserved;
};

struct mem_state {
	struct pf_writer *w;
	uint64_t (*process_track)(void *, int);
	void *ctx;
	struct mem_track tracks[MAX_MEM_TRACKS];
	int n;
	uint64_t peak_allocated, peak_reserved, records;
};

struct mem_state *mem_state_new(struct pf_writer *w, uint64_t (*process_track)(void *, int),
				void *ctx)
{
	struct mem_state *m = calloc(1, sizeof(*m));

	if (m) {
		m->w = w;
		m->process_track = process_track;
		m->ctx = ctx;
	}
	return m;
}

void mem_state_free(struct mem_state *m)
{
	free(m);
}

static struct mem_track *track_for(struct mem_state *m, int pid, uint32_t device)
{
	uint64_t parent;
	char dev[48], name[96];
	struct mem_track *t;

	for (int i = 0; i < m->n; i++)
		if (m->tracks[i].pid == pid && m->tracks[i].device == device)
			return &m->tracks[i];
	if (m->n == MAX_MEM_TRACKS || !(parent = m->process_track(m->ctx, pid)))
		return NULL;
	t = &m->tracks[m->n++];
	*t = (struct mem_track){ .pid = pid, .device = device };
	c10_device_name(device, dev, sizeof(dev));
	snprintf(name, sizeof(name), "%s memory allocated", dev);
	t->allocated = pf_track_counter(m->w, parent, name, PF_UNIT_BYTES);
	if ((device & 0xff) != 0) {
		snprintf(name, sizeof(name), "%s memory reserved", dev);
		t->reserved = pf_track_counter(m->w, parent, name, PF_UNIT_BYTES);
		t->last_reserved = UINT64_MAX;
	}
	return t;
}

void mem_event(struct mem_state *m, const struct ptbpf_event *e)
{
	struct mem_track *t = track_for(m, (int)e->pid, e->id);

	m->records++;
	if (!t)
		return;
	pf_counter(m->w, t->allocated, e->ts, (int64_t)e->arg[1]);
	if (e->arg[1] > m->peak_allocated)
		m->peak_allocated = e->arg[1];
	if (t->reserved && e->arg[2] != t->last_reserved) {
		pf_counter(m->w, t->reserved, e->ts, (int64_t)e->arg[2]);
		t->last_reserved = e->arg[2];
		if (e->arg[2] > m->peak_reserved)
			m->peak_reserved = e->arg[2];
	}
}

void mem_peaks(const struct mem_state *m, uint64_t *allocated, uint64_t *reserved,
	       uint64_t *records)
{
	*allocated = m->peak_allocated;
	*reserved = m->peak_reserved;
	*records = m->records;
}
