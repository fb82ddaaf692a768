/* SPDX-License-Identifier: BSD-2-Clause */
/* The trace reader's insides: what its decoders (trace_decode.c) use of the reader
 * itself (trace_read.c): its interned strings and its count of packets
 * whose contents are malformed. */
#ifndef PTBPF_TRACE_READ_INT_H
#define PTBPF_TRACE_READ_INT_H

#include <stdint.h>

#include "trace/trace_read.h"

/* The string interned as iid in table (F_ID_NAMES, ...) of sequence seq,
 * or "?" (counted as unresolved on the first pass). */
void tr_lookup(struct tr_reader *r, uint32_t seq, uint8_t table, uint64_t iid,
	       struct tr_str *out);
/* As tr_lookup, without counting a miss: false if iid is not there. */
bool tr_lookup_quiet(struct tr_reader *r, uint32_t seq, uint8_t table, uint64_t iid,
		     struct tr_str *out);
/* One more packet whose contents are malformed (counted on the first pass). */
void tr_count_undecodable(struct tr_reader *r);

#endif /* PTBPF_TRACE_READ_INT_H */
