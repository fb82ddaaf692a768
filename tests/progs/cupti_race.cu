// SPDX-License-Identifier: BSD-2-Clause
/*
 * cupti_race: what changing CUPTI's callbacks from one thread does to a
 * thread that is inside CUDA calls meanwhile (issue 43: after ptbpf's
 * agent had subscribed, a job's own profiler found every runtime and
 * driver record of its session with one correlation id, and raised).
 *
 * Usage: cupti_race VARIANT TOGGLES SEED
 * The main thread makes CUDA calls as torch does (cudaGetDevice and
 * cudaGetLastError again and again, a kernel, a synchronize) while another
 * thread does TOGGLES rounds of the variant's "on" and "off", each followed
 * by a random nap (0.2-2 ms). Then the main thread records 100 rounds with
 * CUPTI's runtime activity and prints one line: "ok" if every runtime
 * record has a correlation id of its own, "STUCK" if not (or there are
 * none).
 *   A  subscribe, launch callbacks, the whole runtime domain / unsubscribe
 *   B  kernel, runtime and driver activity on / off (no subscriber)
 *   C  (subscribed once) the runtime domain and a driver callback on / off
 *   G  as the agent once did: A, then 6 frequent runtime calls' callbacks
 *      off again (cudaGetDevice ...) / unsubscribe
 *   H  as the agent does: launch callbacks and each runtime call's but those
 *      6 on, one by one / unsubscribe
 */
#include <cuda_runtime.h>
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>

#define CK(x)                                                                  \
	do {                                                                   \
		CUptiResult r_ = (x);                                          \
		const char *s_ = "?";                                          \
		if (r_ != CUPTI_SUCCESS) {                                     \
			cuptiGetResultString(r_, &s_);                         \
			fprintf(stderr, "%s: %s\n", #x, s_);                   \
		}                                                              \
	} while (0)

__global__ void spin(long long cycles)
{
	long long t = clock64();

	while (clock64() - t < cycles)
		;
}

static char variant;
static std::atomic<bool> done(false);
static CUpti_SubscriberHandle sub;
static const CUpti_CallbackId frequent[6] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
};
static const CUpti_ActivityKind kinds[3] = { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
					     CUPTI_ACTIVITY_KIND_RUNTIME,
					     CUPTI_ACTIVITY_KIND_DRIVER };

static void CUPTIAPI on_call(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
			     const void *data)
{
}

static bool is_frequent(int id)
{
	for (int i = 0; i < 6; i++)
		if (id == (int)frequent[i])
			return true;
	return false;
}

static void subscribe(void)
{
	CK(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_call, NULL));
	CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
			       CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
	CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
			       CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
	if (variant == 'A' || variant == 'G')
		CK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
	for (int i = 0; variant == 'G' && i < 6; i++)
		CK(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API, frequent[i]));
	for (int id = 1; variant == 'H' && id < CUPTI_RUNTIME_TRACE_CBID_SIZE; id++)
		if (!is_frequent(id))
			cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
}

static void action(bool on)
{
	switch (variant) {
	case 'B':
		for (int i = 0; i < 3; i++)
			CK(on ? cuptiActivityEnable(kinds[i]) : cuptiActivityDisable(kinds[i]));
		break;
	case 'C':
		CK(cuptiEnableDomain(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
		CK(cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_DRIVER_API,
				       CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
		break;
	default:
		if (on)
			subscribe();
		else
			CK(cuptiUnsubscribe(sub));
	}
}

struct side_args {
	int toggles;
	unsigned seed;
};

static void *side(void *arg)
{
	struct side_args *a = (struct side_args *)arg;

	for (int i = 0; i < a->toggles; i++)
		for (int on = 1; on >= 0; on--) {
			action(on);
			usleep(200 + rand_r(&a->seed) % 1800);
		}
	done = true;
	return NULL;
}

/* The runtime records of the check. */
static uint32_t corr[1 << 16];
static int ncorr;

static void CUPTIAPI buffer_requested(uint8_t **b, size_t *size, size_t *max)
{
	*b = (uint8_t *)aligned_alloc(8, 1 << 20);
	*size = 1 << 20;
	*max = 0;
}

static void CUPTIAPI buffer_completed(CUcontext c, uint32_t s, uint8_t *b, size_t size,
				      size_t valid)
{
	CUpti_Activity *r = NULL;

	while (valid && cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME && ncorr < (1 << 16))
			corr[ncorr++] = ((CUpti_ActivityAPI *)r)->correlationId;
	free(b);
}

/* One round of calls, as torch's ops make them. */
static void round_trip(void)
{
	int d;

	for (int i = 0; i < 20; i++) {
		cudaGetDevice(&d);
		cudaGetLastError();
	}
	spin<<<1, 1>>>(20000);
	cudaDeviceSynchronize();
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct side_args a;
	pthread_t th;
	int distinct = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: cupti_race A|B|C|G|H TOGGLES SEED\n");
		return 2;
	}
	variant = argv[1][0];
	a.toggles = atoi(argv[2]);
	a.seed = (unsigned)atoi(argv[3]);
	cudaFree(0);
	round_trip();
	CK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	if (variant == 'C')
		CK(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_call, NULL));
	pthread_create(&th, NULL, side, &a);
	while (!done.load())
		round_trip();
	pthread_join(th, NULL);
	if (variant == 'C')
		CK(cuptiUnsubscribe(sub));
	CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
	for (int i = 0; i < 100; i++)
		round_trip();
	CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
	CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	qsort(corr, ncorr, sizeof(corr[0]), cmp_u32);
	for (int i = 0; i < ncorr; i++)
		distinct += !i || corr[i] != corr[i - 1];
	printf("%c seed %u: %s: %d runtime records, %d correlation ids\n", variant, a.seed,
	       ncorr && distinct == ncorr ? "ok" : "STUCK", ncorr, distinct);
	return 0;
}
