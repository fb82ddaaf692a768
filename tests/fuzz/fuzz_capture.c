/* SPDX-License-Identifier: BSD-2-Clause */
/* What a POST /capture asks for (fleet/capture_parse.c) on any bytes: up to
 * the first newline the query string, the rest the body (Alertmanager's
 * JSON, a direct request, or garbage). */
#include "fuzz.h"
#include "fleet/capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t qlen = nl ? (size_t)(nl - data) : 0;
	char *query = strndup((const char *)data, qlen);
	const uint8_t *body = nl ? nl + 1 : data;
	size_t blen = size - (size_t)(body - data);
	char *copy = malloc(blen + 1), err[256];
	struct capture_req r;

	if (!query || !copy)
		abort();
	memcpy(copy, body, blen);
	copy[blen] = 0;
	if (!capture_parse(query, copy, blen, &r, err, sizeof(err)) &&
	    (r.nsel < 0 || r.nsel > CAPTURE_MAX_SEL || !r.reason[0] ||
	     strlen(r.reason) >= sizeof(r.reason)))
		abort();
	free(query);
	free(copy);
	return 0;
}
