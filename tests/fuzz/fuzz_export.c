/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf export --kineto` on any bytes. */
#include "fuzz.h"
#include "offline/export.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));

	export_kineto(path, fuzz_output("k.json"), false);
	close(fd);
	return 0;
}
