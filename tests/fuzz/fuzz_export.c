/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf export --kineto` on any bytes. */
#include "fuzz.h"
#include "offline/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));
	char *argv[] = { "ptbpf", "export", "--kineto", (char *)fuzz_output("k.json"), path, NULL };

	report_main(5, argv);
	close(fd);
	return 0;
}
