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

int target_claim(struct target *t, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, n, other;

	if (t->claimfd >= 0)
		return 0;
	/* Abstract: no file, gone with the last fd (however ptbpf ends). */
	n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "ptbpf/pid/%d/%llu", t->pid,
		     target_start_time(t->pid));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0; /* no sockets: nothing to claim with */
	if (!bind(fd, (struct sockaddr *)&a, offsetof(struct sockaddr_un, sun_path) + 1 + n) &&
	    !listen(fd, 1)) {
		t->claimfd = fd;
		return 0;
	}
	close(fd);
	/* Taken: who holds it? */
	other = -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, offsetof(struct sockaddr_un, sun_path) +
			1 + n) && !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		other = cred.pid;
	if (fd >= 0)
		close(fd);
	if (other > 0)
		snprintf(err, errlen, "pid %d is already traced by another ptbpf (pid %d): stop that "
			 "one first (two would both switch its agent and lose each other's "
			 "records)", t->pid, other);
	else
		snprintf(err, errlen, "pid %d is already traced by another ptbpf: stop that one first",
			 t->pid);
	return -EBUSY;
}
