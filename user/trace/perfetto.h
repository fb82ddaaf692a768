/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Streaming Perfetto trace writer: TracePacket records appended to a file,
 * memory bounded at any trace length, whole packets only on disk (a killed
 * writer or a full disk leaves a readable prefix), and an end marker
 * (PF_END_MARKER_KEY in pf_fields.h) as the last packet. Event timestamps
 * are CLOCK_MONOTONIC (bpf_ktime_get_ns), tied to BOOTTIME and REALTIME by
 * ClockSnapshots; each track's events are on a packet sequence of their
 * own, with the track and an incremental clock as its defaults
 * (perfetto_seq.c).
 * Field numbers: user/trace/perfetto_trace.proto (a subset of Perfetto's protos).
 */
#ifndef PTBPF_PERFETTO_H
#define PTBPF_PERFETTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pf_writer;

/*
 * Limits, so that one packet always fits the writer's fixed scratch buffer:
 * strings longer than PF_STR_MAX bytes are cut (at a UTF-8 boundary); past
 * PF_MAX_ARGS args, PF_MAX_FLOWS flow ids of each kind or PF_MAX_CMDLINE
 * cmdline entries the rest are left out. Each cut or omission is counted
 * (pf_items_clipped). Up to PF_INTERN_MAX distinct strings (as cut) are
 * interned per table (event names, categories, arg names; fewer string
 * values), within a budget of bytes; past it strings are written inline.
 */
#define PF_STR_MAX 4096
#define PF_MAX_ARGS 32
#define PF_MAX_FLOWS 128
#define PF_MAX_CMDLINE 64
#define PF_INTERN_MAX 65536

enum pf_arg_type { PF_ARG_INT, PF_ARG_UINT, PF_ARG_DOUBLE, PF_ARG_STR, PF_ARG_BOOL, PF_ARG_PTR };

/* One debug annotation. Names are interned, string values too while few. */
struct pf_arg {
	const char *name;
	enum pf_arg_type type;
	union {
		int64_t i;
		uint64_t u;
		double d;
		const char *s;
		bool b;
		uint64_t ptr;
	};
};

/* A slice begin or an instant. Flow ids are global to the trace. */
struct pf_event {
	uint64_t track;
	uint64_t ts;               /* CLOCK_MONOTONIC ns */
	const char *name;          /* interned (bounded table; inline once full) */
	const char *category;      /* may be NULL; interned */
	const struct pf_arg *args;
	int nargs;
	const uint64_t *flows;     /* flow_ids (fixed64, unpacked) */
	int nflows;
	const uint64_t *term_flows; /* terminating_flow_ids */
	int nterm;
};

enum pf_counter_unit { PF_UNIT_COUNT = 2, PF_UNIT_BYTES = 3 };

/* Writes the sequence's first packet (incremental state cleared, defaults)
 * and a ClockSnapshot to fd, a regular file at the trace's start (writes
 * that fail part way are cut back to a whole packet). Does not take
 * ownership of fd. NULL + errno on error. */
struct pf_writer *pf_writer_open(int fd);
/* The same for fd at the end of a whole trace that another writer wrote:
 * what it writes goes on sequences of its own (ids past that writer's),
 * and its end marker ends the trace. */
struct pf_writer *pf_writer_open_appending(int fd);
/* A writer of packets encoded elsewhere (ptbpf merge): pf_write_packet
 * only, no sequence of its own; pf_writer_close adds the end marker. */
struct pf_writer *pf_writer_open_copy(int fd);
void pf_write_packet(struct pf_writer *w, const uint8_t *packet, size_t len);
/* Writes what is buffered; 0 or the first write error (negative errno). */
int pf_writer_flush(struct pf_writer *w);
/* Writes the end marker (unless writing failed) and what is buffered;
 * returns 0 or the first write error (negative errno). Frees w. */
int pf_writer_close(struct pf_writer *w);
/* First write error so far (negative errno), 0 if none. */
int pf_writer_error(const struct pf_writer *w);
/* Bytes of whole packets so far (after a write error: those on disk). */
uint64_t pf_bytes_written(const struct pf_writer *w);
/* Strings cut and args/flows/cmdline entries left out so far (see limits). */
uint64_t pf_items_clipped(const struct pf_writer *w);
/* Events were lost before the next packet (e.g. BPF ring overflow): that
 * packet carries previous_packet_dropped, which trace_processor counts. */
void pf_mark_loss(struct pf_writer *w);

/* ClockSnapshot of BOOTTIME, MONOTONIC and REALTIME read back to back. */
int pf_clock_snapshot(struct pf_writer *w);
/* TraceAttributes key/value (reverse-domain keys, e.g. dev.ptbpf.version). */
void pf_trace_attr_str(struct pf_writer *w, const char *key, const char *value);
void pf_trace_attr_int(struct pf_writer *w, const char *key, int64_t value);

/* Track descriptors; each returns the track's uuid (unique in the trace). */
/* labels: the process's labels in the UI ("RANK=0", ...). */
uint64_t pf_track_process(struct pf_writer *w, int32_t pid, const char *name,
			  const char *const *cmdline, int ncmdline,
			  const char *const *labels, int nlabels);
uint64_t pf_track_thread(struct pf_writer *w, int32_t pid, int64_t tid, const char *name);
/* A named track under parent (a process track or another child track),
 * never merged with same-named siblings. */
uint64_t pf_track_child(struct pf_writer *w, uint64_t parent, const char *name);
uint64_t pf_track_counter(struct pf_writer *w, uint64_t parent, const char *name,
			  enum pf_counter_unit unit);

void pf_slice_begin(struct pf_writer *w, const struct pf_event *e);
/* END: track, ts, args and flows of e are used; it carries no name (name
 * and category are ignored). Args and flows merge into the slice. */
void pf_slice_end(struct pf_writer *w, const struct pf_event *e);
void pf_instant(struct pf_writer *w, const struct pf_event *e);
/* Whether a flow of this id was started in the file and not yet ended: an
 * event that ends it is linked to its start then (and need not repeat
 * what the start's slice says). */
bool pf_flow_started(struct pf_writer *w, uint64_t id);
void pf_counter(struct pf_writer *w, uint64_t track, uint64_t ts, int64_t value);

/*
 * Scheduler events, as Perfetto's ftrace data source writes them
 * (perfetto_ftrace.c): one CPU's switches and wakeups in a compact sched
 * FtraceEventBundle, which trace_processor turns into its sched,
 * thread_state and wakeup tables and the UI into CPU tracks and thread
 * states. Timestamps are CLOCK_MONOTONIC, written in BOOTTIME (ftrace's
 * clock) as trace_processor would move them (the first clock snapshot).
 */
struct pf_sched_switch {
	uint64_t ts;
	int64_t prev_state;  /* the sched_switch tracepoint's prev_state */
	int32_t next_pid, next_prio;
	const char *next_comm; /* at most 15 bytes are used */
};

struct pf_sched_waking {
	uint64_t ts;
	int32_t pid, target_cpu, prio;
	uint32_t common_flags; /* 0x08: in a hard interrupt, 0x10: in a soft one */
	const char *comm;
};

/* At most PF_SCHED_BUNDLE_MAX of each per call; lost: events of this CPU
 * were lost before these (trace_processor counts ftrace_cpu_has_data_loss). */
#define PF_SCHED_BUNDLE_MAX 1024
void pf_sched_bundle(struct pf_writer *w, uint32_t cpu, const struct pf_sched_switch *sw,
		     int nsw, const struct pf_sched_waking *wk, int nwk, bool lost);
/*
 * A CPU sample as Perfetto's perf sampler writes it (TracePacket.perf_sample,
 * perfetto_sample.c): trace_processor fills perf_sample and the
 * stack_profile_* tables, the UI draws it on the thread's track and as a
 * flame graph. Frames are given root first (the callstack's bottom frame
 * first, as Perfetto's Callstack wants them), each in a mapping (a file
 * path or a name like "[python]") at rel_pc. Names, mappings, frames and
 * callstacks are interned on the samples' own sequence, bounded: when a
 * table is full, the sequence starts over (its incremental state cleared).
 */
struct pf_frame {
	const char *function; /* NULL: unknown (the frame shows its mapping and rel_pc) */
	const char *mapping;
	uint64_t rel_pc;
};

#define PF_SAMPLE_FRAMES_MAX 128
struct pf_sample {
	uint64_t ts; /* CLOCK_MONOTONIC ns */
	uint32_t cpu;
	int32_t pid, tid;
	const struct pf_frame *frames; /* root first, at most PF_SAMPLE_FRAMES_MAX */
	int nframes;
};
void pf_perf_sample(struct pf_writer *w, const struct pf_sample *s);

/* The system's name, kernel release and CPUs (uname): trace_processor
 * reads prev_state by the kernel's version. */
void pf_system_info(struct pf_writer *w);

#endif /* PTBPF_PERFETTO_H */
