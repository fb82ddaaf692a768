/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf merge --align-collectives` of two traces made from any bytes: the
 * first two bytes say where the second begins. */
#include "fuzz.h"
#include "offline/merge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char a[64], b[64];
	size_t split;
	int fa, fb;

	if (size < 2)
		return 0;
	split = ((size_t)data[0] << 8 | data[1]) % (size - 1);
	data += 2;
	size -= 2;
	fa = fuzz_file(data, split, a, sizeof(a));
	fb = fuzz_file(data + split, size - split, b, sizeof(b));
	merge_traces((const char *[]){ a, b }, 2, fuzz_output("m.pftrace"), true, false);
	close(fa);
	close(fb);
	return 0;
}
