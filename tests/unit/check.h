/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The C unit tests' checks: CHECK(cond, what, i) counts a pass or a
 * failure (the first 20 failures printed with their line and i), and
 * check_summary() prints "NAME: P passed, F failed" (tests/test_unit.py
 * reads that line) and gives the exit code.
 */
#ifndef PTBPF_TEST_CHECK_H
#define PTBPF_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int passed, failed;

#define CHECK(cond, what, i) check(!!(cond), __LINE__, what, (uint64_t)(i))

static void check(int ok, int line, const char *what, uint64_t i)
{
	if (ok) {
		passed++;
		return;
	}
	if (failed++ < 20)
		fprintf(stderr, "FAIL line %d: %s (%llu)\n", line, what, (unsigned long long)i);
}

static int check_summary(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, passed, failed);
	return failed ? 1 : 0;
}

#endif /* PTBPF_TEST_CHECK_H */
