// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unit test of user/record/pystack.c's line-table decoders and user/record/shapes.c.
 *
 *   test_pyline CASES
 *
 * CASES (made by tests/test_unit.py from a real interpreter) has one code
 * object per line: "minor firstlineno hex(linetable) pos:line pos:line
 * ...", the lines CPython's own co_lines() gives for each instruction. The
 * input-shape formatter is checked on built bytes, malformed ones too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptbpf_agent.h"
#include "record/pystack.h"
#include "record/shapes.h"

static int n_pass, n_fail;

#define CHECK(cond, ...) do { if (cond) n_pass++; else { n_fail++; \
	fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
	fprintf(stderr, __VA_ARGS__); fputc(10, stderr); } } while (0)

static void lines(const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int codes = 0;

	CHECK(f != NULL, "cannot open %s", path);
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		int minor, first, used;
		char *p = line, *hex;
		unsigned char *tbl;
		size_t n;

		if (sscanf(p, "%d %d %ms%n", &minor, &first, &hex, &used) != 3)
			continue;
		p += used;
		n = strlen(hex) / 2;
		tbl = malloc(n + 1);
		for (size_t i = 0; i < n; i++)
			sscanf(hex + 2 * i, "%2hhx", &tbl[i]);
		codes++;
		for (;;) {
			int pos, want, got, k;

			if (sscanf(p, " %d:%d%n", &pos, &want, &k) != 2)
				break;
			p += k;
			got = minor == 10 ? pystack_line_310(tbl, n, first, pos * 2) :
			      pystack_line_311(tbl, n, first, pos);
			CHECK(got == want, "3.%d code %d instr %d: line %d, CPython says %d", minor,
			      codes, pos, got, want);
		}
		free(tbl);
		free(hex);
	}
	free(line);
	fclose(f);
	CHECK(codes > 100, "only %d code objects in %s", codes, path);
}

static void shapes(void)
{
	char dims[256], types[256];
	unsigned char b[64];
	size_t n = 0;
	long long v;

	b[n++] = 3;
	b[n++] = OPS_IN_TENSOR;
	b[n++] = 6; /* float */
	b[n++] = 2;
	v = 16;
	memcpy(b + n, &v, 8), n += 8;
	v = 32;
	memcpy(b + n, &v, 8), n += 8;
	b[n++] = OPS_IN_SCALAR;
	b[n++] = OPS_IN_OTHER;
	CHECK(!shapes_format(b, n, dims, sizeof(dims), types, sizeof(types)), "good bytes");
	CHECK(!strcmp(dims, "[[16, 32], [], []]"), "%s", dims);
	CHECK(!strcmp(types, "[\"float\", \"Scalar\", \"\"]"), "%s", types);
	for (size_t cut = 0; cut < n - 2; cut++) /* every truncation is refused */
		CHECK(shapes_format(b, cut, dims, sizeof(dims), types, sizeof(types)) == -1 &&
		      !dims[0], "cut at %zu accepted", cut);
	b[1] = 9; /* an unknown kind */
	CHECK(shapes_format(b, n, dims, sizeof(dims), types, sizeof(types)) == -1, "kind 9");
	b[1] = OPS_IN_TENSOR;
	b[3] = OPS_MAX_RANK + 1; /* rank too large */
	CHECK(shapes_format(b, n, dims, sizeof(dims), types, sizeof(types)) == -1, "rank");
	b[3] = 2;
	CHECK(shapes_format(b, n, dims, 8, types, 8) == -1 && !dims[0] && !types[0],
	      "text longer than the buffers is refused, not cut");
	CHECK(!strcmp(shapes_dtype_name(15), "c10::BFloat16") && !strcmp(shapes_dtype_name(200), "?"),
	      "dtype names");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_pyline CASES\n");
		return 2;
	}
	lines(argv[1]);
	shapes();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
