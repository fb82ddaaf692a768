/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf report` on any bytes: as JSON and as text, within the default
 * step-table budget and within a tiny one (older steps finished during the
 * pass, windows); as a page (--html); and against itself (--diff). */
#include "fuzz.h"
#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));
	struct report_opts json = { .path = path, .json = true, .top = 25 };
	struct report_opts text = { .path = path, .top = 3, .by_shape = true };
	struct report_opts html = { .path = path, .html = fuzz_output("r.html"), .top = 25 };
	struct report_opts diff = { .path = path, .path_b = path, .json = true, .top = 25 };

	unsetenv("PTBPF_REPORT_INTERVALS");
	report_run(&json);
	report_run(&html);
	report_run(&diff);
	setenv("PTBPF_REPORT_INTERVALS", "16", 1);
	report_run(&text);
	close(fd);
	return 0;
}
