// SPDX-License-Identifier: BSD-2-Clause
/*
 * The GPU timeline out of CUPTI's activity buffers: the pool of buffers the
 * agent hands CUPTI, CUPTI's clock mapped onto CLOCK_MONOTONIC, and each
 * kernel, memcpy and memset record turned into a call of ptbpf's probe
 * points ptbpf_agent_kernel/memcpy/memset (agent.c). Buffers that are not
 * the agent's go to the job's own callbacks; records of a job session the
 * agent could not see at attach are copied into the job's buffers too
 * (cupti.c tells why). The buffer callbacks run on any thread, from inside
 * CUPTI, and so never take cupti_lock.
 *
 * Passing through: while a job session runs with the agent's callbacks
 * registered (one it could not see at attach), CUPTI's new buffers come from
 * the job's own allocator and go back to the job whole. Kineto reads its
 * buffers at the end of a session only if it still has one CUPTI has not
 * returned (CuptiActivityApi::activityBuffers: no allocated buffer, no GPU
 * trace, and what it had shows up in its next trace), and a flush can
 * return every one. So from the moment a job session is evident, the agent
 * holds one buffer of the job's unreturned (the anchor) across each flush
 * of its own, and hands it to CUPTI at CUPTI's next request.
 */
#include "cupti_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* The buffer pool: bit i of pool_free set = buffer i is ours to hand out.
 * mmap'd, not malloc'd: glibc raises its mmap threshold to the size of the
 * largest mmap'd chunk freed (up to 32 MB), so a malloc'd 8 MB pool freed
 * at detach would move the job's later 1-8 MB allocations into its heap,
 * which keeps what they free (a Kineto on-demand job grew 58-88 MB of
 * anonymous memory over 1,000 attach/detach cycles on the H200, its
 * untraced twin 2.4 MB; after one malloc'd 8 MB block freed, 64 mallocs of
 * 1 MB come from the heap, and half of them freed stay there). */
static uint8_t *pool;
static _Atomic uint32_t pool_free;

/* Counters of the current activation; read for the deactivation message. */
static _Atomic uint64_t n_kernels, n_memcpys, n_memsets, n_dropped, n_declined, n_foreign,
	n_to_job, n_lost_to_job, n_passed, n_anchors_empty, n_anchors_left, n_anchors_spared,
	n_graph_kernels, n_after_off;

/* CUPTI's clock -> CLOCK_MONOTONIC: mono = m + (cupti - c) * k, published
 * under a sequence count (the buffer callback may run on any thread). */
static struct {
	_Atomic uint32_t seq;
	int64_t c, m;
	double k;
} cal;
static int64_t cal_c0, cal_m0; /* the baseline k is measured over */

_Atomic bool foreign_seen;
_Atomic bool pass_through;
_Atomic bool agent_flushing;

/* The anchor: one buffer from the job's allocator that CUPTI has not seen. */
static uint8_t *_Atomic anchor;
static _Atomic size_t anchor_size;

void anchor_open(void)
{
	uint8_t *b = NULL, *none = NULL;
	size_t size = 0, max = 0;

	if (atomic_load(&anchor) || !job_req || !job_done)
		return;
	job_req(&b, &size, &max);
	if (!b)
		return;
	atomic_store(&anchor_size, size);
	if (!atomic_compare_exchange_strong(&anchor, &none, b)) {
		job_done(NULL, 0, b, size, 0); /* another thread's anchor holds the job's */
		atomic_fetch_add(&n_anchors_empty, 1);
	}
}

bool anchor_held(void)
{
	return atomic_load(&anchor) != NULL;
}

/* Completes the anchor empty: for when the job has another buffer, or is
 * reading its buffers now. */
void anchor_close(void)
{
	uint8_t *b = atomic_exchange(&anchor, NULL);

	if (b) {
		job_done(NULL, 0, b, atomic_load(&anchor_size), 0);
		atomic_fetch_add(&n_anchors_empty, 1);
	}
}

/* Left with the job unreturned: its session is quiet at detach, and an
 * anchor returned now could leave it with no buffer out when it ends.
 * Kineto frees a buffer only when CUPTI completes it, so a left one stays
 * in its map for good, and counts against its buffer limit (about 33: at
 * the limit its sessions get no GPU records). One is enough: with it the
 * job always has a buffer out. So once one is left with the same buffer
 * callbacks (the stub pages keep both across agents), every later anchor
 * goes back empty. */
void anchor_leave(void)
{
	uint8_t *b = atomic_exchange(&anchor, NULL);
	uint64_t *left = stubs_keep(KEEP_ANCHOR_LEFT), *owner = stubs_keep(KEEP_ANCHOR_OWNER);

	if (!b)
		return;
	if (left && *left && owner && *owner == (uintptr_t)job_done) {
		job_done(NULL, 0, b, atomic_load(&anchor_size), 0);
		atomic_fetch_add(&n_anchors_empty, 1);
		atomic_fetch_add(&n_anchors_spared, 1);
		return;
	}
	if (left && owner) {
		*left = (uintptr_t)b;
		*owner = (uintptr_t)job_done;
	}
	atomic_fetch_add(&n_anchors_left, 1);
}

/* A job session is evident while the agent's callbacks are registered. */
static void session_evident(void)
{
	if (!job_req || !job_done)
		return;
	anchor_open();
	atomic_store(&pass_through, true);
	atomic_store(&foreign_seen, true);
}

int pool_init(void)
{
	if (pool)
		return 0;
	/* CUPTI wants 8-byte aligned buffers; mmap gives pages. */
	pool = mmap(NULL, (size_t)POOL_BUFS * POOL_BUF_SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool == MAP_FAILED) {
		pool = NULL;
		agent_report(PTBPF_AGENT_ERR_MEMORY, 0, "cannot allocate %u activity buffers",
			     POOL_BUFS);
		return -1;
	}
	atomic_store(&pool_free, (1u << POOL_BUFS) - 1);
	return 0;
}

/* Every buffer of the agent's back from CUPTI. */
bool pool_all_back(void)
{
	return !pool || atomic_load(&pool_free) == (1u << POOL_BUFS) - 1;
}

void activity_counts_reset(void)
{
	atomic_store(&n_kernels, 0);
	atomic_store(&n_memcpys, 0);
	atomic_store(&n_memsets, 0);
	atomic_store(&n_dropped, 0);
	atomic_store(&n_declined, 0);
	atomic_store(&n_foreign, 0);
	atomic_store(&n_to_job, 0);
	atomic_store(&n_lost_to_job, 0);
	atomic_store(&n_passed, 0);
	atomic_store(&n_anchors_empty, 0);
	atomic_store(&n_anchors_left, 0);
	atomic_store(&n_anchors_spared, 0);
	atomic_store(&n_graph_kernels, 0);
	atomic_store(&n_after_off, 0);
}

uint64_t activity_records(void)
{
	return atomic_load_explicit(&n_kernels, memory_order_relaxed) +
	       atomic_load_explicit(&n_memcpys, memory_order_relaxed) +
	       atomic_load_explicit(&n_memsets, memory_order_relaxed);
}

void activity_counts_report(void)
{
	/* Kernels of CUDA graphs recorded by every agent in this process: CUPTI
	 * 13.0 keeps host copies of device buffers they used (BENCHMARKS.md). */
	uint64_t *graphs = stubs_keep(KEEP_GRAPH_KERNELS);
	uint64_t graph_kernels = atomic_load(&n_graph_kernels);
	uint64_t all = graphs ? (*graphs += graph_kernels) : 0;

	agent_report(PTBPF_AGENT_DORMANT, 0,
		     "GPU timeline off: %llu kernels (%llu from CUDA graphs; %llu in this process "
		     "since ptbpf first traced it), %llu copies, %llu sets, %llu begun once it "
		     "was going off (left out: not the window's), %llu dropped by CUPTI, "
		     "%llu buffer requests declined, %llu foreign buffers, %llu buffers copied to "
		     "the job's profiler, %llu not, %llu of its own passed through, %llu empty ones "
		     "handed back, %llu left with it; %d of the agent's %d buffers still with CUPTI "
		     "(their memory stays in the process after detach)%s",
		     (unsigned long long)n_kernels, (unsigned long long)graph_kernels,
		     (unsigned long long)all, (unsigned long long)n_memcpys,
		     (unsigned long long)n_memsets, (unsigned long long)n_after_off,
		     (unsigned long long)n_dropped,
		     (unsigned long long)n_declined, (unsigned long long)n_foreign,
		     (unsigned long long)n_to_job, (unsigned long long)n_lost_to_job,
		     (unsigned long long)n_passed, (unsigned long long)n_anchors_empty,
		     (unsigned long long)n_anchors_left,
		     pool ? POOL_BUFS - __builtin_popcount(atomic_load(&pool_free)) : 0, POOL_BUFS,
		     atomic_load(&n_anchors_spared) ? "; not left but handed back: the job keeps "
		     "one its profiler never frees since an earlier detach, which is enough" : "");
}

/* --- the clock --- */

static int64_t cupti_now(void)
{
	uint64_t t = 0;

	p_get_timestamp(&t);
	return (int64_t)t;
}

/*
 * When the agent began to switch its kinds off (CUPTI's clock; 0: they are
 * on). A CUDA graph replay launched before goes on recording after it: on
 * the H200 (CUPTI 13.0, a reduce-overhead loop) the kernels of a replay
 * that began 44 us after the kinds went off came out 18.2 ms long, their
 * ends a few us apart, each past the next one's start on the same stream
 * (their true length: 2-6 us). They are not the window's: left out, and
 * counted.
 */
static _Atomic uint64_t off_at; /* 0 where CUPTI gave no time: none left out */

void activity_kinds_on(void)
{
	atomic_store(&off_at, 0);
}

void activity_kinds_off(void)
{
	atomic_store(&off_at, (uint64_t)cupti_now());
}

static bool after_off(uint64_t start)
{
	uint64_t t = atomic_load_explicit(&off_at, memory_order_acquire);

	if (!t || start < t)
		return false;
	atomic_fetch_add_explicit(&n_after_off, 1, memory_order_relaxed);
	return true;
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
void calibrate_reset(void)
{
	int64_t c1, m1;

	agent_clock_pair(cupti_now, &cal_c0, &cal_m0);
	nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	agent_clock_pair(cupti_now, &c1, &m1);
	cal_publish(c1, m1, c1 > cal_c0 ? (double)(m1 - cal_m0) / (double)(c1 - cal_c0) : 1.0);
}

void calibrate(void)
{
	int64_t c, m;

	agent_clock_pair(cupti_now, &c, &m);
	cal_publish(c, m, c > cal_c0 ? (double)(m - cal_m0) / (double)(c - cal_c0) : cal.k);
}

bool clock_in_ns(void)
{
	return cal.k > 0.5 && cal.k < 2;
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
bool clock_is_default(void)
{
	int64_t d = cupti_now() - agent_now(CLOCK_REALTIME);

	return d > -5000000000LL && d < 5000000000LL;
}

/* --- the buffers --- */

void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *busy = busy_enter();
	uint32_t m = atomic_load(&pool_free);
	int i = 0;

	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	if (atomic_load(&pass_through) && job_req) {
		/* Not while a flush of the agent's runs: that would
		 * return the anchor at once. */
		uint8_t *b = atomic_load(&agent_flushing) ? NULL : atomic_exchange(&anchor, NULL);

		if (b) {
			*buffer = b;
			*size = atomic_load(&anchor_size);
		} else {
			job_req(buffer, size, max_records);
		}
		busy_leave(busy);
		return;
	}
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
	if (k->graphId)
		atomic_fetch_add_explicit(&n_graph_kernels, 1, memory_order_relaxed);
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
			if (!after_off(((const CUpti_ActivityKernel10 *)rec)->start))
				emit_kernel((const CUpti_ActivityKernel10 *)rec);
			break;
		case CUPTI_ACTIVITY_KIND_MEMCPY:
			if (!after_off(((const CUpti_ActivityMemcpy6 *)rec)->start))
				emit_memcpy((const CUpti_ActivityMemcpy6 *)rec);
			break;
		case CUPTI_ACTIVITY_KIND_MEMSET:
			if (!after_off(((const CUpti_ActivityMemset4 *)rec)->start))
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

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
			       size_t valid)
{
	uint8_t *busy = busy_enter();
	size_t dropped = 0;

	if (pool && buffer >= pool && buffer < pool + (size_t)POOL_BUFS * POOL_BUF_SIZE) {
		if (emit_records(buffer, valid))
			session_evident();
		if (valid && (atomic_load(&foreign_seen) || atomic_load(&copy_to_job)))
			copy_to_job_buffer(ctx, stream, buffer, valid);
		if (p_num_dropped(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
			ptbpf_agent_dropped(dropped, atomic_fetch_add(&n_dropped, dropped) + dropped);
		atomic_fetch_or(&pool_free, 1u << ((buffer - pool) / POOL_BUF_SIZE));
	} else if (job_done) {
		/* The job's own, through the agent's callbacks. While the
		 * agent has the activity API, that is a session it did not see:
		 * the anchor first, so that the job always has a buffer. */
		if (atomic_load(&activity_owner) == OWN_US)
			session_evident();
		job_done(ctx, stream, buffer, size, valid);
		atomic_fetch_add(&n_passed, 1);
	} else {
		atomic_fetch_add(&n_foreign, 1); /* another client's: not ours to free */
	}
	busy_leave(busy);
}

void cupti_unload(void)
{
	/* Every buffer back (the flushes at deactivation return them):
	 * else CUPTI may still write one, and the pool stays. */
	if (pool && pool_all_back()) {
		munmap(pool, (size_t)POOL_BUFS * POOL_BUF_SIZE);
		pool = NULL;
	}
}
