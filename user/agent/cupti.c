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
 *     activity), or no job call to libcupti within a first 0.3 s. Should
 *     its buffers then show kinds it never enabled (a session it could not
 *     see), it copies them into the job's buffers, puts the job's buffer
 *     callbacks back (ptbpf finds Kineto's in libtorch) and steps aside.
 * Every record of the agent's own buffers goes to ptbpf's uprobes on
 * ptbpf_agent_kernel/memcpy/memset, with its times on CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#define FLUSH_NS      200000000LL   /* deliver what the GPU finished, this often */
#define OBSERVE_NS    300000000LL   /* at attach: watch for a running job session */
#define QUIET_NS      1000000000LL  /* after a job session: quiet this long */
#define REHOOK_NS     1000000000LL  /* look for newly loaded objects to hook */
#define POOL_BUFS     8
#define POOL_BUF_SIZE (1u << 20)

/* The CUPTI functions used, resolved at the first activation. */
static void *cupti;
static __typeof__(&cuptiGetResultString) p_result_string;
static __typeof__(&cuptiGetTimestamp) p_get_timestamp;
static __typeof__(&cuptiSubscribe) p_subscribe;
static __typeof__(&cuptiSubscribe_v2) p_subscribe_v2; /* CUDA 13: optional */
static __typeof__(&cuptiUnsubscribe) p_unsubscribe;
static __typeof__(&cuptiEnableCallback) p_enable_callback;
static __typeof__(&cuptiEnableDomain) p_enable_domain;
static __typeof__(&cuptiActivityRegisterCallbacks) p_register_callbacks;
static __typeof__(&cuptiActivityRegisterTimestampCallback) p_register_timestamp;
static __typeof__(&cuptiActivityEnable) p_enable;
static __typeof__(&cuptiActivityDisable) p_disable;
static __typeof__(&cuptiActivityFlushAll) p_flush_all;
static __typeof__(&cuptiActivitySetAttribute) p_set_attribute;
static __typeof__(&cuptiActivityPushExternalCorrelationId) p_push_ext;
static __typeof__(&cuptiActivityPopExternalCorrelationId) p_pop_ext;
static __typeof__(&cuptiFinalize) p_finalize;
static __typeof__(&cuptiActivityGetNextRecord) p_next_record;
static __typeof__(&cuptiActivityGetNumDroppedRecords) p_num_dropped;
static __typeof__(&cuptiGetVersion) p_get_version;

static const struct {
	const char *name;
	void **slot;
	bool optional;
} cupti_syms[] = {
	{ "cuptiGetResultString", (void **)&p_result_string, false },
	{ "cuptiGetTimestamp", (void **)&p_get_timestamp, false },
	{ "cuptiSubscribe", (void **)&p_subscribe, false },
	{ "cuptiSubscribe_v2", (void **)&p_subscribe_v2, true },
	{ "cuptiUnsubscribe", (void **)&p_unsubscribe, false },
	{ "cuptiEnableCallback", (void **)&p_enable_callback, false },
	{ "cuptiEnableDomain", (void **)&p_enable_domain, false },
	{ "cuptiActivityRegisterCallbacks", (void **)&p_register_callbacks, false },
	{ "cuptiActivityRegisterTimestampCallback", (void **)&p_register_timestamp, false },
	{ "cuptiActivityEnable", (void **)&p_enable, false },
	{ "cuptiActivityDisable", (void **)&p_disable, false },
	{ "cuptiActivityFlushAll", (void **)&p_flush_all, false },
	{ "cuptiActivitySetAttribute", (void **)&p_set_attribute, false },
	{ "cuptiActivityPushExternalCorrelationId", (void **)&p_push_ext, false },
	{ "cuptiActivityPopExternalCorrelationId", (void **)&p_pop_ext, false },
	{ "cuptiFinalize", (void **)&p_finalize, false },
	{ "cuptiActivityGetNextRecord", (void **)&p_next_record, false },
	{ "cuptiActivityGetNumDroppedRecords", (void **)&p_num_dropped, false },
	{ "cuptiGetVersion", (void **)&p_get_version, true },
};

/* Activity kinds the agent turns on; the first is required. */
static const CUpti_ActivityKind our_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
};
#define KIND_BIT(k) ((k) < 64 ? 1ull << (k) : 0)

/* API calls whose entry is reported on the calling thread (the launch's
 * correlation id): what joins a kernel to its launch. */
static const struct {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
} launch_cbids[] = {
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2 },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2 },
};

/* With the op recorder on, every CUDA runtime call is recorded (as a slice
 * on the calling thread, in its op ring), as torch.profiler's Kineto
 * records them: the syncs, copies, sets, allocations, events and stream
 * queries that carry a step's cross-stream dependencies. But for these,
 * which Kineto leaves out too: frequent and telling nothing. */
static const CUpti_CallbackId runtime_left_out[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
};

/*
 * Who has the activity API. The lock is held by whoever changes it, and
 * while the agent calls CUPTI's activity functions; the buffer and API
 * callbacks (which CUPTI may call from inside those) never take it.
 */
enum owner { OWN_NONE, OWN_US, OWN_JOB };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool on;                 /* activated and not deactivated since */
static bool api_to_rings;       /* CUDA calls go into the op rings */
static _Atomic int owner;
static CUpti_SubscriberHandle subscriber;
static uint64_t ours_on;        /* kinds the agent enabled */
static uint64_t job_kinds;      /* kinds the job enabled and has not disabled */
static bool job_registered;     /* the job has (had) buffer callbacks registered */
static CUpti_BuffersCallbackRequestFunc job_req;
static CUpti_BuffersCallbackCompleteFunc job_done;
static _Atomic uint64_t job_calls; /* the job's calls into the activity API */
static uint64_t job_calls_seen;
static int64_t job_last_seen, job_flushed_at, observe_until, next_flush, next_hook;
static _Atomic bool foreign_seen; /* our buffers held kinds someone else enabled */
static _Atomic bool copy_to_job;  /* hand what our buffers hold to the job too */
static bool props_sent;           /* this session's devices and versions told */

/* The buffer pool: bit i of pool_free set = buffer i is ours to hand out.
 * malloc'd, so that one CUPTI hands to another client may be free()d by
 * it; such a buffer is simply never returned to us. */
static uint8_t *pool;
static _Atomic uint32_t pool_free;

/* Counters of the current activation; read for the deactivation message. */
static _Atomic uint64_t n_kernels, n_memcpys, n_memsets, n_dropped, n_declined, n_foreign,
	n_to_job, n_lost_to_job;

/* CUPTI's clock -> CLOCK_MONOTONIC: mono = m + (cupti - c) * k, published
 * under a sequence count (the buffer callback may run on any thread). */
static struct {
	_Atomic uint32_t seq;
	int64_t c, m;
	double k;
} cal;
static int64_t cal_c0, cal_m0; /* the baseline k is measured over */

static const char *cupti_error(CUptiResult res)
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

static int pool_init(void)
{
	if (pool)
		return 0;
	/* CUPTI wants 8-byte aligned buffers; malloc gives 16. */
	pool = malloc((size_t)POOL_BUFS * POOL_BUF_SIZE);
	if (!pool) {
		agent_report(PTBPF_AGENT_ERR_MEMORY, 0, "cannot allocate %u activity buffers",
			     POOL_BUFS);
		return -1;
	}
	atomic_store(&pool_free, (1u << POOL_BUFS) - 1);
	return 0;
}

/* --- the clock --- */

static int64_t cupti_now(void)
{
	uint64_t t = 0;

	p_get_timestamp(&t);
	return (int64_t)t;
}

/* One (CUPTI, CLOCK_MONOTONIC) pair: the tightest of three. */
static void clock_pair(int64_t *c, int64_t *m)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < 3; i++) {
		int64_t a = agent_now(CLOCK_MONOTONIC), t = cupti_now(),
			b = agent_now(CLOCK_MONOTONIC);

		if (b - a < best) {
			best = b - a;
			*c = t;
			*m = a + (b - a) / 2;
		}
	}
}

static void cal_publish(int64_t c, int64_t m, double k)
{
	atomic_fetch_add_explicit(&cal.seq, 1, memory_order_acq_rel);
	cal.c = c;
	cal.m = m;
	cal.k = k;
	atomic_fetch_add_explicit(&cal.seq, 1, memory_order_release);
}

/* A fresh baseline: two pairs 10 ms apart give the first rate (CUPTI's
 * clock is nanoseconds by default but TSC ticks under Kineto's callback). */
static void calibrate_reset(void)
{
	int64_t c1, m1;

	clock_pair(&cal_c0, &cal_m0);
	nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	clock_pair(&c1, &m1);
	cal_publish(c1, m1, c1 > cal_c0 ? (double)(m1 - cal_m0) / (double)(c1 - cal_c0) : 1.0);
}

static void calibrate(void)
{
	int64_t c, m;

	clock_pair(&c, &m);
	cal_publish(c, m, c > cal_c0 ? (double)(m - cal_m0) / (double)(c - cal_c0) : cal.k);
}

static uint64_t to_mono(uint64_t t)
{
	uint32_t s;
	int64_t c, m;
	double k;

	do {
		s = atomic_load_explicit(&cal.seq, memory_order_acquire);
		c = cal.c;
		m = cal.m;
		k = cal.k;
	} while ((s & 1) || s != atomic_load_explicit(&cal.seq, memory_order_acquire));
	return (uint64_t)(m + (int64_t)((double)((int64_t)t - c) * k));
}

/* Whether CUPTI's clock is still its default (CLOCK_REALTIME): then no
 * one ever registered a timestamp callback, so no activity session of the
 * job's (Kineto registers one at every session) was ever configured. */
static bool clock_is_default(void)
{
	int64_t d = cupti_now() - agent_now(CLOCK_REALTIME);

	return d > -5000000000LL && d < 5000000000LL;
}

/* --- the buffers --- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *busy = busy_enter();
	uint32_t m = atomic_load(&pool_free);
	int i = 0;

	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	do {
		if (!m) {
			/* CUPTI drops records and counts them (cuptiActivityGetNumDroppedRecords). */
			atomic_fetch_add(&n_declined, 1);
			busy_leave(busy);
			return;
		}
		i = __builtin_ctz(m);
	} while (!atomic_compare_exchange_weak(&pool_free, &m, m & ~(1u << i)));
	*buffer = pool + (size_t)i * POOL_BUF_SIZE;
	*size = POOL_BUF_SIZE;
	busy_leave(busy);
}

static void emit_kernel(const CUpti_ActivityKernel10 *k)
{
	struct ptbpf_agent_kernel r = {
		.start = to_mono(k->start), .end = to_mono(k->end), .graph_node_id = k->graphNodeId,
		.name = k->name, .correlation_id = k->correlationId,
		.device_id = k->deviceId, .context_id = k->contextId, .stream_id = k->streamId,
		.grid_x = k->gridX, .grid_y = k->gridY, .grid_z = k->gridZ,
		.block_x = k->blockX, .block_y = k->blockY, .block_z = k->blockZ,
		.static_shared_memory = k->staticSharedMemory,
		.dynamic_shared_memory = k->dynamicSharedMemory,
		.graph_id = k->graphId, .registers_per_thread = k->registersPerThread,
		.launch_type = k->launchType, .is_device_launched = k->isDeviceLaunched,
		.cluster_x = k->clusterX, .cluster_y = k->clusterY, .cluster_z = k->clusterZ,
	};

	ptbpf_agent_kernel(&r);
	atomic_fetch_add_explicit(&n_kernels, 1, memory_order_relaxed);
}

static void emit_memcpy(const CUpti_ActivityMemcpy6 *c)
{
	struct ptbpf_agent_memcpy r = {
		.start = to_mono(c->start), .end = to_mono(c->end), .bytes = c->bytes,
		.graph_node_id = c->graphNodeId, .copy_count = c->copyCount,
		.correlation_id = c->correlationId, .device_id = c->deviceId,
		.context_id = c->contextId, .stream_id = c->streamId, .graph_id = c->graphId,
		.copy_kind = c->copyKind, .src_kind = c->srcKind, .dst_kind = c->dstKind,
		.flags = c->flags,
	};

	ptbpf_agent_memcpy(&r);
	atomic_fetch_add_explicit(&n_memcpys, 1, memory_order_relaxed);
}

static void emit_memset(const CUpti_ActivityMemset4 *s)
{
	struct ptbpf_agent_memset r = {
		.start = to_mono(s->start), .end = to_mono(s->end), .bytes = s->bytes,
		.graph_node_id = s->graphNodeId, .value = s->value,
		.correlation_id = s->correlationId, .device_id = s->deviceId,
		.context_id = s->contextId, .stream_id = s->streamId,
		.memory_kind = s->memoryKind, .flags = s->flags,
	};

	ptbpf_agent_memset(&r);
	atomic_fetch_add_explicit(&n_memsets, 1, memory_order_relaxed);
}

/* Our buffer's records to ptbpf; whether it held kinds we never enabled. */
static bool emit_records(uint8_t *buffer, size_t valid)
{
	CUpti_Activity *rec = NULL;
	bool foreign = false;

	while (valid && p_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
		switch (rec->kind) {
		case CUPTI_ACTIVITY_KIND_KERNEL:
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
			emit_kernel((const CUpti_ActivityKernel10 *)rec);
			break;
		case CUPTI_ACTIVITY_KIND_MEMCPY:
			emit_memcpy((const CUpti_ActivityMemcpy6 *)rec);
			break;
		case CUPTI_ACTIVITY_KIND_MEMSET:
			emit_memset((const CUpti_ActivityMemset4 *)rec);
			break;
		default:
			foreign = true;
			break;
		}
	}
	return foreign;
}

/* A copy of our buffer's records into one of the job's, handed to it: its
 * records were the job's session's as well. */
static void copy_to_job_buffer(CUcontext ctx, uint32_t stream, const uint8_t *buffer,
			       size_t valid)
{
	uint8_t *theirs = NULL;
	size_t size = 0, max = 0;

	if (!job_req || !job_done) {
		atomic_fetch_add(&n_lost_to_job, 1);
		return;
	}
	job_req(&theirs, &size, &max);
	if (!theirs || size < valid) {
		atomic_fetch_add(&n_lost_to_job, 1);
		return;
	}
	memcpy(theirs, buffer, valid);
	job_done(ctx, stream, theirs, size, valid);
	atomic_fetch_add(&n_to_job, 1);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
				      size_t size, size_t valid)
{
	uint8_t *busy = busy_enter();
	size_t dropped = 0;

	if (pool && buffer >= pool && buffer < pool + (size_t)POOL_BUFS * POOL_BUF_SIZE) {
		if (emit_records(buffer, valid))
			atomic_store(&foreign_seen, true);
		if (valid && (atomic_load(&foreign_seen) || atomic_load(&copy_to_job)))
			copy_to_job_buffer(ctx, stream, buffer, valid);
		if (p_num_dropped(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
			ptbpf_agent_dropped(dropped, atomic_fetch_add(&n_dropped, dropped) + dropped);
		atomic_fetch_or(&pool_free, 1u << ((buffer - pool) / POOL_BUF_SIZE));
	} else if (job_done) {
		job_done(ctx, stream, buffer, size, valid); /* the job's own */
	} else {
		atomic_fetch_add(&n_foreign, 1); /* another client's: not ours to free */
	}
	busy_leave(busy);
}

/* --- CUDA calls (CUPTI's callback subscriber) --- */

/*
 * On the launching thread, at API entry. A runtime call and the driver call
 * it makes share one correlation id; the driver one is skipped then, so
 * each launch costs one probe hit.
 */
static __thread uint32_t runtime_correlation __attribute__((tls_model("initial-exec")));

static void CUPTIAPI api_callback(void *userdata, CUpti_CallbackDomain domain,
				  CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	uint8_t *busy;

	if (agent_own_cuda_call)
		return;
	busy = busy_enter();
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		runtime_correlation = cb->callbackSite == CUPTI_API_ENTER ? cb->correlationId : 0;
	} else if (domain != CUPTI_CB_DOMAIN_DRIVER_API ||
		   cb->correlationId == runtime_correlation) {
		busy_leave(busy);
		return;
	}
	/* Recording ops: the call becomes a slice in the thread's op ring,
	 * no probe hit at all. Else the correlation goes to ptbpf's uprobe,
	 * which finds the call in its own (libcuda uprobe) slice. */
	if (!(api_to_rings && agent_ops_api(cb->callbackSite == CUPTI_API_ENTER, domain, cbid,
					    cb->correlationId, cb->functionName)) &&
	    cb->callbackSite == CUPTI_API_ENTER)
		ptbpf_agent_correlate(cb->correlationId, cbid, domain);
	busy_leave(busy);
}

/* Subscribes unless another tool holds CUPTI's one subscriber (then says
 * whom, and CUDA calls come from ptbpf's uprobes). */
static void subscribe_locked(void)
{
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
	CUpti_SubscriberParams params = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE, .subscriberName = "ptbpf",
		.oldSubscriberName = other, .oldSubscriberSize = sizeof(other),
	};
	void *cb = stub_entry(STUB_CUPTI_API, (void *)api_callback);
	CUptiResult res;
	unsigned ok = 0;

	if (subscriber)
		return;
	res = p_subscribe_v2 ? p_subscribe_v2(&subscriber, (CUpti_CallbackFunc)cb, NULL, &params) :
			       p_subscribe(&subscriber, (CUpti_CallbackFunc)cb, NULL);
	if (res != CUPTI_SUCCESS) {
		subscriber = NULL;
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0, "no CUDA call callbacks: cuptiSubscribe: "
			     "%s%s%s", cupti_error(res), other[0] ? ": held by " : "", other);
		return;
	}
	for (size_t i = 0; i < sizeof(launch_cbids) / sizeof(launch_cbids[0]); i++)
		ok += p_enable_callback(1, subscriber, launch_cbids[i].domain,
					launch_cbids[i].cbid) == CUPTI_SUCCESS;
	if (!ok)
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0,
			     "cuptiEnableCallback failed for every launch API");
	if (api_to_rings && p_enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) ==
	    CUPTI_SUCCESS)
		for (size_t i = 0; i < sizeof(runtime_left_out) / sizeof(runtime_left_out[0]); i++)
			p_enable_callback(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
					  runtime_left_out[i]);
}

static void unsubscribe_locked(void)
{
	if (subscriber)
		p_unsubscribe(subscriber);
	subscriber = NULL;
}

/* --- the activity API --- */

static void disable_ours_locked(void)
{
	for (size_t i = 0; i < sizeof(our_kinds) / sizeof(our_kinds[0]); i++)
		if (ours_on & KIND_BIT(our_kinds[i]))
			p_disable(our_kinds[i]);
	ours_on = 0;
}

/* Takes the activity API: our buffer callbacks, then our kinds (the clock
 * stays whoever's it is). */
static bool take_locked(bool resumed)
{
	CUptiResult res;

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
	atomic_store(&owner, OWN_US);
	next_flush = agent_now(CLOCK_MONOTONIC) + FLUSH_NS;
	if (resumed)
		agent_report(PTBPF_AGENT_GPU_RESUMED, (uint64_t)agent_now(CLOCK_MONOTONIC),
			     "GPU timeline back: the job's CUPTI session is over");
	else
		agent_report(PTBPF_AGENT_ACTIVE, 0, "active: GPU timeline on (kinds 0x%llx), CUDA "
			     "call callbacks %s, %u x %u KiB buffers, CUPTI clock %s",
			     (unsigned long long)ours_on, subscriber ? "on" : "off", POOL_BUFS,
			     POOL_BUF_SIZE >> 10, cal.k > 0.5 && cal.k < 2 ? "in ns" : "in ticks");
	return true;
}

/*
 * The job is starting (starting) or already running (!starting) a CUPTI
 * session of its own: the agent steps out of its way. Starting: our kinds
 * off and our buffers flushed back to us, before the job's call goes on.
 * Running (a session the agent could not see at attach): its kinds stay,
 * our buffers go to the job as copies, and its buffer callbacks are put
 * back where the agent's were.
 */
static void yield_locked(bool starting, const char *why)
{
	if (atomic_load(&owner) != OWN_US)
		return;
	if (starting) {
		disable_ours_locked();
	} else {
		atomic_store(&copy_to_job, true);
		ours_on = 0;
	}
	p_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	atomic_store(&copy_to_job, false);
	if (!starting && job_req && job_done)
		p_register_callbacks(job_req, job_done);
	atomic_store(&owner, OWN_JOB);
	job_last_seen = job_flushed_at = 0;
	agent_report(PTBPF_AGENT_GPU_PAUSED, (uint64_t)agent_now(CLOCK_MONOTONIC),
		     "GPU timeline paused: the job's own CUPTI user (torch.profiler/Kineto) %s "
		     "(%s); it keeps all its data", starting ? "starts a session" :
		     "has a session running", why);
}

/* --- the job's calls into libcupti (GOT hooks) --- */

/* Each hook: note the call, get out of the way, then make it. */
#define JOB_CALL(starting, why, call)                              \
	({                                                         \
		uint8_t *busy__ = busy_enter();                    \
		CUptiResult r__;                                   \
                                                                   \
		atomic_fetch_add(&job_calls, 1);                   \
		if (atomic_load(&owner) == OWN_US) {               \
			pthread_mutex_lock(&lock);                 \
			yield_locked(starting, why);               \
			pthread_mutex_unlock(&lock);               \
		}                                                  \
		r__ = call;                                        \
		busy_leave(busy__);                                \
		r__;                                               \
	})

static CUptiResult CUPTIAPI job_register_callbacks(CUpti_BuffersCallbackRequestFunc req,
						   CUpti_BuffersCallbackCompleteFunc done)
{
	pthread_mutex_lock(&lock);
	job_req = req;
	job_done = done;
	job_registered = true;
	pthread_mutex_unlock(&lock);
	return JOB_CALL(true, "cuptiActivityRegisterCallbacks", p_register_callbacks(req, done));
}

static CUptiResult CUPTIAPI job_register_timestamp(CUpti_TimestampCallbackFunc f)
{
	return JOB_CALL(true, "cuptiActivityRegisterTimestampCallback", p_register_timestamp(f));
}

static CUptiResult CUPTIAPI job_enable(CUpti_ActivityKind kind)
{
	CUptiResult r = JOB_CALL(true, "cuptiActivityEnable", p_enable(kind));

	if (r == CUPTI_SUCCESS) {
		pthread_mutex_lock(&lock);
		job_kinds |= KIND_BIT(kind);
		pthread_mutex_unlock(&lock);
	}
	return r;
}

static CUptiResult CUPTIAPI job_disable(CUpti_ActivityKind kind)
{
	CUptiResult r = JOB_CALL(false, "cuptiActivityDisable", p_disable(kind));

	pthread_mutex_lock(&lock);
	job_kinds &= ~KIND_BIT(kind);
	pthread_mutex_unlock(&lock);
	return r;
}

static CUptiResult CUPTIAPI job_set_attribute(CUpti_ActivityAttribute attr, size_t *size,
					      void *value)
{
	return JOB_CALL(true, "cuptiActivitySetAttribute", p_set_attribute(attr, size, value));
}

static CUptiResult CUPTIAPI job_flush_all(uint32_t flag)
{
	CUptiResult r = JOB_CALL(false, "cuptiActivityFlushAll", p_flush_all(flag));

	if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) {
		pthread_mutex_lock(&lock);
		if (!job_kinds)
			job_flushed_at = agent_now(CLOCK_MONOTONIC);
		pthread_mutex_unlock(&lock);
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
	pthread_mutex_lock(&lock);
	subscriber = NULL; /* finalize ends every subscription */
	pthread_mutex_unlock(&lock);
	return JOB_CALL(true, "cuptiFinalize", p_finalize());
}

/* The job subscribes (Kineto, at its first session): it gets CUPTI's one
 * subscriber, or it would stay CPU-only for good. */
static void give_up_subscriber(void)
{
	uint8_t *busy = busy_enter();

	pthread_mutex_lock(&lock);
	if (subscriber) {
		unsubscribe_locked();
		agent_report(PTBPF_AGENT_NO_CORRELATION, 0, "the job subscribed to CUPTI (torch.profiler's "
			     "Kineto): CUPTI's one callback subscriber is its now; CUDA calls come "
			     "from ptbpf's uprobes, without launch->kernel flows");
	}
	pthread_mutex_unlock(&lock);
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

static void install_hooks_locked(void)
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
	next_hook = agent_now(CLOCK_MONOTONIC) + REHOOK_NS;
}

/* --- on, off, and the agent thread's tick --- */

bool cupti_activate(bool api_calls, const struct ptbpf_agent_ctl *ctl)
{
	bool clock_default;

	if (cupti_load() || pool_init())
		return false;
	pthread_mutex_lock(&lock);
	atomic_store(&n_kernels, 0);
	atomic_store(&n_memcpys, 0);
	atomic_store(&n_memsets, 0);
	atomic_store(&n_dropped, 0);
	atomic_store(&n_declined, 0);
	atomic_store(&n_foreign, 0);
	atomic_store(&n_to_job, 0);
	atomic_store(&n_lost_to_job, 0);
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
	subscribe_locked();
	on = true;
	job_calls_seen = atomic_load(&job_calls);
	job_last_seen = job_flushed_at = 0;
	if (clock_default) {
		if (!take_locked(false))
			on = false;
	} else {
		atomic_store(&owner, OWN_NONE);
		observe_until = agent_now(CLOCK_MONOTONIC) + OBSERVE_NS;
	}
	pthread_mutex_unlock(&lock);
	return on;
}

void cupti_deactivate(void)
{
	pthread_mutex_lock(&lock);
	if (!on) {
		pthread_mutex_unlock(&lock);
		return;
	}
	hooks_remove();
	if (atomic_load(&owner) == OWN_US) {
		disable_ours_locked();
		p_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		/* The job's buffer callbacks back where they were. */
		if (job_registered && job_req && job_done)
			p_register_callbacks(job_req, job_done);
	}
	unsubscribe_locked();
	atomic_store(&owner, OWN_NONE);
	on = false;
	pthread_mutex_unlock(&lock);
	agent_report(PTBPF_AGENT_DORMANT, 0,
		     "GPU timeline off: %llu kernels, %llu copies, %llu sets, %llu dropped by CUPTI, "
		     "%llu buffer requests declined, %llu foreign buffers, %llu buffers copied to "
		     "the job's profiler, %llu not",
		     (unsigned long long)n_kernels, (unsigned long long)n_memcpys,
		     (unsigned long long)n_memsets, (unsigned long long)n_dropped,
		     (unsigned long long)n_declined, (unsigned long long)n_foreign,
		     (unsigned long long)n_to_job, (unsigned long long)n_lost_to_job);
}

void cupti_tick(int64_t now)
{
	uint64_t calls = atomic_load(&job_calls);
	int o;

	pthread_mutex_lock(&lock);
	if (!on) {
		pthread_mutex_unlock(&lock);
		return;
	}
	if (calls != job_calls_seen) {
		job_calls_seen = calls;
		job_last_seen = now;
	}
	o = atomic_load(&owner);
	if (o == OWN_NONE && now >= observe_until) {
		/* At attach with a clock someone registered: a job session
		 * seen in the first 0.3 s keeps the API until it ends. */
		if (job_last_seen) {
			atomic_store(&owner, OWN_JOB);
			agent_report(PTBPF_AGENT_GPU_PAUSED, (uint64_t)now, "GPU timeline waits: the "
				     "job's own CUPTI user (torch.profiler/Kineto) has a session "
				     "running; it keeps all its data");
		} else if (!take_locked(false)) {
			on = false;
		}
	} else if (o == OWN_US && atomic_load(&foreign_seen)) {
		yield_locked(false, "its kinds in the agent's buffers");
	} else if (o == OWN_US && now >= next_flush) {
		/* Deliver what the GPU finished, at most 200 ms late: a
		 * forced flush hands over partly filled buffers too. */
		calibrate();
		p_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		next_flush = now + FLUSH_NS;
	} else if (o == OWN_JOB && !job_kinds && job_flushed_at &&
		   now - (job_last_seen > job_flushed_at ? job_last_seen : job_flushed_at) >= QUIET_NS) {
		take_locked(true);
	}
	if (on && now >= next_hook)
		install_hooks_locked();
	pthread_mutex_unlock(&lock);
	if (!props_sent)
		props_sent = cuda_props_send(cupti_version());
}

void cupti_unload(void)
{
	/* Every buffer back (a forced flush at deactivation returns them):
	 * else CUPTI may still write one, and the pool stays. */
	if (pool && atomic_load(&pool_free) == (1u << POOL_BUFS) - 1) {
		free(pool);
		pool = NULL;
	}
}
