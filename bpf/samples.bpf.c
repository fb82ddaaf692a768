// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * CPU samples of the traced threads: a perf_event program on every online
 * CPU's cpu-clock (the loader opens the events, user/attach/sample_probes.c),
 * filtered here to the traced processes by the kernel view's bitmap
 * (sched_procs, shared with bpf/sched.bpf.c when that is loaded). Each
 * sample of a traced thread carries its user stack (frame pointers) and,
 * where the process's interpreter layout is known (py_procs), its Python
 * stack read by the walker of pystack.bpf.h. Records go into the main ring
 * (common.bpf.h, shared with the op programs), so their code objects'
 * names (EV_PY_CODE) are ordered before them; every sample that does not
 * fit is counted (STAT_DROP_CPU_SAMPLE).
 *
 * A sample also tells the kernel view (its per-CPU `cpus`, shared) which
 * traced thread runs on this CPU: where its latest switch put another task
 * on, the kernel did not report the switch that put this one on, and the
 * kernel view's next record here replays one at this sample's time
 * (SW_UNSEEN, include/ptbpf_sched.h).
 */
#include "common.bpf.h"
#include "pystack.bpf.h"
#include "sched_shared.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The sample is built here, then copied into the ring at its real size.
 * Per CPU: a perf_event program runs in interrupt context and never nests
 * with itself (the kernel's bpf_prog_active). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ptbpf_cpu_sample);
} sample_scratch SEC(".maps");

SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid(), flags;
	struct ptbpf_py_proc *p;
	struct ptbpf_sched_cpu *c;
	struct ptbpf_cpu_sample *s;
	__u32 zero = 0, tgid = pid_tgid >> 32, n;
	long bytes;

	if (!tgid || !is_traced(tgid))
		return 0;
	/* An interrupt (cpu-clock is an hrtimer, not an NMI): no switch on
	 * this CPU runs meanwhile, and none is between its tracepoint and
	 * the task swap. */
	c = this_cpu();
	if (c && c->last_next && c->last_next != (__u32)pid_tgid)
		put_on_unseen(c, (__u32)pid_tgid, bpf_ktime_get_ns());
	stat_inc(STAT_SENT);
	s = bpf_map_lookup_elem(&sample_scratch, &zero);
	if (!s) {
		stat_inc(STAT_DROP_CPU_SAMPLE);
		return 0;
	}
	fill(&s->ev, EV_CPU_SAMPLE, SRC_TRACEPOINT, 0, bpf_get_smp_processor_id());
	bytes = bpf_get_stack(ctx, s->ips, sizeof(s->ips), BPF_F_USER_STACK);
	s->ev.arg[2] = bytes > 0 ? bytes / sizeof(s->ips[0]) : 0;
	s->ev.arg[1] = SAMPLE_NO_PYTHON;
	p = bpf_map_lookup_elem(&py_procs, &tgid);
	if (p) {
		struct py_walk w = { .p = p, .ev = &s->ev, .f = s->f };

		s->ev.arg[1] = py_walk_thread(&w, bpf_get_current_task_btf());
	}
	n = s->ev.id;
	if (n > PY_MAX_FRAMES)
		n = PY_MAX_FRAMES;
	flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, s, sizeof(s->ev) + sizeof(s->ips) + n * sizeof(s->f[0]),
			       flags))
		stat_inc(STAT_DROP_CPU_SAMPLE);
	return 0;
}
