/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the readers' fuzzers (tests/fuzz/fuzz_*.c, `make fuzz`): each
 * input is handed to the real subcommand as a file (a memfd, a regular
 * file like any trace), and outputs go to a scratch directory, removed
 * after each input (outputs are never written over an existing file).
 */
#ifndef PTBPF_FUZZ_H
#define PTBPF_FUZZ_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* data as a regular file: its fd, its path in path. */
static int fuzz_file(const uint8_t *data, size_t size, char *path, size_t len)
{
	int fd = memfd_create("fuzz-input", MFD_CLOEXEC);

	if (fd < 0) {
		perror("memfd_create");
		abort();
	}
	for (size_t done = 0; done < size;) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0) {
			perror("write");
			abort();
		}
		done += (size_t)n;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

/* A path for an output in this process's scratch directory, and its
 * .partial twin, both removed. */
static const char *fuzz_output(const char *name)
{
	static char dir[64], path[128], partial[160];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/ptbpf-fuzz-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			abort();
		}
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(partial, sizeof(partial), "%s.partial", path);
	unlink(path);
	unlink(partial);
	return path;
}

#endif /* PTBPF_FUZZ_H */
