// SPDX-License-Identifier: BSD-2-Clause
/*
 * The reader at SCHED_IDLE, and the watch that puts it back to ptbpf's
 * own policy when its rings fill (yield.h says why and how).
 */
#define _GNU_SOURCE
#include "lib/yield.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int own_policy = -1;
static struct sched_param own_param;
static pid_t reader;          /* the thread that yields */
static _Atomic bool watching; /* yield only while the watch runs */
static int ep = -1, stop_fd = -1;
static pthread_t watch_thread;
static _Atomic uint64_t boosts;
static uint64_t reads, own_reads;

static void own_policy_read(void)
{
	if (own_policy < 0 && (own_policy = sched_getscheduler(0)) >= 0)
		sched_getparam(0, &own_param);
}

void yield_read_begin(bool behind)
{
	static uint64_t seen;
	struct sched_param none = { 0 };
	uint64_t b = atomic_load(&boosts);

	if (!atomic_load(&watching))
		return;
	reads++;
	/* A boost since the last read may have come after that read had
	 * passed the ring that asked for it (it asks again only once read):
	 * this read is at ptbpf's own policy too. */
	if (behind || b != seen)
		own_reads++;
	else
		sched_setscheduler(0, SCHED_IDLE, &none);
	seen = b;
}

void yield_read_end(void)
{
	if (atomic_load(&watching))
		sched_setscheduler(0, own_policy, &own_param);
}

void yield_counts(uint64_t *r, uint64_t *own)
{
	*r = reads;
	*own = own_reads;
}

/* Each wake-up of a ring: records pile up, so the reader runs at ptbpf's
 * own policy from now until its next read has begun (and ended). */
static void *watch(void *arg)
{
	struct epoll_event ev[8];

	(void)arg;
	for (;;) {
		int n = epoll_wait(ep, ev, 8, -1);
		bool boost = false;

		if (n < 0 && errno != EINTR)
			return NULL;
		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == stop_fd)
				return NULL;
			boost = true;
		}
		if (boost) {
			atomic_fetch_add(&boosts, 1);
			sched_setscheduler(reader, own_policy, &own_param);
		}
	}
}

int yield_watch_start(const int *fds, int n)
{
	struct epoll_event e = { .events = EPOLLIN };
	int err = 0;

	own_policy_read();
	if (own_policy < 0 || own_policy == SCHED_IDLE)
		return -EPERM; /* started idle: it has nothing to yield */
	reader = gettid();
	reads = own_reads = 0;
	ep = epoll_create1(EPOLL_CLOEXEC);
	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e.data.fd = stop_fd;
	if (ep < 0 || stop_fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &e))
		err = -errno;
	/* Edge-triggered: one wake-up each time a ring says so, however long
	 * the reader then takes to empty it. */
	for (int i = 0; i < n && !err; i++) {
		e = (struct epoll_event){ .events = EPOLLIN | EPOLLET, .data.fd = fds[i] };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e))
			err = -errno;
	}
	if (!err && (err = -pthread_create(&watch_thread, NULL, watch, NULL)) == 0) {
		atomic_store(&watching, true);
		return 0;
	}
	if (ep >= 0)
		close(ep);
	if (stop_fd >= 0)
		close(stop_fd);
	ep = stop_fd = -1;
	return err;
}

void yield_watch_stop(void)
{
	if (!atomic_exchange(&watching, false))
		return;
	sched_setscheduler(0, own_policy, &own_param);
	eventfd_write(stop_fd, 1);
	pthread_join(watch_thread, NULL);
	close(ep);
	close(stop_fd);
	ep = stop_fd = -1;
}
