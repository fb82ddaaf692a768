// SPDX-License-Identifier: BSD-2-Clause
/*
 * What an RPC message's first bytes say (see rpc_names.h). Payloads are
 * pickles: a Python call's is Python's own (protocol 2 to 5) after one flag
 * byte; a builtin or TorchScript call's, and a remote call's, a protocol-2
 * pickle by torch.jit (tensors as persistent ids), the remote Python call's
 * Python pickle inside it as a string. A wrapped message (profiling,
 * autograd) starts with the message it wraps. The pickles are walked
 * opcode by opcode, never executed; anything unknown stops the walk.
 */
#define _GNU_SOURCE
#include "record/rpc_names.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {
	"SCRIPT_CALL", "SCRIPT_RET", "PYTHON_CALL", "PYTHON_RET", "SCRIPT_REMOTE_CALL",
	"PYTHON_REMOTE_CALL", "REMOTE_RET", "SCRIPT_RREF_FETCH_CALL", "PYTHON_RREF_FETCH_CALL",
	"SCRIPT_RREF_FETCH_RET", "PYTHON_RREF_FETCH_RET", "RREF_USER_DELETE", "RREF_FORK_REQUEST",
	"RREF_CHILD_ACCEPT", "RREF_ACK", "FORWARD_AUTOGRAD_REQ", "FORWARD_AUTOGRAD_RESP",
	"BACKWARD_AUTOGRAD_REQ", "BACKWARD_AUTOGRAD_RESP", "CLEANUP_AUTOGRAD_CONTEXT_REQ",
	"CLEANUP_AUTOGRAD_CONTEXT_RESP", "RUN_WITH_PROFILING_REQ", "RUN_WITH_PROFILING_RESP",
	"RREF_BACKWARD_REQ", "RREF_BACKWARD_RESP",
};

const char *rpc_type_name(uint32_t type)
{
	uint32_t low = type & 0xff;

	if (low < sizeof(type_names) / sizeof(type_names[0]))
		return type_names[low];
	return low == 0x37 ? "EXCEPTION" : "UNKNOWN";
}

bool rpc_is_message_type(uint32_t type)
{
	return !(type & ~0x3ffu) && (type & 0x300) && (type & 0x300) != 0x300;
}

/* ---- a pickle, walked ---- */

#define MAX_ITEMS 64
#define RPC_PAYLOAD_MAX 4096 /* no string is longer than what was copied */
#define MAX_MEMO  64

struct str { const uint8_t *s; size_t n; }; /* n == SIZE_MAX: not a string */

struct walk {
	const uint8_t *p, *end;
	struct str stack[MAX_ITEMS];
	int depth;
	struct str memo[MAX_MEMO];
	int nmemo;
	/* what was found */
	struct str globals[4][2];
	int nglobals;
	struct str last_str, ops_name;
	const uint8_t *inner; /* a string holding a Python pickle */
	size_t inner_n;
};

static const struct str NOT_STR = { NULL, SIZE_MAX };

static void push(struct walk *w, struct str v)
{
	if (w->depth < MAX_ITEMS)
		w->stack[w->depth++] = v;
}

static struct str pop(struct walk *w)
{
	return w->depth ? w->stack[--w->depth] : NOT_STR;
}

static bool has(const struct walk *w, size_t n)
{
	return (size_t)(w->end - w->p) >= n;
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void memo_put(struct walk *w, uint64_t idx)
{
	if (idx < MAX_MEMO) {
		w->memo[idx] = w->depth ? w->stack[w->depth - 1] : NOT_STR;
		if ((int)idx >= w->nmemo)
			w->nmemo = (int)idx + 1;
	}
}

static void memo_get(struct walk *w, uint64_t idx)
{
	push(w, idx < (uint64_t)w->nmemo ? w->memo[idx] : NOT_STR);
}

static void string(struct walk *w, size_t n)
{
	struct str s = { w->p, n };

	w->p += n;
	if (n >= 2 && s.s[0] == 0x80 && s.s[1] >= 2 && s.s[1] <= 5 && !w->inner) {
		w->inner = s.s; /* a remote Python call's pickle */
		w->inner_n = n;
	}
	if (n > 10 && !memcmp(s.s, "torch.ops.", 10))
		w->ops_name = s;
	w->last_str = s;
	push(w, s);
}

static void global(struct walk *w, struct str mod, struct str name)
{
	if (w->nglobals < 4) {
		w->globals[w->nglobals][0] = mod;
		w->globals[w->nglobals++][1] = name;
	}
	push(w, NOT_STR);
}

/* A line-ended argument (GLOBAL's module and name); false if none. */
static bool line(struct walk *w, struct str *out)
{
	const uint8_t *nl = memchr(w->p, '\n', w->end - w->p);

	if (!nl)
		return false;
	*out = (struct str){ w->p, (size_t)(nl - w->p) };
	w->p = nl + 1;
	return true;
}

/* Arguments of n bytes (ints, floats, a frame's length): skipped. */
static bool skip(struct walk *w, size_t n)
{
	if (!has(w, n))
		return false;
	w->p += n;
	return true;
}

/* A length-prefixed string or bytes of lenb length bytes. */
static bool counted(struct walk *w, int lenb, bool is_str)
{
	uint64_t n;

	if (!has(w, lenb))
		return false;
	n = le(w->p, lenb);
	w->p += lenb;
	if (!has(w, n)) { /* cut by the copy: what there is of a string */
		if (is_str)
			string(w, w->end - w->p);
		return false;
	}
	if (is_str) {
		string(w, n);
	} else {
		w->p += n;
		push(w, NOT_STR);
	}
	return true;
}

/* One opcode; false at STOP, the end of the bytes or an unknown opcode. */
static bool step(struct walk *w)
{
	struct str a, b;
	uint8_t op;

	if (!has(w, 1))
		return false;
	op = *w->p++;
	switch (op) {
	case 0x80: return skip(w, 1);                       /* PROTO */
	case 0x95: return skip(w, 8);                       /* FRAME */
	case 0x8c: return counted(w, 1, true);              /* SHORT_BINUNICODE */
	case 'X': return counted(w, 4, true);               /* BINUNICODE */
	case 0x8d: return counted(w, 8, true);              /* BINUNICODE8 */
	case 'U': return counted(w, 1, true);               /* SHORT_BINSTRING */
	case 'T': return counted(w, 4, true);               /* BINSTRING */
	case 'C': return counted(w, 1, false);              /* SHORT_BINBYTES */
	case 'B': return counted(w, 4, false);              /* BINBYTES */
	case 0x8a: return counted(w, 1, false);             /* LONG1 */
	case 0x94: memo_put(w, w->nmemo); return true;      /* MEMOIZE */
	case 'q': if (!has(w, 1)) return false; memo_put(w, *w->p++); return true;
	case 'r': if (!has(w, 4)) return false; memo_put(w, le(w->p, 4)); w->p += 4; return true;
	case 'h': if (!has(w, 1)) return false; memo_get(w, *w->p++); return true;
	case 'j': if (!has(w, 4)) return false; memo_get(w, le(w->p, 4)); w->p += 4; return true;
	case 0x93: b = pop(w); a = pop(w); global(w, a, b); return true; /* STACK_GLOBAL */
	case 'c': if (!line(w, &a) || !line(w, &b)) return false; global(w, a, b); return true;
	case 'K': push(w, NOT_STR); return skip(w, 1);      /* BININT1 */
	case 'M': push(w, NOT_STR); return skip(w, 2);      /* BININT2 */
	case 'J': push(w, NOT_STR); return skip(w, 4);      /* BININT */
	case 'G': push(w, NOT_STR); return skip(w, 8);      /* BINFLOAT */
	case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89:
	case 't': case 0x85: case 0x86: case 0x87: case 'R': case 0x81: case 'Q':
	case 'e': case 'u': case 'a': case 's': case 'b': case '0': case '1': case '2':
		push(w, NOT_STR); /* the stack's shape is not followed: strings are */
		return true;
	default: /* STOP, or an opcode not walked */
		return false;
	}
}

static void walk(struct walk *w, const uint8_t *p, size_t n)
{
	memset(w, 0, sizeof(*w));
	w->p = p;
	w->end = p + n;
	w->last_str = NOT_STR;
	w->ops_name = NOT_STR;
	while (step(w))
		;
}

static bool str_is(struct str s, const char *lit)
{
	return s.n == strlen(lit) && !memcmp(s.s, lit, s.n);
}

static void copy_str(char *out, size_t len, struct str s)
{
	snprintf(out, len, "%.*s", (int)(s.n < RPC_PAYLOAD_MAX ? s.n : RPC_PAYLOAD_MAX),
		 (const char *)s.s);
}

/* A Python pickle of PythonUDF(func, args, kwargs): func's qualified name,
 * the global after PythonUDF's own. */
static bool python_udf(const uint8_t *p, size_t n, char *fn, size_t len)
{
	struct walk w;

	walk(&w, p, n);
	for (int i = 0; i + 1 < w.nglobals; i++) {
		if (!str_is(w.globals[i][1], "PythonUDF") || w.globals[i + 1][1].n == SIZE_MAX)
			continue;
		copy_str(fn, len, w.globals[i + 1][1]);
		return true;
	}
	return false;
}

/* "torch.ops.aten.add" -> "aten::add", as the profiler names builtins. */
static void builtin_name(struct str s, char *fn, size_t len)
{
	const uint8_t *dot = memchr(s.s + 10, '.', s.n - 10);

	if (!dot)
		copy_str(fn, len, (struct str){ s.s + 10, s.n - 10 });
	else
		snprintf(fn, len, "%.*s::%.*s", (int)(dot - s.s - 10), (const char *)s.s + 10,
			 (int)(s.n - (dot + 1 - s.s)), (const char *)dot + 1);
}

bool rpc_payload_function(const uint8_t *p, size_t n, char *fn, size_t len)
{
	struct walk w;

	if (n >= 2 && p[0] <= 1 && p[1] == 0x80) /* a Python call: flag, pickle */
		return python_udf(p + 1, n - 1, fn, len);
	if (n < 2 || p[0] != 0x80)
		return false;
	walk(&w, p, n);
	if (w.inner)
		return python_udf(w.inner, w.inner_n, fn, len);
	if (w.ops_name.n != SIZE_MAX) {
		builtin_name(w.ops_name, fn, len);
		return true;
	}
	if (w.last_str.n == SIZE_MAX || !w.last_str.n || !memchr(w.last_str.s, '.', w.last_str.n))
		return false;
	copy_str(fn, len, w.last_str); /* a TorchScript function's qualified name */
	return true;
}

/* RemoteException's message, "On WorkerInfo(...):\nValueError('boom')\n...",
 * cut before its exception type: the type from its second line. */
static bool exception_from_message(struct str m, char *what, size_t len)
{
	const uint8_t *nl, *end;

	if (m.n == SIZE_MAX || !(nl = memchr(m.s, '\n', m.n)))
		return false;
	nl++;
	for (end = nl; end < m.s + m.n && (*end == '_' || *end == '.' || (*end >= '0' && *end <= '9') ||
					   ((*end | 0x20) >= 'a' && (*end | 0x20) <= 'z')); end++)
		;
	if (end == nl)
		return false;
	copy_str(what, len, (struct str){ nl, (size_t)(end - nl) });
	return true;
}

bool rpc_payload_remote_exception(const uint8_t *p, size_t n, char *what, size_t len)
{
	struct walk w;

	if (n < 2 || p[0] != 0x80)
		return false;
	walk(&w, p, n);
	for (int i = 0; i < w.nglobals; i++) {
		if (!str_is(w.globals[i][1], "RemoteException"))
			continue;
		if (i + 1 < w.nglobals && w.globals[i + 1][1].n != SIZE_MAX)
			copy_str(what, len, w.globals[i + 1][1]);
		else if (!exception_from_message(w.last_str, what, len))
			snprintf(what, len, "Exception");
		return true;
	}
	return false;
}
