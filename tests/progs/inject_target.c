// SPDX-License-Identifier: BSD-2-Clause
/*
 * Injection target: four threads blocked in different system calls
 * (nanosleep, read on a pipe, futex through pthread_cond_wait, poll) and a
 * main thread doing malloc/free and printing a checksum every 100 ms. A
 * clobbered register, a syscall that returns EINTR instead of restarting,
 * or a hang shows up as a wrong line, an "error" line or a missing "done".
 *
 *   inject_target N [MODE]   prints "ready", then "tick I SUM" N times,
 *                            then "done"
 *
 * MODE "any" (the default) leaves every thread free for ptbpf to borrow.
 * MODE sleeper, reader, waiter or poller leaves only that thread: the main
 * loop runs on a 64 KiB stack and the other threads get 64 KiB stacks, too
 * small for ptbpf to use. MODE vector adds a thread "vector" that adds
 * vectors in AVX registers with MXCSR rounding upward, checking each batch
 * against the first, and leaves only it. Threads are named after their
 * role. If $INJECT_TARGET_STOP names a file, the loop ends early once it
 * exists.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fenv.h>
#include <poll.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define SMALL_STACK (64 * 1024)
#define VEC_ITERS (1 << 20)

static int read_pipe[2], poll_pipe[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int stop;
static int failed;
static int ticks;
static const char *stop_file;
static ucontext_t main_ctx, loop_ctx;
static double vec_inc[32];

static void fail(const char *what, int err)
{
	printf("error %s: %s\n", what, strerror(err));
	fflush(stdout);
	__atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);
}

static void *sleeper(void *arg)
{
	while (!stop) {
		struct timespec ts = { 0, 30 * 1000 * 1000 };

		if (nanosleep(&ts, NULL))
			fail("nanosleep", errno);
	}
	return NULL;
}

static void *reader(void *arg)
{
	char c;
	ssize_t n = read(read_pipe[0], &c, 1);

	if (n != 1 || c != 'q')
		fail("read", n < 0 ? errno : EIO);
	return NULL;
}

static void *waiter(void *arg)
{
	pthread_mutex_lock(&mu);
	while (!stop)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *poller(void *arg)
{
	struct pollfd p = { .fd = poll_pipe[0], .events = POLLIN };
	int n = poll(&p, 1, -1);

	if (n != 1 || !(p.revents & POLLIN))
		fail("poll", n < 0 ? errno : EIO);
	return NULL;
}

/* Eight accumulators in ymm0-7, increments in ymm8-15: every lane of
 * every register, upper halves included, is live for the whole loop. */
__attribute__((target("avx"))) static void vec_run(double out[32], long iters)
{
	asm volatile("vxorpd %%ymm0, %%ymm0, %%ymm0\n\t"
		     "vxorpd %%ymm1, %%ymm1, %%ymm1\n\t"
		     "vxorpd %%ymm2, %%ymm2, %%ymm2\n\t"
		     "vxorpd %%ymm3, %%ymm3, %%ymm3\n\t"
		     "vxorpd %%ymm4, %%ymm4, %%ymm4\n\t"
		     "vxorpd %%ymm5, %%ymm5, %%ymm5\n\t"
		     "vxorpd %%ymm6, %%ymm6, %%ymm6\n\t"
		     "vxorpd %%ymm7, %%ymm7, %%ymm7\n\t"
		     "vmovupd 0(%[inc]), %%ymm8\n\t"
		     "vmovupd 32(%[inc]), %%ymm9\n\t"
		     "vmovupd 64(%[inc]), %%ymm10\n\t"
		     "vmovupd 96(%[inc]), %%ymm11\n\t"
		     "vmovupd 128(%[inc]), %%ymm12\n\t"
		     "vmovupd 160(%[inc]), %%ymm13\n\t"
		     "vmovupd 192(%[inc]), %%ymm14\n\t"
		     "vmovupd 224(%[inc]), %%ymm15\n"
		     "1:\n\t"
		     "vaddpd %%ymm8, %%ymm0, %%ymm0\n\t"
		     "vaddpd %%ymm9, %%ymm1, %%ymm1\n\t"
		     "vaddpd %%ymm10, %%ymm2, %%ymm2\n\t"
		     "vaddpd %%ymm11, %%ymm3, %%ymm3\n\t"
		     "vaddpd %%ymm12, %%ymm4, %%ymm4\n\t"
		     "vaddpd %%ymm13, %%ymm5, %%ymm5\n\t"
		     "vaddpd %%ymm14, %%ymm6, %%ymm6\n\t"
		     "vaddpd %%ymm15, %%ymm7, %%ymm7\n\t"
		     "dec %[n]\n\t"
		     "jnz 1b\n\t"
		     "vmovupd %%ymm0, 0(%[out])\n\t"
		     "vmovupd %%ymm1, 32(%[out])\n\t"
		     "vmovupd %%ymm2, 64(%[out])\n\t"
		     "vmovupd %%ymm3, 96(%[out])\n\t"
		     "vmovupd %%ymm4, 128(%[out])\n\t"
		     "vmovupd %%ymm5, 160(%[out])\n\t"
		     "vmovupd %%ymm6, 192(%[out])\n\t"
		     "vmovupd %%ymm7, 224(%[out])\n\t"
		     "vzeroupper"
		     : [n] "+r"(iters)
		     : [inc] "r"(vec_inc), [out] "r"(out)
		     : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
		       "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
		       "xmm15");
}

/* Rounding upward makes every sum depend on MXCSR staying as it was. */
static void *vector(void *arg)
{
	double first[32], again[32];

	if (!__builtin_cpu_supports("avx")) {
		fail("avx", ENOTSUP);
		return NULL;
	}
	if (fesetround(FE_UPWARD)) {
		fail("fesetround", EINVAL);
		return NULL;
	}
	vec_run(first, VEC_ITERS);
	while (!stop) {
		vec_run(again, VEC_ITERS);
		if (memcmp(first, again, sizeof(first))) {
			fail("avx", EIO);
			return NULL;
		}
	}
	return NULL;
}

static void main_loop(void)
{
	for (int i = 0; i < ticks; i++) {
		unsigned long sum = 0;

		/* Many allocations so a stop often lands inside malloc or free. */
		for (int k = 0; k < 2000; k++) {
			size_t sz = 16 + (k * 37) % 4000;
			unsigned char *p = malloc(sz);

			if (!p)
				exit(3);
			memset(p, (i + k) & 0xff, sz);
			sum += p[sz / 2] + sz;
			free(p);
		}
		printf("tick %d %lu\n", i, sum);
		if (stop_file && !access(stop_file, F_OK))
			break;
		usleep(100 * 1000);
	}
}

/* A stack of size bytes above a guard page, like a small thread stack. */
static void *small_stack(size_t size)
{
	char *p = mmap(NULL, size + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p + 4096, size, PROT_READ | PROT_WRITE))
		exit(2);
	return p + 4096;
}

int main(int argc, char **argv)
{
	static const char *names[5] = { "sleeper", "reader", "waiter", "poller", "vector" };
	void *(*fns[5])(void *) = { sleeper, reader, waiter, poller, vector };
	const char *mode = argc > 2 ? argv[2] : "any";
	bool any = !strcmp(mode, "any");
	int nth = !strcmp(mode, "vector") ? 5 : 4;
	pthread_t th[5];

	ticks = argc > 1 ? atoi(argv[1]) : 50;
	stop_file = getenv("INJECT_TARGET_STOP");
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < 32; i++)
		vec_inc[i] = (i + 1) / 3.0;
	if (pipe(read_pipe) || pipe(poll_pipe))
		return 2;
	for (int i = 0; i < nth; i++) {
		pthread_attr_t a;

		pthread_attr_init(&a);
		if (!any && strcmp(mode, names[i]))
			pthread_attr_setstacksize(&a, SMALL_STACK);
		if (pthread_create(&th[i], &a, fns[i], NULL))
			return 2;
		pthread_setname_np(th[i], names[i]);
		pthread_attr_destroy(&a);
	}
	printf("ready\n");
	if (any) {
		main_loop();
	} else {
		getcontext(&loop_ctx);
		loop_ctx.uc_stack.ss_sp = small_stack(SMALL_STACK);
		loop_ctx.uc_stack.ss_size = SMALL_STACK;
		loop_ctx.uc_link = &main_ctx;
		makecontext(&loop_ctx, main_loop, 0);
		swapcontext(&main_ctx, &loop_ctx);
	}
	stop = 1;
	pthread_mutex_lock(&mu);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	if (write(read_pipe[1], "q", 1) != 1 || write(poll_pipe[1], "q", 1) != 1)
		return 2;
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	if (failed)
		return 1;
	printf("done\n");
	return 0;
}
