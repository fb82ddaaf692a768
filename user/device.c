// SPDX-License-Identifier: BSD-2-Clause
/* The GPU's own timeline from the agent: probes and trace. See device.h. */
#define _GNU_SOURCE
#include "device.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "agent_ctl.h"
#include "elfsym.h"
#include "links.h"
#include "names.h"
#include "probes.h"
#include "ptbpf_agent.h"
#include "target.h"
#include "ptbpf.skel.h"
#include "agent.skel.h"

_Static_assert(sizeof(struct ptbpf_agent_kernel) <= AGENT_RAW_LEN, "kernel record too big");
_Static_assert(sizeof(struct ptbpf_agent_memcpy) <= AGENT_RAW_LEN, "memcpy record too big");
_Static_assert(sizeof(struct ptbpf_agent_memset) <= AGENT_RAW_LEN, "memset record too big");

#define MAX_AGENTS 256
#define MAX_STREAM_TRACKS 4096

struct device_probes {
	struct agent_bpf *skel;
	struct link_set links;
	struct {
		int pid;
		struct agent_link a;
		bool sent;     /* a command went out (ON at attach, then OFF/EXIT) */
		bool injected; /* this ptbpf loaded it */
	} ag[MAX_AGENTS];
	int n;
	int injected[MAX_AGENTS]; /* pids whose agent this ptbpf loaded */
	int ninjected;
	char ops_words[64]; /* what the op recorder adds (OPS_WORD_*) */
};

struct device_probes *device_probes_new(struct ptbpf_bpf *ops)
{
	struct device_probes *d = calloc(1, sizeof(*d));
	int err;

	if (!d)
		return NULL;
	d->skel = agent_bpf__open();
	if (!d->skel)
		goto fail;
	d->skel->rodata->wakeup_bytes = ops->rodata->wakeup_bytes;
	if ((err = probes_share_maps(ops, d->skel->obj)) || (err = agent_bpf__load(d->skel))) {
		errno = -err;
		goto fail;
	}
	return d;
fail:
	device_probes_free(d);
	return NULL;
}

static int agent_index(const struct device_probes *d, int pid)
{
	for (int i = 0; i < d->n; i++)
		if (d->ag[i].pid == pid)
			return i;
	return -1;
}

static int attach_one(struct device_probes *d, struct bpf_program *prog, int pid,
		      const char *path, struct elf_file *ef, const char *sym, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = cookie);
	struct elf_func f;

	if (elf_file_find_func(ef, sym, &f))
		return -ENOENT;
	return link_set_keep(&d->links, pid, bpf_program__attach_uprobe_opts(prog, pid, path,
									f.file_off, &o));
}

static int attach_records(struct device_probes *d, int pid, const char *path,
			  struct elf_file *ef)
{
	static const struct { const char *sym; uint64_t cookie; } recs[] = {
		{ "ptbpf_agent_kernel",
		  AGENT_REC_KERNEL | (offsetof(struct ptbpf_agent_kernel, name) << 8) },
		{ "ptbpf_agent_memcpy", AGENT_REC_MEMCPY },
		{ "ptbpf_agent_memset", AGENT_REC_MEMSET },
	};
	unsigned long offs[3];
	__u64 cookies[3];
	struct elf_func f;

	for (int i = 0; i < 3; i++) {
		if (elf_file_find_func(ef, recs[i].sym, &f))
			return -ENOENT;
		offs[i] = f.file_off;
		cookies[i] = recs[i].cookie;
	}
	LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = offs, .cookies = cookies, .cnt = 3);
	return link_set_keep(&d->links, pid, bpf_program__attach_uprobe_multi(
		d->skel->progs.agent_record, pid, path, NULL, &o));
}

void device_probes_ops_words(struct device_probes *d, const char *words)
{
	snprintf(d->ops_words, sizeof(d->ops_words), "%s", words);
}

void device_probes_injected(struct device_probes *d, int pid)
{
	if (d->ninjected < MAX_AGENTS)
		d->injected[d->ninjected++] = pid;
}

/* The agent's probes: its records, correlations, drops, statuses (the one
 * on ptbpf_agent_status also tells the agent that ptbpf lives), stacks. */
static int attach_agent(struct device_probes *d, const struct target *t)
{
	struct target_lib lib;
	struct elf_file *ef;
	char why[256];
	int err;

	err = target_find_lib(t->pid, "libptbpf-agent.so", &lib);
	if (err)
		return err;
	ef = elf_file_open_exported(lib.fd, why, sizeof(why));
	if (!ef) {
		fprintf(stderr, "ptbpf: pid %d: cannot read %s: %s\n", t->pid, lib.path, why);
		close(lib.fd);
		return -EINVAL;
	}
	err = attach_records(d, t->pid, lib.attach_path, ef);
	if (!err)
		err = attach_one(d, d->skel->progs.agent_correlate, t->pid, lib.attach_path, ef,
				 "ptbpf_agent_correlate", 0);
	if (!err)
		err = attach_one(d, d->skel->progs.agent_dropped, t->pid, lib.attach_path, ef,
				 "ptbpf_agent_dropped", 0);
	if (!err)
		err = attach_one(d, d->skel->progs.agent_status, t->pid, lib.attach_path, ef,
				 "ptbpf_agent_status", 0);
	/* Only where Python stacks are wanted; an agent of an older ptbpf
	 * lacks the point and gets none. */
	if (!err && strstr(d->ops_words, OPS_WORD_STACKS) &&
	    attach_one(d, d->skel->progs.agent_pystack, t->pid, lib.attach_path, ef,
		       "ptbpf_agent_pystack", 0))
		fprintf(stderr, "ptbpf: warning: pid %d: no Python stacks from its agent %s\n",
			t->pid, lib.path);
	elf_file_close(ef);
	close(lib.fd);
	return err;
}

/* Kineto's CUPTI buffer callbacks in t's libtorch_cpu (static functions:
 * found in .symtab): the agent puts them back should it ever take CUPTI
 * from a profiler session it could not see. 0s if not found. */
static void kineto_callbacks(const struct target *t, uint64_t *req, uint64_t *done)
{
	static const char *const needles[2] = { "CuptiActivityApi26bufferRequestedTrampoline",
						"CuptiActivityApi26bufferCompletedTrampoline" };
	uint64_t off[2];
	struct elf_file *ef;
	char why[256];

	*req = *done = 0;
	if (t->torch.fd < 0 || !target_maps(t->pid, "libcupti.so"))
		return;
	ef = elf_file_open_exported(t->torch.fd, why, sizeof(why));
	if (ef && !elf_file_find_in_symtab(ef, needles, 2, off) && off[0] && off[1] &&
	    (target_file_addr(t->pid, &t->torch, off[0], req) ||
	     target_file_addr(t->pid, &t->torch, off[1], done)))
		*req = *done = 0;
	elf_file_close(ef);
}

int device_probes_scan(struct device_probes *d, const struct target *t, bool ops)
{
	uint64_t req, done;
	char words[96], err[512];
	bool injected = false;
	int i, ret;

	if (agent_index(d, t->pid) >= 0 || d->n == MAX_AGENTS)
		return 0;
	i = d->n;
	ret = agent_link_open(t, &d->ag[i].a, err, sizeof(err));
	if (ret == -ENOENT)
		return 0;
	d->ag[i].pid = t->pid;
	d->n++; /* failures are not retried */
	if (ret) {
		fprintf(stderr, "ptbpf: warning: %s\n", err);
		return ret;
	}
	if (!agent_running(&d->ag[i].a)) {
		fprintf(stderr, "ptbpf: pid %d maps an agent without its thread (a child forked by "
			"a traced process): not used\n", t->pid);
		return 0;
	}
	for (int k = 0; k < d->ninjected; k++)
		injected |= d->injected[k] == t->pid;
	d->ag[i].injected = injected;
	ret = attach_agent(d, t);
	if (!ret) {
		kineto_callbacks(t, &req, &done);
		snprintf(words, sizeof(words), "%s%s", ops ? OPS_WORD_OPS : "", ops ? d->ops_words : "");
		ret = agent_send(&d->ag[i].a, PTBPF_CMD_ON, words, req, done, injected);
		d->ag[i].sent = !ret;
	}
	if (ret) {
		fprintf(stderr, "ptbpf: pid %d: cannot use its agent: %s\n", t->pid,
			ret == -EPROTO ? "it is of another version: restart the process to trace "
			"it with this ptbpf" : strerror(-ret));
		return ret;
	}
	fprintf(stderr, "ptbpf: pid %d: agent switched on (%s)\n", t->pid,
		ops ? "ops, and the GPU timeline if CUDA is used" : "GPU timeline");
	return 1;
}

void device_probes_off(struct device_probes *d, int pid)
{
	int i = agent_index(d, pid);

	if (i >= 0 && d->ag[i].sent)
		d->ag[i].sent = !agent_send(&d->ag[i].a, PTBPF_CMD_OFF, "", 0, 0, false);
}

int device_probes_acked(const struct device_probes *d, int pid)
{
	int i = agent_index(d, pid);

	return i < 0 || !d->ag[i].sent ? -ENOENT : agent_acked(&d->ag[i].a);
}

int device_probes_ops_exit(struct device_probes *d, const struct target *t,
			  const struct ptbpf_ops_loc *loc)
{
	/* _exit: the process ends, its memory goes: the last copy, then a
	 * marker (cookie 1). execve*: the image goes, the process may go on:
	 * a copy only. */
	static const struct { const char *sym; uint64_t cookie; } sites[] = {
		{ "_exit", 1 }, { "execve", 0 }, { "execveat", 0 }, { "fexecve", 0 },
	};
	struct target_lib lib;
	struct elf_file *ef;
	char why[256];
	int err;

	err = target_find_lib(t->pid, "libc.so.6", &lib);
	if (err)
		return err;
	ef = elf_file_open_exported(lib.fd, why, sizeof(why));
	err = ef ? 0 : -EINVAL;
	for (size_t i = 0; !err && i < sizeof(sites) / sizeof(sites[0]); i++) {
		int e = attach_one(d, d->skel->progs.ops_exit, t->pid, lib.attach_path, ef,
				   sites[i].sym, sites[i].cookie);

		if (i == 0 || e != -ENOENT) /* _exit is required */
			err = e;
	}
	elf_file_close(ef);
	close(lib.fd);
	if (!err)
		err = bpf_map__update_elem(d->skel->maps.ops_rings, &t->pid, sizeof(t->pid), loc,
					   sizeof(*loc), BPF_ANY);
	return err;
}

void device_probes_switch_off(struct device_probes *d)
{
	for (int i = 0; d && i < d->n; i++) {
		struct agent_link *a = &d->ag[i].a;

		if (!d->ag[i].sent || a->t->pidfd < 0)
			continue;
		/* An agent ptbpf loaded ends its thread, to be unloaded. */
		d->ag[i].sent = !agent_send(a, agent_injected(a) ? PTBPF_CMD_EXIT : PTBPF_CMD_OFF,
					    "", 0, 0, false);
	}
}

bool device_probes_all_acked(const struct device_probes *d)
{
	for (int i = 0; d && i < d->n; i++)
		if (d->ag[i].sent && d->ag[i].a.t->pidfd >= 0 && agent_acked(&d->ag[i].a) == -EAGAIN)
			return false;
	return true;
}

bool device_probes_any(const struct device_probes *d)
{
	return d && d->n > 0;
}

void device_probes_gone(struct device_probes *d, int pid)
{
	int i = d ? agent_index(d, pid) : -1;

	if (i < 0)
		return;
	link_set_destroy_pid(&d->links, pid);
	bpf_map__delete_elem(d->skel->maps.ops_rings, &pid, sizeof(pid), 0);
	d->ag[i] = d->ag[--d->n];
}

void device_probes_free(struct device_probes *d)
{
	char err[512];

	if (!d)
		return;
	link_set_destroy(&d->links);
	agent_bpf__destroy(d->skel);
	/* Agents that ended their thread (EXIT) leave the process. */
	for (int i = 0; i < d->n; i++) {
		if (!d->ag[i].sent || d->ag[i].a.cmd != PTBPF_CMD_EXIT ||
		    d->ag[i].a.t->pidfd < 0 || agent_acked(&d->ag[i].a))
			continue;
		if (agent_unload(&d->ag[i].a, err, sizeof(err)))
			fprintf(stderr, "ptbpf: warning: its agent stays loaded, inert (no thread, "
				"no callbacks): %s\n", err);
	}
	free(d);
}

/* --- the trace --- */

struct stream_track {
	int pid;
	uint32_t device, stream;
	uint64_t track;
};

struct device_state {
	struct pf_writer *w;
	gpu_process_track_fn process_track;
	void *ctx;
	struct str_set *strings;
	struct str_map *names; /* (pid, CUPTI name pointer) -> demangled name */
	struct stream_track *tracks;
	int ntracks;
	struct device_counts counts;
	struct {
		int pid, code;
		uint64_t ops_desc;
		bool calls;   /* its op rings get the CUDA calls */
		bool no_corr; /* no CUDA call callbacks since it was switched on */
	} status[64]; /* each agent's latest */
	struct device_kernel_stat kstats[DEVICE_MAX_KERNEL_STATS]; /* (pid, name): time */
	int nkstats;
	int nstatus;
};

/* Launch -> kernel flows: the id both ends compute from the correlation. */
static uint64_t corr_flow(int pid, uint32_t corr)
{
	return hash_pair((uint64_t)pid, corr ^ 0x4b45524eULL) | 1;
}

struct device_state *device_state_new(struct pf_writer *w, gpu_process_track_fn fn, void *ctx)
{
	struct device_state *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->w = w;
	d->process_track = fn;
	d->ctx = ctx;
	d->strings = str_set_new(1 << 16);
	d->names = str_map_new(1 << 16);
	d->tracks = calloc(MAX_STREAM_TRACKS, sizeof(*d->tracks));
	if (!d->strings || !d->names || !d->tracks) {
		device_state_free(d);
		return NULL;
	}
	return d;
}

void device_state_free(struct device_state *d)
{
	if (!d)
		return;
	str_set_free(d->strings);
	str_map_free(d->names);
	free(d->tracks);
	free(d);
}

const struct device_counts *device_counts(const struct device_state *d)
{
	return &d->counts;
}

/*
 * The start of the launch -> kernel flow, in the CUDA call's slice. The
 * correlation is written here only for a call from ptbpf's own uprobes
 * (EV_AGENT_CORR: its slice has none); a call the agent recorded carries it
 * on its slice already (join.c), and readers take it from there.
 */
void device_correlate(struct device_state *d, uint64_t thread_track, const struct ptbpf_event *e)
{
	uint64_t flow = corr_flow(e->pid, (uint32_t)e->arg[0]);
	struct pf_arg corr = { .name = "correlation", .type = PF_ARG_UINT, .u = e->arg[0] };
	bool probed = e->kind == EV_AGENT_CORR;

	d->counts.launch_flows++;
	pf_instant(d->w, &(struct pf_event){ .track = thread_track, .ts = e->ts,
		   .name = "cupti correlation", .category = "launch_flow",
		   .args = probed ? &corr : NULL, .nargs = probed, .flows = &flow, .nflows = 1 });
}

void device_kernel_name(struct device_state *d, const struct ptbpf_long_name *n)
{
	char raw[PTBPF_LONG_NAME_LEN + 1];

	memcpy(raw, n->name, PTBPF_LONG_NAME_LEN);
	raw[PTBPF_LONG_NAME_LEN] = 0;
	if (raw[0])
		str_map_put(d->names, hash_pair(n->ev.pid, n->ev.key),
			    demangle_intern(d->strings, raw));
}

/* "GPU 0 / stream 7" under a "GPU 0" track under the process. */
static struct stream_track *stream_track(struct device_state *d, int pid, uint32_t dev,
					 uint32_t stream)
{
	uint64_t gpu_track = 0;
	char name[64];
	int i;

	for (i = 0; i < d->ntracks; i++) {
		struct stream_track *t = &d->tracks[i];

		if (t->pid == pid && t->device == dev && t->stream == stream)
			return t;
	}
	if (d->ntracks == MAX_STREAM_TRACKS)
		return NULL;
	/* One "GPU n" parent per (pid, device): stream 0xffffffff stands for it. */
	if (stream != UINT32_MAX) {
		struct stream_track *g = stream_track(d, pid, dev, UINT32_MAX);

		if (!g)
			return NULL;
		gpu_track = g->track;
		snprintf(name, sizeof(name), "GPU %u / stream %u", dev, stream);
	} else {
		gpu_track = d->process_track(d->ctx, pid);
		snprintf(name, sizeof(name), "GPU %u", dev);
	}
	i = d->ntracks++;
	d->tracks[i] = (struct stream_track){ pid, dev, stream,
					      pf_track_child(d->w, gpu_track, name) };
	return &d->tracks[i];
}

static void device_slice(struct device_state *d, int pid, uint32_t dev, uint32_t stream,
			 uint64_t start, uint64_t end, const char *name, const char *cat,
			 uint32_t corr, const struct pf_arg *args, int nargs)
{
	struct stream_track *t = stream_track(d, pid, dev, stream);
	uint64_t flow = corr ? corr_flow(pid, corr) : 0;

	if (!t)
		return;
	pf_slice_begin(d->w, &(struct pf_event){ .track = t->track, .ts = start, .name = name,
		       .category = cat, .args = args, .nargs = nargs, .term_flows = &flow,
		       .nterm = flow ? 1 : 0 });
	pf_slice_end(d->w, &(struct pf_event){ .track = t->track, .ts = end > start ? end : start });
}

/* GPU time by (process, kernel name), for metrics; kernels past the
 * table's size are summed under "(other)". Names are interned. */
static void kernel_stat(struct device_state *d, int pid, const char *name, uint64_t ns)
{
	struct device_kernel_stat *k;
	int i;

	for (i = 0; i < d->nkstats; i++)
		if (d->kstats[i].pid == pid && d->kstats[i].name == name)
			break;
	if (i == d->nkstats) {
		if (d->nkstats == DEVICE_MAX_KERNEL_STATS - 1) {
			name = "(other)";
			for (i = 0; i < d->nkstats; i++)
				if (d->kstats[i].pid == pid && !strcmp(d->kstats[i].name, name))
					break;
		}
		if (i == d->nkstats) {
			if (d->nkstats == DEVICE_MAX_KERNEL_STATS)
				return;
			d->kstats[d->nkstats++] = (struct device_kernel_stat){ .pid = pid,
									       .name = name };
		}
	}
	k = &d->kstats[i];
	k->count++;
	k->ns += ns;
}

int device_kernel_stats(const struct device_state *d, const struct device_kernel_stat **out)
{
	*out = d->kstats;
	return d->nkstats;
}

/* A kernel: its launch geometry, registers, shared memory (static plus
 * dynamic, as Kineto gives it; the dynamic part only where there is one),
 * correlation and context, and its graph where it ran in one. */
static void kernel_record(struct device_state *d, int pid, const struct ptbpf_agent_kernel *k)
{
	const char *name = str_map_get(d->names, hash_pair(pid, (uint64_t)(uintptr_t)k->name));
	char grid[40], block[40];
	struct pf_arg args[9] = {
		{ .name = "grid", .type = PF_ARG_STR, .s = grid },
		{ .name = "block", .type = PF_ARG_STR, .s = block },
		{ .name = "registers", .type = PF_ARG_UINT, .u = k->registers_per_thread },
		{ .name = "shared_mem", .type = PF_ARG_UINT,
		  .u = (uint64_t)k->static_shared_memory + (uint64_t)k->dynamic_shared_memory },
		{ .name = "correlation", .type = PF_ARG_UINT, .u = k->correlation_id },
		{ .name = "context", .type = PF_ARG_UINT, .u = k->context_id },
	};
	int nargs = 6;

	if (k->dynamic_shared_memory)
		args[nargs++] = (struct pf_arg){ .name = "dynamic_shared_mem", .type = PF_ARG_UINT,
						 .u = (uint64_t)k->dynamic_shared_memory };
	if (k->graph_id) {
		args[nargs++] = (struct pf_arg){ .name = "graph_id", .type = PF_ARG_UINT,
						 .u = k->graph_id };
		args[nargs++] = (struct pf_arg){ .name = "graph_node", .type = PF_ARG_UINT,
						 .u = k->graph_node_id };
	}
	snprintf(grid, sizeof(grid), "%d,%d,%d", k->grid_x, k->grid_y, k->grid_z);
	snprintf(block, sizeof(block), "%d,%d,%d", k->block_x, k->block_y, k->block_z);
	d->counts.kernels++;
	kernel_stat(d, pid, name ? name : "kernel", k->end > k->start ? k->end - k->start : 0);
	device_slice(d, pid, k->device_id, k->stream_id, k->start, k->end, name ? name : "kernel",
		     "kernel", k->correlation_id, args, nargs);
}

/* Kineto's names for copies and sets (CUpti_ActivityMemcpyKind,
 * CUpti_ActivityMemoryKind), so that the trace reads as torch.profiler's:
 * the slice's name is where the trace keeps the kinds. */
static const char *copy_kind(uint8_t k)
{
	static const char *const s[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					 "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };

	return k < sizeof(s) / sizeof(s[0]) ? s[k] : "Unknown";
}

static const char *memory_kind(uint8_t k)
{
	static const char *const s[] = { "Unknown", "Pageable", "Pinned", "Device", "Array",
					 "Managed", "Device Static", "Managed Static" };

	return k < sizeof(s) / sizeof(s[0]) ? s[k] : "Unknown";
}

void device_record(struct device_state *d, const struct ptbpf_agent_event *e)
{
	int pid = e->ev.pid;
	char name[64];

	if (e->ev.id == AGENT_REC_KERNEL) {
		struct ptbpf_agent_kernel k;

		memcpy(&k, e->raw, sizeof(k));
		kernel_record(d, pid, &k);
	} else if (e->ev.id == AGENT_REC_MEMCPY) {
		struct ptbpf_agent_memcpy m;
		struct pf_arg args[3];

		memcpy(&m, e->raw, sizeof(m));
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", copy_kind(m.copy_kind),
			 memory_kind(m.src_kind), memory_kind(m.dst_kind));
		args[0] = (struct pf_arg){ .name = "bytes", .type = PF_ARG_UINT, .u = m.bytes };
		args[1] = (struct pf_arg){ .name = "correlation", .type = PF_ARG_UINT,
					   .u = m.correlation_id };
		args[2] = (struct pf_arg){ .name = "context", .type = PF_ARG_UINT, .u = m.context_id };
		d->counts.memcpys++;
		device_slice(d, pid, m.device_id, m.stream_id, m.start, m.end,
			     str_set_intern(d->strings, name), "gpu_memcpy", m.correlation_id,
			     args, 3);
	} else if (e->ev.id == AGENT_REC_MEMSET) {
		struct ptbpf_agent_memset m;
		struct pf_arg args[4];

		memcpy(&m, e->raw, sizeof(m));
		snprintf(name, sizeof(name), "Memset (%s)", memory_kind((uint8_t)m.memory_kind));
		args[0] = (struct pf_arg){ .name = "bytes", .type = PF_ARG_UINT, .u = m.bytes };
		args[1] = (struct pf_arg){ .name = "value", .type = PF_ARG_UINT, .u = m.value };
		args[2] = (struct pf_arg){ .name = "correlation", .type = PF_ARG_UINT,
					   .u = m.correlation_id };
		args[3] = (struct pf_arg){ .name = "context", .type = PF_ARG_UINT, .u = m.context_id };
		d->counts.memsets++;
		device_slice(d, pid, m.device_id, m.stream_id, m.start, m.end,
			     str_set_intern(d->strings, name), "gpu_memset", m.correlation_id,
			     args, 4);
	}
}

bool device_agent_status(const struct device_state *d, int pid, int *code)
{
	for (int i = 0; i < d->nstatus; i++) {
		if (d->status[i].pid == pid) {
			*code = d->status[i].code;
			return true;
		}
	}
	return false;
}

bool device_agent_calls(const struct device_state *d, int pid)
{
	for (int i = 0; i < d->nstatus; i++)
		if (d->status[i].pid == pid)
			return d->status[i].calls;
	return false;
}

uint64_t device_ops_desc(const struct device_state *d, int pid)
{
	for (int i = 0; i < d->nstatus; i++)
		if (d->status[i].pid == pid)
			return d->status[i].ops_desc;
	return 0;
}

/* "WHAT: key=value ... [name=REST]" (PTBPF_AGENT_DEVICE, _VERSIONS) as an
 * instant named WHAT on the process track, numbers as numbers: what the
 * Kineto export writes as deviceProperties and CUDA versions. */
static void facts_instant(struct device_state *d, int pid, uint64_t ts, char *msg)
{
	struct pf_arg args[24];
	char *colon = strstr(msg, ": "), *p, *eq, *end;
	int nargs = 0;

	if (!colon)
		return;
	*colon = 0;
	for (p = colon + 2; *p && nargs < (int)(sizeof(args) / sizeof(args[0])); p = end) {
		eq = strchr(p, '=');
		if (!eq)
			break;
		*eq = 0;
		if (!strcmp(p, "name")) { /* the rest of the line */
			args[nargs++] = (struct pf_arg){ .name = p, .type = PF_ARG_STR, .s = eq + 1 };
			break;
		}
		end = strchr(eq + 1, ' ');
		if (end)
			*end++ = 0;
		else
			end = eq + 1 + strlen(eq + 1);
		args[nargs++] = (struct pf_arg){ .name = p, .type = PF_ARG_INT,
						 .i = strtoll(eq + 1, NULL, 10) };
	}
	pf_instant(d->w, &(struct pf_event){ .track = d->process_track(d->ctx, pid), .ts = ts,
		   .name = str_set_intern(d->strings, msg), .category = "ptbpf",
		   .args = args, .nargs = nargs });
}

void device_status(struct device_state *d, const struct ptbpf_named_event *e, size_t size)
{
	size_t len = size >= sizeof(struct ptbpf_long_name) ? PTBPF_LONG_NAME_LEN : PTBPF_NAME_LEN;
	char msg[PTBPF_LONG_NAME_LEN * 4];
	int code = (int)e->ev.arg[0], i;

	escape_str(msg, sizeof(msg), e->name, len);
	if (code == PTBPF_AGENT_DEVICE || code == PTBPF_AGENT_VERSIONS) {
		facts_instant(d, e->ev.pid, e->ev.ts, msg);
		return;
	}
	fprintf(stderr, "ptbpf: pid %u: agent: %s (%d)\n", e->ev.pid, msg, code);
	for (i = 0; i < d->nstatus && d->status[i].pid != (int)e->ev.pid; i++)
		;
	if (i == (int)(sizeof(d->status) / sizeof(d->status[0])))
		return;
	d->nstatus += i == d->nstatus;
	d->status[i].pid = e->ev.pid;
	d->status[i].code = code;
	if (code == PTBPF_AGENT_DORMANT)
		d->status[i].calls = d->status[i].no_corr = false;
	if (code == PTBPF_AGENT_NO_CORRELATION)
		d->status[i].calls = false, d->status[i].no_corr = true;
	if (code == PTBPF_AGENT_OPS_ON) {
		d->status[i].ops_desc = e->ev.arg[1];
		d->status[i].calls = !d->status[i].no_corr;
	} else if (code == PTBPF_AGENT_DORMANT || code == PTBPF_AGENT_ERR_OPS) {
		d->status[i].ops_desc = 0;
	}
	/* What changes the trace's content is marked in it. */
	if (code == PTBPF_AGENT_GPU_PAUSED || code == PTBPF_AGENT_GPU_RESUMED ||
	    code == PTBPF_AGENT_NO_CORRELATION)
		pf_instant(d->w, &(struct pf_event){ .track = d->process_track(d->ctx, e->ev.pid),
			   .ts = e->ev.ts, .name = msg, .category = "ptbpf" });
}

void device_dropped(struct device_state *d, const struct ptbpf_event *e)
{
	d->counts.cupti_dropped += e->arg[0];
}
