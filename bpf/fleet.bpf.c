// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * --all and the daemon: every exec on the host (the traced set is not
 * consulted), so that the loader watches new processes closely until they
 * map libtorch (a training script imports torch within seconds). These
 * kernels have no kprobes or fentry (no ftrace), so a mapping cannot be
 * hooked itself; a BTF tracepoint on exec can. A separate object, so that
 * a kernel refusing it leaves ptbpf scanning /proc alone.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return emit(EV_EXEC, SRC_TRACEPOINT, 0, 0);
}
