// SPDX-License-Identifier: BSD-2-Clause
/*
 * uprobe_floor PID [PATTERN]: the uprobe floor of the benchmark
 * (tests/bench/bench.py). Puts an entry uprobe whose BPF program only counts
 * on every ATen op function (at::_ops::<op>::call), or on the functions
 * whose symbols match PATTERN (tests/bench/step_signal_cost.py: the
 * record_function entry), of the libtorch_cpu.so that PID maps,
 * one uprobe.multi link as ptbpf's op probes, prints "attached N" and
 * waits; at SIGINT or SIGTERM it prints "hits H" and exits.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include "uprobe_floor.skel.h"

#define OP_PATTERN "_ZN2at4_ops*4callE*"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* The path of the libtorch_cpu.so that pid maps, through its root. */
static int torch_path(int pid, char *out, size_t len)
{
	char maps[64], line[4096];
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path || !strstr(path, "/libtorch_cpu.so"))
			continue;
		path[strcspn(path, "\n")] = 0;
		snprintf(out, len, "/proc/%d/root%s", pid, path);
		fclose(f);
		return 0;
	}
	fclose(f);
	return -ENOENT;
}

int main(int argc, char **argv)
{
	LIBBPF_OPTS(bpf_uprobe_multi_opts, opts);
	struct uprobe_floor_bpf *skel;
	struct bpf_link *link;
	char path[4200];
	int pid, err;

	if (argc < 2 || argc > 3 || (pid = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: uprobe_floor PID [PATTERN]\n");
		return 2;
	}
	libbpf_set_print(quiet);
	err = torch_path(pid, path, sizeof(path));
	if (err) {
		fprintf(stderr, "uprobe_floor: pid %d maps no libtorch_cpu.so: %s\n", pid,
			strerror(-err));
		return 1;
	}
	skel = uprobe_floor_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "uprobe_floor: cannot load the BPF program: %s\n", strerror(errno));
		return 1;
	}
	link = bpf_program__attach_uprobe_multi(skel->progs.count_hit, pid, path,
						argc == 3 ? argv[2] : OP_PATTERN, &opts);
	if (!link) {
		fprintf(stderr, "uprobe_floor: cannot attach to %s: %s\n", path, strerror(errno));
		uprobe_floor_bpf__destroy(skel);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("attached %s\n", path);
	fflush(stdout);
	while (!stop)
		usleep(50000);
	printf("hits %llu\n", (unsigned long long)skel->bss->hits);
	bpf_link__destroy(link);
	uprobe_floor_bpf__destroy(skel);
	return 0;
}
