// SPDX-License-Identifier: BSD-2-Clause
/*
 * Library injected by the tests. Its constructor writes "injected <pid>"
 * to $INJECT_LIB_OUT (the target's environment) or /tmp/inject_lib.<pid>,
 * so a test can see it ran inside the target; inject_lib_ping is for
 * calling a function by symbol, inject_lib_tid tells which thread ran the
 * call. For unloading: a busy word (inject_lib_set_busy, inject_lib_busy_addr)
 * and a thread that spins inside the library (inject_lib_spin 1, then 0).
 * inject_lib_sleep makes a call that outlives a killed injector.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__attribute__((constructor)) static void inject_lib_init(void)
{
	char path[256], line[64];
	const char *out = getenv("INJECT_LIB_OUT");
	int fd, n;

	if (!out) {
		snprintf(path, sizeof(path), "/tmp/inject_lib.%d", (int)getpid());
		out = path;
	}
	n = snprintf(line, sizeof(line), "injected %d\n", (int)getpid());
	fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, n) != n)
		n = -1;
	close(fd);
}

int inject_lib_ping(int x)
{
	return x + 1;
}

int inject_lib_tid(void)
{
	return gettid();
}

static int busy;

int inject_lib_set_busy(int v)
{
	__atomic_store_n(&busy, v, __ATOMIC_SEQ_CST);
	return v;
}

long inject_lib_busy_addr(void)
{
	return (long)&busy;
}

static int spin_stop;
static pthread_t spinner;

static void *spin(void *arg __attribute__((unused)))
{
	while (!__atomic_load_n(&spin_stop, __ATOMIC_RELAXED))
		;
	return NULL;
}

/* 1 starts the spinning thread, 0 stops it and waits for it. */
int inject_lib_spin(int on)
{
	if (on) {
		__atomic_store_n(&spin_stop, 0, __ATOMIC_SEQ_CST);
		return pthread_create(&spinner, NULL, spin, NULL);
	}
	__atomic_store_n(&spin_stop, 1, __ATOMIC_SEQ_CST);
	return pthread_join(spinner, NULL);
}

static int sleeper_tid;

/* Sleeps ms milliseconds; inject_lib_sleeper_tid then says on which thread. */
int inject_lib_sleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	__atomic_store_n(&sleeper_tid, gettid(), __ATOMIC_SEQ_CST);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return ms;
}

int inject_lib_sleeper_tid(void)
{
	return __atomic_load_n(&sleeper_tid, __ATOMIC_SEQ_CST);
}
