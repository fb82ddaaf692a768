// SPDX-License-Identifier: BSD-2-Clause
/*
 * libptbpf-floor.so: the floors of the benchmark (tests/bench/bench.py),
 * switched on and off from inside the measured process (ctypes):
 *
 *   floor_rf_on(n)       torch's RecordFunction machinery with empty global
 *                        callbacks: n = 1 (one callback on every scope: the
 *                        floor), 4 (the agent's four, by scope) or 7 (one
 *                        on USER_SCOPE only: record_function regions)
 *   floor_rf_sampled_on(p) one callback on every scope, torch-sampled with
 *                        probability p (RecordFunctionCallback::samplingProb)
 *   floor_rf_thread(on)  torch's RecordFunction switched on or off for the
 *                        calling thread alone (at::enableRecordFunction,
 *                        thread-local): off, its ops build no
 *                        RecordFunction and reach no callback, whatever is
 *                        registered. Blocks of ops switched so, alternating,
 *                        measure a callback's cost within one phase
 *   floor_rf_work_on(w)  one callback on every scope doing the pieces of the
 *                        agent's work per op named by the bits of w (FLOOR_W_*
 *                        below), to attribute its cost piece by piece
 *   floor_cupti_cb_on(v) CUPTI's callback API on the CUDA calls the agent
 *                        subscribes to, with an empty callback: v = 0 the
 *                        agent's set (launch, copy, set in both the runtime
 *                        and driver domains, plus the runtime's syncs,
 *                        copies and allocations), 1 runtime domain only,
 *                        2 the resource callbacks on CUDA graph nodes made
 *                        or cloned alone (the agent's capture map), 3 those
 *                        and a graph made, through cuptiSubscribe_v2 as the
 *                        agent subscribes (the daemon's kept map)
 *   floor_cupti_act_on(v) CUPTI's activity API: kernels, copies and sets
 *                        (v = 1: also the runtime API's own records, the
 *                        way torch.profiler gets CUDA calls), records only
 *                        walked and counted, no periodic flush
 *   floor_cupti_cb_counts(buf, n) what the empty callbacks saw since the last
 *                        floor_cupti_cb_on: "domain callback count" lines,
 *                        so the callbacks per launch are counted, not guessed
 *   floor_perf_open()    the calling thread's cycles and instructions
 *   floor_perf_read(v)   (perf_event_open, user and kernel; v[0] cycles,
 *                        v[1] instructions), -errno where the machine has
 *                        no such counters
 *
 * and the matching *_off. Each returns 0 or a negative code and writes why
 * into floor_why(). libtorch and libcupti are found in the process by
 * dlopen/dlsym, as the agent finds them: nothing here is in a GOT that the
 * agent hooks, and no floor is ever on while ptbpf is attached.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include <cupti.h>

#include "launch_cbids.h"
#include "rf_abi.h"

#define EXPORT __attribute__((visibility("default")))

static char why[256];

EXPORT const char *floor_why(void)
{
	return why;
}

/* --- RecordFunction --- */

static uint64_t (*p_add)(struct rf_callback cb);
static void (*p_remove)(uint64_t handle);
static uint64_t handles[4];
static int nhandles;

static void **empty_start(void **ret, const void *rf)
{
	*ret = NULL;
	return ret;
}

static void empty_end(const void *rf, void *ctx)
{
}

/* The agent's work per op, piece by piece (user/agent/ops.c): at begin the
 * op's name from torch and its length; at end the thread's next sequence
 * number and std::uncaught_exceptions(); a clock read at each (vDSO
 * clock_gettime or the TSC). */
enum {
	FLOOR_W_NAME = 1,      /* RecordFunction::name(), strnlen */
	FLOOR_W_PEEK = 2,      /* at::sequence_number::peek() at end */
	FLOOR_W_UNCAUGHT = 4,  /* std::uncaught_exceptions() at end */
	FLOOR_W_CLOCK = 8,     /* clock_gettime(CLOCK_MONOTONIC) at both */
	FLOOR_W_TSC = 16,      /* rdtsc at both */
	FLOOR_W_RING = 32,     /* a record into a 4 MiB ring of the thread's at
				* both (the agent's size: writes stream through
				* more than the core's L2), 32 bytes + the name */
	FLOOR_W_RING_L2 = 64,  /* the same into a 64 KiB ring (stays in L2) */
	FLOOR_W_READER = 128,  /* and a reader thread copies what was written
				* every 20 ms, as ptbpf's loader reads the rings
				* from another CPU: the lines the writer comes
				* back to are then shared with another core */
};
#define RING_BIG (4u << 20)
#define RING_L2 (64u << 10)
static __thread uint8_t *ring;
static __thread uint32_t ring_at;
/* The first writer's ring, for the reader. */
static uint8_t *_Atomic ring_pub;
static uint32_t *_Atomic ring_at_pub;
static pthread_t reader;
static _Atomic int reading;

static void *reader_main(void *arg)
{
	static uint8_t copy[RING_BIG];
	uint32_t last = 0;

	(void)arg;
	while (atomic_load(&reading)) {
		uint8_t *r = atomic_load(&ring_pub);
		uint32_t *at = atomic_load(&ring_at_pub);

		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
		if (!r)
			continue;
		uint32_t now = __atomic_load_n(at, __ATOMIC_ACQUIRE);

		if (now >= last) {
			memcpy(copy, r + last, now - last);
		} else { /* wrapped: the rest, then the start (a ring overrun is
			  * not judged: only the cache traffic is of interest) */
			memcpy(copy, r + last, RING_BIG - last);
			memcpy(copy, r, now);
		}
		last = now;
	}
	return NULL;
}
static unsigned work;
static const char *(*p_name)(const void *rf);
static int64_t (*p_peek)(void);
static int (*p_uncaught)(void);
static volatile uint64_t sink;

static inline uint64_t work_clock(void)
{
	struct timespec ts;

	if (work & FLOOR_W_CLOCK) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
	}
	if (work & FLOOR_W_TSC)
		return __builtin_ia32_rdtsc();
	return 0;
}

/* A record as the agent writes one (user/agent/ops.c put()): a 32-byte
 * header, then the name, 8-byte aligned, wrapping at the ring's end.
 * Nothing frees the ring: without FLOOR_W_READER, what writing alone
 * costs. */
static void ring_put(uint64_t ts, const void *rf, const char *name, size_t nlen)
{
	uint32_t cap = work & FLOOR_W_RING_L2 ? RING_L2 : RING_BIG;
	uint32_t size = (uint32_t)((32 + nlen + 7) & ~(size_t)7);
	uint64_t *r;

	if (!ring) {
		ring = mmap(NULL, RING_BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
		if (ring == MAP_FAILED) {
			ring = NULL;
			return;
		}
		uint8_t *none = NULL;

		if (atomic_compare_exchange_strong(&ring_pub, &none, ring))
			atomic_store(&ring_at_pub, &ring_at);
	}
	if (ring_at + size > cap)
		ring_at = 0;
	r = (uint64_t *)(ring + ring_at);
	r[0] = ts;
	r[1] = (uintptr_t)rf;
	r[2] = (uint64_t)-1;
	r[3] = size | (uint64_t)nlen << 32;
	if (nlen)
		memcpy(r + 4, name, nlen);
	__atomic_store_n(&ring_at, ring_at + size, __ATOMIC_RELEASE);
}

static void **work_start(void **ret, const void *rf)
{
	uint64_t v = work_clock();

	if (work & FLOOR_W_NAME) {
		const char *name = p_name(rf);
		size_t n = name ? strnlen(name, 256) : 0;

		if (work & (FLOOR_W_RING | FLOOR_W_RING_L2))
			ring_put(v, rf, name, n);
		v += n;
	}
	sink = v;
	*ret = NULL;
	return ret;
}

static void work_end(const void *rf, void *ctx)
{
	uint64_t v = work_clock();

	if (work & FLOOR_W_PEEK)
		v += (uint64_t)p_peek();
	if (work & FLOOR_W_UNCAUGHT)
		v += (uint64_t)p_uncaught();
	if (work & (FLOOR_W_RING | FLOOR_W_RING_L2))
		ring_put(v, rf, NULL, 0);
	sink = v;
}

static int find_torch(struct dl_phdr_info *info, size_t size, void *ctx)
{
	const char *base = strrchr(info->dlpi_name, '/');

	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libtorch_cpu.so", 15))
		return 0;
	*(void **)ctx = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return *(void **)ctx != NULL;
}

static void add(const int *scopes, int n, double prob)
{
	struct rf_callback cb;

	memset(&cb, 0, sizeof(cb));
	cb.start = work ? work_start : empty_start;
	cb.end = work ? work_end : empty_end;
	cb.sampling_prob = prob;
	for (int i = 0; i < n; i++)
		cb.scopes[scopes[i]] = true;
	handles[nhandles++] = p_add(cb);
}

static int rf_resolve(void)
{
	void *torch = NULL;

	if (!p_add) {
		dl_iterate_phdr(find_torch, &torch);
		if (!torch) {
			snprintf(why, sizeof(why), "libtorch_cpu.so is not loaded");
			return -1;
		}
		p_add = (uint64_t (*)(struct rf_callback))dlsym(torch, RF_SYM_ADD);
		p_remove = (void (*)(uint64_t))dlsym(torch, RF_SYM_REMOVE);
		p_name = (const char *(*)(const void *))dlsym(torch, RF_SYM_NAME);
		p_peek = (int64_t (*)(void))dlsym(torch, RF_SYM_PEEK);
		p_uncaught = (int (*)(void))dlsym(torch, "_ZSt19uncaught_exceptionsv");
		if (!p_add || !p_remove || !p_name || !p_peek || !p_uncaught) {
			p_add = NULL;
			snprintf(why, sizeof(why), "libtorch_cpu.so has no RecordFunction API");
			return -1;
		}
	}
	return 0;
}

static const int all[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };

EXPORT int floor_rf_on(int n)
{
	static const int function[] = { 0 }, backward[] = { 1 }, user[] = { 7 },
			 other[] = { 2, 3, 4, 5, 6, 8, 9 };

	if (nhandles)
		return 0;
	if (rf_resolve())
		return -1;
	if (n == 4) {
		add(function, 1, 1.0);
		add(backward, 1, 1.0);
		add(user, 1, 1.0);
		add(other, 7, 1.0);
	} else if (n == 7) {
		add(user, 1, 1.0);
	} else {
		add(all, 10, 1.0);
	}
	return 0;
}

EXPORT int floor_rf_sampled_on(double p)
{
	if (nhandles)
		return 0;
	if (rf_resolve())
		return -1;
	add(all, 10, p);
	return 0;
}

EXPORT int floor_rf_work_on(unsigned w)
{
	if (nhandles)
		return 0;
	if (rf_resolve())
		return -1;
	work = w;
	add(all, 10, 1.0);
	if (w & FLOOR_W_READER) {
		atomic_store(&reading, 1);
		if (pthread_create(&reader, NULL, reader_main, NULL)) {
			atomic_store(&reading, 0);
			snprintf(why, sizeof(why), "cannot start the reader thread");
			return -1;
		}
	}
	return 0;
}

EXPORT int floor_rf_thread(int on)
{
	static void (*p_enable)(bool);
	void *torch = NULL;

	if (!p_enable) {
		dl_iterate_phdr(find_torch, &torch);
		if (torch)
			p_enable = (void (*)(bool))dlsym(torch, "_ZN2at20enableRecordFunctionEb");
		if (!p_enable) {
			snprintf(why, sizeof(why), "libtorch_cpu.so has no at::enableRecordFunction");
			return -1;
		}
	}
	p_enable(on != 0);
	return 0;
}

EXPORT void floor_rf_off(void)
{
	if (atomic_exchange(&reading, 0))
		pthread_join(reader, NULL);
	for (int i = 0; i < nhandles; i++)
		p_remove(handles[i]);
	nhandles = 0;
	work = 0;
}

/* --- CUPTI --- */

static __typeof__(&cuptiSubscribe) p_subscribe;
static __typeof__(&cuptiSubscribe_v2) p_subscribe_v2;
static __typeof__(&cuptiUnsubscribe) p_unsubscribe;
static __typeof__(&cuptiEnableCallback) p_enable_callback;
static __typeof__(&cuptiActivityRegisterCallbacks) p_register;
static __typeof__(&cuptiActivityEnable) p_enable;
static __typeof__(&cuptiActivityDisable) p_disable;
static __typeof__(&cuptiActivityFlushAll) p_flush_all;
static __typeof__(&cuptiActivityGetNextRecord) p_next_record;
static __typeof__(&cuptiGetResultString) p_result_string;
static __typeof__(&cuptiGetCallbackName) p_callback_name;

static int cupti_load(void)
{
	static const struct { const char *name; void **slot; } syms[] = {
		{ "cuptiSubscribe", (void **)&p_subscribe },
		{ "cuptiUnsubscribe", (void **)&p_unsubscribe },
		{ "cuptiEnableCallback", (void **)&p_enable_callback },
		{ "cuptiActivityRegisterCallbacks", (void **)&p_register },
		{ "cuptiActivityEnable", (void **)&p_enable },
		{ "cuptiActivityDisable", (void **)&p_disable },
		{ "cuptiActivityFlushAll", (void **)&p_flush_all },
		{ "cuptiActivityGetNextRecord", (void **)&p_next_record },
		{ "cuptiGetResultString", (void **)&p_result_string },
		{ "cuptiGetCallbackName", (void **)&p_callback_name },
	};
	void *h;

	if (p_subscribe)
		return 0;
	h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		p_subscribe_v2 = (__typeof__(p_subscribe_v2))dlsym(h, "cuptiSubscribe_v2");
	if (!h)
		h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "libcupti.so.13: %s", dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(why, sizeof(why), "libcupti.so.13: no %s", syms[i].name);
			p_subscribe = NULL;
			return -1;
		}
	}
	return 0;
}

static int cupti_failed(const char *what, CUptiResult res)
{
	const char *s = NULL;

	if (p_result_string(res, &s) != CUPTI_SUCCESS || !s)
		s = "unknown CUPTI error";
	snprintf(why, sizeof(why), "%s: %s", what, s);
	return -(int)res;
}

/* The agent's launch callbacks (launch_cbids, shared with
 * user/agent/cupti_api.c) and, as while it records ops (the whole runtime
 * domain but a few), its syncs, copies, sets and allocations. */
static const struct {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
} extra_cbids[] = {
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020 },
};

static CUpti_SubscriberHandle subscriber;

/* What the empty callback saw, by domain and id (the measured thread is the
 * only one calling CUDA: a plain increment, as cheap as the floor allows). */
#define CB_MAX 2048
static unsigned long cb_seen[CUPTI_CB_DOMAIN_SIZE][CB_MAX];

static void CUPTIAPI empty_api_callback(void *userdata, CUpti_CallbackDomain domain,
					CUpti_CallbackId cbid, const void *data)
{
	if ((unsigned)domain < CUPTI_CB_DOMAIN_SIZE && cbid < CB_MAX)
		cb_seen[domain][cbid]++;
}

EXPORT int floor_cupti_cb_counts(char *buf, int size)
{
	int len = 0;

	buf[0] = 0;
	for (int d = 0; d < CUPTI_CB_DOMAIN_SIZE; d++)
		for (int i = 0; i < CB_MAX; i++) {
			const char *name = NULL;

			if (!cb_seen[d][i])
				continue;
			if (p_callback_name(d, i, &name) != CUPTI_SUCCESS || !name)
				name = "?";
			len += snprintf(buf + len, len < size ? size - len : 0, "%s %s %lu\n",
					d == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" :
					d == CUPTI_CB_DOMAIN_RESOURCE ? "resource" : "driver", name,
					cb_seen[d][i]);
		}
	return len;
}

/* Variant 1: the runtime API's callbacks alone. */
static CUptiResult enable_callback(int variant, CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (variant == 1 && domain != CUPTI_CB_DOMAIN_RUNTIME_API)
		return CUPTI_SUCCESS;
	return p_enable_callback(1, subscriber, domain, cbid);
}

EXPORT int floor_cupti_cb_on(int variant)
{
	CUptiResult res;

	if (subscriber)
		return 0;
	if (cupti_load())
		return -1;
	memset(cb_seen, 0, sizeof(cb_seen));
	if (variant == 3 && p_subscribe_v2) {
		CUpti_SubscriberParams params = {
			.structSize = CUpti_SubscriberParams_STRUCT_SIZE, .subscriberName = "floor",
		};

		res = p_subscribe_v2(&subscriber, empty_api_callback, NULL, &params);
	} else {
		res = p_subscribe(&subscriber, empty_api_callback, NULL);
	}
	if (res != CUPTI_SUCCESS) {
		subscriber = NULL;
		return cupti_failed("cuptiSubscribe", res);
	}
	if (variant == 3 && (res = p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
						     CUPTI_CBID_RESOURCE_GRAPH_CREATED)))
		return cupti_failed("cuptiEnableCallback", res);
	if (variant == 2 || variant == 3) {
		if ((res = p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
					     CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)) ||
		    (res = p_enable_callback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
					     CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED)))
			return cupti_failed("cuptiEnableCallback", res);
		return 0;
	}
	for (size_t i = 0; i < sizeof(launch_cbids) / sizeof(launch_cbids[0]); i++)
		if ((res = enable_callback(variant, launch_cbids[i].domain, launch_cbids[i].cbid)))
			return cupti_failed("cuptiEnableCallback", res);
	for (size_t i = 0; i < sizeof(extra_cbids) / sizeof(extra_cbids[0]); i++)
		if ((res = enable_callback(variant, extra_cbids[i].domain, extra_cbids[i].cbid)))
			return cupti_failed("cuptiEnableCallback", res);
	return 0;
}

EXPORT void floor_cupti_cb_off(void)
{
	if (subscriber)
		p_unsubscribe(subscriber);
	subscriber = NULL;
}

#define BUF_SIZE (1u << 20)
static atomic_ulong records;
static int act_variant = -1;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = aligned_alloc(8, BUF_SIZE);
	*size = *buffer ? BUF_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
				      size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	unsigned long n = 0;

	while (valid && p_next_record(buffer, valid, &rec) == CUPTI_SUCCESS)
		n++;
	atomic_fetch_add(&records, n);
	free(buffer);
}

static const CUpti_ActivityKind act_kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
};

static int act_count(int variant)
{
	return variant == 1 ? 4 : 3;
}

EXPORT int floor_cupti_act_on(int variant)
{
	CUptiResult res;

	if (act_variant >= 0)
		return 0;
	if (cupti_load())
		return -1;
	res = p_register(buffer_requested, buffer_completed);
	if (res != CUPTI_SUCCESS)
		return cupti_failed("cuptiActivityRegisterCallbacks", res);
	for (int i = 0; i < act_count(variant); i++) {
		res = p_enable(act_kinds[i]);
		if (res != CUPTI_SUCCESS) {
			for (int k = 0; k < i; k++)
				p_disable(act_kinds[k]);
			return cupti_failed("cuptiActivityEnable", res);
		}
	}
	act_variant = variant;
	return 0;
}

/* Records delivered so far (a check that the floor did record). */
EXPORT unsigned long floor_cupti_records(void)
{
	return atomic_load(&records);
}

EXPORT void floor_cupti_act_off(void)
{
	if (act_variant < 0)
		return;
	p_flush_all(1);
	for (int i = 0; i < act_count(act_variant); i++)
		p_disable(act_kinds[i]);
	p_flush_all(1);
	act_variant = -1;
}

/* --- the thread's hardware counters --- */

static int perf_fd[2] = { -1, -1 };

EXPORT int floor_perf_open(void)
{
	static const uint64_t what[2] = { PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS };

	for (int i = 0; i < 2; i++) {
		struct perf_event_attr a;

		if (perf_fd[i] >= 0)
			continue;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_HARDWARE;
		a.config = what[i];
		a.exclude_hv = 1;
		perf_fd[i] = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (perf_fd[i] < 0) {
			int err = errno;

			snprintf(why, sizeof(why), "perf_event_open(%s): %s",
				 i ? "instructions" : "cycles", strerror(err));
			return -err;
		}
	}
	return 0;
}

EXPORT int floor_perf_read(uint64_t *v)
{
	for (int i = 0; i < 2; i++)
		if (perf_fd[i] < 0 || read(perf_fd[i], &v[i], sizeof(v[i])) != sizeof(v[i]))
			return -1;
	return 0;
}
