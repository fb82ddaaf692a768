// SPDX-License-Identifier: BSD-2-Clause
/*
 * ring_bench: what the agent's RecordFunction callbacks cost per op, apart
 * from torch and from the noise of a whole process: the op recorder
 * (user/agent/ops.c, compiled in here) is driven in a tight loop with a
 * stand-in RecordFunction, as torch drives it for one op (a begin and an
 * end), and a consumer that frees the ring as ptbpf would. Prints the best
 * of several repetitions, in ns per op, next to an empty callback pair,
 * with the records' timestamps from clock_gettime() and from the TSC
 * (user/agent/clock.c, compiled in too).
 *
 * usage: ring_bench [OPS_PER_REP]
 */
#include "../../user/agent/ops.c"
#include "../../user/agent/clock.c"

#include <stdlib.h>

/* What ops.c takes from the rest of the agent. */
struct ptbpf_agent_busy ptbpf_agent_busy;
__thread int agent_busy_idx __attribute__((tls_model("initial-exec")));

int agent_busy_assign(void)
{
	return 1;
}

void *stub_entry(int i, void *target)
{
	return target;
}

void ptbpf_agent_pystack(uint64_t ts)
{
}

void ptbpf_agent_wake(void)
{
}

/* rf.c's, filled with the stand-ins below. */
struct rf_api rfapi;

int rf_resolve(char *why, size_t len)
{
	return 0;
}

uint64_t rf_add(int start_stub, void **(*start)(void **, const void *), int end_stub,
		void (*end)(const void *, void *), const int *scopes, int n, bool inputs)
{
	return 0;
}

/* The stand-ins for torch: a FUNCTION-scope RecordFunction of an op with a
 * sequence number, its name, and the thread's next sequence number. */
static uint8_t fake_rf[512];
static const char op_name[] = "aten::add";

static const char *fake_name(const void *rf)
{
	return op_name;
}

static int64_t fake_peek(void)
{
	return 7;
}

static int fake_uncaught(void)
{
	return 0;
}

static void **empty_start(void **ret, const void *rf)
{
	*ret = NULL;
	return ret;
}

static void empty_end(const void *rf, void *ctx)
{
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The consumer: everything written so far is read. */
static void drain(void)
{
	struct ptbpf_ops_slot *s = my_slot;

	if (s && s != NO_SLOT)
		__atomic_store_n(&s->tail, s->head, __ATOMIC_RELEASE);
}

/* The agent's thread's part: the clock's line kept, every 20 ms. */
static volatile int ticking;

static void *ticker(void *arg)
{
	(void)arg;
	while (ticking) {
		agent_ops_clock_tick();
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
	return NULL;
}

typedef void **(*start_fn)(void **, const void *);
typedef void (*end_fn)(const void *, void *);

/* Called through pointers, as torch calls them. */
static double best_ns(start_fn volatile start, end_fn volatile end, long ops, int reps)
{
	double best = 1e9;

	for (int r = 0; r < reps; r++) {
		double t0 = now_s();
		void *ret;

		for (long i = 0; i < ops; i++) {
			start(&ret, fake_rf);
			end(fake_rf, NULL);
			if ((i & 1023) == 0)
				drain();
		}
		t0 = (now_s() - t0) / ops * 1e9;
		if (t0 < best)
			best = t0;
	}
	return best;
}

int main(int argc, char **argv)
{
	long ops = argc > 1 ? atol(argv[1]) : 2000000;
	pthread_t tick_thread;
	char why[128];

	if (alloc_slots(why, sizeof(why))) {
		fprintf(stderr, "ring_bench: %s\n", why);
		return 1;
	}
	rfapi.name = fake_name;
	rfapi.peek = fake_peek;
	rfapi.uncaught = fake_uncaught;
	fake_rf[RF_SCOPE_OFF] = SC_FUNCTION;
	*(int64_t *)(fake_rf + RF_SEQ_OFF) = 5;
	atomic_store(&recording, 1);
	best_ns(start_function, end_any, ops / 10, 1); /* warm: the ring's pages */
	printf("empty callbacks %.1f ns/op\n", best_ns(empty_start, empty_end, ops, 7));
	printf("agent callbacks %.1f ns/op (a begin and an end record, clock_gettime)\n",
	       best_ns(start_function, end_any, ops, 7));
	agent_clock_start(true);
	ticking = 1;
	pthread_create(&tick_thread, NULL, ticker, NULL);
	nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	if (!agent_clock.ready) {
		printf("agent callbacks with the TSC: no TSC to trust here\n");
	} else {
		printf("agent callbacks %.1f ns/op (a begin and an end record, the TSC)\n",
		       best_ns(start_function, end_any, ops, 7));
		printf("the TSC line: checked %lu times, largest difference %lu ns\n",
		       (unsigned long)agent_clock.ticks, (unsigned long)agent_clock.max_err_ns);
	}
	ticking = 0;
	pthread_join(tick_thread, NULL);
	return 0;
}
