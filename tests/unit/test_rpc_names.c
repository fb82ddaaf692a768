// SPDX-License-Identifier: BSD-2-Clause
/*
 * Unit test of user/record/rpc_names.c: what an RPC payload's first bytes
 * name.
 *
 *   test_rpc_names CASES
 *
 * CASES (made by tests/test_unit.py with the real pickle module and
 * torch's RPC pickler) has one payload per line: "fn HEX NAME" (the
 * function a request calls), "exc HEX TYPE" (a RemoteException response),
 * "none HEX" (names nothing). The payloads torch.jit pickles (builtin and
 * TorchScript calls, remote calls, profiling-wrapped requests) are the
 * bytes torch 1.13 sent, copied here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/rpc_names.h"
#include "check.h"

#define TENSORS "\x80\x02(ctorch.jit._pickle\nbuild_tensor_from_id\nq\x00(K\x00tRq\x01h\x00(K\x01tRq\x02"
/* (strings split where a hex escape would run on into the next byte) */
#define ADD_SCHEMA "XH\x00\x00\x00" "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensorq\x03" \
	"X\x12\x00\x00\x00torch.ops.aten.addq\x04"
#define UDF_PICKLE "\x80\x04\x95\xa9\x00\x00\x00\x00\x00\x00\x00\x8c\x1etorch.distributed.rpc.internal\x94" \
	"\x8c\tPythonUDF\x94\x93\x94\x8c\x08__main__\x94\x8c\x03udf\x94\x93\x94\x8c\x08" "builtins\x94" \
	"\x8c\x07" "getattr\x94\x93\x94h\x00\x8c\x13_InternalRPCPickler\x94\x93\x94"

static const struct { const char *bytes; size_t n; const char *want; } jit_cases[] = {
#define C(b, w) { b, sizeof(b) - 1, w }
	C(TENSORS "K\x01" ADD_SCHEMA "t.", "aten::add"),                                   /* SCRIPT_CALL */
	C(TENSORS "K\x01" ADD_SCHEMA "K\x00K\x00\x86K\x00K\x01\x86t.", "aten::add"),       /* SCRIPT_REMOTE_CALL */
	C(TENSORS "\x89X\x14\x00\x00\x00__torch__.script_addq\x03t.", "__torch__.script_add"),
	C(TENSORS "X\xb4\x00\x00\x00" UDF_PICKLE, "udf"),                                  /* PYTHON_REMOTE_CALL */
	C(TENSORS "K\x01" ADD_SCHEMA "t.\x80\x02M\x00\x01" "ctorch.jit._pickle\nrestore_type_tag\nq\x00",
	  "aten::add"),                                                                     /* RUN_WITH_PROFILING_REQ */
	C("\x00" UDF_PICKLE, "udf"),                                                       /* PYTHON_CALL, cut */
	C("\x80\x02K\x00K\x00\x86K\x01\x86.", NULL),                                      /* PYTHON_RREF_FETCH_CALL */
	C("\x80\x02K\x00K\x00\x86q\x00K\x00K\x01\x86q\x01\x86.", NULL),                  /* RREF_USER_DELETE */
	C("", NULL),
	C("\x80", NULL),
	C("\x00\x80\x04\x95", NULL),
#undef C
};

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = 0;

	while (h[0] && h[1] && n < cap) {
		unsigned v;

		if (sscanf(h, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		h += 2;
	}
	return n;
}

static void file_cases(const char *path)
{
	FILE *f = fopen(path, "r");
	char kind[8], hex[8192], want[512], got[512];
	static uint8_t bytes[4096];
	int line = 0;

	CHECK(f != NULL, "cases file", 0);
	while (f && fscanf(f, "%7s %8191s", kind, hex) == 2) {
		size_t n = unhex(hex, bytes, sizeof(bytes));
		bool ok;

		line++;
		want[0] = got[0] = 0;
		if (strcmp(kind, "none"))
			CHECK(fscanf(f, " %511[^\n]", want) == 1, "expected name", line);
		if (n > 512) /* what BPF copies */
			n = 512;
		if (!strcmp(kind, "exc"))
			ok = rpc_payload_remote_exception(bytes, n, got, sizeof(got));
		else
			ok = rpc_payload_function(bytes, n, got, sizeof(got));
		if (!strcmp(kind, "none"))
			CHECK(!ok, "names nothing", line);
		else
			CHECK(ok && !strcmp(got, want), want, line);
	}
	if (f)
		fclose(f);
	CHECK(line >= 8, "cases read", line);
}

int main(int argc, char **argv)
{
	char got[256];

	for (size_t i = 0; i < sizeof(jit_cases) / sizeof(jit_cases[0]); i++) {
		bool ok = rpc_payload_function((const uint8_t *)jit_cases[i].bytes, jit_cases[i].n, got,
					       sizeof(got));

		if (jit_cases[i].want)
			CHECK(ok && !strcmp(got, jit_cases[i].want), jit_cases[i].want, i);
		else
			CHECK(!ok, "names nothing", i);
	}
	/* Every prefix of a payload: no read past its end, no crash. */
	for (size_t i = 0; i < sizeof(jit_cases) / sizeof(jit_cases[0]); i++)
		for (size_t n = 0; n <= jit_cases[i].n; n++) {
			uint8_t *copy = malloc(n ? n : 1);

			memcpy(copy, jit_cases[i].bytes, n);
			rpc_payload_function(copy, n, got, sizeof(got));
			rpc_payload_remote_exception(copy, n, got, sizeof(got));
			free(copy);
		}
	CHECK(!strcmp(rpc_type_name(0x102), "PYTHON_CALL"), "type name", 0);
	CHECK(!strcmp(rpc_type_name(0x237), "EXCEPTION"), "type name", 1);
	CHECK(rpc_is_message_type(0x206) && !rpc_is_message_type(0x89cf5e0), "message type", 2);
	if (argc > 1)
		file_cases(argv[1]);
	return check_summary("test_rpc_names");
}
