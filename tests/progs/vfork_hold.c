// SPDX-License-Identifier: BSD-2-Clause
/*
 * A target whose main thread is blocked in the kernel where ptrace cannot
 * stop it: vfork() waits uninterruptibly until the child exits, and the
 * child sleeps HOLD_MS. Three worker threads count meanwhile.
 *   vfork_hold HOLD_MS    prints "ready", "holding" (then blocks), and
 *                         "counts A B C" once the child has exited
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile long counts[3];

static void *work(void *arg)
{
	long i = (long)arg;

	for (;;) {
		counts[i]++;
		usleep(1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long hold_ms = argc > 1 ? atol(argv[1]) : 4000;
	pthread_t t;
	pid_t child;

	for (long i = 0; i < 3; i++)
		pthread_create(&t, NULL, work, (void *)i);
	printf("ready\n");
	printf("holding\n");
	fflush(stdout);
	child = vfork();
	if (!child) {
		struct timespec ts = { hold_ms / 1000, (hold_ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	printf("counts %ld %ld %ld\n", counts[0], counts[1], counts[2]);
	fflush(stdout);
	return 0;
}
