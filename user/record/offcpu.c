// SPDX-License-Identifier: BSD-2-Clause
/*
 * Why a traced thread was off CPU (offcpu.h). BPF sends a system call
 * once it is over and only if it blocked, with the inode behind its first
 * argument when that is an open file descriptor; a switch-out says what
 * the thread blocked in (the call and its arguments, or a page fault) and
 * its fault counters. A call still blocked at the end is known from its
 * switch-out alone, and drawn up to where tracing stopped.
 *
 * A call's slice says who woke the thread, from its last wakeup inside
 * the call, where that is known: BPF sees the task current on the waking
 * CPU and not whether an interrupt ran on it, so the task is named (from
 * /proc, once per task) only for calls that tasks end (a futex, a pipe);
 * a sleep is ended by a timer, and a wakeup while the CPU was idle by an
 * interrupt. Other calls (a socket, a device, a file, an eventfd, which an
 * interrupt may signal) say nothing of it.
 *
 * A file descriptor is named without a system call where its inode says
 * enough (a pipe, a socket), else from /proc/PID/fd (a device such as
 * /dev/nvidia0, a file, an eventfd), once per process, descriptor and
 * inode.
 */
#define _GNU_SOURCE
#include "record/offcpu.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "lib/hash.h"
#include "lib/syscalls.h"
#include "record/pystack.h"

#define MAX_THREADS 65536
#define MAX_FD_NAMES 4096
#define FD_NAME_LEN 96
#define MAX_RUNTIMES 4096 /* processes whose CPython _PyRuntime is known */
#define ERESTARTSYS_ 512   /* the kernel's -ERESTART* (512-516): a signal came */
#define MAX_WAKERS 4096   /* tasks that woke a traced thread, named */
#define EXIT_STATES 0x30 /* EXIT_DEAD | EXIT_ZOMBIE: the thread is gone */
#define BLOCKED_TRACK "blocked in"
#define BLOCK_TRACK "block I/O"
#define BLOCK_LANES 8 /* tracks a thread's requests in flight at once take */
#define RUNNABLE_TRACK "waiting for a CPU" /* apart: such a stretch may lie inside a
					    * call that is written later */
#define FAULTS_TRACK "page faults on CPU" /* apart: on CPU, not blocked */

struct blocked_call { /* a system call seen blocking, not yet over */
	uint64_t enter_ts;
	uint64_t arg[2];
	int32_t nr;
	bool open;
	bool before; /* found blocked in it as tracing began; enter_ts is then */
	char *py_stack; /* before: the thread's Python stack then (malloc'd), or NULL */
};

struct thread {
	int pid, tid;
	uint64_t thread_track;
	uint64_t track; /* "blocked in", under the thread's track; made when first used */
	uint64_t runnable_track; /* "waiting for a CPU", the same way */
	uint64_t faults_track;   /* "page faults on CPU", the same way */
	uint64_t block_track[BLOCK_LANES]; /* "block I/O", "block I/O 2", ...: made when used */
	uint64_t block_end[BLOCK_LANES];   /* ... the end of each one's last slice */
	struct blocked_call call;
	uint64_t fault_ts, fault_addr; /* blocked in a fault since, 0: not */
	uint64_t blocked_end;          /* the end of the last slice on "blocked in" */
	uint64_t preempt_ts;           /* off CPU, runnable, since (0: not) */
	uint32_t preempt_state, by_tid, cpu; /* R+ or R; the task that took the CPU; where */
	uint64_t wake_ts;              /* its last wakeup, by: */
	uint32_t waker_tid, waker_pid; /* the task current on the waking CPU (0: idle) */
	char by[SCHED_COMM_LEN];
	uint64_t min0, maj0, min, maj; /* fault counters: first seen, last written */
	bool counted;
	uint64_t min_track, maj_track;
};

struct fd_name {
	char s[FD_NAME_LEN];
};

struct waker {
	char comm[SCHED_COMM_LEN];
};

struct py_runtime { /* a process's CPython _PyRuntime (the GIL is inside); size 0: none */
	uint64_t start, size;
};

struct offcpu {
	struct pf_writer *w;
	offcpu_thread_track_fn *track;
	void *ctx;
	struct hash_table threads; /* tid -> struct thread */
	struct hash_table fd_names; /* (pid, fd, inode) -> struct fd_name */
	struct hash_table runtimes; /* pid -> struct py_runtime */
	struct hash_table wakers; /* tid -> struct waker */
	struct offcpu_counts counts;
};

/* The call is over (or the thread): its Python stack goes with it. */
static void call_closed(struct blocked_call *c)
{
	c->open = false;
	free(c->py_stack);
	c->py_stack = NULL;
}

struct offcpu *offcpu_new(struct pf_writer *w, offcpu_thread_track_fn *track, void *ctx)
{
	struct offcpu *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->w = w;
	o->track = track;
	o->ctx = ctx;
	hash_init(&o->threads, MAX_THREADS, sizeof(struct thread));
	hash_init(&o->fd_names, MAX_FD_NAMES, sizeof(struct fd_name));
	hash_init(&o->runtimes, MAX_RUNTIMES, sizeof(struct py_runtime));
	hash_init(&o->wakers, MAX_WAKERS, sizeof(struct waker));
	return o;
}

void offcpu_free(struct offcpu *o)
{
	struct thread *t;

	if (!o)
		return;
	for (uint32_t i = 0; (t = hash_next(&o->threads, &i));)
		call_closed(&t->call);
	hash_free(&o->threads);
	hash_free(&o->fd_names);
	hash_free(&o->runtimes);
	hash_free(&o->wakers);
	free(o);
}

const struct offcpu_counts *offcpu_counts(const struct offcpu *o)
{
	return &o->counts;
}

/* tid's state (of process pid), with its track; NULL past the limit. */
static struct thread *thread_of(struct offcpu *o, int pid, int tid)
{
	uint64_t key = hash_u64((uint64_t)(uint32_t)tid + 1);
	struct thread *t = hash_get(&o->threads, key);

	if (t && t->pid == pid)
		return t;
	if (!t && !(t = hash_add(&o->threads, key))) {
		o->counts.no_thread++;
		return NULL;
	}
	*t = (struct thread){ .pid = pid, .tid = tid };
	t->thread_track = o->track(o->ctx, pid, tid);
	return t;
}

/* What file descriptor fd of pid is (its inode's number and mode). */
static const char *fd_name(struct offcpu *o, int pid, uint64_t fd, uint64_t ino, uint32_t mode)
{
	uint64_t key = hash_pair((uint64_t)pid << 32 | (uint32_t)fd, ino);
	struct fd_name *n = hash_get(&o->fd_names, key);
	static struct fd_name tmp;
	char path[64];
	ssize_t len;

	if (n)
		return n->s;
	n = hash_add(&o->fd_names, key);
	if (!n)
		n = &tmp; /* past the limit: named, not kept */
	if (S_ISFIFO(mode) || S_ISSOCK(mode)) {
		snprintf(n->s, sizeof(n->s), "%s:[%llu]", S_ISFIFO(mode) ? "pipe" : "socket",
			 (unsigned long long)ino);
		return n->s;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%llu", pid, (unsigned long long)fd);
	len = readlink(path, n->s, sizeof(n->s) - 1);
	if (len < 0)
		snprintf(n->s, sizeof(n->s), "inode %llu", (unsigned long long)ino);
	else
		n->s[len] = 0;
	return n->s;
}

/* Whether addr lies in pid's CPython _PyRuntime: a futex there is the
 * GIL's (its mutex or condition variable), in CPython 3.10 to 3.13. */
static bool is_gil(struct offcpu *o, int pid, uint64_t addr)
{
	uint64_t key = hash_u64((uint64_t)(uint32_t)pid + 1);
	struct py_runtime *rt = hash_get(&o->runtimes, key);

	if (!rt && (rt = hash_add(&o->runtimes, key)) &&
	    pystack_runtime(pid, &rt->start, &rt->size))
		rt->size = 0;
	return rt && rt->size && addr >= rt->start && addr - rt->start < rt->size;
}

/* The call's arguments as the slice shows them: the file descriptor and
 * what it is, the futex's address and operation (and "lock": "GIL" for
 * the GIL's), or the first argument; *file: what the descriptor is, or
 * NULL. */
static int call_args(struct offcpu *o, int pid, int32_t nr, const uint64_t arg[2],
		     uint64_t ino, uint32_t mode, struct pf_arg *a, const char **file)
{
	char name[32];
	int n = 0;

	*file = NULL;
	switch (syscall_arg0(nr)) {
	case SYSCALL_ARG_FD:
		a[n++] = (struct pf_arg){ .name = "fd", .type = PF_ARG_INT, .i = (int64_t)arg[0] };
		if (ino)
			a[n++] = (struct pf_arg){ .name = "file", .type = PF_ARG_STR,
						  .s = *file = fd_name(o, pid, arg[0], ino, mode) };
		break;
	case SYSCALL_ARG_ADDR:
		a[n++] = (struct pf_arg){ .name = "addr", .type = PF_ARG_PTR, .ptr = arg[0] };
		if (!strcmp(syscall_name(nr, name, sizeof(name)), "futex")) {
			a[n++] = (struct pf_arg){ .name = "futex_op", .type = PF_ARG_UINT,
						  .u = arg[1] & 0x7f }; /* FUTEX_CMD_MASK */
			if (is_gil(o, pid, arg[0]))
				a[n++] = (struct pf_arg){ .name = "lock", .type = PF_ARG_STR,
							  .s = "GIL" };
		}
		break;
	default:
		a[n++] = (struct pf_arg){ .name = "arg0", .type = PF_ARG_UINT, .u = arg[0] };
	}
	return n;
}

/* The name of the task that woke t. */
static const char *waker_name(struct offcpu *o, const struct thread *t)
{
	uint64_t key = hash_pair((uint64_t)t->waker_pid + 1, t->waker_tid); /* a tid comes back */
	struct waker *k;
	static struct waker tmp;
	char path[64];
	FILE *f;

	if ((k = hash_get(&o->wakers, key)))
		return k->comm;
	if (!(k = hash_add(&o->wakers, key)))
		k = &tmp; /* past the limit: named, not kept */
	snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", t->waker_pid, t->waker_tid);
	f = fopen(path, "re");
	if (!f || !fgets(k->comm, sizeof(k->comm), f)) { /* gone: its process's name */
		if (f)
			fclose(f);
		snprintf(path, sizeof(path), "/proc/%u/comm", t->waker_pid);
		f = fopen(path, "re");
		if (!f || !fgets(k->comm, sizeof(k->comm), f))
			snprintf(k->comm, sizeof(k->comm), "pid %u", t->waker_pid);
	}
	if (f)
		fclose(f);
	k->comm[strcspn(k->comm, "\n")] = 0;
	return k->comm;
}

void offcpu_waking(struct offcpu *o, const struct ptbpf_sched_waking *r)
{
	struct thread *t = thread_of(o, (int)r->tgid, (int)r->tid);

	if (!t)
		return;
	t->wake_ts = r->h.ts;
	t->waker_tid = r->waker_tid;
	t->waker_pid = r->waker_tgid;
}

/* Who woke t inside the call nr (on file, or NULL) that returned ret:
 * args added to a. A timer or a signal is known from the call itself; a
 * task or an interrupt only from a wakeup seen inside the call (woke: the
 * ring may hand it over after the call's end, then nothing is said). */
static int woken_by(struct offcpu *o, const struct thread *t, int32_t nr, const char *file,
		    int64_t ret, bool woke, struct pf_arg *a)
{
	char name[32];
	const char *call = syscall_name(nr, name, sizeof(name));
	bool by_task = !strcmp(call, "futex") || (file && !strncmp(file, "pipe:", 5));
	bool signal = ret == -EINTR || (ret <= -ERESTARTSYS_ && ret >= -ERESTARTSYS_ - 4);

	if (signal || ret == -ETIMEDOUT || !strcmp(call, "clock_nanosleep") ||
	    !strcmp(call, "nanosleep")) {
		a[0] = (struct pf_arg){ .name = "woken_by", .type = PF_ARG_STR,
					.s = signal ? "a signal" :
					     ret == -ETIMEDOUT ? "a timer (the call's timeout)" :
					     "a timer" };
		return 1;
	}
	if (!woke)
		return 0;
	if (!t->waker_tid) {
		a[0] = (struct pf_arg){ .name = "woken_by", .type = PF_ARG_STR,
					.s = "an interrupt (the CPU was idle)" };
		return 1;
	}
	if (!by_task)
		return 0;
	a[0] = (struct pf_arg){ .name = "woken_by", .type = PF_ARG_STR, .s = waker_name(o, t) };
	a[1] = (struct pf_arg){ .name = "woken_by_tid", .type = PF_ARG_UINT, .u = t->waker_tid };
	return 2;
}

/* The thread's "blocked in" track, made at its first slice. */
static uint64_t blocked_track(struct offcpu *o, struct thread *t)
{
	if (!t->track)
		t->track = pf_track_child(o->w, t->thread_track, BLOCKED_TRACK);
	return t->track;
}

static void fault_slice(struct offcpu *o, struct thread *t, uint64_t to);

/* A call's slice. A fault whose end (the thread's switch back in) has not
 * been read yet, though this call, after it or around it, has returned
 * (under load the CPUs' records arrive out of order), is drawn first or
 * inside it, ending where it must have: by the call's start, or by its
 * return. Drawn later, it would go back in time on the track. */
static void call_slice(struct offcpu *o, struct thread *t, int32_t nr, uint64_t from,
		       uint64_t to, struct pf_arg *args, int nargs)
{
	char buf[32];
	struct pf_event e = { .track = blocked_track(o, t), .ts = from, .category = "syscall",
			      .name = syscall_name(nr, buf, sizeof(buf)), .args = args,
			      .nargs = nargs };

	if (t->fault_ts && t->fault_ts < from)
		fault_slice(o, t, from);
	pf_slice_begin(o->w, &e);
	if (t->fault_ts && t->fault_ts <= to)
		fault_slice(o, t, to);
	e = (struct pf_event){ .track = t->track, .ts = to };
	pf_slice_end(o->w, &e);
	t->blocked_end = to;
}

void offcpu_syscall(struct offcpu *o, const struct ptbpf_sched_syscall *r)
{
	struct thread *t = thread_of(o, (int)r->tgid, (int)r->tid);
	struct pf_arg a[10];
	const char *file;
	uint64_t from = r->enter_ts;
	bool before = !from;
	int n;

	if (!t || !t->thread_track)
		return;
	if (before) { /* the call it was in as tracing began: drawn if it was blocked */
		if (!t->call.open || !t->call.before || t->call.nr != r->nr)
			return;
		from = t->call.enter_ts;
	}
	n = call_args(o, t->pid, r->nr, r->arg, r->ino, r->mode, a, &file);
	if (before) {
		a[n++] = (struct pf_arg){ .name = "begun_before_tracing", .type = PF_ARG_BOOL,
					  .b = true };
		if (t->call.py_stack)
			a[n++] = (struct pf_arg){ .name = "py_stack", .type = PF_ARG_STR,
						  .s = t->call.py_stack };
	} else {
		a[n++] = (struct pf_arg){ .name = "off_cpu_ns", .type = PF_ARG_UINT,
					  .u = r->off_cpu_ns };
		a[n++] = (struct pf_arg){ .name = "blocked", .type = PF_ARG_UINT,
					  .u = r->switches };
	}
	a[n++] = (struct pf_arg){ .name = "ret", .type = PF_ARG_INT, .i = r->ret };
	n += woken_by(o, t, r->nr, file, r->ret, t->wake_ts >= from && t->wake_ts <= r->h.ts,
		      a + n);
	call_slice(o, t, r->nr, from, r->h.ts, a, n);
	if (t->call.open && t->call.enter_ts <= from)
		call_closed(&t->call);
	o->counts.syscalls++;
}

/* One thread's state and system call from /proc: true if it is blocked
 * (S or D) in call *nr with those first two arguments. */
static bool blocked_in(int pid, int tid, int32_t *nr, uint64_t arg[2])
{
	char path[64], buf[512], *p;
	long long n;
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (!(f = fopen(path, "r")))
		return false;
	ok = fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ' &&
	     (p[2] == 'S' || p[2] == 'D');
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (!ok || !(f = fopen(path, "r")))
		return false;
	/* "NR ARG1 ... ARG6 SP PC", "-1 SP PC" (not in a call), "running" */
	ok = fscanf(f, "%lld %" SCNx64 " %" SCNx64, &n, &arg[0], &arg[1]) == 3 && n >= 0;
	fclose(f);
	*nr = (int32_t)n;
	return ok;
}

void offcpu_started(struct offcpu *o, int pid, uint64_t ts, struct pystack *ps)
{
	char stack[4096];
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (!(dir = opendir(path)))
		return;
	while ((d = readdir(dir))) {
		int tid = atoi(d->d_name);
		struct blocked_call c = { .enter_ts = ts, .open = true, .before = true };
		struct thread *t;

		if (tid <= 0 || !blocked_in(pid, tid, &c.nr, c.arg) ||
		    !(t = thread_of(o, pid, tid)) || !t->thread_track)
			continue;
		if (ps && pystack_thread(ps, pid, tid, stack, sizeof(stack)) > 0) {
			c.py_stack = strdup(stack);
			o->counts.before_py += c.py_stack != NULL;
		}
		call_closed(&t->call);
		t->call = c;
		o->counts.before++;
	}
	closedir(dir);
}

/* A request's slice, under the thread that started it: from its start to
 * its completion (queued and on the device), named by its operation.
 * Requests overlap without nesting (a readahead's, queued at once), and a
 * track's slices must nest: each goes on the first of the thread's block
 * I/O tracks that is free by its start. More at once than there are
 * tracks: counted, not drawn. */
void offcpu_block(struct offcpu *o, const struct ptbpf_sched_block *r)
{
	static const char *const ops[] = { "read", "write", "flush", "discard" };
	struct thread *t = thread_of(o, (int)r->tgid, (int)r->tid);
	char dev[24], op[16];
	struct pf_arg a[3] = {
		{ .name = "bytes", .type = PF_ARG_UINT, .u = r->bytes },
		{ .name = "sector", .type = PF_ARG_UINT, .u = r->sector },
		{ .name = "dev", .type = PF_ARG_STR, .s = dev },
	};
	struct pf_event e = { .ts = r->start_ts, .category = "block", .args = a, .nargs = 3 };
	int lane = 0;

	if (!t || !t->thread_track)
		return;
	while (lane < BLOCK_LANES && t->block_track[lane] && t->block_end[lane] > r->start_ts)
		lane++;
	if (lane == BLOCK_LANES) {
		o->counts.block_undrawn++;
		return;
	}
	snprintf(dev, sizeof(dev), "%u:%u", r->dev >> 20, r->dev & 0xfffff);
	if (r->op < sizeof(ops) / sizeof(ops[0])) {
		e.name = ops[r->op];
	} else {
		snprintf(op, sizeof(op), "op %u", r->op);
		e.name = op;
	}
	if (!t->block_track[lane]) {
		char name[32];

		snprintf(name, sizeof(name), lane ? BLOCK_TRACK " %d" : BLOCK_TRACK, lane + 1);
		t->block_track[lane] = pf_track_child(o->w, t->thread_track, name);
	}
	e.track = t->block_track[lane];
	pf_slice_begin(o->w, &e);
	e = (struct pf_event){ .track = t->block_track[lane],
			       .ts = r->h.ts > r->start_ts ? r->h.ts : r->start_ts };
	pf_slice_end(o->w, &e);
	t->block_end[lane] = e.ts;
	o->counts.block_io++;
	o->counts.block_bytes += r->bytes;
}

/* A fault counter under the thread's track, made at its first change. */
static void fault_counter(struct offcpu *o, struct thread *t, uint64_t *track,
			  const char *name, uint64_t ts, uint64_t value)
{
	if (!*track)
		*track = pf_track_counter(o->w, t->thread_track, name, PF_UNIT_COUNT);
	pf_counter(o->w, *track, ts, (int64_t)value);
}

static void count_faults(struct offcpu *o, struct thread *t, const struct ptbpf_sched_switch *r)
{
	if (!t->counted) {
		t->min0 = t->min = r->min_flt;
		t->maj0 = t->maj = r->maj_flt;
		t->counted = true;
		return;
	}
	if (r->min_flt > t->min) {
		o->counts.minor += r->min_flt - t->min;
		t->min = r->min_flt;
		fault_counter(o, t, &t->min_track, "page faults (minor)", r->h.ts, t->min - t->min0);
	}
	if (r->maj_flt > t->maj) {
		o->counts.major += r->maj_flt - t->maj;
		t->maj = r->maj_flt;
		fault_counter(o, t, &t->maj_track, "page faults (major)", r->h.ts, t->maj - t->maj0);
	}
}

/* A fault the thread blocked in. Its switch-out record can come after the
 * record of a later call of the thread's (records of different CPUs, under
 * load): the part before that call's end is not drawn, and a fault wholly
 * before it is counted, not drawn (a slice cannot go back in time). */
static void fault_slice(struct offcpu *o, struct thread *t, uint64_t to)
{
	struct pf_arg a = { .name = "addr", .type = PF_ARG_PTR, .ptr = t->fault_addr };
	uint64_t from = t->fault_ts, end = to > t->fault_ts ? to : t->fault_ts;
	struct pf_event e = { .track = blocked_track(o, t), .ts = from, .category = "fault",
			      .name = "page fault", .args = &a, .nargs = 1 };

	t->fault_ts = 0;
	if (from < t->blocked_end) {
		if (end <= t->blocked_end) {
			o->counts.faults_undrawn++;
			return;
		}
		e.ts = t->blocked_end;
	}
	pf_slice_begin(o->w, &e);
	e = (struct pf_event){ .track = t->track, .ts = end };
	pf_slice_end(o->w, &e);
	t->blocked_end = end;
	o->counts.faults++;
}

/* A stretch of faults the thread took on CPU one after another. */
void offcpu_faults(struct offcpu *o, const struct ptbpf_sched_faults *r)
{
	struct thread *t = thread_of(o, (int)r->tgid, (int)r->tid);
	struct pf_arg a[3] = {
		{ .name = "faults", .type = PF_ARG_UINT, .u = r->faults },
		{ .name = "major_faults", .type = PF_ARG_UINT, .u = r->major },
		{ .name = "in_faults_us", .type = PF_ARG_UINT, .u = r->fault_ns / 1000 },
	};
	struct pf_event e = { .ts = r->start_ts, .category = "fault", .name = "page faults",
			      .args = a, .nargs = 3 };

	if (!t || !t->thread_track)
		return;
	if (!t->faults_track)
		t->faults_track = pf_track_child(o->w, t->thread_track, FAULTS_TRACK);
	e.track = t->faults_track;
	pf_slice_begin(o->w, &e);
	e = (struct pf_event){ .track = t->faults_track,
			       .ts = r->h.ts > r->start_ts ? r->h.ts : r->start_ts };
	pf_slice_end(o->w, &e);
	o->counts.fault_runs++;
	o->counts.fault_run_ns += r->fault_ns;
}

/* A stretch runnable but off CPU, with the task that took the CPU. The
 * switch says R+ when the kernel preempted the thread in the kernel and R
 * when it gave up the CPU itself while runnable: sched_yield, but also
 * (lazy preemption, kernels 6.13+) a preemption on the way back to user
 * space. Both are "preempted"; "state" tells them apart. Where the kernel
 * did not report the thread's return (SW_UNSEEN), `mark` says so: the
 * stretch ends at the thread's first CPU sample back there
 * (return_from_cpu_sample), or, with none, where the thread was next seen
 * (return_not_reported: it may have run for much of it). */
static void preempt_slice(struct offcpu *o, struct thread *t, uint64_t to, const char *mark)
{
	struct pf_arg a[5] = {
		{ .name = "by", .type = PF_ARG_STR, .s = t->by },
		{ .name = "by_tid", .type = PF_ARG_UINT, .u = t->by_tid },
		{ .name = "cpu", .type = PF_ARG_UINT, .u = t->cpu },
		{ .name = "state", .type = PF_ARG_STR,
		  .s = t->preempt_state == SCHED_STATE_PREEMPTED ? "R+" : "R" },
		{ .name = mark, .type = PF_ARG_BOOL, .b = true },
	};
	struct pf_event e = { .ts = t->preempt_ts, .category = "sched", .name = "preempted",
			      .args = a, .nargs = mark ? 5 : 4 };

	if (!t->runnable_track)
		t->runnable_track = pf_track_child(o->w, t->thread_track, RUNNABLE_TRACK);
	e.track = t->runnable_track;
	pf_slice_begin(o->w, &e);
	e = (struct pf_event){ .track = t->runnable_track,
			       .ts = to > t->preempt_ts ? to : t->preempt_ts };
	pf_slice_end(o->w, &e);
	t->preempt_ts = 0;
	o->counts.preempted++;
}

/* The traced thread that left the CPU: what it blocked in. */
static void prev_left(struct offcpu *o, const struct ptbpf_sched_switch *r)
{
	struct thread *t = thread_of(o, (int)r->prev_tgid, (int)r->prev_tid);

	if (!t || !t->thread_track)
		return;
	count_faults(o, t, r);
	if (r->prev_state & EXIT_STATES) {
		call_closed(&t->call);
		t->fault_ts = 0;
		t->preempt_ts = 0;
	} else if ((r->prev_state == SCHED_STATE_PREEMPTED ||
		    r->prev_state == SCHED_STATE_RUNNING) && !(r->flags & SW_REPLAYED)) {
		t->preempt_ts = r->h.ts;
		t->preempt_state = r->prev_state;
		t->by_tid = r->next_tid;
		t->cpu = r->h.cpu;
		memcpy(t->by, r->next_comm, sizeof(t->by));
		t->by[sizeof(t->by) - 1] = 0;
	} else if ((r->flags & SW_SYSCALL) &&
		   !(t->call.open && t->call.enter_ts == r->sys_enter_ts)) {
		call_closed(&t->call);
		t->call = (struct blocked_call){ .enter_ts = r->sys_enter_ts, .nr = r->sys_nr,
						 .arg = { r->sys_arg[0], r->sys_arg[1] },
						 .open = true };
	} else if ((r->flags & SW_FAULT) && !t->fault_ts) {
		t->fault_ts = r->fault_ts;
		t->fault_addr = r->fault_addr;
	}
}

void offcpu_switch(struct offcpu *o, const struct ptbpf_sched_switch *r)
{
	struct thread *t;

	if (r->flags & SW_PREV_TRACED)
		prev_left(o, r);
	if (!(r->flags & SW_NEXT_TRACED))
		return;
	t = thread_of(o, (int)r->next_tgid, (int)r->next_tid);
	if (t && t->thread_track && t->fault_ts)
		fault_slice(o, t, r->h.ts);
	if (t && t->thread_track && t->preempt_ts)
		preempt_slice(o, t, r->h.ts, !(r->flags & SW_UNSEEN) ? NULL :
					     r->flags & SW_UNTIMED ? "return_not_reported" :
					     "return_from_cpu_sample");
}

void offcpu_finish(struct offcpu *o, uint64_t ts)
{
	struct thread *t;

	for (uint32_t i = 0; (t = hash_next(&o->threads, &i));) {
		struct pf_arg a[8];
		const char *file;
		int n;

		if (!t->thread_track)
			continue;
		if (t->preempt_ts)
			preempt_slice(o, t, ts, NULL);
		if (!t->call.open || t->call.enter_ts > ts) {
			if (t->fault_ts)
				fault_slice(o, t, ts);
			continue;
		}
		/* call_slice draws a fault still open, before or inside it. */
		n = call_args(o, t->pid, t->call.nr, t->call.arg, 0, 0, a, &file);
		/* Still blocked on it: the descriptor names its file now. */
		if (!file && syscall_arg0(t->call.nr) == SYSCALL_ARG_FD)
			a[n++] = (struct pf_arg){ .name = "file", .type = PF_ARG_STR,
						  .s = fd_name(o, t->pid, t->call.arg[0], 0, 0) };
		a[n++] = (struct pf_arg){ .name = "unfinished", .type = PF_ARG_BOOL, .b = true };
		if (t->call.before)
			a[n++] = (struct pf_arg){ .name = "begun_before_tracing",
						  .type = PF_ARG_BOOL, .b = true };
		if (t->call.py_stack)
			a[n++] = (struct pf_arg){ .name = "py_stack", .type = PF_ARG_STR,
						  .s = t->call.py_stack };
		call_slice(o, t, t->call.nr, t->call.enter_ts, ts, a, n);
		call_closed(&t->call);
		o->counts.unfinished++;
	}
}
