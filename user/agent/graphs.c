// SPDX-License-Identifier: BSD-2-Clause
/*
 * The kept capture map (part of libptbpf-agent.so), asked for by " graphs"
 * beside the daemon's always-on step signal (" steps"). A window's own map
 * (cupti_api.c's graph nodes, which ptbpf joins to the op open on the
 * thread that made each) holds the captures it saw; but a job captures its
 * CUDA graphs once, at its warm-up, long before a window opens. So between
 * windows the agent keeps, for every graph node made in the process, the op
 * that was open on the thread that made it, and hands the map to each
 * window at its start (ptbpf_agent_graph_kept), before the window's GPU
 * timeline begins.
 *
 * What it takes:
 *   - CUPTI's resource callbacks: a graph made (by a stream capture), a
 *     node made (a launch into the capturing stream), a node cloned (an
 *     instantiation). Between windows the agent holds CUPTI's callback
 *     subscriber for these alone (cupti.c), and gives it up to the job's
 *     own CUPTI user as a window does; the map then stops growing.
 *   - the op open on a thread, tracked only during a capture phase: from a
 *     graph or node made until no node was made for PHASE_NS. The step
 *     signal's callback (steps.c) passes USER_SCOPE regions on; FUNCTION
 *     and BACKWARD_FUNCTION ops come from a second callback, registered for
 *     the phase alone (outside one, ATen ops build no RecordFunction for
 *     ptbpf at all). An op begun before its phase did (one enclosing a
 *     phase's first capture) is not seen: its nodes get the innermost op
 *     seen, or none (counted).
 * The map lives as long as the process: nodes of destroyed graphs stay
 * (CUPTI never gives their ids again); past KEPT_MAX, nodes are counted.
 * CUPTI 13 tells each node of a graph being instantiated twice: as made,
 * inside the instantiating call (under whatever op is open then: torch's
 * CompiledFunction, or none), then as cloned from the captured node. The
 * clone's record replaces the first: its op is its original's (on the
 * H200, every replayed kernel of a reduce-overhead loop went to
 * CompiledFunction and CompiledFunctionBackward before).
 */
#define _GNU_SOURCE
#include "agent.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "rf_abi.h"

#define KEPT_MAX  16384         /* nodes kept: 2.9 MiB, resident as filled */
#define PHASE_NS  2000000000LL  /* a capture phase ends this long after its last node */
#define DEPTH_MAX 12            /* ops open on a thread that are tracked */
#define RETRY_NS  2000000000LL  /* asked for before the process has CUDA: looks again */

/* ver: 0 until made, odd while told_anew rewrites it, even once ready (a
 * sequence count: graphs_send copies a record between two equal reads). */
static struct {
	struct ptbpf_agent_graph_kept k;
	_Atomic uint32_t ver;
} kept[KEPT_MAX];
static _Atomic uint32_t nkept;      /* slots taken (past KEPT_MAX by a few racing threads) */
/* The node ids kept (0: a free slot) and each one's record (its index + 1;
 * 0 until placed), so that a node told again keeps one record. */
#define IDS_SLOTS (2 * KEPT_MAX)
static _Atomic uint64_t ids[IDS_SLOTS];
static _Atomic uint32_t id_rec[IDS_SLOTS];
static _Atomic uint64_t told_again; /* nodes told again, not as the clone of a copy */
static _Atomic uint64_t not_kept;   /* nodes made or cloned once the map was full */
static _Atomic bool keeping;
static _Atomic bool lost;    /* CUPTI's callbacks went (graphs_lost) */
static _Atomic bool layout_bad;     /* a scope byte not where 1.13-2.x have it */
static _Atomic int64_t last_made;   /* when the last node was made */

/* The phase's callback, under phase_lock (a job thread begins a phase, the
 * agent's thread ends it). */
static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool phase_on;
static uint64_t phase_handle;
static uint64_t phases;
static int64_t phase_began, phase_ns; /* the phase on now began; all ended ones' time */
static _Atomic uint64_t graphs_seen;  /* graphs made (by a capture, or cudaGraphCreate) */

/* This thread's open ops, innermost last, while a phase is on: each a
 * RecordFunction's address with its kind in the low bits (it holds
 * pointers: 8-aligned). Kept small (TLS, agent.h). */
enum { OP_FUNCTION = 0, OP_BACKWARD = 1, OP_USER = 2, OP_KIND_MASK = 3 };
static TLS uintptr_t open_ops[DEPTH_MAX];
static TLS uint8_t nops, deeper; /* deeper: opened past DEPTH_MAX, not tracked */

/* scope: SC_FUNCTION, SC_BACKWARD or SC_USER (rf_abi.h). A
 * region that may end on another thread (c10d's collectives) is never
 * passed here: its entry would outlive it (steps.c). */
void graphs_rf_begin(const void *rf, uint8_t scope)
{
	if (!atomic_load_explicit(&phase_on, memory_order_relaxed))
		return;
	if (nops < DEPTH_MAX)
		open_ops[nops++] = (uintptr_t)rf | (scope == SC_FUNCTION ? OP_FUNCTION :
						    scope == SC_BACKWARD ? OP_BACKWARD : OP_USER);
	else if (deeper < UINT8_MAX)
		deeper++;
}

/* Ends are popped whether or not a phase is on: a phase that ended
 * leaves its ops' ends to come. */
void graphs_rf_end(const void *rf)
{
	for (int i = nops - 1; i >= 0; i--) {
		if ((open_ops[i] & ~(uintptr_t)OP_KIND_MASK) == (uintptr_t)rf) {
			nops = (uint8_t)i;
			return;
		}
	}
	if (deeper && nops == DEPTH_MAX)
		deeper--;
}

bool graphs_tracking(void)
{
	return atomic_load_explicit(&phase_on, memory_order_relaxed);
}

/* The phase's start callback: a null std::unique_ptr<ObserverContext>
 * through the hidden pointer ret (its scope byte checked: FUNCTION or
 * BACKWARD_FUNCTION, else no sequence number is read again). */
static void **phase_start(void **ret, const void *rf)
{
	uint8_t *busy = busy_enter();
	uint8_t scope = *((const uint8_t *)rf + RF_SCOPE_OFF);

	*ret = NULL;
	if (scope != SC_FUNCTION && scope != SC_BACKWARD)
		atomic_store_explicit(&layout_bad, true, memory_order_relaxed);
	graphs_rf_begin(rf, scope);
	busy_leave(busy);
	return ret;
}

static void phase_end(const void *rf, void *ctx)
{
	uint8_t *busy = busy_enter();

	(void)ctx;
	graphs_rf_end(rf);
	busy_leave(busy);
}

static void phase_begin(int64_t now)
{
	static const int scopes[] = { SC_FUNCTION, SC_BACKWARD };

	atomic_store_explicit(&last_made, now, memory_order_relaxed);
	if (atomic_load_explicit(&phase_on, memory_order_acquire))
		return;
	pthread_mutex_lock(&phase_lock);
	if (!atomic_load(&phase_on) && atomic_load(&keeping)) {
		atomic_store_explicit(&phase_on, true, memory_order_release);
		phase_handle = rf_add(STUB_RF_GRAPHS, phase_start, STUB_RF_GRAPHS_END, phase_end,
				      scopes, 2, false);
		phases++;
		phase_began = now;
	}
	pthread_mutex_unlock(&phase_lock);
}

static void phase_stop(void)
{
	pthread_mutex_lock(&phase_lock);
	if (atomic_load(&phase_on)) {
		rfapi.remove(phase_handle);
		atomic_store(&phase_on, false);
		phase_ns += agent_mono_ns() - phase_began;
	}
	pthread_mutex_unlock(&phase_lock);
}

/* Phases so far, and how long they were on in all (the one on now too):
 * while one is on, every ATen op builds a RecordFunction for it. */
static uint64_t phase_time(uint64_t *n)
{
	int64_t ns;

	pthread_mutex_lock(&phase_lock);
	*n = phases;
	ns = phase_ns + (atomic_load(&phase_on) ? agent_mono_ns() - phase_began : 0);
	pthread_mutex_unlock(&phase_lock);
	return (uint64_t)ns;
}

void graphs_made(void)
{
	atomic_fetch_add_explicit(&graphs_seen, 1, memory_order_relaxed);
	if (atomic_load_explicit(&keeping, memory_order_relaxed))
		phase_begin(agent_mono_ns());
}

/* id's slot in ids, where add puts it if it is not there (*fresh: it was
 * not); -1: not there and not added (the table is at most half full: ids
 * are added only while the map has room). */
static int32_t id_slot(uint64_t id, bool add, bool *fresh)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull;

	*fresh = true;
	for (uint32_t i = 0; i < IDS_SLOTS; i++) {
		uint32_t at = (uint32_t)((h + i) % IDS_SLOTS);
		uint64_t seen = add ? 0 : atomic_load(&ids[at]);

		if (!add && !seen)
			return -1;
		if ((add && atomic_compare_exchange_strong(&ids[at], &seen, id)) || seen == id) {
			*fresh = seen != id;
			return (int32_t)at;
		}
	}
	return -1;
}

/* r, told again: a clone of a node first told as made (a copy made by an
 * instantiation, above) takes its record over, in place (its order, after
 * its original, stays; a clone's op is its original's, which ptbpf looks
 * up); anything else keeps the first. CUPTI tells both on the
 * instantiating thread, one after the other: the record is placed by then
 * (id_rec). A window's start may be sending it meanwhile (ver). */
static void told_anew(int32_t at, const struct ptbpf_agent_graph_node *r)
{
	uint32_t i = at >= 0 ? atomic_load(&id_rec[at]) : 0;
	struct ptbpf_agent_graph_kept *k = i ? &kept[i - 1].k : NULL;
	uint32_t v;

	if (!k || r->kind != GRAPH_NODE_CLONED || k->node.kind != GRAPH_NODE_CREATED) {
		atomic_fetch_add(&told_again, 1);
		return;
	}
	v = atomic_load_explicit(&kept[i - 1].ver, memory_order_relaxed);
	atomic_store_explicit(&kept[i - 1].ver, v + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	k->node.kind = r->kind;
	k->node.original_id = r->original_id;
	k->node.graph_id = r->graph_id;
	k->seq = -1;
	memset(k->op, 0, sizeof(k->op));
	atomic_store_explicit(&kept[i - 1].ver, v + 2, memory_order_release);
}

/* Record i as it stands, into *out: false while it is made or rewritten. */
static bool kept_copy(uint32_t i, struct ptbpf_agent_graph_kept *out)
{
	for (int tries = 0; tries < 100; tries++) {
		uint32_t v = atomic_load_explicit(&kept[i].ver, memory_order_acquire);

		if (!v)
			return false;
		if (v & 1)
			continue;
		memcpy(out, &kept[i].k, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&kept[i].ver, memory_order_relaxed) == v)
			return true;
	}
	return false;
}

/* On the thread that made (or cloned) node r, inside CUPTI's callback. A
 * node made begins or renews a phase; a clone takes its original's op. */
void graphs_node(const struct ptbpf_agent_graph_node *r)
{
	struct ptbpf_agent_graph_kept *k;
	int32_t at = -1;
	bool fresh = true, room;
	int64_t now;
	uint32_t i;

	if (!atomic_load_explicit(&keeping, memory_order_relaxed))
		return;
	room = atomic_load_explicit(&nkept, memory_order_relaxed) < KEPT_MAX;
	if (r->node_id && (at = id_slot(r->node_id, room, &fresh)) >= 0 && !fresh) {
		told_anew(at, r);
		return;
	}
	if (!room) {
		atomic_fetch_add(&not_kept, 1);
		return;
	}
	if ((i = atomic_fetch_add(&nkept, 1)) >= KEPT_MAX) {
		atomic_fetch_add(&not_kept, 1);
		return;
	}
	now = agent_mono_ns();
	if (r->kind == GRAPH_NODE_CREATED)
		phase_begin(now);
	k = &kept[i].k;
	memset(k, 0, sizeof(*k));
	k->node = *r;
	k->node.correlation_id = 0;
	k->seq = -1;
	k->made_ns = (uint64_t)now;
	if (r->kind == GRAPH_NODE_CREATED && nops) {
		const void *rf = (const void *)(open_ops[nops - 1] & ~(uintptr_t)OP_KIND_MASK);
		int kind = (int)(open_ops[nops - 1] & OP_KIND_MASK);
		const char *name = rfapi.name(rf);

		if (name)
			strncpy(k->op, name, sizeof(k->op) - 1);
		if (kind != OP_USER && !atomic_load(&layout_bad))
			k->seq = *(const int64_t *)((const uint8_t *)rf + RF_SEQ_OFF);
	}
	atomic_store_explicit(&kept[i].ver, 2, memory_order_release);
	if (at >= 0)
		atomic_store(&id_rec[at], i + 1);
}

static bool graphs_on(char *why, size_t len)
{
	if (!agent_steps_is_on()) {
		snprintf(why, len, "the step signal is off (the map takes its callback)");
		return false;
	}
	atomic_store(&keeping, true);
	if (!cupti_graphs_on(why, len)) {
		atomic_store(&keeping, false);
		return false;
	}
	return true;
}

bool graphs_is_on(void)
{
	return atomic_load(&keeping);
}

/* Asked for, on the agent's thread: on once the process has CUDA (torch
 * loads it at its first CUDA call, after the daemon found the process);
 * once refused for another reason, not tried again until asked anew. */
static bool wanted, refused;
static int64_t next_try;
static char why_not[200]; /* the last refusal, told to each window */

static void try_on(int64_t now)
{
	char why[200];

	if (!wanted || refused || atomic_load(&keeping) || atomic_load(&lost) ||
	    now < next_try)
		return;
	next_try = now + RETRY_NS;
	if (!agent_cuda_loaded())
		return;
	if (graphs_on(why, sizeof(why))) {
		agent_report(PTBPF_AGENT_GRAPHS, 1, "graphs: on (CUPTI's graph callbacks, and the "
			     "ops open on capturing threads, kept between windows)");
	} else {
		refused = true;
		snprintf(why_not, sizeof(why_not), "%s", why);
		agent_report(PTBPF_AGENT_GRAPHS, 0, "graphs: not kept: %s", why);
	}
}

void graphs_want(bool want, int64_t now)
{
	bool was = wanted;

	if (want && !was) {
		refused = false;
		next_try = 0;
		atomic_store(&lost, false);
	}
	wanted = want;
	if (want) {
		try_on(now);
	} else if (was) {
		bool on = atomic_exchange(&keeping, false);

		phase_stop();
		cupti_graphs_off();
		if (on)
			agent_report(PTBPF_AGENT_GRAPHS, 0, "graphs: off");
	}
}

/* CUPTI's callbacks are gone (cupti.c says why: the job's own CUPTI user
 * took them, or they could not be had back after a window): kept is what
 * was made until now. */
static const char *_Atomic lost_why;

void graphs_lost(const char *why)
{
	atomic_store(&lost_why, why);
	atomic_store(&lost, true);
	atomic_store(&keeping, false);
}

void graphs_tick(int64_t now)
{
	if (atomic_load(&phase_on) && now - atomic_load(&last_made) > PHASE_NS)
		phase_stop();
	if (wanted)
		cupti_graphs_tick(now);
	try_on(now);
}

/* At a window's start, on the agent's thread, before its GPU timeline: the
 * map, in the order made (a clone after its original), to ptbpf. */
void graphs_send(void)
{
	uint32_t n = atomic_load(&nkept), sent = 0, outside_ops = 0;
	const char *why = atomic_load(&lost_why);
	uint64_t n_phases, ns;

	next_try = 0; /* asked for and not on: a look now, so that what is said is so */
	try_on(agent_mono_ns());
	/* A process without CUDA has no graph to keep: nothing to say (a
	 * daemon asks for the map in every process it watches, CPU-only ones
	 * too). */
	if (wanted && refused && !atomic_load(&keeping) && !atomic_load(&lost))
		agent_report(PTBPF_AGENT_GRAPHS, 0, "graphs: the capture map is not kept: %s",
			     why_not);
	if (!n)
		return;
	if (n > KEPT_MAX)
		n = KEPT_MAX;
	for (uint32_t i = 0; i < n; i++) {
		struct ptbpf_agent_graph_kept k;

		if (!kept_copy(i, &k))
			continue; /* being made now: the window sees it itself */
		ptbpf_agent_graph_kept(&k);
		outside_ops += k.node.kind == GRAPH_NODE_CREATED && !k.op[0];
		sent++;
	}
	ns = phase_time(&n_phases);
	agent_report(PTBPF_AGENT_GRAPHS, sent, "graphs: the capture map kept between windows: %u "
		     "records (nodes made, and their clones); %u nodes made with no op seen "
		     "open, %llu not kept (the map was full), %llu told again; %llu graphs made; "
		     "%llu capture phases, on for %.1f s in all%s%s", sent, outside_ops,
		     (unsigned long long)atomic_load(&not_kept),
		     (unsigned long long)atomic_load(&told_again),
		     (unsigned long long)atomic_load(&graphs_seen), (unsigned long long)n_phases,
		     ns / 1e9, atomic_load(&lost) ? "; it grows no more: " : "",
		     atomic_load(&lost) && why ? why : "");
}
