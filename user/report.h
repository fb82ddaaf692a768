/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf report FILE.pftrace [--json] [--top N]` (user/report.c): operator,
 * kernel and per-step tables from a trace. */
#ifndef PTBPF_REPORT_H
#define PTBPF_REPORT_H

/* argv[1] is "report". Returns the exit code (0, 1 error, 2 usage). */
int report_main(int argc, char **argv);

#endif /* PTBPF_REPORT_H */
