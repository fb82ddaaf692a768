/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * c10::Device names as the trace writes them (the memory counter tracks:
 * "cuda:0 memory allocated") and as the offline tools read them back.
 */
#ifndef PTBPF_C10_DEVICE_H
#define PTBPF_C10_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/* "cuda:0" for a c10::Device (EV_MEM's id). */
void c10_device_name(uint32_t device, char *buf, size_t len);
/* The other way: the c10::Device a track name starts with ("cuda:0 memory
 * allocated"); 0, or -1 if it names none. */
int c10_device_parse(const char *name, uint32_t *device);
#endif /* PTBPF_C10_DEVICE_H */
