// SPDX-License-Identifier: BSD-2-Clause
/* c10::Device names. See c10_device.h. */
#include "lib/c10_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* c10::DeviceType's numbers, as the counter tracks name them. */
static const char *const types[] = { [0] = "cpu", [1] = "cuda", [6] = "hip",
				     [9] = "xla", [13] = "mps", [20] = "privateuse1" };
#define NTYPES (sizeof(types) / sizeof(types[0]))

int c10_device_parse(const char *name, uint32_t *device)
{
	for (unsigned type = 0; type < NTYPES; type++) {
		size_t n = types[type] ? strlen(types[type]) : 0;

		if (!n || strncmp(name, types[type], n))
			continue;
		if (type == 0 && (name[n] == ' ' || !name[n])) {
			*device = 0;
			return 0;
		}
		if (type != 0 && name[n] == ':') {
			*device = type | (uint32_t)(atoi(name + n + 1) & 0xff) << 8;
			return 0;
		}
	}
	return -1;
}

void c10_device_name(uint32_t device, char *buf, size_t len)
{
	unsigned type = device & 0xff, index = (device >> 8) & 0xff;
	const char *name = type < NTYPES ? types[type] : NULL;

	if (!name)
		snprintf(buf, len, "device type %u:%u", type, index);
	else if (type == 0)
		snprintf(buf, len, "cpu");
	else
		snprintf(buf, len, "%s:%u", name, index);
}
