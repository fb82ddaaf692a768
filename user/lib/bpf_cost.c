// SPDX-License-Identifier: BSD-2-Clause
/* --bpf-stats: the kernel's own count of ptbpf's programs' runs and time. */
#include "lib/bpf_cost.h"

#include <errno.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

int bpf_cost_enable(void)
{
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	return fd < 0 ? -errno : fd;
}

void bpf_cost_add(struct bpf_cost *c, const struct bpf_object *obj)
{
	struct bpf_program *p;

	if (!obj)
		return;
	bpf_object__for_each_program(p, obj) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(p);

		if (fd < 0 || bpf_prog_get_info_by_fd(fd, &info, &len))
			continue;
		c->runs += info.run_cnt;
		c->ns += info.run_time_ns;
	}
}
