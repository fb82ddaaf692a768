// SPDX-License-Identifier: BSD-2-Clause
/*
 * Test driver for user/attach/inject.c:
 *   inject_cli PID LIB                    dlopen; prints "handle 0xH"
 *   inject_cli --call PID LIBPREFIX SYM X calls SYM(X, 0); prints "ret R"
 *   inject_cli --dlclose PID HANDLE       dlclose; prints "ret R"
 *   inject_cli --dlclose-checked PID HANDLE TEXT_LO TEXT_HI BUSY_ADDR BUSY_LEN
 *                                         dlclose once the library is idle
 *   inject_cli --linger MS ARGS...        any of the above, then stays MS ms as
 *                                         a loader does, calling inject_reap()
 * Errors go to stderr as one line; the exit code is 1.
 */
#include "attach/inject.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || !*s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
	char err[512] = "";
	uint64_t pid, v, addr, ret, lo, hi, len, linger = 0;
	int rc, r;

	if (argc > 2 && !strcmp(argv[1], "--linger") && !parse_u64(argv[2], &linger)) {
		argv += 2;
		argc -= 2;
	}

	if (argc == 3 && !parse_u64(argv[1], &pid)) {
		rc = inject_dlopen((int)pid, argv[2], &v, err, sizeof(err));
		if (!rc)
			printf("handle 0x%" PRIx64 "\n", v);
	} else if (argc == 6 && !strcmp(argv[1], "--call") && !parse_u64(argv[2], &pid) &&
		   !parse_u64(argv[5], &v)) {
		rc = inject_symbol_addr((int)pid, argv[3], argv[4], &addr);
		if (rc)
			snprintf(err, sizeof(err), "%s not found in %s: %s", argv[4], argv[3],
				 strerror(-rc));
		else
			rc = inject_call((int)pid, addr, v, 0, &ret, err, sizeof(err));
		if (!rc)
			printf("ret %" PRId64 "\n", (int64_t)ret);
	} else if (argc == 4 && !strcmp(argv[1], "--dlclose") && !parse_u64(argv[2], &pid) &&
		   !parse_u64(argv[3], &v)) {
		rc = inject_dlclose((int)pid, v, &r, err, sizeof(err));
		if (!rc)
			printf("ret %d\n", r);
	} else if (argc == 8 && !strcmp(argv[1], "--dlclose-checked") &&
		   !parse_u64(argv[2], &pid) && !parse_u64(argv[3], &v) &&
		   !parse_u64(argv[4], &lo) && !parse_u64(argv[5], &hi) &&
		   !parse_u64(argv[6], &addr) && !parse_u64(argv[7], &len)) {
		rc = inject_dlclose_checked((int)pid, v, lo, hi, addr, len, &r, err, sizeof(err));
		if (!rc)
			printf("ret %d\n", r);
	} else {
		fprintf(stderr, "usage: inject_cli PID LIB | --call PID LIBPREFIX SYM X | "
			"--dlclose PID HANDLE | --dlclose-checked PID HANDLE TEXT_LO TEXT_HI "
			"BUSY_ADDR BUSY_LEN\n");
		return 2;
	}
	if (rc)
		fprintf(stderr, "inject: %s\n", err);
	fflush(NULL);
	for (uint64_t ms = 0; ms < linger; ms += 10) {
		struct timespec ts = { 0, 10000000 };

		inject_reap();
		nanosleep(&ts, NULL);
	}
	return rc ? 1 : 0;
}
