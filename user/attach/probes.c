// SPDX-License-Identifier: BSD-2-Clause
/* Where probes go, and attaching them. See probes.h. */
#define _GNU_SOURCE
#include "attach/probes_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "lib/clock.h"
#include "lib/elfsym.h"
#include "attach/links.h"
#include "attach/target.h"
#include "ptbpf.skel.h"

#define MAX_EXITS 64

/* Symbols (mangled) of the non-op probe points in libtorch_cpu. */
#define SYM_EVALUATE_FUNCTION                                                      \
	"_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEE" \
	"PNS0_4NodeERNS0_11InputBufferERKS2_INS0_10ReadyQueueEE"
#define SYM_SEQ_GET_AND_INCREMENT "_ZN2at15sequence_number17get_and_incrementEv"
#define SYM_RF_CTOR "_ZN2at14RecordFunctionC1ENS_11RecordScopeE"
#define SYM_RF_END "_ZN2at14RecordFunction3endEv"
#define SYM_CXA_BEGIN_CATCH "__cxa_begin_catch"

struct site_list {
	uint64_t *off, *cookie;
	size_t n, cap;
};

/* Where every probe goes in one libtorch_cpu inode. */
struct plan {
	uint64_t dev, ino;
	struct site_list entries, exits;     /* ops, cookie = op index */
	struct site_list bwd_entry, bwd_exits, seq_rets;
	struct site_list user_enter, user_ctor, user_end;
	struct attach_report rep;            /* the plan's share of the report */
};

static int sites_add(struct site_list *l, uint64_t off, uint64_t cookie)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		uint64_t *o = realloc(l->off, cap * sizeof(*o));
		uint64_t *c = o ? realloc(l->cookie, cap * sizeof(*c)) : NULL;

		if (o)
			l->off = o;
		if (!c)
			return -ENOMEM;
		l->cookie = c;
		l->cap = cap;
	}
	l->off[l->n] = off;
	l->cookie[l->n++] = cookie;
	return 0;
}

static void sites_free(struct site_list *l)
{
	free(l->off);
	free(l->cookie);
}

/* The entry probe's offset: past an endbr64, which changes no state but is
 * single-stepped, when the instruction after it is emulated. */
uint64_t probes_entry_site(struct elf_file *ef, const struct elf_func *f, int *emulated)
{
	struct insn_info in;

	*emulated = 0;
	if (insn_decode(ef, f->file_off, &in))
		return f->file_off;
	if (in.is_endbr) {
		struct insn_info next;

		if (!insn_decode(ef, f->file_off + in.len, &next) && next.emulated) {
			*emulated = 1;
			return f->file_off + in.len;
		}
	}
	*emulated = in.emulated;
	return f->file_off;
}

/* RecordFunction::end starts with `cmpb $0,0x68(%rdi); je`: the cmp is
 * single-stepped, the je emulated, and RDI is the same at both. */
static uint64_t flags_only_prefix_site(struct elf_file *ef, const struct elf_func *f)
{
	struct insn_info in, next;

	if (insn_decode(ef, f->file_off, &in) || in.emulated || !in.flags_only)
		return f->file_off;
	if (insn_decode(ef, f->file_off + in.len, &next) || !next.emulated)
		return f->file_off;
	return f->file_off + in.len;
}

/* Adds f's exit sites (rets, tail jumps) with cookie; -1 if undecodable. */
static int add_exits(struct elf_file *ef, const struct elf_func *f, struct site_list *l,
		     uint64_t cookie, struct attach_report *rep)
{
	struct exit_site sites[MAX_EXITS];
	int n = func_exit_sites(ef, f, sites, MAX_EXITS);

	if (n <= 0 || n > MAX_EXITS)
		return -1;
	for (int i = 0; i < n; i++) {
		if (sites_add(l, sites[i].file_off, cookie))
			return -1;
		rep->ret_sites += sites[i].kind == EXIT_RET;
		rep->tail_sites += sites[i].kind == EXIT_TAILJMP;
	}
	return 0;
}

struct op_scan {
	struct elf_file *ef;
	struct op_namer *namer;
	struct op_table *ops;
	struct plan *plan;
	int err;
};

static int scan_op(const struct elf_func *f, void *ctx)
{
	struct op_scan *s = ctx;
	char sname[512], name[512], overload[256];
	size_t nexits = s->plan->exits.n;
	uint64_t off;
	int emulated;

	if (strncmp(f->name, "_ZN2at4_ops", 11) || op_struct_name(f->name, sname, sizeof(sname)))
		return 0;
	if (s->ops->n >= PTBPF_MAX_OPS)
		return 0;
	if (add_exits(s->ef, f, &s->plan->exits, s->ops->n, &s->plan->rep)) {
		s->plan->exits.n = nexits; /* never an entry without its exits */
		s->plan->rep.ops_skipped++;
		return 0;
	}
	op_namer_split(s->namer, sname, name, sizeof(name), overload, sizeof(overload));
	off = probes_entry_site(s->ef, f, &emulated);
	if (sites_add(&s->plan->entries, off, s->ops->n) ||
	    op_table_add(s->ops, name, overload)) {
		s->err = -ENOMEM;
		return 1;
	}
	s->plan->rep.ops++;
	s->plan->rep.emulated_entries += emulated;
	return 0;
}

/* The non-op probe points; each is optional (a torch version may lack it). */
static void plan_extras(struct elf_file *ef, struct plan *pl)
{
	struct elf_func f;
	int emulated;

	if (!elf_file_find_func(ef, SYM_EVALUATE_FUNCTION, &f) &&
	    !add_exits(ef, &f, &pl->bwd_exits, 0, &pl->rep))
		sites_add(&pl->bwd_entry, probes_entry_site(ef, &f, &emulated), 0);
	if (!elf_file_find_func(ef, SYM_SEQ_GET_AND_INCREMENT, &f)) {
		struct exit_site sites[4];
		int n = func_exit_sites(ef, &f, sites, 4);

		/* Only a leaf with plain rets: RAX holds the result there. */
		for (int i = 0; i < n && n <= 4; i++)
			if (sites[i].kind == EXIT_RET)
				sites_add(&pl->seq_rets, sites[i].file_off, 0);
	}
	if (!elf_file_find_func(ef, SYM_RF_CTOR, &f))
		sites_add(&pl->user_ctor, probes_entry_site(ef, &f, &emulated), 0);
	if (!elf_file_find_func(ef, SYM_RF_END, &f))
		sites_add(&pl->user_end, flags_only_prefix_site(ef, &f), 0);
	if (!elf_file_find_func_prefix(ef, "_ZN5torch8autograd8profiler25record_function_enter_new", &f))
		sites_add(&pl->user_enter, probes_entry_site(ef, &f, &emulated), 0);
}

static struct plan *find_or_make_plan(struct probes *p, const struct target *t,
				      char *err, size_t errlen)
{
	struct plan *pl;
	struct op_scan s = { .ops = p->ops };
	uint64_t t0;
	char why[256] = "";

	for (int i = 0; i < p->nplans; i++)
		if (p->plans[i].dev == t->torch.dev && p->plans[i].ino == t->torch.ino)
			return &p->plans[i];
	t0 = clock_mono_ns();
	pl = realloc(p->plans, (p->nplans + 1) * sizeof(*pl));
	if (!pl)
		return NULL;
	p->plans = pl;
	pl = &p->plans[p->nplans];
	memset(pl, 0, sizeof(*pl));
	pl->dev = t->torch.dev;
	pl->ino = t->torch.ino;
	s.plan = pl;
	s.ef = elf_file_open_exported(t->torch.fd, why, sizeof(why));
	if (!s.ef) {
		snprintf(err, errlen, "cannot read %s: %s", t->torch.path, why);
		return NULL;
	}
	s.namer = op_namer_new(s.ef);
	if (s.namer)
		elf_file_for_each_func(s.ef, scan_op, &s);
	if (s.namer && !s.err)
		plan_extras(s.ef, pl);
	op_namer_free(s.namer);
	elf_file_close(s.ef);
	if (!s.namer || s.err || !pl->entries.n) {
		snprintf(err, errlen, "%s: no at::_ops::<op>::call functions could be probed",
			 t->torch.path);
		return NULL;
	}
	pl->rep.plan_ms = clock_ms_since(t0);
	p->nplans++;
	return pl;
}

static int attach_multi(struct probes *p, struct bpf_program *prog, int pid,
			const char *path, const struct site_list *l)
{
	LIBBPF_OPTS(bpf_uprobe_multi_opts, o, .offsets = (unsigned long *)l->off,
		    .cookies = (__u64 *)l->cookie, .cnt = l->n);

	struct ptbpf_bpf *s = p->skel;
	/* What closes a slice goes last at detach (links.h). */
	bool end = prog == s->progs.op_exit || prog == s->progs.bwd_exit ||
		   prog == s->progs.user_end || prog == s->progs.unwind_catch;

	if (!l->n)
		return 0;
	return link_set_uprobes(&p->links, pid, prog, path, &o, end);
}

/* A program that must have a site: -ENOENT without one. A uprobe.multi
 * link even for one site: at detach its grace period runs beside the
 * others' (keeper.c), where a perf-event uprobe's is serialized (~80 ms
 * each on kernel 6.18). */
static int attach_one(struct probes *p, struct bpf_program *prog, int pid,
		      const char *path, const struct site_list *l)
{
	return l->n ? attach_multi(p, prog, pid, path, l) : -ENOENT;
}

static int attach_catch(struct probes *p, const struct target *t, int *attached)
{
	struct site_list l = { 0 };
	struct elf_func f;
	struct elf_file *ef;
	char why[256];
	int emulated, err = 0;

	*attached = 0;
	if (t->stdcxx.fd < 0)
		return 0;
	ef = elf_file_open_exported(t->stdcxx.fd, why, sizeof(why));
	if (!ef)
		return 0;
	if (!elf_file_find_func(ef, SYM_CXA_BEGIN_CATCH, &f) &&
	    !sites_add(&l, probes_entry_site(ef, &f, &emulated), 0)) {
		err = attach_one(p, p->skel->progs.unwind_catch, t->pid, t->stdcxx.attach_path, &l);
		*attached = !err;
	}
	sites_free(&l);
	elf_file_close(ef);
	return err;
}

struct ptbpf_bpf *probes_load(uint32_t ring_bytes, bool py_stacks, char *err, size_t errlen)
{
	struct ptbpf_bpf *skel = NULL;
	uint64_t again = 0;
	int e;

	do {
		ptbpf_bpf__destroy(skel);
		skel = ptbpf_bpf__open();
		if (!skel) {
			snprintf(err, errlen, "opening the BPF object failed: %s", strerror(errno));
			return NULL;
		}
		bpf_map__set_max_entries(skel->maps.events, ring_bytes);
		skel->rodata->wakeup_bytes = ring_bytes / 16;
		skel->rodata->py_stacks = py_stacks;
		e = ptbpf_bpf__load(skel);
	} while (probes_load_again(e, &again));
	if (!e)
		e = ptbpf_bpf__attach(skel); /* the process tracepoints: exits, forks */
	if (e) {
		snprintf(err, errlen, "loading the BPF programs failed: %s (run with -v for the "
			 "verifier log)", strerror(-e));
		ptbpf_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

struct probes *probes_new(struct ptbpf_bpf *skel, struct op_table *ops, bool entries_only)
{
	struct probes *p = calloc(1, sizeof(*p));

	if (p) {
		p->skel = skel;
		p->ops = ops;
		p->entries_only = entries_only;
	}
	return p;
}

static int attach_plan(struct probes *p, const struct plan *pl, const struct target *t,
		       struct attach_report *rep)
{
	struct ptbpf_bpf *s = p->skel;
	const char *path = t->torch.attach_path;
	int pid = t->pid, err;

	/* Exits first: an entry must never be live without its exits. */
	if ((!p->entries_only &&
	     (err = attach_multi(p, s->progs.op_exit, pid, path, &pl->exits))) ||
	    (err = attach_multi(p, s->progs.op_entry, pid, path, &pl->entries)))
		return err;
	if (pl->bwd_entry.n &&
	    (p->entries_only || !attach_multi(p, s->progs.bwd_exit, pid, path, &pl->bwd_exits)))
		rep->bwd_probe = !attach_one(p, s->progs.bwd_entry, pid, path, &pl->bwd_entry);
	rep->seq_probe = !attach_one(p, s->progs.seq_ret, pid, path, &pl->seq_rets);
	if (!attach_one(p, s->progs.user_end, pid, path, &pl->user_end) &&
	    !attach_one(p, s->progs.user_ctor, pid, path, &pl->user_ctor))
		rep->user_probes = !attach_one(p, s->progs.user_enter, pid, path, &pl->user_enter);
	return 0;
}

int probes_prepare(struct probes *p, const struct target *t, char *err, size_t errlen)
{
	return t->torch.fd < 0 || find_or_make_plan(p, t, err, errlen) ? 0 : -EINVAL;
}

int probes_attach(struct probes *p, const struct target *t, struct attach_report *rep,
		  volatile sig_atomic_t *stop, char *err, size_t errlen)
{
	uint64_t t0;
	struct plan *pl;
	__u8 one = 1;
	int ret;

	memset(rep, 0, sizeof(*rep));
	if (t->torch.fd < 0) /* no libtorch: only the GPU probes (gpu_probes.c) */
		return bpf_map__update_elem(p->skel->maps.traced, &t->pid, sizeof(t->pid), &one,
					    sizeof(one), BPF_ANY);
	pl = find_or_make_plan(p, t, err, errlen);
	if (!pl)
		return -EINVAL;
	*rep = pl->rep;
	if (*stop)
		return -EINTR;
	t0 = clock_mono_ns();
	ret = bpf_map__update_elem(p->skel->maps.traced, &t->pid, sizeof(t->pid), &one,
				   sizeof(one), BPF_ANY);
	if (!ret && !p->entries_only)
		ret = attach_catch(p, t, &rep->catch_probe);
	if (!ret && !*stop)
		ret = attach_plan(p, pl, t, rep);
	rep->attach_ms = clock_ms_since(t0);
	if (ret) {
		snprintf(err, errlen, "pid %d: attaching uprobes to %s failed: %s", t->pid,
			 t->torch.path, strerror(-ret));
		return ret;
	}
	return *stop ? -EINTR : 0;
}

/* c10::reportMemoryUsageToProfiler(void*, int64_t, ...): the rest of the
 * signature is int64_t in 1.13, size_t in 2.x. */
#define SYM_MEM_REPORT     "_ZN3c1027reportMemoryUsageToProfilerEPvl"

static const char *const site_syms[][2] = {
	[SITES_MEM] = { SYM_MEM_REPORT, NULL },
};

/* The `what` sites of lib, looked up once per inode; NULL if its ELF
 * cannot be read. All of a group's symbols or none. */
static const struct lib_sites *find_sites(struct probes *p, const struct target_lib *lib,
					  int what)
{
	struct lib_sites *r;
	struct elf_func f;
	struct elf_file *ef;
	char why[256];
	int emulated, want = site_syms[what][1] ? 2 : 1;

	for (int i = 0; i < p->nsites; i++)
		if (p->sites[i].dev == lib->dev && p->sites[i].ino == lib->ino &&
		    p->sites[i].what == what)
			return &p->sites[i];
	ef = elf_file_open_sections(lib->fd, why, sizeof(why)); /* two lookups: no index */
	if (!ef)
		return NULL;
	r = realloc(p->sites, (p->nsites + 1) * sizeof(*r));
	if (!r) {
		elf_file_close(ef);
		return NULL;
	}
	p->sites = r;
	r = &p->sites[p->nsites++];
	*r = (struct lib_sites){ .dev = lib->dev, .ino = lib->ino, .what = what };
	for (int i = 0; i < want && r->n == i; i++)
		if (!elf_file_find_func_prefix(ef, site_syms[what][i], &f))
			r->off[r->n++] = probes_entry_site(ef, &f, &emulated);
	if (r->n < want)
		r->n = 0;
	elf_file_close(ef);
	return r;
}

int probes_attach_mem(struct probes *p, const struct target *t, char *err, size_t errlen)
{
	struct target_lib c10 = { .fd = -1 };
	const struct lib_sites *r;
	uint64_t off;
	int ret;

	ret = target_find_lib(t->pid, "libc10.so", &c10);
	if (ret) {
		snprintf(err, errlen, "pid %d maps no libc10.so%s", t->pid,
			 ret == -ENOENT ? "" : ": cannot open it");
		return ret;
	}
	r = find_sites(p, &c10, SITES_MEM);
	if (!r || !r->n) {
		snprintf(err, errlen, "pid %d: %s has no c10::reportMemoryUsageToProfiler",
			 t->pid, c10.path);
		close(c10.fd);
		return -ENOENT;
	}
	off = r->off[0];
	ret = attach_multi(p, p->skel->progs.mem_report, t->pid, c10.attach_path,
			   &(struct site_list){ .off = &off, .n = 1 });
	close(c10.fd);
	if (ret)
		snprintf(err, errlen, "pid %d: attaching the memory probe to %s failed: %s",
			 t->pid, c10.path, strerror(-ret));
	return ret;
}

int probes_trace_pid(struct probes *p, int pid)
{
	__u8 one = 1;

	return bpf_map__update_elem(p->skel->maps.traced, &pid, sizeof(pid), &one, sizeof(one),
				    BPF_ANY);
}

void probes_detach(struct probes *p)
{
	link_set_destroy(&p->links);
}

void probes_forget_pid(struct probes *p, int pid)
{
	link_set_destroy_pid(&p->links, pid);
	bpf_map__delete_elem(p->skel->maps.traced, &pid, sizeof(pid), 0);
}

int probes_share_maps(struct ptbpf_bpf *ops, struct bpf_object *obj)
{
	const struct bpf_map *mine[] = { ops->maps.events, ops->maps.stats, ops->maps.traced,
					 ops->maps.py_procs };

	for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, bpf_map__name(mine[i]));
		int err = m ? bpf_map__reuse_fd(m, bpf_map__fd(mine[i])) :
			  mine[i] == ops->maps.py_procs ? 0 : -ENOENT; /* only where stacks are read */

		if (err)
			return err;
	}
	return 0;
}

bool probes_load_again(int err, uint64_t *first_ns)
{
	uint64_t now;

	if (err != -EAGAIN)
		return false;
	now = clock_mono_ns();
	if (!*first_ns)
		*first_ns = now;
	return now - *first_ns < 10000000000ull;
}

void probes_free(struct probes *p)
{
	if (!p)
		return;
	probes_detach(p);
	for (int i = 0; i < p->nplans; i++) {
		struct plan *pl = &p->plans[i];
		struct site_list *all[] = { &pl->entries, &pl->exits, &pl->bwd_entry,
					    &pl->bwd_exits, &pl->seq_rets, &pl->user_enter,
					    &pl->user_ctor, &pl->user_end };

		for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
			sites_free(all[k]);
	}
	free(p->plans);
	free(p->sites);
	free(p->rpc_sites);
	free(p);
}
