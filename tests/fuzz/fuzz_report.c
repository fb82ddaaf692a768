/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf report` on any bytes: as JSON and as text, within the default
 * step-table budget and within a tiny one (older steps finished during the
 * pass, windows); as a page (--html); and against itself (--diff). */
#include "fuzz.h"
#include "offline/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));
	char *json[] = { "ptbpf", "report", path, "--json", NULL };
	char *text[] = { "ptbpf", "report", path, "--top", "3", "--group-by-shape", NULL };
	char *html[] = { "ptbpf", "report", path, "--html", (char *)fuzz_output("r.html"), NULL };
	char *diff[] = { "ptbpf", "report", "--diff", path, path, "--json", NULL };

	unsetenv("PTBPF_REPORT_INTERVALS");
	report_main(4, json);
	report_main(5, html);
	report_main(6, diff);
	setenv("PTBPF_REPORT_INTERVALS", "16", 1);
	report_main(6, text);
	close(fd);
	return 0;
}
