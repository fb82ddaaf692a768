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
 */
#define _GNU_SOURCE
#include "agent.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

enum kind { K_STEP, K_OPTIM, K_LOADER };

static const struct { const char *prefix; size_t len; } kinds[] = {
	[K_STEP] = { "ProfilerStep#", 13 },
	[K_OPTIM] = { "Optimizer.step#", 15 },
	[K_LOADER] = { "enumerate(DataLoader)#", 22 },
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
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS struct { const void *rf; uint64_t start; int kind; } open_rf[OPEN_MAX];
static TLS int nopen;

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
	for (int k = 0; name && k < (int)(sizeof(kinds) / sizeof(kinds[0])); k++)
		if (!strncmp(name, kinds[k].prefix, kinds[k].len))
			return k;
	return -1;
}

/* torch's StartCallback: a null std::unique_ptr<ObserverContext> through
 * the hidden pointer ret. */
static void **steps_start(void **ret, const void *rf)
{
	uint8_t *busy = busy_enter();
	int kind;

	*ret = NULL;
	if (atomic_load_explicit(&counting, memory_order_relaxed) && nopen < OPEN_MAX &&
	    (kind = kind_of(rfapi.name(rf))) >= 0) {
		uint64_t t = (uint64_t)agent_mono_ns();

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
	for (int i = nopen - 1; i >= 0; i--) {
		if (open_rf[i].rf != rf)
			continue;
		if (atomic_load_explicit(&counting, memory_order_relaxed))
			region_ended(open_rf[i].kind, open_rf[i].start, (uint64_t)agent_mono_ns());
		open_rf[i] = open_rf[--nopen];
		break;
	}
	busy_leave(busy);
}

static void child_after_fork(void)
{
	atomic_store(&counting, 0);
}

bool agent_steps_on(char *why, size_t len)
{
	static const int user[] = { 7 }; /* at::RecordScope::USER_SCOPE */
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
