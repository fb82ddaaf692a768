/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * torch's at::RecordFunction callback API as the agent (ops.c) reaches it
 * without linking libtorch: the exported functions by mangled name, and the
 * one structure passed in, RecordFunctionCallback, written out with the
 * layout torch 1.13 and 2.x share. Also used by the benchmark's floor
 * library (tests/bench/floor.c), which registers empty callbacks.
 */
#ifndef PTBPF_RF_ABI_H
#define PTBPF_RF_ABI_H

#include <stdbool.h>
#include <stdint.h>

/* at::RecordFunctionCallback: trivially copyable, 40 bytes, so passed by
 * value in memory on the stack, as C passes this struct. StartCallback
 * returns std::unique_ptr<ObserverContext>, which is returned through a
 * hidden pointer (first argument) and handed back in RAX. */
#define RF_NUM_SCOPES 10
struct rf_callback {
	void **(*start)(void **ret, const void *rf);
	void (*end)(const void *rf, void *ctx);
	double sampling_prob;
	bool scopes[RF_NUM_SCOPES];
	bool needs_inputs, needs_outputs, needs_ids;
};
_Static_assert(sizeof(struct rf_callback) == 40, "RecordFunctionCallback layout");

/* at::addGlobalCallback(RecordFunctionCallback) -> handle,
 * at::removeCallback(handle), at::RecordFunction::name() const,
 * at::sequence_number::peek() */
#define RF_SYM_ADD    "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE"
#define RF_SYM_REMOVE "_ZN2at14removeCallbackEm"
#define RF_SYM_NAME   "_ZNK2at14RecordFunction4nameEv"
#define RF_SYM_PEEK   "_ZN2at15sequence_number4peekEv"

/* RecordFunction members behind inline accessors: step_callbacks_.scope_
 * and sequence_nr_, at the same offsets in 1.13 and 2.x (vptr, then a
 * 96-byte StepCallbacks, then the flag, the ObserverContext list and the
 * name/schema variant). */
#define RF_SCOPE_OFF 96
#define RF_SEQ_OFF   200

/* The at::RecordScope values the agent registers for or tells apart. */
enum { SC_FUNCTION = 0, SC_BACKWARD = 1, SC_USER = 7 };

#endif /* PTBPF_RF_ABI_H */
