// SPDX-License-Identifier: BSD-2-Clause
/*
 * sched_floor PID CMD_FIFO ACK_FIFO: ptbpf's kernel view switched on and off
 * on command, for the benchmark's `--paired sched:switch`
 * (tests/bench/bench.py, bench_target.py). Loads ptbpf's own scheduler,
 * system call and page fault programs (user/attach/sched_probes.c, the
 * same code and objects as ptbpf's), records PID and the processes it has
 * started (a DataLoader's workers), and reads their ring on a thread of its
 * own as ptbpf's loader does, counting the records and dropping them (the
 * trace writing is ptbpf's loader's work, on its own CPU). Prints "ready"
 * once loaded (detached), then serves lines from CMD_FIFO: "on" attaches
 * every program, "on nosys" all but the system call ones (and rss_stat's,
 * whose fault timing a system call ends; what those cost is the
 * difference), "off" detaches them; each is answered "ok N" (N: the
 * records the programs had sent while they were last detached) or "error:
 * ..." on ACK_FIFO once done. At the command FIFO's end it prints
 * "records R sent S lost L" and exits.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "attach/sched_probes.h"

static volatile int stop;

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static int count(void *ctx, void *data, size_t size)
{
	++*(unsigned long *)ctx;
	return 0;
}

/* As ptbpf's loader (read_pump): wait for a batch, then take whatever is
 * there (the programs wake the reader only every wakeup_bytes). */
static void *reader(void *arg)
{
	while (!stop) {
		ring_buffer__poll(arg, 100);
		ring_buffer__consume(arg);
	}
	return NULL;
}

/* PID and its child processes (each thread's children), as ptbpf -p follows them. */
static int watch_tree(struct sched_probes *p, int pid)
{
	char path[320], buf[4096];
	struct dirent *d;
	int n = 0;
	DIR *dir;

	if (sched_probes_watch(p, pid, true))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/children", pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fscanf(f, "%4095s", buf) == 1)
			n += !sched_probes_watch(p, atoi(buf), true);
		fclose(f);
	}
	closedir(dir);
	return n;
}

int main(int argc, char **argv)
{
	char err[256], line[64];
	unsigned long records = 0;
	uint64_t st[SCHED_STAT_MAX], lost = 0;
	struct sched_probes *p;
	struct ring_buffer *rb;
	FILE *cmd, *ack;
	pthread_t t;
	int pid;

	if (argc != 4) {
		fprintf(stderr, "usage: sched_floor PID CMD_FIFO ACK_FIFO\n");
		return 2;
	}
	pid = atoi(argv[1]);
	libbpf_set_print(quiet);
	p = sched_probes_new(1u << 22, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "sched_floor: %s\n", err);
		return 1;
	}
	sched_probes_detach(p);
	rb = ring_buffer__new(sched_probes_ring_fd(p), count, &records, NULL);
	if (!rb || watch_tree(p, pid) < 0) {
		fprintf(stderr, "sched_floor: cannot watch pid %d: %s\n", pid, strerror(errno));
		return 1;
	}
	pthread_create(&t, NULL, reader, rb);
	printf("ready\n");
	fflush(stdout);
	/* The answers' FIFO read-write: its open never waits for a reader. */
	cmd = fopen(argv[2], "r");
	ack = cmd ? fopen(argv[3], "r+") : NULL;
	if (!ack) {
		fprintf(stderr, "sched_floor: cannot open its FIFOs: %s\n", strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), cmd)) {
		int rc = 0;

		/* Counted while detached: before an attach, after a detach. */
		if (!strncmp(line, "on", 2)) {
			sched_probes_stats(p, st);
			rc = sched_probes_attach(p, strcmp(line, "on nosys\n") != 0, err,
						 sizeof(err));
		} else {
			sched_probes_detach(p);
			/* A run that began before the detach may still send. */
			usleep(10000);
			sched_probes_stats(p, st);
		}
		if (rc)
			fprintf(ack, "error: %s\n", err);
		else
			fprintf(ack, "ok %llu\n", (unsigned long long)st[SCHED_STAT_SENT]);
		fflush(ack);
	}
	sched_probes_detach(p);
	stop = 1;
	pthread_join(t, NULL);
	ring_buffer__consume(rb);
	sched_probes_stats(p, st);
	lost = sched_probes_lost(st);
	printf("records %lu sent %llu lost %llu\n", records, (unsigned long long)st[SCHED_STAT_SENT],
	       (unsigned long long)lost);
	ring_buffer__free(rb);
	sched_probes_free(p);
	return 0;
}
