// SPDX-License-Identifier: BSD-2-Clause
/*
 * The agent's op recorder (part of libptbpf-agent.so, not of ptbpf): global
 * at::RecordFunction callbacks that write each begin and end into a ring of
 * the calling thread (include/ptbpf_agent.h). With a callback registered
 * the dispatcher takes its RecordFunction path, so every at::_ops::<op>::call
 * begins and ends here, exception unwinds included (end runs from
 * ~RecordFunction), along with backward nodes and record_function regions:
 * what torch.profiler records, from the same callbacks. A record costs a
 * clock read and a copy into memory only this thread writes; no kernel
 * entry, no lock.
 *
 * libtorch is not linked: its C++ API is reached by exported symbol, and
 * the one structure passed in (RecordFunctionCallback) is written out in
 * rf_abi.h with the layout torch 1.13 and 2.x share. torch is given stubs
 * (stubs.c), not these functions: RecordFunctions begun while recording
 * keep their callbacks after they are removed, and may end after the
 * agent is unloaded.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptbpf_agent.h"
#include "rf_abi.h"

/* RF_SCOPE_OFF and RF_SEQ_OFF (rf_abi.h): each callback serves known
 * scopes, so every call checks the scope byte; one mismatch and no field
 * is read again. */
/* inputs_ (c10::ArrayRef<const c10::IValue>: pointer, count) follows
 * sequence_nr_ in 1.13 and 2.x; filled for callbacks that need inputs. */
#define RF_INPUTS_OFF 208

/* c10::IValue: an 8-byte payload (a Tensor's is its TensorImpl*), then
 * the tag. Tensor is 1 in 1.13 and 2.x; 3 to 8 are scalars in both
 * (1.13: Double, ComplexDouble, Int, SymInt, SymFloat, Bool; 2.x: Double,
 * ComplexDouble, Int, UInt, SymInt, SymFloat). */
struct ivalue {
	uint64_t payload;
	uint32_t tag;
	uint32_t pad;
};
enum { TAG_TENSOR = 1, TAG_FIRST_SCALAR = 3, TAG_LAST_SCALAR = 8 };

/*
 * TensorImpl's sizes_and_strides_ (c10::impl::SizesAndStrides: size_t
 * size_, then 5 inline sizes and 5 inline strides or, past 5 dims, a
 * pointer to them), followed by storage_offset_, numel_ and data_type_
 * (TypeMeta, whose index is the ScalarType). Its offset moves between
 * versions (72 in 1.13), so it is found on the first tensor input that
 * settles it: exactly one candidate offset where the inline sizes
 * multiply to numel_ (>= 2), the strides are the contiguous ones for
 * those sizes and the dtype is plausible. Only memory within the object
 * is read while looking.
 */
#define SAS_FIRST 40
#define SAS_LAST 80
#define SAS_GIVE_UP 100000
static _Atomic int sas_off = -1; /* -1: not known yet; 0: not found */
static _Atomic uint32_t sas_tries;
static bool want_shapes;
static unsigned stacks_every;
/* Ops (FUNCTION scope) open on this thread: only the outermost asks for a
 * Python stack (the ones inside it, and their CUDA calls, share it). */
static TLS unsigned stacks_seen, open_depth;

enum { SC_OTHER = 0xff }; /* any scope but SC_FUNCTION/BACKWARD/USER (rf_abi.h) */

static struct ptbpf_ops_desc desc;
static uint8_t *slot_mem;
static pthread_key_t slot_key;
static _Atomic int recording;
static uint64_t handles[4];
static int nhandles;

#define NO_SLOT ((struct ptbpf_ops_slot *)1)
static TLS struct ptbpf_ops_slot *my_slot;
/* Where my_slot's head is in its ring (head % ring_cap), kept as records
 * are written: no division per record. */
static TLS uint64_t my_pos;
static uint64_t ring_cap; /* bytes of records a ring holds */

/* The thread's last timestamp: its records never go back in time, even
 * where the clock's line is slewed or set anew (clock.c). */
static TLS uint64_t my_last_ts;

static uint64_t now_ns(void)
{
	uint64_t ts = agent_clock_ns();

	if (__builtin_expect(ts < my_last_ts, 0))
		return my_last_ts;
	return my_last_ts = ts;
}

/* At thread exit: ptbpf frees the slot once it has read what is left. */
static void slot_release(void *p)
{
	uint8_t *busy = busy_enter();
	struct ptbpf_ops_slot *s = p;

	my_slot = NO_SLOT;
	__atomic_store_n(&s->state, OPS_SLOT_RETIRED, __ATOMIC_RELEASE);
	busy_leave(busy);
}

static struct ptbpf_ops_slot *thread_slot(void)
{
	struct ptbpf_ops_slot *s = my_slot;

	if (__builtin_expect(s != NULL, 1))
		return s;
	for (uint32_t i = 0; i < desc.nslots; i++) {
		uint32_t expect = OPS_SLOT_FREE;

		s = (struct ptbpf_ops_slot *)(slot_mem + (size_t)i * desc.slot_bytes);
		if (__atomic_compare_exchange_n(&s->state, &expect, OPS_SLOT_OWNED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_store_n(&s->tid, (uint32_t)gettid(), __ATOMIC_RELEASE);
			s->gap_lost = 0; /* a gap of the last owner is not this thread's */
			my_pos = s->head % ring_cap;
			my_slot = s;
			pthread_setspecific(slot_key, s);
			return s;
		}
	}
	my_slot = NO_SLOT; /* counted in desc.no_slot from now on */
	return NO_SLOT;
}

/* The ring's tail when this thread last called ptbpf_agent_wake for a
 * ring a quarter full (+1: 0 is never a tail seen then). */
static TLS uint64_t my_woke_at;

/* Room for a record of size bytes in ring s (after a pad if it would
 * not fit before the ring's end), or NULL if the ring is full. *end is
 * where the head goes once the record is written, *pos where that is in
 * the ring (commit). A ring past a quarter full calls ptbpf_agent_wake (once
 * until ptbpf reads it again): ptbpf's reader, which yields the CPU to the
 * job's threads, is behind and takes its own back to read (lib/yield.h). */
static struct ptbpf_ops_rec *reserve_rec(struct ptbpf_ops_slot *s, uint32_t size,
					 uint64_t *end, uint64_t *pos)
{
	uint8_t *data = (uint8_t *)(s + 1);
	uint64_t head = s->head, tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
	uint64_t at = my_pos, skip = ring_cap - at < size ? ring_cap - at : 0;
	struct ptbpf_ops_rec *r;

	/* Once per read of ptbpf's: a reader that read since is woken
	 * again when it falls behind again. */
	if (__builtin_expect(head - tail > ring_cap / 4, 0) && my_woke_at != tail + 1) {
		my_woke_at = tail + 1;
		ptbpf_agent_wake();
	}
	if (head + skip + size - tail > ring_cap)
		return NULL;
	if (skip >= sizeof(*r)) {
		r = (struct ptbpf_ops_rec *)(data + at);
		*r = (struct ptbpf_ops_rec){ .size = (uint16_t)skip, .type = OPS_REC_PAD };
	}
	if (skip)
		at = 0;
	*end = head + skip + size;
	*pos = at + size == ring_cap ? 0 : at + size;
	return (struct ptbpf_ops_rec *)(data + at);
}

static void commit(struct ptbpf_ops_slot *s, uint64_t end, uint64_t pos)
{
	__atomic_store_n(&s->head, end, __ATOMIC_RELEASE);
	my_pos = pos;
}

/* The first record while the agent idles: ptbpf's reader and the agent's
 * thread read and tick often again (agent_ops_idle). */
static void wake(void)
{
	if (!__atomic_exchange_n(&desc.idle, 0, __ATOMIC_ACQ_REL))
		return;
	ptbpf_agent_wake();
	syscall(SYS_futex, &desc.idle, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Writes a record into this thread's ring; its timestamp, or 0 if it was
 * not written. */
static uint64_t put(uint8_t type, uint8_t scope, const void *rf, int64_t seq,
		    const char *name, size_t nlen, const uint8_t *shapes, size_t slen)
{
	struct ptbpf_ops_slot *s = thread_slot();
	uint32_t size = (uint32_t)((sizeof(struct ptbpf_ops_rec) + nlen + slen + 7) & ~(size_t)7);
	struct ptbpf_ops_rec *r;
	uint64_t end, pos, ts;

	if (__builtin_expect(__atomic_load_n(&desc.idle, __ATOMIC_RELAXED), 0))
		wake();
	if (s == NO_SLOT) {
		__atomic_fetch_add(&desc.no_slot, 1, __ATOMIC_RELAXED);
		if (type == OPS_REC_BEGIN)
			__atomic_fetch_add(&desc.no_slot_begins, 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* Records lost to a full ring since the last one written: the next
	 * record that fits is preceded by an OPS_REC_GAP saying so, so that
	 * ptbpf knows where in the stream they went missing. */
	if (s->gap_lost && (r = reserve_rec(s, sizeof(*r), &end, &pos))) {
		*r = (struct ptbpf_ops_rec){ .ts = s->gap_from, .rf = s->begins_dropped,
					     .seq = (int64_t)s->dropped, .size = sizeof(*r),
					     .type = OPS_REC_GAP };
		s->written++;
		commit(s, end, pos);
		s->gap_lost = 0;
	}
	r = s->gap_lost ? NULL : reserve_rec(s, size, &end, &pos);
	if (!r) {
		if (!s->gap_lost++)
			s->gap_from = now_ns();
		if (type == OPS_REC_BEGIN)
			__atomic_store_n(&s->begins_dropped, s->begins_dropped + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->dropped, s->dropped + 1, __ATOMIC_RELAXED);
		return 0;
	}
	ts = now_ns();
	*r = (struct ptbpf_ops_rec){ .ts = ts, .rf = (uintptr_t)rf, .seq = seq,
				     .size = (uint16_t)size, .type = type, .scope = scope,
				     .name_len = (uint16_t)nlen, .shapes_len = (uint16_t)slen };
	memcpy(r + 1, name, nlen);
	if (slen)
		memcpy((uint8_t *)(r + 1) + nlen, shapes, slen);
	s->written++;
	if (type == OPS_REC_BEGIN)
		s->begins++;
	commit(s, end, pos);
	return ts;
}

/* A begin at ts, outside any other on this thread, asks for its Python
 * stack (one in stacks_every). */
static void maybe_stack(uint64_t ts)
{
	if (stacks_every && ts && !open_depth && ++stacks_seen >= stacks_every) {
		stacks_seen = 0;
		ptbpf_agent_pystack(ts);
	}
}

static bool sas_fits(const uint8_t *impl, int off)
{
	const int64_t *sizes = (const int64_t *)(impl + off + 8), *strides = sizes + 5;
	uint64_t dim = *(const uint64_t *)(impl + off), prod = 1;
	int64_t numel = *(const int64_t *)(impl + off + 96);
	uint16_t dtype = *(const uint16_t *)(impl + off + 104);

	if (dim == 0 || dim > 5 || numel < 2 || dtype >= 64)
		return false;
	for (int k = (int)dim - 1; k >= 0; k--) {
		if (sizes[k] < 1 || sizes[k] > (1ll << 40) || strides[k] != (int64_t)prod)
			return false;
		prod *= (uint64_t)sizes[k];
	}
	return prod == (uint64_t)numel;
}

/* Settles sas_off if this tensor fits exactly one candidate. */
static void sas_find(const uint8_t *impl)
{
	int found = 0, unknown = -1;

	if (atomic_fetch_add_explicit(&sas_tries, 1, memory_order_relaxed) > SAS_GIVE_UP) {
		atomic_compare_exchange_strong(&sas_off, &unknown, 0);
		return;
	}
	for (int off = SAS_FIRST; off <= SAS_LAST; off += 8) {
		if (!sas_fits(impl, off))
			continue;
		if (found)
			return; /* two fit: this tensor does not tell */
		found = off;
	}
	if (found)
		atomic_compare_exchange_strong(&sas_off, &unknown, found);
}

/* A tensor input: kind, dtype, rank, sizes; OPS_IN_UNKNOWN where the
 * layout is not known (yet) or the tensor is undefined. */
static size_t shape_of(const uint8_t *impl, uint8_t *out)
{
	int off = atomic_load_explicit(&sas_off, memory_order_relaxed);
	uint64_t dim, prod = 1;
	const int64_t *sizes;
	size_t n = 0;

	if (off < 0 && impl)
		sas_find(impl), off = atomic_load_explicit(&sas_off, memory_order_relaxed);
	/* (More than 64 dims: no tensor has that many, not a layout to trust.) */
	if (off <= 0 || !impl || impl == rfapi.undefined_tensor ||
	    (dim = *(const uint64_t *)(impl + off)) > 64)
		goto unknown;
	sizes = dim <= 5 ? (const int64_t *)(impl + off + 8) : *(int64_t *const *)(impl + off + 8);
	for (uint64_t k = 0; k < dim && sizes; k++)
		prod *= (uint64_t)sizes[k];
	if (!sizes || prod != *(const uint64_t *)(impl + off + 96))
		goto unknown;
	out[n++] = OPS_IN_TENSOR;
	out[n++] = (uint8_t)*(const uint16_t *)(impl + off + 104);
	out[n++] = (uint8_t)(dim < OPS_MAX_RANK ? dim : OPS_MAX_RANK);
	memcpy(out + n, sizes, 8 * out[2]);
	return n + 8 * out[2];
unknown:
	out[0] = OPS_IN_UNKNOWN;
	return 1;
}

/* The op's inputs as OPS_SHAPES describes them; 0 bytes if none. */
static size_t shapes_of(const void *rf, uint8_t *out)
{
	const struct ivalue *in = *(const struct ivalue *const *)((const uint8_t *)rf + RF_INPUTS_OFF);
	uint64_t n = *(const uint64_t *)((const uint8_t *)rf + RF_INPUTS_OFF + 8);
	size_t len = 1;

	if (!in || n == 0 || n > 1024)
		return 0;
	out[0] = (uint8_t)(n < OPS_MAX_INPUTS ? n : OPS_MAX_INPUTS);
	for (uint8_t i = 0; i < out[0]; i++) {
		if (in[i].tag == TAG_TENSOR)
			len += shape_of((const uint8_t *)(uintptr_t)in[i].payload, out + len);
		else
			out[len++] = in[i].tag >= TAG_FIRST_SCALAR && in[i].tag <= TAG_LAST_SCALAR ?
				     OPS_IN_SCALAR : OPS_IN_OTHER;
	}
	return len;
}

static void begin(const void *rf, uint8_t scope)
{
	uint8_t shapes[OPS_SHAPES_MAX];
	size_t slen = 0;
	const char *name;
	int64_t seq = -1;

	if (!atomic_load_explicit(&recording, memory_order_relaxed))
		return;
	if (__atomic_load_n(&desc.layout_ok, __ATOMIC_RELAXED)) {
		uint8_t seen = *((const uint8_t *)rf + RF_SCOPE_OFF);

		if (scope != SC_OTHER && seen != scope) {
			__atomic_store_n(&desc.layout_ok, 0, __ATOMIC_RELAXED);
		} else {
			scope = seen;
			seq = *(const int64_t *)((const uint8_t *)rf + RF_SEQ_OFF);
		}
	}
	name = rfapi.name(rf);
	if (!name)
		name = "";
	if (want_shapes && scope == SC_FUNCTION && __atomic_load_n(&desc.layout_ok, __ATOMIC_RELAXED))
		slen = shapes_of(rf, shapes);
	maybe_stack(put(OPS_REC_BEGIN, scope, rf, seq, name, strnlen(name, PTBPF_OPS_NAME_MAX),
			shapes, slen));
	if (stacks_every && scope == SC_FUNCTION && __atomic_load_n(&desc.layout_ok, __ATOMIC_RELAXED))
		open_depth++;
}

/* torch's StartCallback: returns std::unique_ptr<ObserverContext> (null)
 * through the hidden pointer ret. */
#define START_CALLBACK(fn, scope)                                \
	static void **fn(void **ret, const void *rf)             \
	{                                                        \
		uint8_t *busy = busy_enter();                    \
                                                                 \
		*ret = NULL;                                     \
		begin(rf, scope);                                \
		busy_leave(busy);                                \
		return ret;                                      \
	}
START_CALLBACK(start_function, SC_FUNCTION)
START_CALLBACK(start_backward, SC_BACKWARD)
START_CALLBACK(start_user, SC_USER)
START_CALLBACK(start_other, SC_OTHER)

/* What an END record carries: the thread's next sequence number, which
 * ptbpf needs only for a RecordFunction that has a sequence number of its
 * own (an op that may have made an autograd node); -1 for the others,
 * without the call into torch. */
static int64_t end_seq(const void *rf)
{
	if (__atomic_load_n(&desc.layout_ok, __ATOMIC_RELAXED) &&
	    *(const int64_t *)((const uint8_t *)rf + RF_SEQ_OFF) < 0)
		return -1;
	return rfapi.peek();
}

/* Ends of RecordFunctions begun while recording still come here after the
 * callbacks are removed (they travel with the RecordFunction): `recording`
 * drops them. */
static void end_any(const void *rf, void *ctx)
{
	uint8_t *busy = busy_enter();

	(void)ctx;
	/* Ops (FUNCTION scope) end where they began; regions may end on
	 * another thread (c10d's async work), so only ops are counted. */
	if (stacks_every && open_depth && __atomic_load_n(&desc.layout_ok, __ATOMIC_RELAXED) &&
	    *((const uint8_t *)rf + RF_SCOPE_OFF) == SC_FUNCTION)
		open_depth--;
	if (atomic_load_explicit(&recording, memory_order_relaxed))
		put(OPS_REC_END, rfapi.uncaught && rfapi.uncaught() > 0 ? OPS_END_UNWINDING : 0, rf,
		    end_seq(rf), NULL, 0, NULL, 0);
	busy_leave(busy);
}

bool agent_ops_api(bool enter, uint32_t domain, uint32_t cbid, uint32_t correlation,
		   const char *name)
{
	uint64_t key = OPS_API_KEY | (uint64_t)domain << 32 | correlation;

	if (!atomic_load_explicit(&recording, memory_order_relaxed))
		return false;
	if (enter) {
		if (!name)
			name = "cuda?";
		maybe_stack(put(OPS_REC_BEGIN, OPS_SCOPE_CUDA_API | (uint8_t)domain,
				(const void *)(uintptr_t)key,
				(int64_t)((uint64_t)cbid << 32 | correlation), name,
				strnlen(name, PTBPF_OPS_NAME_MAX), NULL, 0));
	} else {
		put(OPS_REC_END, 0, (const void *)(uintptr_t)key, correlation, NULL, 0, NULL, 0);
	}
	return true;
}

void agent_ops_region(bool begin, const void *key, const char *name, size_t len)
{
	if (!atomic_load_explicit(&recording, memory_order_relaxed))
		return;
	if (begin)
		maybe_stack(put(OPS_REC_BEGIN, SC_FUNCTION, key, -1, name,
				len < PTBPF_OPS_NAME_MAX ? len : PTBPF_OPS_NAME_MAX, NULL, 0));
	else
		put(OPS_REC_END, 0, key, -1, NULL, 0, NULL, 0);
}

/* A forked child (a DataLoader worker) has no agent thread to switch its
 * recorder off, and nobody reads its rings: it stops recording. The
 * callbacks stay registered and return at once. */
static void child_after_fork(void)
{
	atomic_store(&recording, 0);
}

static int alloc_slots(char *why, size_t len)
{
	size_t bytes = (size_t)PTBPF_OPS_SLOTS * PTBPF_OPS_SLOT_BYTES;

	if (slot_mem)
		return 0;
	/* Pages are touched only as threads write (and a little ahead of
	 * them, agent_ops_prefault): a thread's ring costs memory once it
	 * has recorded that much. */
	slot_mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (slot_mem == MAP_FAILED || pthread_key_create(&slot_key, slot_release) ||
	    pthread_atfork(NULL, NULL, child_after_fork)) {
		if (slot_mem != MAP_FAILED)
			munmap(slot_mem, bytes);
		slot_mem = NULL;
		snprintf(why, len, "cannot reserve %zu MiB for the op rings", bytes >> 20);
		return -1;
	}
	ring_cap = PTBPF_OPS_SLOT_BYTES - sizeof(struct ptbpf_ops_slot);
	desc = (struct ptbpf_ops_desc){
		.magic = PTBPF_OPS_MAGIC, .version = PTBPF_OPS_VERSION,
		.nslots = PTBPF_OPS_SLOTS, .slot_bytes = PTBPF_OPS_SLOT_BYTES,
		.slots = (uintptr_t)slot_mem, .layout_ok = 1,
	};
	return 0;
}

/* agent_ops_stop switched recording off since the last start. */
static bool stopped_since_start;

/*
 * A start right after a stop (a new session while the last one was on):
 * threads that saw `recording` set just before the stop may still be in
 * put(). Each thread's busy byte is seen clear once, after the stop is
 * visible to all (a thread entering later sees it), or 50 ms pass.
 */
static void wait_for_writers(void)
{
	int64_t until = agent_mono_ns() + 50000000LL;

	nanosleep(&(struct timespec){ 0, 100000 }, NULL); /* their stores land */
	for (int i = 0; i < PTBPF_AGENT_BUSY_THREADS; i++)
		while (__atomic_load_n(&ptbpf_agent_busy.thread[i], __ATOMIC_ACQUIRE) &&
		       agent_mono_ns() < until)
			nanosleep(&(struct timespec){ 0, 50000 }, NULL);
	while (__atomic_load_n(&ptbpf_agent_busy.more, __ATOMIC_ACQUIRE) &&
	       agent_mono_ns() < until)
		nanosleep(&(struct timespec){ 0, 50000 }, NULL);
}

const struct ptbpf_ops_desc *agent_ops_start(char *why, size_t len, bool shapes,
					     unsigned every, bool tsc)
{
	static const int function[] = { SC_FUNCTION }, backward[] = { SC_BACKWARD },
			 user[] = { SC_USER }, other[] = { 2, 3, 4, 5, 6, 8, 9 };

	if (nhandles)
		return &desc;
	if (rf_resolve(why, len) || alloc_slots(why, len))
		return NULL;
	want_shapes = shapes;
	stacks_every = every;
	agent_clock_start(tsc);
	desc.clock = OPS_CLOCK_KERNEL;
	agent_ops_clock_tick();
	/* Losses of an earlier session were reported to it (or not at all):
	 * this one starts without them, and its records start at the counts
	 * as they are now. Nothing writes while not recording. */
	if (stopped_since_start)
		wait_for_writers();
	stopped_since_start = false;
	for (uint32_t i = 0; i < desc.nslots; i++) {
		struct ptbpf_ops_slot *s =
			(struct ptbpf_ops_slot *)(slot_mem + (size_t)i * desc.slot_bytes);

		s->gap_lost = 0;
		s->start_head = s->head;
		s->start_written = s->written;
		s->start_begins = s->begins;
		s->start_dropped = s->dropped;
		s->start_begins_dropped = s->begins_dropped;
	}
	atomic_store(&recording, 1);
	handles[nhandles++] = rf_add(STUB_RF_FUNCTION, start_function, STUB_RF_END, end_any,
				     function, 1, shapes);
	handles[nhandles++] = rf_add(STUB_RF_BACKWARD, start_backward, STUB_RF_END, end_any,
				     backward, 1, false);
	handles[nhandles++] = rf_add(STUB_RF_USER, start_user, STUB_RF_END, end_any, user, 1,
				     false);
	handles[nhandles++] = rf_add(STUB_RF_OTHER, start_other, STUB_RF_END, end_any, other,
				     sizeof(other) / sizeof(other[0]), false);
	return &desc;
}

/*
 * Ring pages a thread is about to write, faulted in from the agent's
 * thread: MADV_POPULATE_WRITE maps them writable without touching their
 * bytes, so the writer's stores never race with it. Left to the job's
 * thread, a fresh 4 KiB page every 46 ops costs it about 15 ns per op over
 * the first 4 MiB it records after each attach (CI VM: 18-20 ns per
 * 88-byte record on a first pass, 3.4-4.3 after), which is all of a short
 * capture (a daemon window, a benchmark phase). Each owned ring is kept
 * populated ahead of its head by twice what it wrote since the last tick,
 * at least 128 KiB, at most 2 MiB a tick; a ring that wrapped has every
 * page already. A kernel without it (before 5.14) or an error stops it.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define AHEAD_MIN (128u << 10)
#define AHEAD_STEP (2u << 20)
static uint64_t populated[PTBPF_OPS_SLOTS], head_seen[PTBPF_OPS_SLOTS];
static bool populate_off;

void agent_ops_prefault(void)
{
	uintptr_t page = 4096;

	for (uint32_t i = 0; i < desc.nslots && slot_mem && !populate_off; i++) {
		struct ptbpf_ops_slot *s =
			(struct ptbpf_ops_slot *)(slot_mem + (size_t)i * desc.slot_bytes);
		uint64_t head = __atomic_load_n(&s->head, __ATOMIC_RELAXED);
		uint64_t ahead = 2 * (head - head_seen[i]), want;
		uintptr_t from, to;

		head_seen[i] = head;
		if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != OPS_SLOT_OWNED ||
		    populated[i] >= ring_cap)
			continue;
		if (populated[i] < head) /* the writer has touched those itself */
			populated[i] = head < ring_cap ? head : ring_cap;
		ahead = ahead < AHEAD_MIN ? AHEAD_MIN : ahead;
		want = head + ahead < ring_cap ? head + ahead : ring_cap;
		if (want > populated[i] + AHEAD_STEP)
			want = populated[i] + AHEAD_STEP;
		if (want <= populated[i])
			continue;
		from = ((uintptr_t)(s + 1) + populated[i]) & ~(page - 1);
		to = (uintptr_t)(s + 1) + want;
		if (madvise((void *)from, to - from, MADV_POPULATE_WRITE)) {
			populate_off = true; /* the writer faults its pages in itself */
			return;
		}
		populated[i] = want;
	}
}

/* What the threads recorded, or tried to: it changes with every record. */
uint64_t agent_ops_activity(void)
{
	uint64_t n = __atomic_load_n(&desc.no_slot, __ATOMIC_RELAXED);

	for (uint32_t i = 0; i < desc.nslots && slot_mem; i++) {
		const struct ptbpf_ops_slot *s =
			(const struct ptbpf_ops_slot *)(slot_mem + (size_t)i * desc.slot_bytes);

		n += __atomic_load_n(&s->written, __ATOMIC_RELAXED) +
		     __atomic_load_n(&s->dropped, __ATOMIC_RELAXED);
	}
	return n;
}

/*
 * The agent idles (nothing recorded for a while): desc.idle tells ptbpf,
 * which then reads the rings seldom, and the first record written after
 * it wakes both (wake()). A record written as it is set may not see it;
 * the next one does. Returns at once if a record came after activity was
 * last seen (then it is not idle), else waits on desc.idle for up to ms.
 */
void agent_ops_idle(uint64_t activity, long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	if (!slot_mem || !atomic_load(&recording)) {
		nanosleep(&ts, NULL);
		return;
	}
	__atomic_store_n(&desc.idle, 1, __ATOMIC_SEQ_CST);
	if (agent_ops_activity() != activity) {
		__atomic_store_n(&desc.idle, 0, __ATOMIC_RELEASE);
		return;
	}
	syscall(SYS_futex, &desc.idle, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
}

/* Not idle (any longer): recording, or about to stop. */
void agent_ops_busy(void)
{
	__atomic_store_n(&desc.idle, 0, __ATOMIC_RELEASE);
}

/* The clock's line kept near CLOCK_MONOTONIC, and how near, for ptbpf. */
void agent_ops_clock_tick(void)
{
	agent_clock_tick();
	/* The TSC once a line is there (records before it: clock_gettime). */
	if (__atomic_load_n(&agent_clock.ready, __ATOMIC_RELAXED))
		desc.clock = OPS_CLOCK_TSC;
	__atomic_store_n(&desc.clock_checks, agent_clock.ticks, __ATOMIC_RELAXED);
	__atomic_store_n(&desc.clock_steps, agent_clock.steps, __ATOMIC_RELAXED);
	__atomic_store_n(&desc.clock_max_err_ns, agent_clock.max_err_ns, __ATOMIC_RELAXED);
}

/* At process exit, while recording: stop, then give ptbpf (which reads
 * every 20 ms) up to 250 ms to read what the rings still hold, since the
 * process's memory, rings included, is gone once it exits. */
void agent_ops_exit(void)
{
	if (!atomic_exchange(&recording, 0))
		return;
	for (int waited = 0; waited < 250; waited += 2) {
		bool drained = true;

		for (uint32_t i = 0; i < desc.nslots && drained; i++) {
			struct ptbpf_ops_slot *s =
				(struct ptbpf_ops_slot *)(slot_mem + (size_t)i * desc.slot_bytes);

			drained = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE) == s->head;
		}
		if (drained)
			return;
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	}
}

void agent_ops_stop(void)
{
	agent_ops_busy();
	if (atomic_exchange(&recording, 0))
		stopped_since_start = true;
	for (int i = 0; i < nhandles; i++)
		rfapi.remove(handles[i]);
	nhandles = 0;
}

void agent_ops_unload(void)
{
	if (!slot_mem)
		return;
	memset(populated, 0, sizeof(populated));
	memset(head_seen, 0, sizeof(head_seen));
	pthread_key_delete(slot_key);
	munmap(slot_mem, (size_t)PTBPF_OPS_SLOTS * PTBPF_OPS_SLOT_BYTES);
	slot_mem = NULL;
}
