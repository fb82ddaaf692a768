// SPDX-License-Identifier: BSD-2-Clause
/*
 * Library injected by the tests. Its constructor writes "injected <pid>"
 * to $INJECT_LIB_OUT (the target's environment) or /tmp/inject_lib.<pid>,
 * so a test can see it ran inside the target; inject_lib_ping is for
 * calling a function by symbol.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
