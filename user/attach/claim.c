// SPDX-License-Identifier: BSD-2-Clause
/* One ptbpf per process. See claim.h. */
#define _GNU_SOURCE
#include "attach/claim.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "attach/target.h"
#include "lib/log.h"

/* Askers queued on a claim until its holder answers (target_claim_answer):
 * more than come in the 0.5 s between two answers. */
#define CLAIM_BACKLOG 64

/* Where every ptbpf on the host names its claims: the initial network
 * namespace, kthreadd's (pid 2 in the initial pid namespace, where ptbpf
 * runs; kernel threads never leave it). Not pid 1's: an init may keep
 * its /proc files from root (a sandbox's does). */
#define SHARED_NETNS "/proc/2/ns/net"

struct netns_socket {
	int nsfd; /* in: the namespace */
	int fd;   /* out: the socket, or -1 */
	int err;  /* out: why not */
	bool entered; /* out: the socket was made there (or failed there) */
};

/* Non-blocking: an asker whose holder's queue is full (a stopped ptbpf)
 * gets EAGAIN instead of waiting for it. */
static int unix_socket(void)
{
	return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

static void *socket_in_netns(void *arg)
{
	struct netns_socket *s = arg;

	if (setns(s->nsfd, CLONE_NEWNET)) {
		s->err = errno;
		return NULL;
	}
	s->entered = true;
	s->fd = unix_socket();
	s->err = s->fd < 0 ? errno : 0;
	return NULL;
}

/* A socket stays in the network namespace it was made in, and setns()
 * moves only the calling thread: a thread of its own (every signal
 * blocked: they are the main thread's) makes it and ends. */
static void netns_socket(struct netns_socket *s)
{
	sigset_t all, old;
	pthread_t th;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&th, NULL, socket_in_netns, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		s->err = ret;
	else
		pthread_join(th, NULL);
}

static bool in_netns(int nsfd)
{
	struct stat ns, self;

	return !fstat(nsfd, &ns) && !stat("/proc/thread-self/ns/net", &self) &&
	       ns.st_dev == self.st_dev && ns.st_ino == self.st_ino;
}

/* A socket for a claim, in the initial network namespace: abstract names
 * are per network namespace, and a ptbpf in a container with the host's
 * pids but a network of its own (unshare -n) must see the claims of one
 * outside. Where ptbpf cannot enter it (no CAP_SYS_ADMIN over it, or
 * kthreadd's namespace unreadable), in its own, said once with -v. */
static int claim_socket(void)
{
	static bool told;
	struct netns_socket s = { .fd = -1 };

	s.nsfd = open(SHARED_NETNS, O_RDONLY | O_CLOEXEC);
	if (s.nsfd < 0) {
		s.err = errno;
	} else {
		s.entered = in_netns(s.nsfd);
		if (s.entered)
			s.fd = unix_socket();
		else
			netns_socket(&s);
		close(s.nsfd);
	}
	if (s.entered)
		return s.fd;
	if (!told)
		log_debug("claims on processes are made in this network namespace only: cannot "
			  "enter the initial one (%s: %s); a ptbpf in another network namespace "
			  "will not see them\n", SHARED_NETNS, strerror(s.err));
	told = true;
	return unix_socket();
}

/* Abstract: no file, gone with the last fd (however ptbpf ends). */
static socklen_t claim_name(int pid, struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "ptbpf/pid/%d/%llu", pid,
		     target_start_time(pid));
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

/* The pid of the ptbpf holding the claim a, or 0 if it cannot tell: its
 * listening socket's credentials, the pid as this pid namespace sees it
 * (the host's), whatever network namespace the holder runs in. */
static int claim_holder(const struct sockaddr_un *a, socklen_t alen)
{
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	int fd = claim_socket();

	if (fd < 0)
		return 0;
	if (connect(fd, (const struct sockaddr *)a, alen) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.pid = 0;
	close(fd);
	return cred.pid > 0 ? cred.pid : 0;
}

int target_claim(struct target *t, char *err, size_t errlen)
{
	struct sockaddr_un a;
	socklen_t alen;
	int fd, holder;

	if (t->claimfd >= 0)
		return 0;
	alen = claim_name(t->pid, &a);
	fd = claim_socket();
	if (fd < 0)
		return 0; /* no sockets: nothing to claim with */
	if (!bind(fd, (struct sockaddr *)&a, alen) && !listen(fd, CLAIM_BACKLOG)) {
		t->claimfd = fd;
		return 0;
	}
	close(fd);
	holder = claim_holder(&a, alen);
	/* This ptbpf holds it already (the daemon's always-on layer, beside
	 * which a capture window traces the process): still one ptbpf. */
	if (holder == getpid())
		return 0;
	if (holder)
		snprintf(err, errlen, "pid %d is already traced by another ptbpf (pid %d): stop that "
			 "one first (two would both switch its agent and lose each other's "
			 "records)", t->pid, holder);
	else
		snprintf(err, errlen, "pid %d is already traced by another ptbpf: stop that one first",
			 t->pid);
	return -EBUSY;
}

void target_claim_answer(struct target *t)
{
	int fd;

	if (t->claimfd < 0)
		return;
	while ((fd = accept4(t->claimfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
}
