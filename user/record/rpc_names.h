/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * torch.distributed.rpc messages as the loader reads them: a MessageType's
 * name, and what a payload's first bytes (struct ptbpf_rpc) say: the
 * function a request calls, named as torch.profiler names it (a Python
 * function's __qualname__, "aten::add" for a builtin op, a TorchScript
 * function's qualified name), and whether a response carries a Python
 * exception raised by the remote function. Pure functions, no state.
 */
#ifndef PTBPF_RPC_NAMES_H
#define PTBPF_RPC_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RPC_REQUEST_FLAG  0x100
#define RPC_RESPONSE_FLAG 0x200
#define RPC_EXCEPTION     0x237

/* "PYTHON_CALL", ...; "EXCEPTION"; "UNKNOWN". */
const char *rpc_type_name(uint32_t type);
/* Whether type is a MessageType (a request or a response). */
bool rpc_is_message_type(uint32_t type);
/* The function a request's payload (its first n bytes) calls, into fn;
 * false if these bytes do not say. */
bool rpc_payload_function(const uint8_t *p, size_t n, char *fn, size_t len);
/* Whether a response's payload holds a RemoteException (a Python exception
 * the remote function raised); its type ("ValueError") into what. */
bool rpc_payload_remote_exception(const uint8_t *p, size_t n, char *what, size_t len);

#endif /* PTBPF_RPC_NAMES_H */
