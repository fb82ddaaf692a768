/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The in-process agent's modules (libptbpf-agent.so, never part of ptbpf):
 *   agent.c  lifecycle: its thread, ptbpf's control block, the probe points
 *   ops.c    RecordFunction callbacks -> per-thread op rings
 *   steps.c  the always-on step signal: one USER_SCOPE callback -> step
 *            counters in ptbpf_agent_steps
 *   rf.c     torch's RecordFunction API, found in the process (ops.c and
 *            steps.c use it)
 *   regions.c  torch.compile's regions (--compiled-regions): a stand-in for
 *            _RecordFunctionFast, put in through the job's main thread
 *   graphs.c the daemon's kept capture map: CUDA graph nodes and the ops
 *            that captured them, between windows
 *   cupti.c  CUPTI: the GPU timeline, CUDA call callbacks, sharing CUPTI
 *            with the job's own profiler (with cupti_job.c, the job's calls
 *            into libcupti; cupti_activity.c, the activity buffers and
 *            their records; cupti_api.c, the callback subscriber; what
 *            they share is in cupti_int.h)
 *   stubs.c  entry points that outlive the library, and GOT hooks
 *   cuda_props.c  the devices' properties and CUDA versions, once a session
 *   clock.c  the op records' clock: CLOCK_MONOTONIC from the TSC
 * Everything the outside world calls (torch, CUPTI, the job's calls into
 * libcupti) enters through stubs.c, so that the library can be unloaded
 * while those pointers live on; every such entry marks its thread busy.
 */
#ifndef PTBPF_AGENT_INTERNAL_H
#define PTBPF_AGENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "ptbpf_agent.h"
#include "rf_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* --- agent.c --- */

/* A status to ptbpf's probe (and stderr with PTBPF_AGENT_LOG=1). */
__attribute__((format(printf, 3, 4)))
void agent_report(int code, uint64_t value, const char *fmt, ...);

/* clock_gettime(clock) in nanoseconds. */
static inline int64_t agent_now(int clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CLOCK_MONOTONIC nanoseconds by the system call (agent_clock_ns: from
 * the TSC), the clock of every record. */
static inline int64_t agent_mono_ns(void)
{
	return agent_now(CLOCK_MONOTONIC);
}

/* The agent's thread-local state: initial-exec, so that reaching it calls
 * nothing outside the agent (it comes out of the surplus glibc shares
 * among the libraries dlopen'd into the job: keep it small). */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* Threads inside the agent's code (see ptbpf_agent.h): a per-thread count
 * of nested entries, in TLS so that marking a thread busy calls nothing
 * outside the agent. */
extern struct ptbpf_agent_busy ptbpf_agent_busy;
extern TLS int agent_busy_idx;
int agent_busy_assign(void);

static inline uint8_t *busy_enter(void)
{
	int i = agent_busy_idx;

	if (__builtin_expect(i == 0, 0))
		i = agent_busy_idx = agent_busy_assign();
	if (__builtin_expect(i < 0, 0)) {
		__atomic_fetch_add(&ptbpf_agent_busy.more, 1, __ATOMIC_SEQ_CST);
		return NULL;
	}
	ptbpf_agent_busy.thread[i - 1]++;
	__asm__ volatile("" ::: "memory");
	return &ptbpf_agent_busy.thread[i - 1];
}

static inline void busy_leave(uint8_t *b)
{
	__asm__ volatile("" ::: "memory");
	if (b)
		(*(volatile uint8_t *)b)--;
	else
		__atomic_fetch_sub(&ptbpf_agent_busy.more, 1, __ATOMIC_SEQ_CST);
}

/* Whether libcuda.so.1 is loaded in the process (agent.c). */
bool agent_cuda_loaded(void);

/* --- stubs.c --- */

enum agent_stub {
	STUB_RF_FUNCTION, STUB_RF_BACKWARD, STUB_RF_USER, STUB_RF_OTHER,
	STUB_RF_STEPS,       /* -> null start */
	STUB_RF_GRAPHS,      /* -> null start */
	STUB_RF_END,         /* -> ret */
	STUB_RF_STEPS_END,   /* -> ret */
	STUB_RF_GRAPHS_END,  /* -> ret */
	STUB_CUPTI_API,      /* -> ret */
	STUB_BUF_REQUESTED,  /* -> no buffer */
	STUB_BUF_COMPLETED,  /* -> ret */
	STUB_PY_BEGIN,       /* Python functions (regions.c) -> PyObject_Type */
	STUB_PY_END,
	STUB_PY_CALL,        /* Python's pending calls -> return 0 */
	STUB_PY_RUN,         /* not an entry: PyRun_SimpleString, always (stubs_py_run) */
	STUB_HOOK0,          /* GOT hooks: -> the hooked function itself */
	STUB_MAX = STUB_HOOK0 + 16,
};

/* Finds the stub pages an earlier copy of the agent left in the process,
 * or makes them. false if executable memory cannot be had: then entry
 * points are the agent's own functions and it can never be unloaded. */
bool stubs_init(void);
/* The address to hand out for entry i: its stub, which jumps to target
 * (or target itself without stubs). */
void *stub_entry(int i, void *target);
/* Points every stub at its inert end: late calls (a RecordFunction begun
 * before its callbacks were removed, CUPTI's registered buffer callbacks)
 * then do nothing, and the library can go. */
void stubs_retire(void);
bool stubs_available(void);

/* Words about the process that outlive the library with the stub pages
 * (zero in new ones), for a later copy of the agent. */
enum agent_keep {
	KEEP_ANCHOR_LEFT, /* the job's buffer an earlier session left with it */
	KEEP_GRAPH_KERNELS, /* kernels of CUDA graphs the agents recorded */
	KEEP_ANCHOR_OWNER, /* the buffer callback of the job's that the anchor was left with */
	KEEP_MAX = 16,
};
/* Word i, or NULL without stubs. */
uint64_t *stubs_keep(int i);
/* STUB_PY_AREA bytes that outlive the library with the stub pages, for
 * what Python keeps pointers to (regions.c), or NULL without stubs. */
#define STUB_PY_AREA 2048
void *stubs_py_area(void);
/* A pending call, int (*)(void *text), that runs text with libpython's
 * PyRun_SimpleString and returns 0 whatever that returned (a pending call
 * that returns -1 must have raised), code of the stub pages; or NULL. */
void *stubs_py_run(void);

/* GOT hooks: calls that other libraries (torch's Kineto) make to a libcupti
 * function go to wrapper first, through a stub. real is the function. */
struct hook {
	const char *name;
	void *wrapper;
	void *real;
};
/* Hooks the named imports of every loaded object but libcupti and the
 * agent (again for objects loaded since the last call). How many GOT
 * slots point at a hook now. */
int hooks_install(const struct hook *h, int n);
/* Puts every hooked GOT slot back. */
void hooks_remove(void);

/* --- regions.c --- */

/* torch.compile's regions (" regions", --compiled-regions): on while
 * ops are recorded, off (torch's own objects put back) when they stop.
 * Both only queue work for the job's main thread (Python's pending
 * calls); regions_tick asks again where torch was not imported yet. */
void regions_on(void);
void regions_off(bool unloading);
void regions_tick(int64_t now);

/* --- rf.c --- */

struct rf_api {
	uint64_t (*add)(struct rf_callback cb);  /* at::addGlobalCallback */
	void (*remove)(uint64_t handle);         /* at::removeCallback */
	const char *(*name)(const void *rf);     /* at::RecordFunction::name() */
	int64_t (*peek)(void);                   /* at::sequence_number::peek() */
	int (*uncaught)(void);                   /* std::uncaught_exceptions(), or NULL */
	const void *undefined_tensor;            /* c10::UndefinedTensorImpl::_singleton */
};
extern struct rf_api rfapi;
/* Finds the API in the process (once): 0, or -1 with a one-line reason. */
int rf_resolve(char *why, size_t len);
/* Registers a global callback on the given scopes, handing torch the
 * stubs start_stub and end_stub (which lead to start and end); its handle. */
uint64_t rf_add(int start_stub, void **(*start)(void **, const void *), int end_stub,
		void (*end)(const void *, void *), const int *scopes, int n, bool inputs);

/* --- steps.c --- */

/* The exported counter block (include/ptbpf_agent.h). */
extern struct ptbpf_agent_steps ptbpf_agent_steps;
/* Registers the USER_SCOPE callback (once); false with a reason in why. */
bool agent_steps_on(char *why, size_t len);
/* Removes it. */
void agent_steps_off(void);
bool agent_steps_is_on(void);
/* Whether ptbpf's heartbeat in the block changed since the last call. */
bool agent_steps_heartbeat(void);

/* --- graphs.c --- */

/* The kept capture map (" graphs", with the step signal on): CUPTI's graph
 * callbacks between windows and the ops open on capturing threads. Asked
 * for or not by each command (on the agent's thread; reported). */
void graphs_want(bool want, int64_t now);
bool graphs_is_on(void);
/* From CUPTI's callbacks (cupti_api.c): a graph made, a node made or
 * cloned; from cupti.c: the job's own CUPTI user took the subscriber. */
void graphs_made(void);
void graphs_node(const struct ptbpf_agent_graph_node *r);
void graphs_lost(const char *why); /* why: a string that lives */
/* Whether a capture phase is on (ops are tracked); a RecordFunction begun
 * (scope: its RecordScope) or ended on this thread. */
bool graphs_tracking(void);
void graphs_rf_begin(const void *rf, uint8_t scope);
void graphs_rf_end(const void *rf);
/* On the agent's thread: every tick; at a window's start. */
void graphs_tick(int64_t now);
void graphs_send(void);

/* --- ops.c --- */

/* Registers the RecordFunction callbacks (the rings are allocated at the
 * first start). The rings' descriptor, or NULL with a one-line reason in
 * why. shapes: also record aten ops' input shapes; stacks_every: call
 * ptbpf_agent_pystack for one op or CUDA call in that many per thread;
 * tsc: timestamps from the TSC where it is invariant (clock.c). */
const struct ptbpf_ops_desc *agent_ops_start(char *why, size_t len, bool shapes,
					     unsigned stacks_every, bool tsc);
/* Every PTBPF_AGENT_POLL_MS on the agent's thread while recording: the
 * clock's line checked and kept (clock.c), its numbers in the descriptor. */
void agent_ops_clock_tick(void);
/* From the agent's thread: ring pages the writers reach next, faulted in. */
void agent_ops_prefault(void);
/* What the threads recorded, or tried to: changes with every record. */
uint64_t agent_ops_activity(void);
/* From the agent's thread, nothing recorded for a while (activity is what
 * agent_ops_activity said then): tells ptbpf it idles and waits up to ms,
 * or until a thread records (which wakes ptbpf's reader too). */
void agent_ops_idle(uint64_t activity, long ms);
/* Recording again (or stopping): not idle. */
void agent_ops_busy(void);
/* Stops recording and removes the callbacks. */
void agent_ops_stop(void);
/* At process exit: stops recording and waits (250 ms at most) until
 * ptbpf has read the rings. */
void agent_ops_exit(void);
/* At unload (no thread in the agent): rings, key and state go. */
void agent_ops_unload(void);
/* A CUDA API call's entry or exit (CUPTI callback on the calling thread),
 * recorded in the thread's ring while ops are recorded: true if it was. */
bool agent_ops_api(bool enter, uint32_t domain, uint32_t cbid, uint32_t correlation,
		   const char *name);
/* A region of torch.compile's begins (name) or ends on this thread: key
 * pairs the two (regions.c). */
void agent_ops_region(bool begin, const void *key, const char *name, size_t len);
/* agent.c's probe point for Python stacks. */
void ptbpf_agent_pystack(uint64_t ts);

/* --- clock.c --- */

/* The op records' clock (CLOCK_MONOTONIC ns from the TSC): a line
 * base_ns + (tsc - base_tsc) * mult / 2^32 that the agent's thread keeps
 * near CLOCK_MONOTONIC, under a sequence count (odd while it changes). */
struct agent_clock {
	uint32_t seq;
	uint32_t ready;          /* 0: read clock_gettime() */
	uint64_t base_tsc;
	int64_t base_ns;
	uint64_t mult;           /* ns per tick, 32.32 fixed point */
	uint64_t limit_tsc;      /* past it the line is not used (a late tick) */
	/* The agent's thread's, for ptbpf (the ops descriptor): */
	bool tsc;                /* the TSC is used */
	uint64_t ticks, steps;   /* checks against CLOCK_MONOTONIC; those that set it */
	uint64_t max_err_ns;     /* the largest difference a check found */
};
extern struct agent_clock agent_clock;

/* At the start of a recording session (the TSC only if use_tsc and the
 * CPU's is invariant), then every PTBPF_AGENT_POLL_MS while it records,
 * on the agent's thread. */
void agent_clock_start(bool use_tsc);
void agent_clock_tick(void);
/* A (read(), CLOCK_MONOTONIC) pair: read() between two clock reads, the
 * tightest of three tries (*ns their midpoint); that try's width in ns.
 * For the TSC here, and CUPTI's clock (cupti_activity.c). */
int64_t agent_clock_pair(int64_t (*read)(void), int64_t *x, int64_t *ns);

static inline uint64_t agent_clock_at(uint64_t base_tsc, int64_t base_ns, uint64_t mult,
				      uint64_t tsc)
{
	/* tsc may be a little before base_tsc: read unordered, or on a CPU
	 * that read it just before the tick that set base_tsc. */
	if (tsc >= base_tsc)
		return (uint64_t)base_ns + (uint64_t)(((unsigned __int128)(tsc - base_tsc) * mult) >> 32);
	return (uint64_t)base_ns - (uint64_t)(((unsigned __int128)(base_tsc - tsc) * mult) >> 32);
}

/* CLOCK_MONOTONIC nanoseconds, now. */
static inline uint64_t agent_clock_ns(void)
{
	const struct agent_clock *c = &agent_clock;

	for (;;) {
		uint32_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		uint64_t base_tsc = c->base_tsc, mult = c->mult, limit = c->limit_tsc, tsc;
		int64_t base_ns = c->base_ns;

		if (!__atomic_load_n(&c->ready, __ATOMIC_RELAXED))
			break;
		tsc = __builtin_ia32_rdtsc();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if ((seq & 1) || __atomic_load_n(&c->seq, __ATOMIC_RELAXED) != seq)
			continue;
		if (__builtin_expect(tsc > limit, 0))
			break;
		return agent_clock_at(base_tsc, base_ns, mult, tsc);
	}
	return (uint64_t)agent_mono_ns(); /* no line (yet), or past it */
}

/* --- cupti.c (cupti_activity.c: cupti_unload) --- */

/* The GPU timeline on (with CUDA API calls into the op rings when
 * api_to_rings): false if it could not be (the reason is reported). ctl
 * gives the job's own buffer callbacks when ptbpf found them. */
bool cupti_activate(bool api_to_rings, const struct ptbpf_agent_ctl *ctl);
void cupti_deactivate(void);
/* On the agent's thread while active: every PTBPF_AGENT_POLL_MS, or every
 * PTBPF_AGENT_IDLE_MS while idle (nothing recorded or seen lately: then no
 * flush, no clock calibration). */
void cupti_tick(int64_t now, bool idle);
/* What CUPTI showed of the job: CUDA calls, GPU records, its own calls into
 * libcupti; changes whenever any happens. */
uint64_t cupti_activity(void);
/* At unload: the buffer pool goes. */
void cupti_unload(void);
/* The kept capture map's side of CUPTI (graphs.c): the subscriber with
 * graph callbacks only, and the job's calls hooked, between windows. */
bool cupti_graphs_on(char *why, size_t len);
void cupti_graphs_off(void);
void cupti_graphs_tick(int64_t now);

/* --- cuda_props.c --- */

/* Sends the CUDA versions and every device's properties (statuses
 * PTBPF_AGENT_VERSIONS, PTBPF_AGENT_DEVICE): false if CUDA is not
 * initialised yet (ask again later), true once told (or nothing to tell). */
bool cuda_props_send(uint32_t cupti_version);
/* The job's cudaRuntimeGetVersion, looked up (not under cupti_lock), then
 * called once, under cupti_lock while the agent holds the activity API, so
 * that no job profiler session records it. */
void cuda_runtime_find(void);
void cuda_runtime_read_locked(void);
/* Set around the agent's own CUDA runtime calls: not the job's. */
extern __thread bool agent_own_cuda_call __attribute__((tls_model("initial-exec")));

#endif /* PTBPF_AGENT_INTERNAL_H */
