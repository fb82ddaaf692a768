/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the agent's CUPTI files share with one another; the rest of the
 * agent sees only their face in agent.h. One process-global CUPTI, four
 * sides of it (cupti.c tells how the agent shares it with the job):
 *   cupti.c           libcupti's functions; who has the activity API, the
 *                     agent or the job's own profiler, and the hand-overs;
 *                     on, off, and the agent thread's tick
 *   cupti_job.c       the job's calls into libcupti (GOT hooks), each seen
 *                     before it takes effect
 *   cupti_activity.c  the buffer pool, CUPTI's clock, and the activity
 *                     buffers' records -> ptbpf_agent_kernel/memcpy/memset
 *   cupti_api.c       the callback subscriber: launch correlation, CUDA
 *                     calls into the op rings
 * The state below is one object each, shared as it was when all four were
 * one file; where a lock guards it, it is cupti_lock.
 */
#ifndef PTBPF_AGENT_CUPTI_INT_H
#define PTBPF_AGENT_CUPTI_INT_H

#include "agent.h"

#include <pthread.h>
#include <stdatomic.h>

#include <cupti.h>

/* --- cupti.c --- */

/* The CUPTI functions the agent calls, resolved by name at the first
 * activation: X(function, pointer to it, optional). cuptiSubscribe_v2 is
 * CUDA 13's. */
#define CUPTI_FUNCTIONS(X)                                                       \
	X(cuptiGetResultString, p_result_string, false)                          \
	X(cuptiGetTimestamp, p_get_timestamp, false)                             \
	X(cuptiSubscribe, p_subscribe, false)                                    \
	X(cuptiSubscribe_v2, p_subscribe_v2, true)                               \
	X(cuptiUnsubscribe, p_unsubscribe, false)                                \
	X(cuptiEnableCallback, p_enable_callback, false)                         \
	X(cuptiActivityRegisterCallbacks, p_register_callbacks, false)           \
	X(cuptiActivityRegisterTimestampCallback, p_register_timestamp, false)   \
	X(cuptiActivityEnable, p_enable, false)                                  \
	X(cuptiActivityDisable, p_disable, false)                                \
	X(cuptiActivityFlushAll, p_flush_all, false)                             \
	X(cuptiActivitySetAttribute, p_set_attribute, false)                     \
	X(cuptiActivityPushExternalCorrelationId, p_push_ext, false)             \
	X(cuptiActivityPopExternalCorrelationId, p_pop_ext, false)               \
	X(cuptiFinalize, p_finalize, false)                                      \
	X(cuptiActivityGetNextRecord, p_next_record, false)                      \
	X(cuptiActivityGetNumDroppedRecords, p_num_dropped, false)               \
	X(cuptiGetVersion, p_get_version, true)                                  \
	X(cuptiGetGraphNodeId, p_graph_node_id, true)                            \
	X(cuptiGetGraphId, p_graph_id, true)

#define CUPTI_DECLARE_POINTER(function, pointer, optional) extern __typeof__(&function) pointer;
CUPTI_FUNCTIONS(CUPTI_DECLARE_POINTER)
#undef CUPTI_DECLARE_POINTER

const char *cupti_error(CUptiResult res);

#define KIND_BIT(k) ((k) < 64 ? 1ull << (k) : 0)

/*
 * Who has the activity API. cupti_lock is held by whoever changes it, and
 * while the agent calls CUPTI's activity functions; the buffer and API
 * callbacks (which CUPTI may call from inside those) never take it.
 */
enum owner { OWN_NONE, OWN_US, OWN_JOB };

extern pthread_mutex_t cupti_lock;
extern _Atomic int activity_owner;
extern bool api_to_rings;         /* CUDA calls go into the op rings */
extern _Atomic bool copy_to_job;  /* hand what our buffers hold to the job too */

/* The job is starting (starting) or already running (!starting) a CUPTI
 * session of its own: the agent steps out of its way. */
void yield_locked(bool starting, const char *why);

/* --- cupti_job.c --- */

/* What the agent knows of the job's own use of CUPTI. */
extern uint64_t job_kinds;      /* kinds the job enabled and has not disabled */
extern bool job_registered;     /* the job has (had) buffer callbacks registered */
/* The job's buffer callbacks: registered through its hook, or found in
 * libtorch by ptbpf (given at activation). */
extern CUpti_BuffersCallbackRequestFunc job_req;
extern CUpti_BuffersCallbackCompleteFunc job_done;
extern _Atomic uint64_t job_calls; /* the job's calls into the activity API */
extern int64_t job_flushed_at;  /* its last forced flush with none of its kinds on */

/* Hooks the job's calls into libcupti (again for objects loaded since). */
void install_hooks_locked(void);
/* install_hooks_locked again once REHOOK_NS have passed since the last. */
void rehook_locked(int64_t now);

/* --- cupti_activity.c --- */

#define POOL_BUFS     8
#define POOL_BUF_SIZE (1u << 20)

extern _Atomic bool foreign_seen; /* our buffers held kinds someone else enabled */
extern _Atomic bool pass_through; /* a job session runs: buffers are the job's */

extern _Atomic bool agent_flushing; /* a flush of the agent's runs */

void anchor_open(void);
bool anchor_held(void);
void anchor_close(void);
void anchor_leave(void);

/* Allocates the buffer pool, once: -1 if it cannot be (reported). */
int pool_init(void);
bool pool_all_back(void);
void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
			       size_t valid);
/* The counters of an activation: zeroed at its start, told at its end. */
void activity_counts_reset(void);
/* The records emitted so far (kernels, copies, sets): activity. */
uint64_t activity_records(void);
void activity_counts_report(void);
/* The agent's kinds go on, or begin to go off: an activity begun since
 * they went off is not the window's (left out, counted). */
void activity_kinds_on(void);
void activity_kinds_off(void);

/* CUPTI's clock onto CLOCK_MONOTONIC: a fresh baseline (at each take of
 * the activity API), then a new rate over it (at each periodic flush). */
void calibrate_reset(void);
void calibrate(void);
/* Whether the clock runs in ns (CUPTI's own), not in ticks (Kineto's). */
bool clock_in_ns(void);
/* Whether CUPTI's clock is still its default: no activity session of the
 * job's was ever configured. */
bool clock_is_default(void);

/* --- cupti_api.c --- */

extern CUpti_SubscriberHandle subscriber;
/* CUDA calls the callbacks saw (racy: counts only that calls come). */
extern _Atomic uint64_t api_calls_seen;

/* A window's: subscribes unless another tool holds CUPTI's one subscriber,
 * and switches the launch callbacks on. */
void subscribe_locked(void);
/* The kept capture map's: a subscriber with graph callbacks only, unless
 * one is there; false with a reason in why. */
bool subscribe_graphs_locked(char *why, size_t len);
void unsubscribe_locked(void);
/* At a window's end: unsubscribes, unless keep and the subscriber is the
 * kept capture map's (no launch callbacks on it). */
void window_unsubscribe_locked(bool keep);
/* The job's own CUPTI user subscribed or started a session (its hooks). */
extern bool job_took_cupti;
void give_up_subscriber_locked(const char *why);

#endif /* PTBPF_AGENT_CUPTI_INT_H */
