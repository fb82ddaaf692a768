// SPDX-License-Identifier: BSD-2-Clause
/* One ptbpf per process. See claim.h. */
#define _GNU_SOURCE
#include "attach/claim.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "attach/target.h"

/* Askers queued on a claim until its holder answers (target_claim_answer):
 * more than come in the 0.5 s between two answers. */
#define CLAIM_BACKLOG 64

/* Non-blocking: an asker whose holder's queue is full (a stopped ptbpf)
 * gets EAGAIN instead of waiting for it. */
static int claim_socket(void)
{
	return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

/* The pid of the ptbpf holding the claim a (its listening socket's
 * credentials, as this pid namespace sees it), or 0 if it cannot tell. */
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
