/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A live capture: `ptbpf -p PID`, `run`, `--all` and each daemon window.
 * Its data path, one file each:
 *   targets.c  attach: find processes, put the agent or probes in them
 *   read.c     read: the BPF ring and the agents' op rings, merged in
 *              time order (record/reorder.c), handed to record/route.c
 *   session.c  set up, the loop, stop and detach
 *   budget.c   daemon windows: their size cap and cost governor, metrics
 *   summary.c  what was recorded and lost: on stderr and in the trace
 */
#ifndef PTBPF_LIVE_SESSION_H
#define PTBPF_LIVE_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/resource.h>

#include "cli.h"
#include "attach/keeper.h"
#include "attach/target.h"
#include "fleet/capture.h"
#include "lib/bpf_cost.h"
#include "lib/clock.h"
#include "lib/files.h"
#include "lib/op_table.h"
#include "ptbpf_events.h"
#include "ptbpf_sched.h"

#define MAX_TARGETS 256

/* The signal that stops the capture (0 while it runs); a second one
 * leaves at once (main.c). */
extern volatile sig_atomic_t session_exiting;

/* What --bpf-stats reports, by part. */
enum { COST_PROBES, COST_SCHED, COST_SAMPLES, COST_MAX };

struct session {
	struct options opt;

	/* Sources (read.c): the BPF ring; once an agent records ops, its
	 * rings too, merged with the BPF ring's records in time order. */
	struct ptbpf_bpf *skel;
	struct ring_buffer *rb;
	struct ops_rings *opsr;
	struct reorder *reorder;
	uint64_t received;       /* records read from the BPF ring buffer */
	bool yielded;            /* the reader yielded to the job (lib/yield.h) */
	uint64_t exit_chunks;    /* op-ring bytes sent by the _exit probe (EV_OPS_CHUNK) */
	struct sched_probes *sched;   /* the kernel view's programs (NULL: --no-sched) */
	struct sched_view *schedv;    /* ... their records into the trace */
	uint64_t sched_received;      /* records read from their ring */
	struct sample_probes *samples; /* the CPU sampler (NULL: --no-samples); its
					* records come through the BPF ring */

	/* Attached (targets.c): probes on libtorch, the GPU libraries and
	 * the agents' probe points; the processes. */
	struct probes *probes;
	struct gpu_probes *gpu;
	struct agent_probes *agents;
	struct op_table ops;
	struct target targets[MAX_TARGETS];
	int ntargets;
	bool traced;             /* tracing started: a process was attached and was still
				  * there when its attach ended */
	bool attach_cut;         /* a Ctrl-C cut an attach (no "tracing pid" said) */
	int pending_forks[64];   /* children to attach (-f) */
	int npending;
	int execs;               /* traced processes that exec'd */
	struct {                 /* --all, and traced processes that exec */
		struct exec_probes *exec_probes; /* EV_EXEC; NULL: none */
		int refused[256];        /* pids that could not be attached (not retried) */
		int nrefused;
		struct { int pid; uint64_t at, checked; bool exec; } mapped[256];
					 /* new processes, watched until they map libtorch */
		int nmapped;
		uint64_t last_full_scan;
	} find;

	/* Output: the trace (record/join.c writes into it), a raw capture. */
	struct pf_writer *w;
	struct outfile out;      /* the trace, under its .partial name until complete */
	struct route *route;     /* records to join and the decoders (record/route.c) */
	struct join *join;       /* route's joiner */
	const struct decoders *dec; /* route's decoders */
	struct raw_writer *raw;
	uint64_t lost_track;
	bool discard_output;     /* the run failed before tracing started */

	/* A daemon window (budget.c). */
	struct {
		struct metrics *metrics;  /* where running totals go */
		uint64_t max_trace_bytes; /* it stops at this trace size */
		double targets_cpu0;      /* the traced processes' CPU seconds at the start */
		char stopped_why[256];    /* why it ended early */
		const struct capture_req *trigger; /* what opened it; NULL: the schedule */
		int steps_pid;            /* --steps: it ends once this process's */
		uint64_t steps_end;       /*   step count reaches steps_end */
	} win;
	double cpu_at_trace_start;   /* CPU seconds spent planning and attaching */
	/* --bpf-stats: the kernel's statistics, on while stats_fd is held
	 * (stats_on); what each part's programs cost, read before they are
	 * freed, and over what time (CLOCK_MONOTONIC ns, on to the last read). */
	bool stats_on;
	int stats_fd;
	struct bpf_cost cost[COST_MAX];
	uint64_t stats_from, stats_to;
};

/* ptbpf's CPU time, its link keeper's included (it makes and takes out
 * the uprobes: most of an attach's and a detach's kernel time). */
static inline double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return keeper_cpu_seconds();
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6 + keeper_cpu_seconds();
}

/* session.c */
int session_setup_bpf(struct session *s);
int session_setup_trace(struct session *s);
/* Reads and attaches until stopped, the targets are gone, or time is up;
 * -1 if it stopped because reading failed (said), else 0. */
int session_loop(struct session *s);
/* Switches the agents off, reads everything, detaches, completes the
 * trace (or keeps it as .partial); rc, or 1 if the trace failed. Unless
 * tracing started (traced, and not discard_output), no output is left:
 * not FILE, not FILE.partial, and nothing printed about them. */
int session_finish(struct session *s, int rc);
/* The BPF programs' counters (sent, lost per cause), summed over CPUs. */
void session_stats(struct session *s, uint64_t out[STAT_MAX]);
uint64_t session_lost(const uint64_t st[STAT_MAX]);

/* read.c */
/* The BPF ring's callback (ring_buffer__new). */
int read_bpf_record(void *ctx, void *data, size_t size);
/* The op rings' callback. */
int read_op_record(void *ctx, void *data, size_t size);
/* Reads the agents' rings and hands on what is older than upto; how many
 * records were read. */
uint64_t read_op_rings(struct session *s, uint64_t upto);
/* One turn of reading both sources; the op records read, or -errno. */
int64_t read_pump(struct session *s, int wait_ms);
/* The last read of the BPF ring, once nothing can send any more; st: the
 * counters then. */
void read_bpf_last(struct session *s, uint64_t st[STAT_MAX]);
/* The kernel view's ring's callback. */
int read_sched_record(void *ctx, void *data, size_t size);
/* Its last read, once its programs are detached; sst: its counters then. */
void read_sched_last(struct session *s, uint64_t sst[SCHED_STAT_MAX]);

/* targets.c */
/* Opens and attaches one more process; 0, or -errno with a message printed. */
int targets_add(struct session *s, int pid, bool quiet_if_gone);
/* --follow-children: a child a traced process forked (not one that has
 * already become one of Inductor's compile workers). */
void targets_add_child(struct session *s, int pid);
void targets_scan_all(struct session *s);
void targets_attach_mapped(struct session *s);
void targets_scan_gpu(struct session *s, const struct target *t);
/* Every 500 ms: the GPU libraries and the agent where t mapped something
 * since the last look. */
void targets_rescan(struct session *s, struct target *t);
bool targets_wait_for_agent(struct session *s, int pid);
void targets_watch_new(struct session *s, int pid, uint64_t ts, bool was_traced);
bool targets_exec(struct session *s, int pid);
int targets_reap(struct session *s);

/* budget.c */
void budget_publish_metrics(struct session *s);
double budget_targets_cpu(const struct session *s);
double budget_cost_s(const struct session *s);
bool budget_window_must_end(struct session *s);
/* Once tracing started: where a slow step's window ends (--steps). */
void budget_steps_start(struct session *s);

/* summary.c */
void summary_status_line(struct session *s, uint64_t *last_events, uint64_t *last_ns);
void summary_print(struct session *s, const uint64_t st[STAT_MAX]);
void summary_write_counters(struct session *s, const uint64_t st[STAT_MAX]);
/* The kernel view's: what it recorded and lost (sst: its counters). */
void summary_print_sched(struct session *s, const uint64_t sst[SCHED_STAT_MAX]);
void summary_write_sched(struct session *s, const uint64_t sst[SCHED_STAT_MAX]);

#endif /* PTBPF_LIVE_SESSION_H */
