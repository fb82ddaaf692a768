// SPDX-License-Identifier: BSD-2-Clause
/*
 * Injection target: four threads blocked in different system calls
 * (nanosleep, read on a pipe, futex through pthread_cond_wait, poll) and a
 * main thread doing malloc/free and printing a checksum every 100 ms. A
 * clobbered register, a syscall that returns EINTR instead of restarting,
 * or a hang shows up as a wrong line, an "error" line or a missing "done".
 *
 *   inject_target N   prints "ready", then "tick I SUM" N times, then "done"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int read_pipe[2], poll_pipe[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int stop;
static int failed;

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

int main(int argc, char **argv)
{
	void *(*fns[4])(void *) = { sleeper, reader, waiter, poller };
	pthread_t th[4];
	int n = argc > 1 ? atoi(argv[1]) : 50;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(read_pipe) || pipe(poll_pipe))
		return 2;
	for (int i = 0; i < 4; i++)
		if (pthread_create(&th[i], NULL, fns[i], NULL))
			return 2;
	printf("ready\n");
	for (int i = 0; i < n; i++) {
		unsigned long sum = 0;

		/* Many allocations so a stop often lands inside malloc or free. */
		for (int k = 0; k < 2000; k++) {
			size_t sz = 16 + (k * 37) % 4000;
			unsigned char *p = malloc(sz);

			if (!p)
				return 3;
			memset(p, (i + k) & 0xff, sz);
			sum += p[sz / 2] + sz;
			free(p);
		}
		printf("tick %d %lu\n", i, sum);
		usleep(100 * 1000);
	}
	stop = 1;
	pthread_mutex_lock(&mu);
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	if (write(read_pipe[1], "q", 1) != 1 || write(poll_pipe[1], "q", 1) != 1)
		return 2;
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	if (failed)
		return 1;
	printf("done\n");
	return 0;
}
