/* SPDX-License-Identifier: BSD-2-Clause */
/* The daemon port's request heads (fleet/http_parse.c) on any bytes: a
 * head is read or refused with a status and one line, never past its
 * bytes, and what it keeps is NUL-terminated within its fields. */
#include "fuzz.h"
#include "fleet/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1), why[320];
	struct http_head h;
	int rc;

	if (!copy)
		abort();
	memcpy(copy, data, size); /* exactly size bytes: ASan sees any read past them */
	rc = http_parse_head(copy, size, &h, why, sizeof(why));
	if (rc && (rc < 400 || rc > 505 || !why[0] || strchr(why, '\n')))
		abort();
	if (!rc && (!h.method_bit || h.path[0] != '/' || strlen(h.path) >= sizeof(h.path) ||
		    strlen(h.authorization) >= sizeof(h.authorization)))
		abort();
	free(copy);
	return 0;
}
