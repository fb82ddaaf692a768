/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * sched: the kernel view's records (include/ptbpf_sched.h) into the trace.
 * Switches and wakeups are kept per CPU, in time order, and written as
 * Perfetto's compact sched bundles (trace/perfetto_ftrace.c): the CPU
 * tracks, and trace_processor's sched, thread_state and wakeup tables.
 * What a thread blocked in goes to record/offcpu.c. Each traced thread seen
 * gets its thread track (so trace_processor knows its process).
 */
#ifndef PTBPF_SCHED_REC_H
#define PTBPF_SCHED_REC_H

#include <stddef.h>
#include <stdint.h>

#include "record/offcpu.h"
#include "trace/perfetto.h"

struct sched_view;

struct sched_counts {
	uint64_t records;   /* read from the ring */
	uint64_t switches, replayed, wakings, syscalls;
	uint64_t untimed;   /* replayed from a cold CPU: placed just before the next record */
	uint64_t unseen;    /* replayed where the kernel reported no switch (SW_UNSEEN) */
	uint64_t unseen_sampled; /* ... placed at the thread's first CPU sample there */
	uint64_t lost;      /* switch/wakeup records BPF could not send (per CPU) */
	uint64_t cpus_lost; /* bundles written with lost_events */
	uint64_t bad;       /* records of an unknown kind or size, or CPU */
	uint64_t bundles;
};

/* Writes the system's description now (trace_processor needs the kernel's
 * release to read the switch states). NULL when out of memory. */
struct sched_view *sched_view_new(struct pf_writer *w, offcpu_thread_track_fn *track,
				  void *ctx);
void sched_view_free(struct sched_view *v);
/* One record from the ring; 0 (records are never refused). */
int sched_view_record(struct sched_view *v, const void *data, size_t size);
/* Writes what each CPU holds (e.g. once a second: memory stays bounded). */
void sched_view_flush(struct sched_view *v);
/* Tracing of process pid began at ts (CLOCK_MONOTONIC, read just before its
 * threads were watched: every wakeup and call end seen is later): the calls
 * its threads are blocked in then get slices from ts, with their Python
 * stacks (offcpu_started). */
void sched_view_started(struct sched_view *v, int pid, uint64_t ts, struct pystack *ps);
/* Tracing stopped at ts: everything written, blocked calls end at ts. */
void sched_view_finish(struct sched_view *v, uint64_t ts);
const struct sched_counts *sched_view_counts(const struct sched_view *v);
const struct offcpu_counts *sched_view_offcpu(const struct sched_view *v);

#endif /* PTBPF_SCHED_REC_H */
