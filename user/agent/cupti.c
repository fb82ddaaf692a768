// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU's own timeline from CUPTI, shared with the job's own CUPTI user.
 *
 * CUPTI's activity API is one process-global switchboard: one pair of
 * buffer callbacks, one set of enabled kinds (not counted: a disable turns
 * a kind off for everyone), one timestamp callback, and one callback
 * subscriber. torch.profiler (Kineto) uses all of it, and subscribes once
 * for the life of the process at its first session: if that fails it is
 * CPU-only for good. So the agent:
 *   - never registers a timestamp callback: it maps CUPTI's clock, whatever
 *     registered it, onto CLOCK_MONOTONIC by calibration;
 *   - hooks the job's calls into libcupti (its GOT, stubs.c) and sees each
 *     one before it takes effect: when the job subscribes, the agent gives
 *     up its own subscriber first (and its CUDA-call callbacks with it);
 *     when the job starts an activity session, the agent switches its
 *     kinds off and hands back its buffers first, and records no GPU
 *     timeline until the job's session is over (disabled, flushed, quiet
 *     for a second), then takes it back;
 *   - at attach, takes the activity API only if no job session can be
 *     running: CUPTI's clock still its default (nobody ever configured
 *     activity), or no job call to libcupti within a first 0.3 s and the
 *     job's buffer callbacks known (ptbpf finds Kineto's in libtorch; else
 *     it waits for the job's next session to end). Should a session it
 *     could not see show up after all (its kinds in the agent's buffers,
 *     or one of the job's buffers coming back through the agent's
 *     callback), it copies what its own buffers hold into the job's, and
 *     from then on passes the job's buffers through (cupti_activity.c),
 *     steps aside, and never turns off a kind: the job's session has them
 *     on too. At detach it hands every buffer back and puts the job's
 *     buffer callbacks back in place.
 * Every record of the agent's own buffers goes to ptbpf's uprobes on
 * ptbpf_agent_kernel/memcpy/memset, with its times on CLOCK_MONOTONIC.
 *
 * This file holds that policy: libcupti's functions, who has the activity
 * API and the hand-overs, and the agent thread's tick that times them. The
 * job's calls are caught in cupti_job.c, the buffers and their records are
 * cupti_activity.c's, the callback subscriber cupti_api.c's (cupti_int.h).
 */
#define _GNU_SOURCE
#include "cupti_int.h"

#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

#define FLUSH_NS      200000000LL   /* deliver what the GPU finished, this often */
#define DRAIN_FLUSHES 25             /* at detach: plain flushes, then a forced one */
#define DRAIN_WAIT_NS 20000000L      /* between them: records of launched kernels complete */
#define DRAIN_LOOKS   3              /* flushes at least where the job has used CUPTI */
#define OBSERVE_NS    300000000LL   /* at attach: watch for a running job session */
#define QUIET_NS      1000000000LL  /* after a job session: quiet this long */

/* The CUPTI functions used, resolved at the first activation. */
static void *cupti;
#define CUPTI_DEFINE_POINTER(function, pointer, optional) __typeof__(&function) pointer;
CUPTI_FUNCTIONS(CUPTI_DEFINE_POINTER)
#undef CUPTI_DEFINE_POINTER

static const struct {
	const char *name;
	void **slot;
	bool optional;
} cupti_syms[] = {
#define CUPTI_SYM(function, pointer, optional) { #function, (void **)&pointer, optional },
	CUPTI_FUNCTIONS(CUPTI_SYM)
#undef CUPTI_SYM
};

/* Activity kinds the agent turns on; the first is required. */
static const CUpti_ActivityKind our_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
};

/* Who has the activity API (cupti_int.h), and the timing of hand-overs. */
pthread_mutex_t cupti_lock = PTHREAD_MUTEX_INITIALIZER;
static bool keep_graphs; /* the kept capture map's subscriber and hooks (graphs.c) */
_Atomic int activity_owner;
bool api_to_rings;
_Atomic bool copy_to_job;
static bool on;                 /* activated and not deactivated since */
static uint64_t ours_on;        /* kinds the agent enabled */
static uint64_t job_calls_seen;
static int64_t job_last_seen, observe_until, next_flush;
static bool props_sent;         /* this session's devices and versions told */

const char *cupti_error(CUptiResult res)
{
	const char *s = NULL;

	if (!p_result_string || p_result_string(res, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

/* Binds to the libcupti torch loaded (soname match); loads it otherwise. */
static int cupti_load(void)
{
	void *h;
	size_t i;

	if (cupti)
		return 0;
	h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		agent_report(PTBPF_AGENT_ERR_LOAD, 0, "libcupti.so.13: %s", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof(cupti_syms) / sizeof(cupti_syms[0]); i++) {
		*cupti_syms[i].slot = dlsym(h, cupti_syms[i].name);
		if (!*cupti_syms[i].slot && !cupti_syms[i].optional) {
			agent_report(PTBPF_AGENT_ERR_SYMBOL, 0, "libcupti.so.13: no %s",
				     cupti_syms[i].name);
			return -1;
		}
	}
	cupti = h;
	return 0;
}

static uint32_t cupti_version(void)
{
	uint32_t v = 0;

	if (p_get_version && p_get_version(&v) != CUPTI_SUCCESS)
		v = 0;
	return v;
}

/* --- the activity API --- */

/* Buffers back from CUPTI: with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED every
 * one, else those whose records are all complete. Passing a job session's
 * buffers through, until that session has read its own, the job keeps one
 * out: the anchor, held across the flush. */
static void flush_locked(uint32_t flag)
{
	atomic_store(&agent_flushing, true);
	if (atomic_load(&pass_through) && !job_flushed_at)
		anchor_open();
	p_flush_all(flag);
	atomic_store(&agent_flushing, false);
}

static void flush_forced_locked(void)
{
	flush_locked(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static void disable_ours_locked(void)
{
	if (ours_on)
		activity_kinds_off();
	for (size_t i = 0; i < sizeof(our_kinds) / sizeof(our_kinds[0]); i++)
		if (ours_on & KIND_BIT(our_kinds[i]))
			p_disable(our_kinds[i]);
	ours_on = 0;
}

/*
 * Our kinds off, then every buffer back. A forced flush from the agent's
 * thread while the job replays CUDA graphs makes CUPTI 13.0 keep one of
 * its device buffers for good, with its host copies (3.2 MB of GPU memory
 * and 4.8 MB of malloc'd memory each), about once per session; plain
 * flushes from another thread, and forced ones from the launching thread,
 * do not (H200, 2026-11-29, tests/bench/cupti_rss.py: 20 and 19 kept in
 * 18 sessions against 0 in 18). So plain flushes while the records of
 * kernels already launched complete, until every buffer of the agent's is
 * back, and a forced one only if some are not by then: the agent cannot
 * be unloaded while CUPTI holds one of its buffers.
 *
 * The lock stays held while it waits (at most 0.5 s): a CUPTI call the job
 * makes meanwhile waits, then finds the hooks gone. Freed, it let a
 * session the job started meanwhile find the agent half way out, and one
 * such job died in its profiler's stop ("double free or corruption", H200,
 * 2026-11-29, test_sessions_that_start_as_ptbpf_detaches, 1 of 23).
 *
 * A session of the job's that ran unseen and shows only now (its records
 * in the buffers that came back last) had our kinds on as well, and lost
 * them when they went off: they go back on for it at once, and the gap is
 * told. Where the job has used CUPTI (such a session can be), the drain
 * makes DRAIN_LOOKS flushes at least, each a chance for a buffer of the
 * job's held by a record not yet complete to come back.
 */
static void disable_and_drain_locked(void)
{
	uint64_t off = ours_on;
	int64_t t0 = agent_mono_ns();
	int i, looks = job_registered ? DRAIN_LOOKS : 1;

	disable_ours_locked();
	for (i = 0; i < DRAIN_FLUSHES && (i < looks || !pool_all_back()) &&
		    !atomic_load(&pass_through); i++) {
		if (i)
			nanosleep(&(struct timespec){ 0, DRAIN_WAIT_NS }, NULL);
		flush_locked(0);
	}
	if (atomic_load(&pass_through)) {
		int failed = 0;

		for (size_t k = 0; k < sizeof(our_kinds) / sizeof(our_kinds[0]); k++)
			if ((off & KIND_BIT(our_kinds[k])) && p_enable(our_kinds[k]) != CUPTI_SUCCESS)
				failed++;
		agent_report(PTBPF_AGENT_GPU_PAUSED, (uint64_t)agent_mono_ns(),
			     "a session of the job's own CUPTI user (torch.profiler/Kineto) that "
			     "ran unseen showed only as ptbpf detached: its kernel, copy and set "
			     "records of the last %lld ms at least are lost; %s",
			     (long long)((agent_mono_ns() - t0) / 1000000),
			     failed ? "CUPTI refused to switch some of those kinds back on" :
			     "those kinds are back on for it");
		return; /* hand_back_locked's flush brings every buffer back */
	}
	if (!pool_all_back())
		flush_forced_locked();
}

/* Takes the activity API: our buffer callbacks, then our kinds (the clock
 * stays whoever's it is). */
static bool take_locked(bool resumed)
{
	CUptiResult res;

	/* The job's session, if one passed through, is over; a later one
	 * has not read its buffers yet. */
	anchor_close();
	atomic_store(&pass_through, false);
	job_flushed_at = 0;
	calibrate_reset();
	res = p_register_callbacks(
		(CUpti_BuffersCallbackRequestFunc)stub_entry(STUB_BUF_REQUESTED, (void *)buffer_requested),
		(CUpti_BuffersCallbackCompleteFunc)stub_entry(STUB_BUF_COMPLETED,
							      (void *)buffer_completed));
	if (res != CUPTI_SUCCESS) {
		agent_report(PTBPF_AGENT_ERR_CUPTI, 0, "cuptiActivityRegisterCallbacks: %s",
			     cupti_error(res));
		return false;
	}
	activity_kinds_on();
	for (size_t i = 0; i < sizeof(our_kinds) / sizeof(our_kinds[0]); i++) {
		res = p_enable(our_kinds[i]);
		if (res == CUPTI_SUCCESS) {
			ours_on |= KIND_BIT(our_kinds[i]);
		} else if (i == 0) {
			agent_report(PTBPF_AGENT_ERR_CUPTI, 0, "cuptiActivityEnable(CONCURRENT_KERNEL): %s",
				     cupti_error(res));
			disable_ours_locked();
			return false;
		}
	}
	atomic_store(&foreign_seen, false);
	atomic_store(&activity_owner, OWN_US);
	next_flush = agent_mono_ns() + FLUSH_NS;
	if (resumed)
		agent_report(PTBPF_AGENT_GPU_RESUMED, (uint64_t)agent_mono_ns(),
			     "GPU timeline back: the job's CUPTI session is over");
	else
		agent_report(PTBPF_AGENT_ACTIVE, 0, "active: GPU timeline on (kinds 0x%llx), CUDA "
			     "call callbacks %s, %u x %u KiB buffers, CUPTI clock %s",
			     (unsigned long long)ours_on, subscriber ? "on" : "off", POOL_BUFS,
			     POOL_BUF_SIZE >> 10, clock_in_ns() ? "in ns" : "in ticks");
	return true;
}

/*
 * The job is starting (starting) or already running (!starting) a CUPTI
 * session of its own: the agent steps out of its way. Starting: our kinds
 * off and our buffers flushed back to us, before the job's call goes on.
 * Running (a session the agent could not see at attach): its kinds stay,
 * our buffers go to the job as copies, and its buffers pass through the
 * agent's callbacks from now on (the anchor held across the flush).
 */
void yield_locked(bool starting, const char *why)
{
	if (atomic_load(&activity_owner) != OWN_US)
		return;
	if (starting) {
		disable_ours_locked();
	} else {
		atomic_store(&copy_to_job, true);
		ours_on = 0;
		if (job_req && job_done)
			atomic_store(&pass_through, true);
	}
	flush_forced_locked();
	atomic_store(&copy_to_job, false);
	atomic_store(&activity_owner, OWN_JOB);
	job_last_seen = job_flushed_at = 0;
	agent_report(PTBPF_AGENT_GPU_PAUSED, (uint64_t)agent_mono_ns(),
		     "GPU timeline paused: the job's own CUPTI user (torch.profiler/Kineto) %s "
		     "(%s); it keeps all its data", starting ? "starts a session" :
		     "has a session running", why);
}

/* --- on, off, and the agent thread's tick --- */

/* After a window: the kept capture map's subscriber again, with its graph
 * callbacks only (the window's, with its launch callbacks, went: never
 * switched off on a live one); where the job's CUPTI user may have a
 * session now, none (subscribing then can crash the job, above), and the
 * map grows no more. A kept subscriber the window left as it was stays. */
static void graphs_back_locked(void)
{
	static char why[160]; /* graphs_lost keeps it */

	if (!keep_graphs)
		return;
	if (graphs_is_on()) {
		if (subscriber)
			return;
		if (job_took_cupti || !clock_is_default())
			snprintf(why, sizeof(why), "the job's own CUPTI user has used CUPTI");
		else if (subscribe_graphs_locked(why, sizeof(why)))
			return;
		graphs_lost(why);
		agent_report(PTBPF_AGENT_GRAPHS, 0, "graphs: the capture map grows no more: %s", why);
	}
	keep_graphs = false;
}

/* A window's activation failed after it subscribed: as at its end. */
static void window_failed_locked(void)
{
	window_unsubscribe_locked(keep_graphs);
	graphs_back_locked();
}

bool cupti_activate(bool api_calls, const struct ptbpf_agent_ctl *ctl)
{
	bool clock_default;

	if (cupti_load() || pool_init())
		return false;
	pthread_mutex_lock(&cupti_lock);
	activity_counts_reset();
	api_to_rings = api_calls;
	props_sent = false;
	if (ctl && ctl->job_buf_requested && ctl->job_buf_completed && !job_req) {
		job_req = (CUpti_BuffersCallbackRequestFunc)(uintptr_t)ctl->job_buf_requested;
		job_done = (CUpti_BuffersCallbackCompleteFunc)(uintptr_t)ctl->job_buf_completed;
	}
	clock_default = clock_is_default();
	job_registered |= !clock_default;
	/* Hooks first: from here on the agent sees each job call first. */
	install_hooks_locked();
	/* CUPTI's callbacks only where no session of the job's can be
	 * tracing: subscribing while one traced CUDA calls killed 10 of 127
	 * jobs traced by Kineto on demand (SIGSEGV in libcupti's callback
	 * dispatch, CUPTI 13.0.1, H200, 2026-11-28). */
	if (clock_default)
		subscribe_locked();
	else
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0, "no CUDA call callbacks: the job's own "
			     "CUPTI user (torch.profiler's Kineto) has used CUPTI's activity API and a "
			     "session of its may be tracing unseen, when subscribing can crash the "
			     "job; CUDA calls come from ptbpf's uprobes, without launch->kernel flows");
	on = true;
	job_calls_seen = atomic_load(&job_calls);
	job_last_seen = job_flushed_at = 0;
	if (clock_default) {
		if (!take_locked(false)) {
			on = false;
			window_failed_locked();
		}
	} else {
		atomic_store(&activity_owner, OWN_NONE);
		observe_until = agent_mono_ns() + OBSERVE_NS;
	}
	pthread_mutex_unlock(&cupti_lock);
	return on;
}

/*
 * A job session runs with its buffers passing through the agent's
 * callbacks: every buffer back to the job, then its own callbacks back in
 * place. The anchor goes to CUPTI at its next request, which comes as soon
 * as the job's session records anything. A session that has ended (its
 * forced flush seen) needs none: it goes back empty. One still quiet after
 * 0.5 s keeps it unreturned, counted: returned, it could leave the session
 * with no buffer out when it ends.
 */
static void hand_back_locked(void)
{
	ours_on = 0;
	atomic_store(&activity_owner, OWN_JOB);
	atomic_store(&copy_to_job, true);
	flush_forced_locked();
	atomic_store(&copy_to_job, false);
	if (!job_flushed_at) {
		/* The lock free for the job's threads meanwhile (the tick, like
		 * this, runs under agent.c's state_lock): a forced flush of the
		 * job's now returns the anchor empty through its hook. */
		pthread_mutex_unlock(&cupti_lock);
		for (int i = 0; i < 500 && anchor_held(); i++)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		pthread_mutex_lock(&cupti_lock);
	}
	p_register_callbacks(job_req, job_done);
	atomic_store(&pass_through, false);
	if (job_flushed_at)
		anchor_close();
	else
		anchor_leave();
}

void cupti_deactivate(void)
{
	pthread_mutex_lock(&cupti_lock);
	if (!on) {
		pthread_mutex_unlock(&cupti_lock);
		return;
	}
	if (atomic_load(&activity_owner) == OWN_US && !atomic_load(&pass_through)) {
		/* A session of the job's that runs unseen shows in this flush
		 * (its buffers come back through ours, as at every tick) before
		 * any kind goes off: the job's session has them on too. Plain,
		 * as every flush of the agent's while the job may launch: a
		 * forced one here kept 10 of CUPTI's device buffers in 24
		 * detaches from a CUDA graph job that had profiled itself (H200,
		 * 2026-11-29, tests/bench/attach_rss.py --variants long). One
		 * found only later is given its kinds back in the drain. */
		flush_locked(0);
		if (!atomic_load(&pass_through)) {
			disable_and_drain_locked();
			/* The job's buffer callbacks back where they were. */
			if (!atomic_load(&pass_through) && job_registered && job_req && job_done)
				p_register_callbacks(job_req, job_done);
		}
	}
	if (atomic_load(&pass_through))
		hand_back_locked();
	/* One held past the job's own registration: returned empty (the
	 * job's callbacks are its own again). */
	anchor_close();
	window_unsubscribe_locked(keep_graphs);
	graphs_back_locked();
	atomic_store(&activity_owner, OWN_NONE);
	/* The hooks last: a session the job starts meanwhile waits for the
	 * lock in them, then finds the API free. Removed first, they let a
	 * session start between here and our kinds going off, and the agent
	 * turned its kernel, copy and set kinds off under it: its trace had
	 * no GPU side (3 of about 1,200 sessions in the H200 soaks). The
	 * kept capture map's stay. */
	if (!keep_graphs)
		hooks_remove();
	on = false;
	pthread_mutex_unlock(&cupti_lock);
	activity_counts_report();
}

/* The kept capture map's side (graphs.c): hooks and a subscriber with the
 * graph callbacks, between windows; during one, the window's subscriber
 * has them too. */
bool cupti_graphs_on(char *why, size_t len)
{
	bool ok = true;

	if (cupti_load()) {
		snprintf(why, len, "libcupti.so.13 could not be loaded");
		return false;
	}
	pthread_mutex_lock(&cupti_lock);
	if (keep_graphs) {
		pthread_mutex_unlock(&cupti_lock);
		return true;
	}
	if (job_took_cupti || !clock_is_default()) {
		snprintf(why, len, "the job's own CUPTI user has used CUPTI (a subscription then "
			 "can crash the job, or take its profiler's callbacks)");
		ok = false;
	} else if (on && !subscriber) {
		snprintf(why, len, "CUPTI's callback subscriber is not the agent's (this window "
			 "said why)");
		ok = false;
	} else if (!on) {
		install_hooks_locked();
		if (!(ok = subscribe_graphs_locked(why, len)))
			hooks_remove();
	}
	keep_graphs = ok;
	pthread_mutex_unlock(&cupti_lock);
	return ok;
}

/* The kept map's subscriber and hooks go; during a window, the window's
 * end takes them with its own. */
static void graphs_release_locked(void)
{
	if (keep_graphs && !on) {
		unsubscribe_locked();
		hooks_remove();
	}
	keep_graphs = false;
}

void cupti_graphs_off(void)
{
	pthread_mutex_lock(&cupti_lock);
	graphs_release_locked();
	pthread_mutex_unlock(&cupti_lock);
}

/* Between windows: the hooks kept up to date while the map is kept; once
 * CUPTI's callbacks went to the job (graphs_lost), they go too. */
void cupti_graphs_tick(int64_t now)
{
	pthread_mutex_lock(&cupti_lock);
	if (keep_graphs && !on && !graphs_is_on())
		graphs_release_locked();
	else if (keep_graphs && !on)
		rehook_locked(now);
	pthread_mutex_unlock(&cupti_lock);
}

uint64_t cupti_activity(void)
{
	return atomic_load(&job_calls) + activity_records() +
	       atomic_load_explicit(&api_calls_seen, memory_order_relaxed);
}

void cupti_tick(int64_t now, bool idle)
{
	static int64_t next_find;
	uint64_t calls = atomic_load(&job_calls);
	int o;

	/* At most once a second: a job without CUDA never has the runtime. */
	if (!props_sent && now >= next_find) {
		next_find = now + 1000000000;
		cuda_runtime_find();
	}
	pthread_mutex_lock(&cupti_lock);
	if (!on) {
		pthread_mutex_unlock(&cupti_lock);
		return;
	}
	if (calls != job_calls_seen) {
		job_calls_seen = calls;
		job_last_seen = now;
	}
	o = atomic_load(&activity_owner);
	if (o == OWN_NONE && now >= observe_until) {
		/* At attach with a clock someone registered: a job session
		 * seen in the first 0.3 s keeps the API until it ends. */
		if (job_last_seen) {
			atomic_store(&activity_owner, OWN_JOB);
			agent_report(PTBPF_AGENT_GPU_PAUSED, (uint64_t)now, "GPU timeline waits: the "
				     "job's own CUPTI user (torch.profiler/Kineto) has a session "
				     "running; it keeps all its data");
		} else if (!job_req || !job_done) {
			/* A session of the job's may run unseen, and taking the
			 * buffer callbacks from it would leave its buffers with
			 * nobody to hand them to: its whole trace lost. */
			atomic_store(&activity_owner, OWN_JOB);
			agent_report(PTBPF_AGENT_GPU_PAUSED, (uint64_t)now, "GPU timeline waits: the "
				     "job's own CUPTI user (torch.profiler/Kineto) has used CUPTI and "
				     "its buffer callbacks are not known, so a session of its may be "
				     "running; the timeline starts once the job's next session is over");
		} else if (!take_locked(false)) {
			on = false;
			window_failed_locked();
		}
	} else if (o == OWN_US && atomic_load(&foreign_seen)) {
		yield_locked(false, "its kinds in the agent's buffers");
	} else if (o == OWN_US && now >= next_flush && !idle) {
		/* Deliver what the GPU finished, about 200 ms late: a plain
		 * flush hands over partly filled buffers too, those whose
		 * records are all complete (a forced one from this thread
		 * can keep CUPTI's device buffers, above). Not while idle:
		 * nothing was launched (what a full buffer holds comes
		 * without a flush, the rest at the next one or at detach). */
		calibrate();
		flush_locked(0);
		next_flush = now + FLUSH_NS;
	} else if (o == OWN_JOB && !job_kinds && job_flushed_at &&
		   now - (job_last_seen > job_flushed_at ? job_last_seen : job_flushed_at) >= QUIET_NS) {
		take_locked(true);
	}
	if (on)
		rehook_locked(now);
	o = atomic_load(&activity_owner);
	if (on && o == OWN_US)
		cuda_runtime_read_locked();
	pthread_mutex_unlock(&cupti_lock);
	/* Once it is known who has the activity API (the runtime's version
	 * is read only if the agent has it). */
	if (!props_sent && o != OWN_NONE)
		props_sent = cuda_props_send(cupti_version());
}
