// SPDX-License-Identifier: BSD-2-Clause
/* The CPU sampler's perf events and program. See sample_probes.h. */
#define _GNU_SOURCE
#include "attach/sample_probes.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attach/probes.h"
#include "attach/sched_probes.h"
#include "ptbpf.skel.h"
#include "samples.skel.h"

struct sample_probes {
	struct samples_bpf *skel;
	bool own_bitmap; /* not the kernel view's */
	int ncpus;
	struct bpf_link **links;
	int nlinks;
};

/* The maps the program shares: the ops object's ring, counters, Python
 * layouts and named code objects; the kernel view's bitmap and CPUs. */
static int share_maps(struct samples_bpf *skel, struct ptbpf_bpf *ops,
		      struct sched_probes *sched)
{
	int err = probes_share_maps(ops, skel->obj);

	if (!err)
		err = bpf_map__reuse_fd(skel->maps.py_codes, bpf_map__fd(ops->maps.py_codes));
	if (!err && sched)
		err = bpf_map__reuse_fd(skel->maps.sched_procs, sched_probes_procs_fd(sched));
	if (!err && sched)
		err = bpf_map__reuse_fd(skel->maps.cpus, sched_probes_cpus_fd(sched));
	return err;
}

/* The kernel refuses a frequency above kernel.perf_event_max_sample_rate. */
static void explain_open(int err, uint32_t hz, char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
	unsigned long max = 0;

	if (f && fscanf(f, "%lu", &max) != 1)
		max = 0;
	if (f)
		fclose(f);
	if (err == EINVAL && max && hz > max)
		snprintf(buf, len, "%u Hz is above this kernel's perf_event_max_sample_rate (%lu)",
			 hz, max);
	else
		snprintf(buf, len, "perf_event_open(cpu-clock) failed: %s", strerror(err));
}

static int open_events(struct sample_probes *p, uint32_t hz, char *err, size_t errlen)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE, .size = sizeof(a), .config = PERF_COUNT_SW_CPU_CLOCK,
		.freq = 1, .sample_freq = hz,
	};
	int ncpu = libbpf_num_possible_cpus();

	if (ncpu <= 0 || !(p->links = calloc((size_t)ncpu, sizeof(*p->links)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int cpu = 0; cpu < ncpu; cpu++) {
		int fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		struct bpf_link *l;

		if (fd < 0 && errno == ENODEV)
			continue; /* offline */
		if (fd < 0) {
			explain_open(errno, hz, err, errlen);
			return -1;
		}
		l = bpf_program__attach_perf_event(p->skel->progs.cpu_sample, fd);
		if (!l) {
			snprintf(err, errlen, "attaching to CPU %d's cpu-clock failed: %s", cpu,
				 strerror(errno));
			close(fd);
			return -1;
		}
		p->links[p->nlinks++] = l; /* the link owns fd */
		p->ncpus++;
	}
	return 0;
}

struct sample_probes *sample_probes_new(struct ptbpf_bpf *ops, struct sched_probes *sched,
					uint32_t hz, char *err, size_t errlen)
{
	struct sample_probes *p = calloc(1, sizeof(*p));
	uint64_t again = 0;
	int e;

	if (!p)
		goto no_open;
	p->own_bitmap = !sched;
	do {
		samples_bpf__destroy(p->skel);
		if (!(p->skel = samples_bpf__open()))
			goto no_open;
		if (!(e = share_maps(p->skel, ops, sched)))
			e = samples_bpf__load(p->skel);
	} while (probes_load_again(e, &again));
	if (e) {
		snprintf(err, errlen, "loading its BPF program failed: %s (run with -v for the "
			 "verifier log)", strerror(-e));
		sample_probes_free(p);
		return NULL;
	}
	if (open_events(p, hz, err, errlen)) {
		sample_probes_free(p);
		return NULL;
	}
	return p;
no_open:
	snprintf(err, errlen, "opening its BPF object failed: %s", strerror(errno));
	free(p);
	return NULL;
}

int sample_probes_watch(struct sample_probes *p, int pid, bool on)
{
	if (!p || !p->own_bitmap)
		return 0;
	return sched_procs_bitmap_watch(p->skel->maps.sched_procs, pid, on);
}

int sample_probes_cpus(const struct sample_probes *p)
{
	return p ? p->ncpus : 0;
}

void sample_probes_detach(struct sample_probes *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nlinks; i++)
		bpf_link__destroy(p->links[i]);
	p->nlinks = 0;
}

const struct bpf_object *sample_probes_obj(const struct sample_probes *p)
{
	return p ? p->skel->obj : NULL;
}

void sample_probes_free(struct sample_probes *p)
{
	if (!p)
		return;
	sample_probes_detach(p);
	free(p->links);
	samples_bpf__destroy(p->skel);
	free(p);
}
