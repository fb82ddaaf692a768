/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ops_ring: reads the op rings of the agents in the traced processes
 * (RecordFunction begins and ends, include/ptbpf_agent.h) with
 * process_vm_readv (checked against the image attached to afterwards),
 * turns each record into a loader-made ring event
 * (EV_NAMED_RF_BEGIN, EV_RF_END of ptbpf_events.h) and hands it on. What
 * never reaches ptbpf is counted from the rings' counters and marked
 * (EV_OPS_GAP) on its thread: dropped by a full ring, or gone with its
 * process unread (counted from what the exit probe saved of them).
 */
#ifndef PTBPF_OPS_RING_H
#define PTBPF_OPS_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ptbpf_events.h"

struct ops_rings;

/* Records, and apart the BEGIN records (ops) among them: what the job did
 * = read + unread + dropped + no_slot (once every process is read to its
 * end), each counted where it went missing. */
struct ops_ring_counts {
	uint64_t written;   /* records the agents wrote (as last read) */
	uint64_t records;   /* records read */
	uint64_t unread;    /* written, but gone with their process before
			     * ptbpf read them (it fell behind, or the exit
			     * copy found the BPF ring full) */
	uint64_t dropped;   /* lost in the target: a ring was full */
	uint64_t no_slot;   /* lost in the target: a thread found no free ring */
	uint64_t begins, begins_unread, begins_dropped, begins_no_slot;
	uint64_t bad;       /* malformed records (the ring was skipped to its head) */
	uint64_t lost_at_exit; /* processes gone without their rings' last
				* counters (killed by a signal): what they
				* wrote after ptbpf's last read is not counted */
	int layout_ok;      /* all agents could read RecordFunction's fields */
	/* The records' timestamps (include/ptbpf_agent.h, enum ptbpf_ops_clock):
	 * processes whose agent stamped them from the TSC (the others, from
	 * clock_gettime()); the TSC line's checks against CLOCK_MONOTONIC,
	 * those that set it anew, and the largest difference one found. */
	int clock_tsc;
	uint64_t clock_checks, clock_steps, clock_max_err_ns;
};

/* The counters pid's _exit or exec probe saved (ptbpf_ops_loc), 0; or
 * -ENOENT. */
struct ptbpf_ops_loc;
typedef int (*ops_final_fn)(void *ctx, int pid, struct ptbpf_ops_loc *out);

struct ops_rings *ops_rings_new(ops_final_fn final, void *final_ctx);
void ops_rings_free(struct ops_rings *r);
/* Starts reading t's rings, whose descriptor its agent reported at
 * desc_addr; what they hold now is skipped. Rings are read only from the
 * image t was opened on and written only through it (an exec ends them).
 * 0, or -errno with one line in err. */
struct target;
int ops_rings_add(struct ops_rings *r, const struct target *t, uint64_t desc_addr, char *err,
		  size_t errlen);
/* The end, after the last drain (the agents are off): the losses the
 * agents counted but could not mark with a gap record are marked now, and
 * no ring is read again (an agent may be unloaded next). Processes found
 * gone are settled by the next ops_rings_settle. */
void ops_rings_finish(struct ops_rings *r, int (*emit)(void *ctx, void *data, size_t size),
		      void *ctx);
/* pid exec'd: its rings are gone (the exec probes copied them and their
 * counters). */
void ops_rings_exec(struct ops_rings *r, int pid, int (*emit)(void *ctx, void *data, size_t size),
		    void *ctx);
/* Whether any process is being read. */
int ops_rings_count(const struct ops_rings *r);
/* Whether every process read has its agent idle (ptbpf_ops_desc.idle as
 * last read): its first record then wakes the reader. */
bool ops_rings_idle(const struct ops_rings *r);
/* Processes found gone at an earlier drain, now that the BPF ring was
 * read after it (their exit copy is in): what they took with them unread
 * is counted and marked. */
void ops_rings_settle(struct ops_rings *r, int (*emit)(void *ctx, void *data, size_t size),
		      void *ctx);
/* Whatever is newer than this waits (UINT64_MAX: nothing need): a process
 * found gone, and not yet settled, may still mark its losses as far back
 * as this. */
uint64_t ops_rings_unsettled_from(const struct ops_rings *r);
/* Reads everything the rings hold and calls emit with each event. */
void ops_rings_drain(struct ops_rings *r, int (*emit)(void *ctx, void *data, size_t size),
		     void *ctx);
/* Where pid's rings are (for the exit probe); 0 or -ENOENT. */
int ops_rings_loc(const struct ops_rings *r, int pid, struct ptbpf_ops_loc *loc);
/* Bytes of a ring read by BPF as the process exits or exec's: parsed like
 * a drain. */
void ops_rings_chunk(struct ops_rings *r, const struct ptbpf_ops_chunk *c,
		     int (*emit)(void *ctx, void *data, size_t size), void *ctx);
const struct ops_ring_counts *ops_rings_counts(const struct ops_rings *r);

#endif /* PTBPF_OPS_RING_H */
