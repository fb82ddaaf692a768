/* SPDX-License-Identifier: BSD-2-Clause */
/* `ptbpf export --kineto OUT.json FILE.pftrace [--force]` (user/offline/export.c):
 * the trace as torch.profiler's Kineto writes Chrome JSON. */
#ifndef PTBPF_EXPORT_H
#define PTBPF_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* `ptbpf export --kineto OUT PATH`: 0, or 1 with one line printed. */
int export_kineto(const char *path, const char *out_path, bool force);

/* export_meta.c */
struct report;
/* Kineto's "123.456": microseconds with nanosecond decimals. */
void put_us(FILE *o, uint64_t ns);
/* An item of a list ptbpf wrote as JSON ("Input Dims": a list of
 * integers; "Input type": a quoted name), *p advanced past it. */
bool int_list(const char **p);
bool export_plain_name(const char **p);
/* s verbatim if it is a list of such items, else as a JSON string. */
void json_raw(FILE *o, const char *s, bool (*item)(const char **));
/* ",\n  \"deviceProperties\": [...]": one entry per device of the trace's
 * "device properties" instants, their arguments as given. */
void device_properties(struct report *r, FILE *o);
/* distributedInfo from the first process with a RANK label. */
void distributed_info(const struct report *r, FILE *o);

#endif /* PTBPF_EXPORT_H */
