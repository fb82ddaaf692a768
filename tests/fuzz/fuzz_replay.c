/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf replay` of any bytes as a raw capture. */
#include "fuzz.h"
#include "record/raw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));

	raw_replay(path, fuzz_output("r.pftrace"), false, NULL);
	close(fd);
	return 0;
}
