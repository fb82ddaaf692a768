// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * Execs. A traced process that exec's is a new process image: the loader
 * stops reading or writing the old one's memory, cuts its open frames and
 * treats the new image as a new process. With --all and the daemon every
 * exec on the host is reported (all_procs), so that the loader watches new
 * processes closely until they map libtorch (a training script imports
 * torch within seconds). These kernels have no kprobes or fentry (no
 * ftrace), so a mapping cannot be hooked itself; a BTF tracepoint on exec
 * can. A separate object, so that a kernel refusing it leaves ptbpf
 * scanning /proc alone.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile bool all_procs = false;

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!all_procs && !bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	return emit(EV_EXEC, SRC_TRACEPOINT, 0, 0);
}
