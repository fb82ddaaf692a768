// SPDX-License-Identifier: BSD-2-Clause
/*
 * The job's own calls into libcupti (torch.profiler's Kineto), caught in
 * its GOT (stubs.c's hooks) so that the agent sees each one before it
 * takes effect: a subscribe takes CUPTI's one callback subscriber from the
 * agent first; a call that starts or runs an activity session makes the
 * agent step aside first (yield_locked, cupti.c), and one that starts a
 * session takes the subscriber too: CUPTI 13.0 crashed jobs whose
 * subscription changed while their session traced CUDA calls. The job's
 * call itself is then made unchanged, and what it did is noted here (its
 * buffer callbacks, its kinds, its flushes): cupti.c judges by it when the
 * job's session is over, and whose buffer callbacks to put back.
 */
#include "cupti_int.h"

#include <time.h>

#define REHOOK_NS 1000000000LL /* look for newly loaded objects to hook */

uint64_t job_kinds;
bool job_registered;
CUpti_BuffersCallbackRequestFunc job_req;
CUpti_BuffersCallbackCompleteFunc job_done;
_Atomic uint64_t job_calls;
int64_t job_flushed_at;
static int64_t next_hook;

/* Each hook: note the call, get out of the way, then make it. */
#define JOB_CALL(starting, why, call)                               \
	({                                                          \
		uint8_t *busy__ = busy_enter();                     \
		CUptiResult r__;                                    \
                                                                    \
		atomic_fetch_add(&job_calls, 1);                    \
		if ((starting) || atomic_load(&activity_owner) == OWN_US) { \
			pthread_mutex_lock(&cupti_lock);            \
			if (starting)                               \
				give_up_subscriber_locked(          \
					"starts a CUPTI session (" why ")"); \
			yield_locked(starting, why);                \
			pthread_mutex_unlock(&cupti_lock);          \
		}                                                   \
		r__ = call;                                         \
		busy_leave(busy__);                                 \
		r__;                                                \
	})

static CUptiResult CUPTIAPI job_register_callbacks(CUpti_BuffersCallbackRequestFunc req,
						   CUpti_BuffersCallbackCompleteFunc done)
{
	CUptiResult r;

	pthread_mutex_lock(&cupti_lock);
	job_req = req;
	job_done = done;
	job_registered = true;
	pthread_mutex_unlock(&cupti_lock);
	r = JOB_CALL(true, "cuptiActivityRegisterCallbacks", p_register_callbacks(req, done));
	if (r == CUPTI_SUCCESS) {
		/* The agent's callbacks are gone, and the job starts anew:
		 * an anchor goes back empty. */
		atomic_store(&pass_through, false);
		anchor_close();
	}
	return r;
}

static CUptiResult CUPTIAPI job_register_timestamp(CUpti_TimestampCallbackFunc f)
{
	return JOB_CALL(true, "cuptiActivityRegisterTimestampCallback", p_register_timestamp(f));
}

static CUptiResult CUPTIAPI job_enable(CUpti_ActivityKind kind)
{
	CUptiResult r = JOB_CALL(true, "cuptiActivityEnable", p_enable(kind));

	if (r == CUPTI_SUCCESS) {
		pthread_mutex_lock(&cupti_lock);
		job_kinds |= KIND_BIT(kind);
		pthread_mutex_unlock(&cupti_lock);
	}
	return r;
}

static CUptiResult CUPTIAPI job_disable(CUpti_ActivityKind kind)
{
	CUptiResult r = JOB_CALL(false, "cuptiActivityDisable", p_disable(kind));

	pthread_mutex_lock(&cupti_lock);
	job_kinds &= ~KIND_BIT(kind);
	pthread_mutex_unlock(&cupti_lock);
	return r;
}

static CUptiResult CUPTIAPI job_set_attribute(CUpti_ActivityAttribute attr, size_t *size,
					      void *value)
{
	return JOB_CALL(true, "cuptiActivitySetAttribute", p_set_attribute(attr, size, value));
}

/* A forced flush is how Kineto reads its buffers (after it has checked
 * that it still has one out: the anchor, if the agent holds it). */
static CUptiResult flush_for_job(uint32_t flag)
{
	if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
		anchor_close();
	return p_flush_all(flag);
}

static CUptiResult CUPTIAPI job_flush_all(uint32_t flag)
{
	CUptiResult r = JOB_CALL(false, "cuptiActivityFlushAll", flush_for_job(flag));

	if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) {
		pthread_mutex_lock(&cupti_lock);
		if (!job_kinds)
			job_flushed_at = agent_mono_ns();
		pthread_mutex_unlock(&cupti_lock);
	}
	return r;
}

static CUptiResult CUPTIAPI job_push_ext(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
	return JOB_CALL(false, "cuptiActivityPushExternalCorrelationId", p_push_ext(kind, id));
}

static CUptiResult CUPTIAPI job_pop_ext(CUpti_ExternalCorrelationKind kind, uint64_t *id)
{
	return JOB_CALL(false, "cuptiActivityPopExternalCorrelationId", p_pop_ext(kind, id));
}

static CUptiResult CUPTIAPI job_finalize(void)
{
	pthread_mutex_lock(&cupti_lock);
	subscriber = NULL; /* finalize ends every subscription */
	if (graphs_is_on())
		graphs_lost("the job called cuptiFinalize");
	pthread_mutex_unlock(&cupti_lock);
	return JOB_CALL(true, "cuptiFinalize", p_finalize());
}

/* The job subscribes (Kineto, at its first session): it gets CUPTI's one
 * subscriber, or it would stay CPU-only for good. */
static void give_up_subscriber(void)
{
	uint8_t *busy = busy_enter();

	pthread_mutex_lock(&cupti_lock);
	give_up_subscriber_locked("subscribed to CUPTI");
	pthread_mutex_unlock(&cupti_lock);
	busy_leave(busy);
}

static CUptiResult CUPTIAPI job_subscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb,
					  void *ud)
{
	give_up_subscriber();
	return p_subscribe(h, cb, ud);
}

static CUptiResult CUPTIAPI job_subscribe_v2(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb,
					     void *ud, CUpti_SubscriberParams *params)
{
	give_up_subscriber();
	return p_subscribe_v2(h, cb, ud, params);
}

void install_hooks_locked(void)
{
	const struct hook hooks[] = {
		{ "cuptiSubscribe", (void *)job_subscribe, (void *)p_subscribe },
		{ "cuptiSubscribe_v2", (void *)job_subscribe_v2, (void *)p_subscribe_v2 },
		{ "cuptiActivityRegisterCallbacks", (void *)job_register_callbacks,
		  (void *)p_register_callbacks },
		{ "cuptiActivityRegisterTimestampCallback", (void *)job_register_timestamp,
		  (void *)p_register_timestamp },
		{ "cuptiActivityEnable", (void *)job_enable, (void *)p_enable },
		{ "cuptiActivityDisable", (void *)job_disable, (void *)p_disable },
		{ "cuptiActivitySetAttribute", (void *)job_set_attribute, (void *)p_set_attribute },
		{ "cuptiActivityFlushAll", (void *)job_flush_all, (void *)p_flush_all },
		{ "cuptiActivityPushExternalCorrelationId", (void *)job_push_ext, (void *)p_push_ext },
		{ "cuptiActivityPopExternalCorrelationId", (void *)job_pop_ext, (void *)p_pop_ext },
		{ "cuptiFinalize", (void *)job_finalize, (void *)p_finalize },
	};

	hooks_install(hooks, sizeof(hooks) / sizeof(hooks[0]));
	next_hook = agent_mono_ns() + REHOOK_NS;
}

void rehook_locked(int64_t now)
{
	if (now >= next_hook)
		install_hooks_locked();
}
