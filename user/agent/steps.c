// SPDX-License-Identifier: BSD-2-Clause
/*
 * The always-on step signal (part of libptbpf-agent.so): one global
 * RecordFunction callback on USER_SCOPE only, so ATen ops (FUNCTION scope)
 * never call it, and with no callback on their scope the dispatcher builds
 * no RecordFunction for them at all. What reaches it are record_function
 * regions: torch.profiler's ProfilerStep#N, Optimizer.step#X.step, the
 * DataLoader's enumerate(DataLoader)#X.__next__ (torch 1.13 and 2.x open
 * all three with torch.autograd.profiler.record_function, USER_SCOPE), and
 * the user's own, which it leaves at a name comparison. Those three it
 * times, into the counters of ptbpf_agent_steps (include/ptbpf_agent.h),
 * which the daemon reads through /proc/PID/mem: no ring, nothing per op.
 * Every region also goes to the kept capture map's op tracking (graphs.c).
 */
#define _GNU_SOURCE
#include "agent.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

enum kind { K_STEP, K_OPTIM, K_LOADER, K_COLL };

static const struct { const char *prefix; size_t len; int kind; } kinds[] = {
	{ "ProfilerStep#", 13, K_STEP },
	{ "Optimizer.step#", 15, K_OPTIM },
	{ "enumerate(DataLoader)#", 22, K_LOADER },
	/* c10d's profiling titles, one region per collective (any backend) */
	{ "gloo:", 5, K_COLL },
	{ "nccl:", 5, K_COLL },
	{ "mpi:", 4, K_COLL },
	{ "ucc:", 4, K_COLL },
};

EXPORT struct ptbpf_agent_steps ptbpf_agent_steps = {
	.magic = PTBPF_STEPS_MAGIC, .version = PTBPF_STEPS_VERSION,
};

static const uint64_t bounds[PTBPF_STEPS_BUCKETS - 1] = PTBPF_STEPS_BOUNDS_NS;
static uint64_t handle;
static bool registered;
static _Atomic int counting; /* 0 in a forked child: nobody reads its block */
static uint64_t heartbeat_seen;
static uint64_t last_optim_end;
static _Atomic int writer; /* one writer at a time (steps may end on any thread) */

/* This thread's open regions of the three kinds, by RecordFunction. */
#define OPEN_MAX 8
static TLS struct { const void *rf; uint64_t start; int kind; } open_rf[OPEN_MAX];
static TLS int nopen;

/* Collectives open now: they end on whichever thread completes their work
 * (gloo's worker thread), so not in open_rf; changed with the block being
 * written. */
static struct { const void *rf; uint64_t start; } coll_open[PTBPF_STEPS_COLL_OPEN];
static _Atomic int ncoll_open;

static void write_begin(void)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;

	while (atomic_exchange_explicit(&writer, 1, memory_order_acquire))
		;
	__atomic_store_n(&b->seq, b->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void write_end(void)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;

	__atomic_store_n(&b->seq, b->seq + 1, __ATOMIC_RELEASE);
	atomic_store_explicit(&writer, 0, memory_order_release);
}

/* One step of ns ended at end; with the block being written. */
static void step_ended(uint64_t ns, uint64_t end)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;
	int i = 0;

	while (i < PTBPF_STEPS_BUCKETS - 1 && ns > bounds[i])
		i++;
	b->bucket[i]++;
	b->recent[b->steps % PTBPF_STEPS_RECENT] = ns;
	b->steps++;
	b->sum_ns += ns;
	b->last_end = end;
}

static void region_ended(int kind, uint64_t start, uint64_t end)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;

	write_begin();
	switch (kind) {
	case K_STEP:
		b->source = PTBPF_STEPS_PROFILER;
		step_ended(end - start, end);
		b->cur_start = 0; /* the next ProfilerStep begins it */
		break;
	case K_OPTIM:
		b->optim_ns += end - start;
		b->optim_n++;
		/* Without ProfilerStep regions a step runs from one optimizer
		 * step's end to the next one's. */
		if (b->source != PTBPF_STEPS_PROFILER) {
			if (last_optim_end) {
				b->source = PTBPF_STEPS_OPTIMIZER;
				step_ended(end - last_optim_end, end);
			}
			b->cur_start = end;
		}
		last_optim_end = end;
		break;
	case K_LOADER:
		b->loader_ns += end - start;
		b->loader_n++;
		break;
	}
	write_end();
}

static int kind_of(const char *name)
{
	for (size_t k = 0; name && k < sizeof(kinds) / sizeof(kinds[0]); k++)
		if (!strncmp(name, kinds[k].prefix, kinds[k].len))
			return kinds[k].kind;
	return -1;
}

static void coll_oldest(void)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;
	int n = atomic_load_explicit(&ncoll_open, memory_order_relaxed);

	b->coll_open_ts = 0;
	for (int i = 0; i < n; i++)
		if (!b->coll_open_ts || coll_open[i].start < b->coll_open_ts)
			b->coll_open_ts = coll_open[i].start;
}

static void coll_entered(const void *rf, const char *name, uint64_t t)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;
	int n;

	write_begin();
	n = atomic_load_explicit(&ncoll_open, memory_order_relaxed);
	b->coll_entered++;
	b->coll_enter_ts = t;
	strncpy(b->coll_name, name, sizeof(b->coll_name) - 1);
	if (n < PTBPF_STEPS_COLL_OPEN) {
		coll_open[n].rf = rf;
		coll_open[n].start = t;
		atomic_store_explicit(&ncoll_open, n + 1, memory_order_relaxed);
		coll_oldest();
	} else {
		b->coll_untimed++;
	}
	write_end();
}

/* rf ended: if it is an open collective, it left (on any thread). */
static void coll_ended(const void *rf, const char *name)
{
	struct ptbpf_agent_steps *b = &ptbpf_agent_steps;
	uint64_t t = (uint64_t)agent_mono_ns();
	int n;

	write_begin();
	n = atomic_load_explicit(&ncoll_open, memory_order_relaxed);
	for (int i = 0; i < n; i++) {
		if (coll_open[i].rf != rf)
			continue;
		b->coll_left++;
		b->coll_left_seq = b->coll_entered - (uint64_t)(n - 1 - i);
		b->coll_wait_ns += t - coll_open[i].start;
		b->coll_left_ts = t;
		if (name)
			strncpy(b->coll_left_name, name, sizeof(b->coll_left_name) - 1);
		memmove(&coll_open[i], &coll_open[i + 1], (size_t)(n - 1 - i) * sizeof(coll_open[0]));
		atomic_store_explicit(&ncoll_open, n - 1, memory_order_relaxed);
		coll_oldest();
		break;
	}
	write_end();
}

/* torch's StartCallback: a null std::unique_ptr<ObserverContext> through
 * the hidden pointer ret. */
static void **steps_start(void **ret, const void *rf)
{
	uint8_t *busy = busy_enter();
	bool counts = atomic_load_explicit(&counting, memory_order_relaxed) && nopen < OPEN_MAX;
	bool tracks = graphs_tracking();
	const char *name = counts || tracks ? rfapi.name(rf) : NULL;
	int kind = kind_of(name);

	*ret = NULL;
	if (tracks && kind != K_COLL)
		graphs_rf_begin(rf, SC_USER); /* a collective ends on another thread */
	if (counts && kind >= 0) {
		uint64_t t = (uint64_t)agent_mono_ns();

		if (kind == K_COLL) {
			coll_entered(rf, name, t);
			busy_leave(busy);
			return ret;
		}

		open_rf[nopen].rf = rf;
		open_rf[nopen].start = t;
		open_rf[nopen++].kind = kind;
		if (kind == K_STEP) {
			write_begin();
			ptbpf_agent_steps.cur_start = t;
			write_end();
		}
	}
	busy_leave(busy);
	return ret;
}

static void steps_end(const void *rf, void *ctx)
{
	uint8_t *busy = busy_enter();

	(void)ctx;
	graphs_rf_end(rf);
	for (int i = nopen - 1; i >= 0; i--) {
		if (open_rf[i].rf != rf)
			continue;
		if (atomic_load_explicit(&counting, memory_order_relaxed))
			region_ended(open_rf[i].kind, open_rf[i].start, (uint64_t)agent_mono_ns());
		open_rf[i] = open_rf[--nopen];
		busy_leave(busy);
		return;
	}
	if (atomic_load_explicit(&ncoll_open, memory_order_relaxed) &&
	    atomic_load_explicit(&counting, memory_order_relaxed))
		coll_ended(rf, rfapi.name(rf));
	busy_leave(busy);
}

static void child_after_fork(void)
{
	atomic_store(&counting, 0);
}

bool agent_steps_on(char *why, size_t len)
{
	static const int user[] = { SC_USER };
	static bool atfork;

	if (registered)
		return true;
	if (rf_resolve(why, len))
		return false;
	if (!atfork)
		atfork = !pthread_atfork(NULL, NULL, child_after_fork);
	stubs_init();
	last_optim_end = 0;
	atomic_store(&counting, 1);
	handle = rf_add(STUB_RF_STEPS, steps_start, STUB_RF_STEPS_END, steps_end, user, 1, false);
	registered = true;
	__atomic_store_n(&ptbpf_agent_steps.on, 1, __ATOMIC_RELEASE);
	return true;
}

void agent_steps_off(void)
{
	if (!registered)
		return;
	atomic_store(&counting, 0);
	rfapi.remove(handle);
	registered = false;
	__atomic_store_n(&ptbpf_agent_steps.on, 0, __ATOMIC_RELEASE);
	write_begin();
	ptbpf_agent_steps.cur_start = 0;
	/* their ends are not seen any more */
	atomic_store_explicit(&ncoll_open, 0, memory_order_relaxed);
	ptbpf_agent_steps.coll_open_ts = 0;
	write_end();
}

bool agent_steps_is_on(void)
{
	return registered;
}

bool agent_steps_heartbeat(void)
{
	uint64_t h = __atomic_load_n(&ptbpf_agent_steps.heartbeat, __ATOMIC_RELAXED);
	bool changed = h != heartbeat_seen;

	heartbeat_seen = h;
	return changed;
}
