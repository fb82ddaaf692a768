/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The calling thread's Python stack (--py-stacks), read from the target's
 * CPython: interpreters.head -> threads -> the PyThreadState whose
 * thread_id (pthread_t, which on x86-64 glibc is the thread's fs base) is
 * this thread's -> its innermost frame -> the frame chain. Each frame
 * sends its code object and instruction position; the loader names them
 * (user/record/pystack.c), while the code objects are alive. The layout comes
 * per process from py_procs, filled by the loader.
 */
#ifndef PTBPF_PYSTACK_BPF_H
#define PTBPF_PYSTACK_BPF_H

#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ptbpf_py_proc);
} py_procs SEC(".maps");

/* The record is built here, then copied into the ring at its real size:
 * one per thread (a uprobe program can be preempted, so a per-CPU buffer
 * could be overwritten by another thread's stack half way). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ptbpf_py_stack);
} py_scratch SEC(".maps");

/* Code objects already sent (EV_PY_CODE), by (tgid, address); the value
 * is the co_qualname it had, so an address reused by another code object
 * is named again. */
struct py_code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_code_key);
	__type(value, __u64);
} py_codes SEC(".maps");

/* probes: per-CPU count of ops seen, for --py-stacks=N sampling. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} py_seen SEC(".maps");

static __always_inline __u64 py_read(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* The process's layout if this event is to get a stack (sampling). */
static __always_inline struct ptbpf_py_proc *py_wanted(__u32 tgid, bool sample)
{
	struct ptbpf_py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
	__u32 zero = 0, *seen;

	if (!p || !sample || p->every <= 1)
		return p;
	seen = bpf_map_lookup_elem(&py_seen, &zero);
	if (!seen)
		return NULL;
	if (++*seen < p->every)
		return NULL;
	*seen = 0;
	return p;
}

/* The walk's state, for the bpf_loop callbacks (each verified once, where
 * open-coded loops would be explored iteration by iteration). */
struct py_walk {
	struct ptbpf_py_proc *p;
	struct ptbpf_event *ev;   /* ev->id counts the frames: kept in map
				   * memory, the count is not tracked value by
				   * value, so the walk verifies in few states */
	struct ptbpf_py_frame *f; /* PY_MAX_FRAMES of them, in map memory too */
	__u64 self, tstate, frame;
};

static long py_find_thread(__u32 i, void *ctx)
{
	struct py_walk *w = ctx;

	if (!w->tstate)
		return 1;
	if (py_read(w->tstate + w->p->ts_thread_id) == w->self)
		return 1;
	w->tstate = py_read(w->tstate + w->p->ts_next);
	if (i == PY_MAX_THREADS - 1)
		w->tstate = 0; /* not among the first PY_MAX_THREADS */
	return 0;
}

/* A str's text: compact ASCII after PyASCIIObject, compact Latin-1 after
 * PyCompactUnicodeObject; anything else is left "?". 1 if Latin-1 (the
 * loader converts it), else 0. */
static __always_inline int py_str(struct ptbpf_py_proc *p, __u64 obj, char *dst, __u32 len)
{
	__u8 state = 0;
	__u64 at;

	dst[0] = '?';
	dst[1] = 0;
	if (!obj || bpf_probe_read_user(&state, 1, (void *)(obj + 32)))
		return 0;
	if (!(state & 0x20) || ((state >> 2) & 7) != 1)
		return 0;
	at = obj + (state & 0x40 ? p->ascii_data : p->compact_data);
	if (bpf_probe_read_user_str(dst, len, (void *)at) < 0) {
		dst[0] = '?';
		dst[1] = 0;
		return 0;
	}
	return !(state & 0x40);
}

/* The first time this process's code object is seen: its names and line
 * table, read now, while it is alive (the loader may read too late). */
static __always_inline void py_code_once(struct ptbpf_py_proc *p, __u64 code, __u64 ts)
{
	struct py_code_key k = { .tgid = bpf_get_current_pid_tgid() >> 32, .code = code };
	struct ptbpf_py_code *c;
	__u64 lt, n = 0, qualname, *seen;
	__s32 first = 0;

	if (!code || py_read(code + 8) != p->code_type)
		return;
	qualname = py_read(code + p->co_qualname);
	seen = bpf_map_lookup_elem(&py_codes, &k);
	if (seen && *seen == qualname)
		return;
	c = reserve_sized(sizeof(*c), STAT_DROP_PY_CODE);
	if (!c)
		return; /* not marked: tried again next time */
	bpf_map_update_elem(&py_codes, &k, &qualname, BPF_ANY);
	fill(&c->ev, EV_PY_CODE, SRC_ENTRY_PROBE, 0, code);
	c->ev.ts = ts - 1; /* merged by time (reorder.c): just before its stack */
	c->ev.id = py_str(p, py_read(code + p->co_filename), c->file, sizeof(c->file)) |
		   py_str(p, qualname, c->name, sizeof(c->name)) << 1; /* Latin-1 */
	bpf_probe_read_user(&first, sizeof(first), (void *)(code + p->co_firstlineno));
	c->ev.arg[0] = (__u32)first;
	lt = py_read(code + p->co_linetable);
	if (lt)
		n = py_read(lt + 16);
	c->ev.arg[2] = n;
	if (n > PY_LINETABLE_LEN)
		n = PY_LINETABLE_LEN;
	if (n && bpf_probe_read_user(c->linetable, n, (void *)(lt + 32)))
		n = 0;
	c->ev.arg[1] = n;
	submit(c);
}

static long py_frame(__u32 i, void *ctx)
{
	struct py_walk *w = ctx;
	struct ptbpf_py_proc *p = w->p;
	__u32 n = w->ev->id;
	__u8 owner = 0;

	if (!w->frame || n >= PY_MAX_FRAMES)
		return 1;
	if (p->f_owner != PY_NO_FIELD) {
		bpf_probe_read_user(&owner, 1, (void *)(w->frame + p->f_owner));
		if (owner == p->owner_cstack) { /* a C-stack shim: no Python frame */
			w->frame = py_read(w->frame + p->f_back);
			return 0;
		}
	}
	n &= PY_MAX_FRAMES - 1;
	w->f[n].code = py_read(w->frame + p->f_code);
	py_code_once(p, w->f[n].code, w->ev->ts);
	w->f[n].lasti = py_read(w->frame + p->f_lasti) &
			(p->lasti_is_int ? 0xffffffffull : ~0ull);
	w->ev->id = n + 1;
	w->frame = py_read(w->frame + p->f_back);
	return 0;
}

/* Walks the current thread's frames into w->f, counting them in w->ev->id
 * (zeroed by the caller); the PY_STACK_* status. Sets arg[0] of w->ev to 1
 * if frames past PY_MAX_FRAMES were cut. Runs from uprobes and from the CPU
 * sampler's perf_event program (bpf/samples.bpf.c) alike. */
static __always_inline __u32 py_walk_thread(struct py_walk *w, struct task_struct *task)
{
	struct ptbpf_py_proc *p = w->p;
	__u32 status = PY_STACK_NO_THREAD;

	w->self = task->thread.fsbase;
	w->tstate = py_read(py_read(p->runtime + p->interp_head) + p->threads_head);
	bpf_loop(PY_MAX_THREADS, py_find_thread, w, 0);
	if (w->tstate) {
		status = PY_STACK_NO_FRAME;
		w->frame = py_read(w->tstate + p->ts_frame);
		if (w->frame && p->cframe_frame != PY_NO_FIELD)
			w->frame = py_read(w->frame + p->cframe_frame);
		bpf_loop(PY_MAX_FRAMES + 8, py_frame, w, 0);
	}
	w->ev->arg[0] = w->frame != 0;
	return w->ev->id ? PY_STACK_OK : status;
}

/* Sends the calling thread's Python stack as an EV_PY_STACK stamped ts. */
static __always_inline void py_stack_emit(struct ptbpf_py_proc *p, __u64 ts)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ptbpf_py_stack *s;
	struct py_walk w = { .p = p };
	__u32 n;
	__u64 flags;

	s = bpf_task_storage_get(&py_scratch, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		stat_inc(STAT_SENT);
		stat_inc(STAT_DROP_PY_STACK);
		return;
	}
	fill(&s->ev, EV_PY_STACK, SRC_ENTRY_PROBE, 0, 0);
	s->ev.ts = ts;
	w.ev = &s->ev;
	w.f = s->f;
	s->ev.arg[1] = py_walk_thread(&w, task);
	n = s->ev.id;
	stat_inc(STAT_SENT);
	flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (n > PY_MAX_FRAMES)
		n = PY_MAX_FRAMES;
	if (bpf_ringbuf_output(&events, s, sizeof(s->ev) + n * sizeof(s->f[0]), flags))
		stat_inc(STAT_DROP_PY_STACK);
}

#endif /* PTBPF_PYSTACK_BPF_H */
