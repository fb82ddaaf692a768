// SPDX-License-Identifier: BSD-2-Clause
/*
 * The line a report starts with when its trace counted losses: what was
 * lost, how many, and why, from the capture's counters (the trace
 * attributes live/summary.c writes), so that no table below is read as
 * whole when it is not. See report.h.
 */
#define _GNU_SOURCE
#include "report/report.h"

#include <string.h>

#include "lib/text.h"
#include "report/report_data.h"

/* Each loss counter: what it counts, and why those were lost. */
static const struct {
	const char *key, *what, *why;
} losses[] = {
	{ "op_begins_lost_ring_full", "ops", "their thread's op ring was full: ptbpf read it too "
	  "late (stalled, or slower than the job)" },
	{ "op_begins_lost_no_free_ring", "ops", "their thread found no free op ring (more threads "
	  "than the agent's rings)" },
	{ "op_begins_lost_gone_unread", "ops", "their process exited before ptbpf read its "
	  "rings" },
	{ "lost_ringbuf_full", "probe events (ops, threads, processes)", "the BPF ring was full" },
	{ "lost_named_ringbuf_full", "named probe events (regions, backward nodes)",
	  "the BPF ring was full" },
	{ "lost_gpu_ringbuf_full", "GPU API calls", "the BPF ring was full" },
	{ "lost_agent_ringbuf_full", "agent records (GPU kernels, copies, sets)",
	  "the BPF ring was full" },
	{ "ops_lost_exit_probe_ring_full", "op ring copies at a process's exit",
	  "the BPF ring was full" },
	{ "lost_py_stacks", "Python stacks", "the BPF ring was full" },
	{ "lost_py_code_objects", "Python function names", "the BPF ring was full" },
	{ "lost_rpc_records", "RPC records", "the BPF ring was full" },
	{ "lost_cpu_samples", "CPU samples", "the BPF ring was full" },
	{ "sched_lost_switch_ringbuf_full", "thread switches", "the kernel view's ring was full" },
	{ "sched_lost_waking_ringbuf_full", "wakeups", "the kernel view's ring was full" },
	{ "sched_lost_syscall_ringbuf_full", "blocking system calls",
	  "the kernel view's ring was full" },
	{ "sched_lost_block_ringbuf_full", "block I/O requests", "the kernel view's ring was full" },
	{ "cupti_dropped", "GPU activity records", "CUPTI's own buffers were full" },
	{ "records_past_thread_limit", "records of threads", "past the thread table's limit" },
};
#define NLOSSES (sizeof(losses) / sizeof(losses[0]))

/* The integer attribute dev.ptbpf.<key>, summed over the inputs a merged
 * trace has; -1 if absent. */
static int64_t attr(const struct report *r, const char *key)
{
	int64_t v = -1;

	for (int i = 0; i < r->nattrs; i++) {
		const char *k = rd_str(r, r->attrs[i].key);

		if (!r->attrs[i].is_str && !strncmp(k, "dev.ptbpf.", 10) && !strcmp(k + 10, key))
			v = (v < 0 ? 0 : v) + r->attrs[i].i;
	}
	return v;
}

bool report_loss_line(const struct report *r, char *b, size_t len)
{
	int64_t read = attr(r, "op_begins_read"), ops = read; /* and every op lost: the job's */
	size_t o = 0;
	int n = 0;

	for (size_t i = 0; i < NLOSSES; i++)
		if (!strcmp(losses[i].what, "ops") && attr(r, losses[i].key) > 0)
			ops += attr(r, losses[i].key);
	b[0] = 0;
	for (size_t i = 0; i < NLOSSES; i++) {
		int64_t v = attr(r, losses[i].key);

		if (v <= 0)
			continue;
		text_append(b, len, &o, "%s%ld %s", n++ ? "; " : "LOST: ", (long)v, losses[i].what);
		if (!strcmp(losses[i].what, "ops") && read >= 0)
			text_append(b, len, &o, " (%.1f%% of %ld)", 100.0 * v / ops, (long)ops);
		text_append(b, len, &o, ": %s", losses[i].why);
	}
	if (n)
		text_append(b, len, &o, ". Every count below is of what was recorded.");
	return n > 0;
}

void report_losses_json(FILE *o, const struct report *r)
{
	char line[2048];
	int n = 0;

	fputs(", \"losses\": [", o);
	for (size_t i = 0; i < NLOSSES; i++) {
		int64_t v = attr(r, losses[i].key);

		if (v <= 0)
			continue;
		fprintf(o, "%s{\"what\": ", n++ ? ", " : "");
		json_str(o, losses[i].what);
		fprintf(o, ", \"count\": %ld, \"why\": ", (long)v);
		json_str(o, losses[i].why);
		fprintf(o, ", \"counter\": \"dev.ptbpf.%s\"}", losses[i].key);
	}
	fputs("], \"loss_line\": ", o);
	json_str(o, report_loss_line(r, line, sizeof(line)) ? line : "");
}
