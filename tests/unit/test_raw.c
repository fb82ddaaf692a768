// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unit test of user/record/raw.c's Triton kernel items ('I'): a kernel's
 * ATen op and node lists are written whole however long (a 16 KB buffer
 * once dropped those past it, uncounted), and cut to fit an item, the
 * other fields whole, past 1 MiB.
 *
 *   test_raw DIR     (writes DIR/t.raw)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "record/inductor.h"
#include "record/raw.h"

#define MIB (1u << 20)

static char *list(size_t n, char c)
{
	char *s = malloc(n + 1);

	memset(s, c, n);
	s[n] = 0;
	return s;
}

/* The next 'I' item's payload (malloc'd) and its length; NULL at the end. */
static char *next_item(FILE *f, uint32_t *len)
{
	uint8_t tag;
	char *p;

	while (fread(&tag, 1, 1, f) == 1 && fread(len, 4, 1, f) == 1) {
		if (!(p = malloc(*len)) || fread(p, 1, *len, f) != *len)
			return free(p), NULL;
		if (tag == 'I')
			return p;
		free(p);
	}
	return NULL;
}

/* Field i (0: name .. 4: graph) of an 'I' payload. */
static const char *field(const char *p, uint32_t len, int i)
{
	const char *s = p + 4;

	while (i-- > 0 && s < p + len)
		s += strlen(s) + 1;
	return s < p + len ? s : "";
}

int main(int argc, char **argv)
{
	char path[4096], magic[10];
	char *nodes40k = list(40000, 'n'), *nodes3m = list(3 * MIB, 'm'), *aten = list(MIB / 2, 'a');
	struct inductor_kernel small = { "aten::add", "add_1", "/c/aa.py", "0_forward" };
	struct inductor_kernel long_ = { "aten::mul", nodes40k, "/c/bb.py", "1_backward" };
	struct inductor_kernel huge = { aten, nodes3m, "/c/cc.py", "2_forward" };
	struct raw_writer *w;
	uint32_t len;
	char *p;
	FILE *f;

	if (argc != 2)
		return 2;
	snprintf(path, sizeof(path), "%s/t.raw", argv[1]);
	w = raw_open(path, true);
	CHECK(w, "raw_open", 0);
	if (!w)
		return check_summary("test_raw");
	raw_inductor(w, 7, "triton_a_0", &small);
	raw_inductor(w, 7, "triton_b_1", &long_);
	raw_inductor(w, 7, "triton_c_2", &huge);
	CHECK(raw_close(w, true) == 0, "raw_close", 0);
	f = fopen(path, "rb");
	CHECK(f && fread(magic, 1, 10, f) == 10, "the capture is there", 0);
	if (!f)
		return check_summary("test_raw");

	p = next_item(f, &len);
	CHECK(p && !strcmp(field(p, len, 0), "triton_a_0"), "a small item", 0);
	CHECK(p && !strcmp(field(p, len, 4), "0_forward"), "its graph", 0);
	free(p);
	p = next_item(f, &len);
	CHECK(p && !strcmp(field(p, len, 0), "triton_b_1"), "a 40 KB node list is written", 0);
	CHECK(p && strlen(field(p, len, 2)) == 40000, "whole", p ? strlen(field(p, len, 2)) : 0);
	CHECK(p && !strcmp(field(p, len, 3), "/c/bb.py"), "with its module", 0);
	free(p);
	p = next_item(f, &len);
	CHECK(p && len <= MIB, "a 3.5 MiB item fits in 1 MiB", len);
	CHECK(p && !strcmp(field(p, len, 0), "triton_c_2"), "its name whole", 0);
	CHECK(p && strlen(field(p, len, 1)) == MIB / 2, "its ATen ops whole", 0);
	CHECK(p && !strcmp(field(p, len, 3), "/c/cc.py") && !strcmp(field(p, len, 4), "2_forward"),
	      "its module and graph whole", 0);
	CHECK(p && p[len - 1] == 0, "NUL-terminated", 0);
	free(p);
	CHECK(!next_item(f, &len), "three items", 0);
	fclose(f);
	free(nodes40k);
	free(nodes3m);
	free(aten);
	return check_summary("test_raw");
}
