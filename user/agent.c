// SPDX-License-Identifier: BSD-2-Clause
/*
 * libptbpf-agent.so: the in-process half of ptbpf's GPU timeline. Loaded
 * into a CUDA PyTorch process (CUDA_INJECTION64_PATH, LD_PRELOAD, or a
 * ptrace-driven dlopen), it stays dormant until ptbpf creates
 * /dev/shm/ptbpf-agent-<pid>.on, then collects CUPTI's kernel, copy and set
 * records and hands each one to an out-of-line ptbpf_agent_* function that
 * ptbpf's uprobes read (include/ptbpf_agent.h). It is not part of the
 * ptbpf binary and has no other output channel.
 *
 * libcupti is not linked: torch has already loaded it, so activation binds
 * to that copy by soname, and the library builds (and loads) without CUDA.
 * Everything is bounded: one thread, a fixed pool of activity buffers
 * allocated at the first activation, no allocation afterwards.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "agent_ops.h"
#include "ptbpf_agent.h"
#include "ptbpf_events.h"

#define EXPORT __attribute__((visibility("default")))

/*
 * The uprobe entry points. noinline/noipa/used keep each one a real,
 * distinct function (noipa also stops identical-code folding, which would
 * turn one into a jump to another and give two symbols one address). The
 * memory clobber makes the caller materialize the record before the call.
 * Each body starts with a one-byte `nop` (the build uses
 * -fcf-protection=none, so there is no endbr64 before it): x86 uprobes
 * emulate nop in the kernel instead of single-stepping it out of line, so
 * a probe hit costs one trap, not two. tests/test_agent_build.py checks
 * the first instruction.
 */
#if defined(__has_attribute) && __has_attribute(noipa)
#define PROBE_ENTRY EXPORT __attribute__((noinline, noipa, used))
#else
#define PROBE_ENTRY EXPORT __attribute__((noinline, used))
#endif

PROBE_ENTRY void ptbpf_agent_correlate(uint32_t correlation_id, uint32_t cbid, uint32_t domain)
{
	asm volatile("nop" ::: "memory");
}

/* --py-stacks: the op or CUDA call recorded at ts on this thread wants its
 * Python stack, which ptbpf's BPF program reads from here. */
PROBE_ENTRY void ptbpf_agent_pystack(uint64_t ts)
{
	asm volatile("nop" ::: "memory");
}

PROBE_ENTRY void ptbpf_agent_kernel(const struct ptbpf_agent_kernel *r)
{
	asm volatile("nop" ::: "memory");
}

PROBE_ENTRY void ptbpf_agent_memcpy(const struct ptbpf_agent_memcpy *r)
{
	asm volatile("nop" ::: "memory");
}

PROBE_ENTRY void ptbpf_agent_memset(const struct ptbpf_agent_memset *r)
{
	asm volatile("nop" ::: "memory");
}

PROBE_ENTRY void ptbpf_agent_dropped(uint64_t since_last, uint64_t total)
{
	asm volatile("nop" ::: "memory");
}

PROBE_ENTRY void ptbpf_agent_status(int code, const char *msg, uint64_t value)
{
	asm volatile("nop" ::: "memory");
}

/* ptbpf copies a fixed AGENT_RAW_LEN bytes from each record pointer. */
_Static_assert(sizeof(struct ptbpf_agent_kernel) == 104, "kernel record layout");
_Static_assert(sizeof(struct ptbpf_agent_memcpy) == 64, "memcpy record layout");
_Static_assert(sizeof(struct ptbpf_agent_memset) == 56, "memset record layout");
_Static_assert(sizeof(struct ptbpf_agent_kernel) <= AGENT_RAW_LEN, "kernel record too long");

#define POLL_NS       200000000L /* activation-file poll and flush period */
#define RETRY_NS      (10 * 1000000000LL) /* between failed activations */
#define POOL_BUFS     8
#define POOL_BUF_SIZE (1u << 20)

/* The CUPTI functions used, resolved at activation. */
static void *cupti;
static __typeof__(&cuptiGetResultString) p_result_string;
static __typeof__(&cuptiSubscribe) p_subscribe;
static __typeof__(&cuptiUnsubscribe) p_unsubscribe;
static __typeof__(&cuptiEnableCallback) p_enable_callback;
static __typeof__(&cuptiActivityRegisterTimestampCallback) p_register_timestamp;
static __typeof__(&cuptiActivityRegisterCallbacks) p_register_callbacks;
static __typeof__(&cuptiActivityEnable) p_enable;
static __typeof__(&cuptiActivityDisable) p_disable;
static __typeof__(&cuptiActivityFlushAll) p_flush_all;
static __typeof__(&cuptiActivityGetNextRecord) p_next_record;
static __typeof__(&cuptiActivityGetNumDroppedRecords) p_num_dropped;

static const struct {
	const char *name;
	void **slot;
} cupti_syms[] = {
	{ "cuptiGetResultString", (void **)&p_result_string },
	{ "cuptiSubscribe", (void **)&p_subscribe },
	{ "cuptiUnsubscribe", (void **)&p_unsubscribe },
	{ "cuptiEnableCallback", (void **)&p_enable_callback },
	{ "cuptiActivityRegisterTimestampCallback", (void **)&p_register_timestamp },
	{ "cuptiActivityRegisterCallbacks", (void **)&p_register_callbacks },
	{ "cuptiActivityEnable", (void **)&p_enable },
	{ "cuptiActivityDisable", (void **)&p_disable },
	{ "cuptiActivityFlushAll", (void **)&p_flush_all },
	{ "cuptiActivityGetNextRecord", (void **)&p_next_record },
	{ "cuptiActivityGetNumDroppedRecords", (void **)&p_num_dropped },
};

/* Activity kinds turned on; the first is required. */
static const CUpti_ActivityKind activity_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET,
};

/* API calls whose entry is reported on the calling thread. */
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

/* With the op recorder on, these calls too are recorded (as slices on
 * the calling thread, in its op ring): the syncs, copies, sets and
 * allocations a reader of a trace looks for. */
static const CUpti_CallbackId sync_copy_alloc_cbids[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
	CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
	CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
	CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
	CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
};

/* State, changed only under state_lock (by the agent thread or by the
 * exported activate/deactivate). */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool active, active_by_file, gpu_on, ops_on, process_exiting;
static CUpti_SubscriberHandle subscriber;
static unsigned enabled_kinds; /* bit i: activity_kinds[i] is on */

/* The buffer pool: bit i of pool_free set = buffer i is ours to hand out.
 * malloc'd, so that a buffer CUPTI gives to another client's completion
 * callback (Kineto re-registering its own) may be free()d by it; such a
 * buffer is simply never returned to us. */
static uint8_t *pool;
static _Atomic uint32_t pool_free;

/* Counters of the current activation; read for the deactivation message. */
static _Atomic uint64_t n_kernels, n_memcpys, n_memsets, n_dropped, n_declined, n_foreign;

static bool log_to_stderr;
static char on_path[64];

/* Every status goes to ptbpf's uprobe; with PTBPF_AGENT_LOG=1 also to stderr. */
static void report_value(int code, uint64_t value, const char *fmt, va_list ap)
{
	char msg[256];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	ptbpf_agent_status(code, msg, value);
	if (log_to_stderr)
		fprintf(stderr, "ptbpf-agent[%d]: %s (%d)\n", (int)getpid(), msg, code);
}

__attribute__((format(printf, 2, 3))) static void report(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_value(code, 0, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 3, 4))) static void report_with(int code, uint64_t value,
							      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_value(code, value, fmt, ap);
	va_end(ap);
}

static const char *cupti_error(CUptiResult res)
{
	const char *s = NULL;

	if (!p_result_string || p_result_string(res, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

static int64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CUPTI's clock: bpf_ktime_get_ns()'s, so ptbpf needs no translation. */
static uint64_t CUPTIAPI monotonic_timestamp(void)
{
	return (uint64_t)now_ns(CLOCK_MONOTONIC);
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
		report(PTBPF_AGENT_ERR_LOAD, "libcupti.so.13: %s", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof(cupti_syms) / sizeof(cupti_syms[0]); i++) {
		*cupti_syms[i].slot = dlsym(h, cupti_syms[i].name);
		if (!*cupti_syms[i].slot) {
			report(PTBPF_AGENT_ERR_SYMBOL, "libcupti.so.13: no %s", cupti_syms[i].name);
			return -1;
		}
	}
	cupti = h;
	return 0;
}

static int pool_init(void)
{
	if (pool)
		return 0;
	/* CUPTI wants 8-byte aligned buffers; malloc gives 16. */
	pool = malloc((size_t)POOL_BUFS * POOL_BUF_SIZE);
	if (!pool) {
		report(PTBPF_AGENT_ERR_MEMORY, "cannot allocate %u activity buffers", POOL_BUFS);
		return -1;
	}
	atomic_store(&pool_free, (1u << POOL_BUFS) - 1);
	return 0;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint32_t m = atomic_load(&pool_free);
	int i;

	*max_records = 0;
	do {
		if (!m) {
			/* CUPTI drops records and counts them (cuptiActivityGetNumDroppedRecords). */
			atomic_fetch_add(&n_declined, 1);
			*buffer = NULL;
			*size = 0;
			return;
		}
		i = __builtin_ctz(m);
	} while (!atomic_compare_exchange_weak(&pool_free, &m, m & ~(1u << i)));
	*buffer = pool + (size_t)i * POOL_BUF_SIZE;
	*size = POOL_BUF_SIZE;
}

static void emit_kernel(const CUpti_ActivityKernel10 *k)
{
	struct ptbpf_agent_kernel r = {
		.start = k->start, .end = k->end, .graph_node_id = k->graphNodeId,
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
		.start = c->start, .end = c->end, .bytes = c->bytes,
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
		.start = s->start, .end = s->end, .bytes = s->bytes,
		.graph_node_id = s->graphNodeId, .value = s->value,
		.correlation_id = s->correlationId, .device_id = s->deviceId,
		.context_id = s->contextId, .stream_id = s->streamId,
		.memory_kind = s->memoryKind, .flags = s->flags,
	};

	ptbpf_agent_memset(&r);
	atomic_fetch_add_explicit(&n_memsets, 1, memory_order_relaxed);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
				      size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;

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
			break;
		}
	}
	if (p_num_dropped(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
		ptbpf_agent_dropped(dropped, atomic_fetch_add(&n_dropped, dropped) + dropped);
	if (pool && buffer >= pool && buffer < pool + (size_t)POOL_BUFS * POOL_BUF_SIZE)
		atomic_fetch_or(&pool_free, 1u << ((buffer - pool) / POOL_BUF_SIZE));
	else
		atomic_fetch_add(&n_foreign, 1); /* another client's: not ours to free */
}

/*
 * On the launching thread, at API entry. A runtime call and the driver call
 * it makes share one correlation id; the driver one is skipped then, so
 * each launch costs one probe hit. Global-dynamic TLS: its block is made
 * once per thread by the loader, and works in a dlopen'd library.
 */
static __thread uint32_t runtime_correlation;

static void CUPTIAPI api_callback(void *userdata, CUpti_CallbackDomain domain,
				  CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;

	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
		runtime_correlation = cb->callbackSite == CUPTI_API_ENTER ? cb->correlationId : 0;
	} else if (domain != CUPTI_CB_DOMAIN_DRIVER_API ||
		   cb->correlationId == runtime_correlation) {
		return;
	}
	/* Recording ops: the call becomes a slice in the thread's op ring,
	 * no probe hit at all. Else the correlation goes to ptbpf's uprobe,
	 * which finds the call in its own (libcuda uprobe) slice. */
	if (agent_ops_api(cb->callbackSite == CUPTI_API_ENTER, domain, cb->correlationId,
			  cb->functionName))
		return;
	if (cb->callbackSite == CUPTI_API_ENTER)
		ptbpf_agent_correlate(cb->correlationId, cbid, domain);
}

/* Returns false when another subscriber owns CUPTI: then the agent steps
 * aside entirely, since taking the process-global buffer callbacks would
 * steal that client's records. */
static bool subscribe_launches(bool with_ops)
{
	CUptiResult res = p_subscribe(&subscriber, api_callback, NULL);
	unsigned ok = 0;
	size_t i;

	if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		subscriber = NULL;
		report(PTBPF_AGENT_STEPPED_ASIDE, "cuptiSubscribe: %s", cupti_error(res));
		return false;
	}
	if (res != CUPTI_SUCCESS) {
		subscriber = NULL;
		report(PTBPF_AGENT_NO_CORRELATION, "cuptiSubscribe: %s", cupti_error(res));
		return true;
	}
	for (i = 0; i < sizeof(launch_cbids) / sizeof(launch_cbids[0]); i++)
		ok += p_enable_callback(1, subscriber, launch_cbids[i].domain,
					launch_cbids[i].cbid) == CUPTI_SUCCESS;
	if (!ok)
		report(PTBPF_AGENT_NO_CORRELATION, "cuptiEnableCallback failed for every launch API");
	for (i = 0; with_ops && i < sizeof(sync_copy_alloc_cbids) / sizeof(sync_copy_alloc_cbids[0]);
	     i++)
		p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, sync_copy_alloc_cbids[i]);
	return true;
}

static void unsubscribe(void)
{
	if (subscriber)
		p_unsubscribe(subscriber);
	subscriber = NULL;
}

static void disable_kinds(void)
{
	size_t i;

	for (i = 0; i < sizeof(activity_kinds) / sizeof(activity_kinds[0]); i++)
		if (enabled_kinds & (1u << i))
			p_disable(activity_kinds[i]);
	enabled_kinds = 0;
}

/* Timestamp callback, buffer callbacks, then the kinds (CUPTI wants the
 * clock set before any kind is enabled). */
static int enable_activities(void)
{
	CUptiResult res;
	size_t i;

	if (p_register_timestamp(monotonic_timestamp) != CUPTI_SUCCESS)
		report(PTBPF_AGENT_CLOCK_DEFAULT, "cuptiActivityRegisterTimestampCallback refused");
	res = p_register_callbacks(buffer_requested, buffer_completed);
	if (res != CUPTI_SUCCESS) {
		report(PTBPF_AGENT_ERR_CUPTI, "cuptiActivityRegisterCallbacks: %s", cupti_error(res));
		return -1;
	}
	for (i = 0; i < sizeof(activity_kinds) / sizeof(activity_kinds[0]); i++) {
		res = p_enable(activity_kinds[i]);
		if (res == CUPTI_SUCCESS) {
			enabled_kinds |= 1u << i;
		} else if (i == 0) {
			report(PTBPF_AGENT_ERR_CUPTI, "cuptiActivityEnable(CONCURRENT_KERNEL): %s",
			       cupti_error(res));
			return -1;
		}
	}
	return 0;
}

/* CUPTI on: false if it could not be (the reason is reported). */
static bool activate_gpu(bool with_ops)
{
	if (cupti_load() || pool_init())
		return false;
	atomic_store(&n_kernels, 0);
	atomic_store(&n_memcpys, 0);
	atomic_store(&n_memsets, 0);
	atomic_store(&n_dropped, 0);
	atomic_store(&n_declined, 0);
	atomic_store(&n_foreign, 0);
	if (!subscribe_launches(with_ops))
		return false;
	if (enable_activities()) {
		disable_kinds();
		unsubscribe();
		return false;
	}
	report(PTBPF_AGENT_ACTIVE, "active: kinds 0x%x, launch correlation %s, %u x %u KiB buffers",
	       enabled_kinds, subscriber ? "on" : "off", POOL_BUFS, POOL_BUF_SIZE >> 10);
	return true;
}

static bool cuda_loaded(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (h)
		dlclose(h);
	return h != NULL;
}

static const char *file_words(char *buf, size_t len);

/* The GPU timeline if the process uses CUDA, then the ops if asked for:
 * their status comes last, and ptbpf waits for it. */
static void activate_locked(bool by_file, bool want_ops)
{
	const struct ptbpf_ops_desc *d;
	char why[200];

	if (active)
		return;
	if (cuda_loaded()) {
		gpu_on = activate_gpu(want_ops);
	} else {
		gpu_on = false;
		report(PTBPF_AGENT_NO_CUDA, "no libcuda.so.1 in the process: no GPU timeline");
	}
	ops_on = false;
	if (want_ops) {
		char words[128];

		const char *st;
		unsigned every = 0;

		file_words(words, sizeof(words));
		st = strstr(words, OPS_WORD_STACKS);
		if (st && sscanf(st + strlen(OPS_WORD_STACKS), "%u", &every) != 1)
			every = 0;
		d = agent_ops_start(why, sizeof(why), strstr(words, OPS_WORD_SHAPES) != NULL,
				    every);
		if (d)
			report_with(PTBPF_AGENT_OPS_ON, (uintptr_t)d,
				    "ops: RecordFunction callbacks on, %u rings of %u KiB",
				    d->nslots, (unsigned)(d->slot_bytes >> 10));
		else
			report(PTBPF_AGENT_ERR_OPS, "ops: %s", why);
		ops_on = d != NULL;
	}
	active = gpu_on || ops_on;
	active_by_file = by_file;
}

static void deactivate_locked(const char *why)
{
	if (!active)
		return;
	if (ops_on)
		agent_ops_stop();
	if (gpu_on) {
		disable_kinds();
		p_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		unsubscribe();
	}
	active = gpu_on = ops_on = false;
	report(PTBPF_AGENT_DORMANT,
	       "dormant (%s): %llu kernels, %llu copies, %llu sets, %llu dropped, "
	       "%llu buffer requests declined, %llu foreign buffers",
	       why, (unsigned long long)n_kernels, (unsigned long long)n_memcpys,
	       (unsigned long long)n_memsets, (unsigned long long)n_dropped,
	       (unsigned long long)n_declined, (unsigned long long)n_foreign);
}

EXPORT void ptbpf_agent_activate(void)
{
	pthread_mutex_lock(&state_lock);
	activate_locked(false, false);
	pthread_mutex_unlock(&state_lock);
}

EXPORT void ptbpf_agent_deactivate(void)
{
	pthread_mutex_lock(&state_lock);
	deactivate_locked("requested");
	pthread_mutex_unlock(&state_lock);
}

/* Fresh = present and touched within PTBPF_AGENT_STALE_S (ptbpf touches it
 * every second, so a dead ptbpf retracts the agent). */
static bool on_file_fresh(bool *present, uint64_t *ino)
{
	struct stat st;
	int64_t age;

	*present = stat(on_path, &st) == 0;
	if (!*present)
		return false;
	*ino = st.st_ino;
	age = now_ns(CLOCK_REALTIME) - (st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
	return age < PTBPF_AGENT_STALE_S * 1000000000LL;
}

/* The file holds ptbpf's pid, then "ops" if it wants the op recorder,
 * then what else the recorder should record (OPS_WORD_*). */
static const char *file_words(char *buf, size_t len)
{
	FILE *f = fopen(on_path, "re");

	buf[0] = 0;
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = 0;
		fclose(f);
	}
	return buf;
}

static bool file_asks_ops(void)
{
	char buf[128];

	return strstr(file_words(buf, sizeof(buf)), " ops") != NULL;
}

static void *agent_thread(void *arg)
{
	const struct timespec period = { 0, POLL_NS };
	int64_t last_failure = 0;
	bool present, fresh;
	uint64_t ino = 0, active_ino = 0;

	pthread_setname_np(pthread_self(), "ptbpf-agent");
	for (;;) {
		nanosleep(&period, NULL);
		fresh = on_file_fresh(&present, &ino);
		pthread_mutex_lock(&state_lock);
		if (process_exiting) {
			pthread_mutex_unlock(&state_lock);
			continue;
		}
		if (active && active_by_file && !fresh) {
			deactivate_locked(present ? "activation file stale" : "activation file removed");
		} else if (active && active_by_file && ino != active_ino) {
			/* A new session made a new file before this one saw the
			 * last one go: start over, so that it hears how it went. */
			deactivate_locked("a new ptbpf session");
			activate_locked(true, file_asks_ops());
			active_ino = ino;
		} else if (active && gpu_on) {
			/* Deliver what the GPU finished, at most 200 ms late: a
			 * forced flush hands over partly filled buffers too,
			 * which a short job would otherwise take to its exit. */
			p_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		} else if (fresh && (!last_failure ||
				     now_ns(CLOCK_MONOTONIC) - last_failure >= RETRY_NS)) {
			activate_locked(true, file_asks_ops());
			active_ino = ino;
			last_failure = active ? 0 : now_ns(CLOCK_MONOTONIC);
		}
		if (!present)
			last_failure = 0; /* a new file retries at once */
		pthread_mutex_unlock(&state_lock);
	}
	return NULL;
}

/* Only starts the thread: the constructor may run under the loader lock
 * (dlopen) or inside cuInit (injection), where blocking is not allowed.
 * The thread takes no signals meant for the target. */
static void agent_start(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t tid;
	const char *log = getenv("PTBPF_AGENT_LOG");

	log_to_stderr = log && *log && strcmp(log, "0");
	snprintf(on_path, sizeof(on_path), PTBPF_AGENT_ON_FMT, (int)getpid());
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_create(&tid, &attr, agent_thread, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static pthread_once_t agent_once = PTHREAD_ONCE_INIT;

__attribute__((constructor)) static void agent_init(void)
{
	pthread_once(&agent_once, agent_start);
}

/* At exit (or dlclose): what the op rings hold must reach ptbpf before the
 * process's memory goes. */
__attribute__((destructor)) static void agent_fini(void)
{
	/* From here on the agent thread leaves torch and CUPTI alone: their
	 * static objects are destroyed after this (the agent was loaded last,
	 * so its destructor runs first). */
	pthread_mutex_lock(&state_lock);
	process_exiting = true;
	pthread_mutex_unlock(&state_lock);
	agent_ops_exit();
}

/* Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this
 * library; the constructor has normally run already. */
EXPORT int InitializeInjection(void)
{
	pthread_once(&agent_once, agent_start);
	return 1;
}
