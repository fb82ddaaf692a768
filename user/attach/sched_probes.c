// SPDX-License-Identifier: BSD-2-Clause
/*
 * The kernel view's programs on their tracepoints (sched_probes.h). A
 * kernel without the page fault tracepoint (another architecture, an old
 * kernel) loses only the fault attribution: the object is loaded again
 * without that program (nor rss_stat's, which times faults on CPU), and
 * the trace says what is missing.
 */
#define _GNU_SOURCE
#include "attach/sched_probes.h"
#include "attach/probes.h"
#include "attach/target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sched.skel.h"

#define MAX_PROGS 16

struct sched_probes {
	struct sched_bpf *skel;
	struct bpf_link *links[MAX_PROGS];
	int nlinks;
	char missing[128];
	size_t missing_loaded; /* strlen(missing) before the first attach */
};

/* faults: page_fault_user's program; rss: rss_stat's (faults on CPU, which
 * needs the other). */
static struct sched_bpf *open_skel(uint32_t ring_bytes, bool faults, bool rss, bool block,
				   int *err)
{
	uint64_t again = 0;

	for (;;) {
		struct sched_bpf *skel = sched_bpf__open();

		if (!skel) {
			*err = -errno;
			return NULL;
		}
		bpf_map__set_max_entries(skel->maps.sched_events, ring_bytes);
		skel->rodata->wakeup_bytes = ring_bytes / 16;
		if (!faults)
			bpf_program__set_autoload(skel->progs.on_fault, false);
		if (!faults || !rss)
			bpf_program__set_autoload(skel->progs.on_rss, false);
		if (!block) { /* block_io_start/done: kernels 6.5+ */
			bpf_program__set_autoload(skel->progs.on_block_start, false);
			bpf_program__set_autoload(skel->progs.on_block_done, false);
		}
		*err = sched_bpf__load(skel);
		if (!*err)
			return skel;
		sched_bpf__destroy(skel);
		if (!probes_load_again(*err, &again))
			return NULL;
	}
}

static void missing_add(struct sched_probes *p, const char *tracepoint)
{
	size_t n = strlen(p->missing);

	snprintf(p->missing + n, sizeof(p->missing) - n, "%s%s", n ? ", " : "", tracepoint);
}

/* Attaches each program on its own (without the system call ones unless
 * syscalls): one the kernel refuses is named. rss_stat's goes last, and
 * only with page_fault_user's and the system call ones: it times the
 * faults that one starts, which a system call's entry ends. */
static int attach_all(struct sched_probes *p, bool syscalls, char *err, size_t errlen)
{
	struct sched_bpf *k = p->skel;
	struct bpf_program *prog;
	bool faults = bpf_program__autoload(k->progs.on_fault);
	struct bpf_link *l;

	bpf_object__for_each_program(prog, k->obj) {
		if (!bpf_program__autoload(prog) || p->nlinks == MAX_PROGS ||
		    prog == k->progs.on_rss)
			continue;
		if (!syscalls && (prog == k->progs.on_sys_enter || prog == k->progs.on_sys_exit))
			continue;
		l = bpf_program__attach(prog);
		if (!l && (prog == k->progs.on_fault || prog == k->progs.on_block_start ||
			   prog == k->progs.on_block_done)) {
			missing_add(p, prog == k->progs.on_fault ? "page_fault_user" :
				       prog == k->progs.on_block_start ? "block_io_start" :
				       "block_io_done");
			faults &= prog != k->progs.on_fault;
			continue;
		}
		if (!l) {
			snprintf(err, errlen, "attaching %s failed: %s", bpf_program__name(prog),
				 strerror(errno));
			return -1;
		}
		p->links[p->nlinks++] = l;
	}
	if (!bpf_program__autoload(k->progs.on_rss) || p->nlinks == MAX_PROGS)
		return 0;
	if (!faults || !syscalls) /* page_fault_user is named, or a bench's "on nosys" */
		return 0;
	if ((l = bpf_program__attach(k->progs.on_rss)))
		p->links[p->nlinks++] = l;
	else
		missing_add(p, "rss_stat");
	return 0;
}

struct sched_probes *sched_probes_new(uint32_t ring_bytes, char *err, size_t errlen)
{
	struct sched_probes *p = calloc(1, sizeof(*p));
	int e = 0;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->skel = open_skel(ring_bytes, true, true, true, &e);
	/* Without a tracepoint an older kernel lacks; not for EAGAIN, which
	 * went on for 10 s (probes_load_again) and would again. */
	if (!p->skel && e != -EAGAIN && (p->skel = open_skel(ring_bytes, true, true, false, &e)))
		snprintf(p->missing, sizeof(p->missing), "block_io_start");
	if (!p->skel && e != -EAGAIN && (p->skel = open_skel(ring_bytes, true, false, false, &e)))
		snprintf(p->missing, sizeof(p->missing), "rss_stat, block_io_start");
	if (!p->skel && e != -EAGAIN &&
	    (p->skel = open_skel(ring_bytes, false, false, false, &e)))
		snprintf(p->missing, sizeof(p->missing), "page_fault_user, rss_stat, block_io_start");
	if (!p->skel) {
		snprintf(err, errlen, "loading its BPF programs failed: %s (run with -v for the "
			 "verifier log)", strerror(-e));
		free(p);
		return NULL;
	}
	p->missing_loaded = strlen(p->missing);
	if (sched_probes_attach(p, true, err, errlen)) {
		sched_probes_free(p);
		return NULL;
	}
	return p;
}

int sched_procs_bitmap_watch(const struct bpf_map *m, int pid, bool on)
{
	uint32_t word = (uint32_t)pid / 64;
	uint64_t bits = 0, bit = 1ull << ((uint32_t)pid % 64);

	if (pid <= 0 || word >= bpf_map__max_entries(m))
		return -EINVAL;
	if (bpf_map__lookup_elem(m, &word, sizeof(word), &bits, sizeof(bits), 0))
		return -errno;
	bits = on ? bits | bit : bits & ~bit;
	return bpf_map__update_elem(m, &word, sizeof(word), &bits, sizeof(bits), BPF_ANY);
}

int sched_probes_watch(struct sched_probes *p, int pid, bool on)
{
	return p ? sched_procs_bitmap_watch(p->skel->maps.sched_procs, pid, on) : 0;
}

int sched_probes_procs_fd(const struct sched_probes *p)
{
	return bpf_map__fd(p->skel->maps.sched_procs);
}

int sched_probes_cpus_fd(const struct sched_probes *p)
{
	return bpf_map__fd(p->skel->maps.cpus);
}

int sched_probes_ring_fd(const struct sched_probes *p)
{
	return bpf_map__fd(p->skel->maps.sched_events);
}

uint64_t sched_probes_block_in_flight(const struct sched_probes *p)
{
	uint64_t key, next, n = 0;
	const struct bpf_map *m;
	void *prev = NULL;

	if (!p)
		return 0;
	m = p->skel->maps.block_rqs;
	while (n < bpf_map__max_entries(m) &&
	       !bpf_map__get_next_key(m, prev, &next, sizeof(next))) {
		key = next;
		prev = &key;
		n++;
	}
	return n;
}

const char *sched_probes_missing(const struct sched_probes *p)
{
	return p ? p->missing : "";
}

void sched_probes_detach(struct sched_probes *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nlinks; i++)
		bpf_link__destroy(p->links[i]);
	p->nlinks = 0;
}

int sched_probes_attach(struct sched_probes *p, bool syscalls, char *err, size_t errlen)
{
	if (p->nlinks)
		return 0;
	p->missing[p->missing_loaded] = 0; /* what fails to attach is named again */
	if (!attach_all(p, syscalls, err, errlen))
		return 0;
	sched_probes_detach(p);
	return -1;
}

/* A thread's process, name and kernel priority (task->prio), from /proc
 * (its name as its track has it); false if it is gone. */
static bool thread_facts(uint32_t tid, uint32_t *tgid, char comm[SCHED_COMM_LEN], int32_t *prio)
{
	char path[64], buf[1024], *p;
	FILE *f;
	int pri = 20;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%u/stat", tid);
	if (!(f = fopen(path, "re")))
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* pid (comm) state ppid ... : the 18th field is the priority */
	if ((p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %d", &pri);
	*prio = pri + 100;
	snprintf(path, sizeof(path), "/proc/%u/status", tid);
	if (!(f = fopen(path, "re")))
		return false;
	*tgid = 0;
	while (fgets(buf, sizeof(buf), f) && sscanf(buf, "Tgid: %u", tgid) != 1)
		;
	fclose(f);
	if (!*tgid)
		return false;
	target_thread_name((int)*tgid, (int)tid, comm, SCHED_COMM_LEN);
	return true;
}

int sched_probes_pending(const struct sched_probes *p,
			 int (*fn)(void *ctx, void *data, size_t size), void *ctx)
{
	int ncpu = libbpf_num_possible_cpus(), n = 0;
	struct ptbpf_sched_cpu *v;
	uint32_t zero = 0;

	if (!p || ncpu <= 0 || !(v = calloc((size_t)ncpu, sizeof(*v))))
		return 0;
	if (bpf_map__lookup_elem(p->skel->maps.cpus, &zero, sizeof(zero), v,
				 sizeof(*v) * (size_t)ncpu, 0))
		ncpu = 0;
	for (int c = 0; c < ncpu; c++) {
		struct ptbpf_sched_switch r;

		/* Untimed: a replay the ring had no room for, counted lost. */
		if (!v[c].unseen || !v[c].last_next || !v[c].last_ts)
			continue;
		memset(&r, 0, sizeof(r));
		if (!thread_facts(v[c].last_next, &r.next_tgid, r.next_comm, &r.next_prio))
			continue;
		r.h = (struct ptbpf_sched_hdr){ .ts = v[c].last_ts, .kind = SCHED_REC_SWITCH,
						.cpu = (uint16_t)c };
		r.prev_tid = v[c].last_prev;
		r.next_tid = v[c].last_next;
		r.flags = SW_REPLAYED | SW_UNSEEN | SW_NEXT_TRACED;
		r.sys_nr = -1;
		fn(ctx, &r, sizeof(r));
		n++;
	}
	free(v);
	return n;
}

uint64_t sched_probes_lost(const uint64_t st[SCHED_STAT_MAX])
{
	return st[SCHED_DROP_SWITCH] + st[SCHED_DROP_WAKING] + st[SCHED_DROP_SYSCALL] +
	       st[SCHED_DROP_BLOCK] + st[SCHED_DROP_FAULTS];
}

void sched_probes_stats(const struct sched_probes *p, uint64_t out[SCHED_STAT_MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t vals[ncpu > 0 ? ncpu : 1];

	for (uint32_t k = 0; k < SCHED_STAT_MAX; k++) {
		out[k] = 0;
		if (!p || bpf_map__lookup_elem(p->skel->maps.sched_stats, &k, sizeof(k), vals,
					       sizeof(uint64_t) * ncpu, 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
}

uint64_t sched_probes_missed(const struct sched_probes *p)
{
	struct bpf_program *prog;
	uint64_t n = 0;

	if (!p)
		return 0;
	bpf_object__for_each_program(prog, p->skel->obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		memset(&info, 0, sizeof(info));
		if (fd >= 0 && !bpf_prog_get_info_by_fd(fd, &info, &len))
			n += info.recursion_misses;
	}
	return n;
}

const struct bpf_object *sched_probes_obj(const struct sched_probes *p)
{
	return p ? p->skel->obj : NULL;
}

void sched_probes_free(struct sched_probes *p)
{
	if (!p)
		return;
	sched_probes_detach(p);
	sched_bpf__destroy(p->skel);
	free(p);
}
