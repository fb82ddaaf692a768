/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf export --kineto OUT.json FILE.pftrace [--force]` (user/export.c):
 * the trace as torch.profiler's Kineto writes Chrome JSON. */
#ifndef PTBPF_EXPORT_H
#define PTBPF_EXPORT_H

/* argv[1] is "export". Returns the exit code (0, 1 error, 2 usage). */
int export_main(int argc, char **argv);

#endif /* PTBPF_EXPORT_H */
