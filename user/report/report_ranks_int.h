/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What report_ranks.c keeps of the pass over the trace, for its hang
 * summary (report_hang.c) and "waiting for" table (report_ranks.c).
 */
#ifndef PTBPF_REPORT_RANKS_INT_H
#define PTBPF_REPORT_RANKS_INT_H

#include "report/report_ranks.h"

#define RK_MAX_HANG 64
#define RK_LEAVES 8
#define RK_CAUSES 12
#define RK_MAX_THREADS 8192
#define RK_MAX_ITEMS 1000000 /* collectives and steps kept; past it, counted */

/* A "rank" instant of the "ptbpf hang" track (live/session.c writes it). */
struct rk_hang {
	int64_t pid;
	uint32_t rank, state, coll_name, coll_left_name; /* string ids */
	uint64_t ts, gone_ts, steps, step_start, median, limit;
	uint64_t coll_entered, coll_left, coll_left_seq, coll_enter_ts, coll_left_ts,
		 coll_open_ts;
	bool seen_hung;
};

struct rk_count {
	uint32_t name;
	uint64_t n;
};

struct rk_thread {
	int64_t pid, tid;
	uint32_t stack;   /* the attach's look at it, blocked: its Python call site */
	uint32_t call;    /* ... the call it was blocked in (RD_NONE: no look) */
	uint64_t samples; /* its CPU samples; leaf: their innermost Python frames */
	struct rk_count leaf[RK_LEAVES];
	struct rk_count cause[RK_CAUSES]; /* the kernel view's causes, ns */
	uint64_t cause_ns;                /* all of them */
};

/* A collective on one rank (a region or a c10d:: op), or a step. */
struct rk_item {
	int64_t pid, tid;
	uint32_t name;
	uint64_t start, end;
};

/* A row of the "waiting for" table: the collective of a step the others
 * waited longest in, and the last rank to arrive in it. */
struct rk_late {
	uint32_t step, coll;
	int64_t pid, tid;
	uint64_t first, second, last; /* the first, second-last and last arrivals */
	int nranks;
};

struct rk_data {
	struct rk_hang hang[RK_MAX_HANG];
	int nhang;
	struct rd_map thread_ix; /* tid -> index + 1 */
	struct rk_thread *th;
	size_t nth, th_cap;
	struct rk_item *regions, *ops, *steps;
	size_t nregions, regions_cap, nops, ops_cap, nsteps, steps_cap;
	uint64_t dropped;
	struct rk_late *late;
	size_t nlate, late_cap;
	uint64_t groups; /* collectives matched across all the ranks */
	int nranks;      /* the ranks in them: the most any collective had */
};

/* The thread tid of pid (pid 0: not known yet), made if need be. */
struct rk_thread *rk_thread_of(struct report *r, int64_t pid, int64_t tid);
/* The rank of pid as its process's label says it: "rank 2", else "pid N". */
void rk_rank_name(const struct report *r, int64_t pid, char *buf, size_t len);
/* A thread's largest causes, as "sleep (clock_nanosleep) 97%, running 2%". */
void rk_causes_line(const struct report *r, const struct rk_thread *t, char *buf, size_t len);

#endif /* PTBPF_REPORT_RANKS_INT_H */
