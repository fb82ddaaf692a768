// SPDX-License-Identifier: BSD-2-Clause
/* Input shapes, formatted. See shapes.h. */
#include "record/shapes.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ptbpf_agent.h"

const char *shapes_dtype_name(unsigned t)
{
	/* caffe2::TypeMeta names, indexed by c10::ScalarType. */
	static const char *const names[] = {
		"unsigned char", "signed char", "short int", "int", "long int", "c10::Half",
		"float", "double", "c10::complex<c10::Half>", "c10::complex<float>",
		"c10::complex<double>", "bool", "c10::qint8", "c10::quint8", "c10::qint32",
		"c10::BFloat16", "c10::quint4x2", "c10::quint2x4", "c10::bits1x8",
		"c10::bits2x4", "c10::bits4x2", "c10::bits8", "c10::bits16",
		"c10::Float8_e5m2", "c10::Float8_e4m3fn", "c10::Float8_e5m2fnuz",
		"c10::Float8_e4m3fnuz", "unsigned short", "unsigned int", "unsigned long",
	};

	return t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

struct out {
	char *p;
	size_t len, used;
	bool full;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->p + o->used, o->len - o->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->len - o->used) {
		o->full = true;
		o->p[o->used] = 0;
		return;
	}
	o->used += (size_t)n;
}

int shapes_format(const uint8_t *b, size_t n, char *dims, size_t dlen, char *types,
		  size_t tlen)
{
	struct out d = { dims, dlen, 0, false }, t = { types, tlen, 0, false };
	size_t pos = 1;

	dims[0] = types[0] = 0;
	if (n < 1 || b[0] > OPS_MAX_INPUTS)
		return -1;
	put(&d, "[");
	put(&t, "[");
	for (unsigned i = 0; i < b[0]; i++) {
		const char *sep = i ? ", " : "";

		if (pos >= n)
			goto bad;
		switch (b[pos++]) {
		case OPS_IN_TENSOR: {
			unsigned dtype, rank;

			if (pos + 2 > n)
				goto bad;
			dtype = b[pos++];
			rank = b[pos++];
			if (rank > OPS_MAX_RANK || pos + 8 * rank > n)
				goto bad;
			put(&d, "%s[", sep);
			for (unsigned k = 0; k < rank; k++) {
				int64_t v;

				memcpy(&v, b + pos + 8 * k, 8);
				put(&d, "%s%lld", k ? ", " : "", (long long)v);
			}
			put(&d, "]");
			put(&t, "%s\"%s\"", sep, shapes_dtype_name(dtype));
			pos += 8 * rank;
			break;
		}
		case OPS_IN_SCALAR:
			put(&d, "%s[]", sep);
			put(&t, "%s\"Scalar\"", sep);
			break;
		case OPS_IN_UNKNOWN: /* a tensor whose sizes were not read */
			put(&d, "%s[]", sep);
			put(&t, "%s\"Tensor\"", sep);
			break;
		case OPS_IN_OTHER:
			put(&d, "%s[]", sep);
			put(&t, "%s\"\"", sep);
			break;
		default:
			goto bad;
		}
	}
	put(&d, "]");
	put(&t, "]");
	if (!d.full && !t.full)
		return 0;
bad: /* malformed, or longer than the buffers: nothing rather than a cut list */
	dims[0] = types[0] = 0;
	return -1;
}
