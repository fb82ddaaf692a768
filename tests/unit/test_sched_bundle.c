/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the kernel view's encoding: the writer's compact sched
 * bundles (user/trace/perfetto_ftrace.c) decoded field by field with the
 * reader's protobuf decoder (timestamps delta-encoded and moved onto
 * BOOTTIME by the first clock snapshot, names in one table per bundle,
 * packed arrays of equal length, the loss flag), and merge's move of a
 * bundle (user/offline/merge_sched.c: only the first timestamp of each
 * array moves, pids but the idle task's 0, the CPU).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offline/merge_sched.h"
#include "trace/pbread.h"
#include "trace/pbwrite.h"
#include "trace/perfetto.h"
#include "trace/pf_fields.h"

static int passed, failed;

#define CHECK(cond) check((cond), __LINE__, #cond)
#define CHECK_EQ(a, b) check_eq((long long)(a), (long long)(b), __LINE__, #a " == " #b)

static void check(bool ok, int line, const char *what)
{
	if (ok) {
		passed++;
		return;
	}
	failed++;
	fprintf(stderr, "FAIL line %d: %s\n", line, what);
}

static void check_eq(long long a, long long b, int line, const char *what)
{
	if (a != b)
		fprintf(stderr, "  (%lld vs %lld)\n", a, b);
	check(a == b, line, what);
}

/* A bundle decoded: its arrays (absolute timestamps) and names. */
struct decoded {
	uint32_t cpu;
	bool lost;
	int64_t v[13][16]; /* by CompactSched field number */
	int n[13];
	char names[16][16];
	int nnames;
};

static void unpack(const struct field *f, struct decoded *d)
{
	size_t off = 0;
	int64_t acc = 0;

	while (off < f->len && d->n[f->num] < 16) {
		uint64_t v;
		int k = pb_varint_get(f->d + off, f->len - off, &v);

		if (k <= 0)
			break;
		off += (size_t)k;
		if (f->num == F_SCHED_SW_TS || f->num == F_SCHED_WK_TS)
			v = (uint64_t)(acc += (int64_t)v);
		d->v[f->num][d->n[f->num]++] = (int64_t)v;
	}
}

static void decode_bundle(const uint8_t *b, size_t n, struct decoded *d)
{
	const uint8_t *p = b, *q;
	struct field f, g;
	bool bad = false;

	memset(d, 0, sizeof(*d));
	while (pb_next_field(&p, b + n, &f, &bad)) {
		if (f.num == F_FB_CPU)
			d->cpu = (uint32_t)f.v;
		else if (f.num == F_FB_LOST)
			d->lost = f.v;
		if (f.num != F_FB_COMPACT)
			continue;
		for (q = f.d; pb_next_field(&q, f.d + f.len, &g, &bad);) {
			if (g.num == F_SCHED_INTERN && d->nnames < 16)
				snprintf(d->names[d->nnames++], 16, "%.*s", (int)g.len, g.d);
			else if (g.wt == PB_LEN && g.num < 13)
				unpack(&g, d);
		}
	}
	CHECK(!bad);
}

/* The first ClockSnapshot's BOOTTIME - MONOTONIC, and the first bundle. */
static void read_trace(const uint8_t *buf, size_t len, int64_t *boot_minus_mono,
		       struct decoded *d)
{
	const uint8_t *p = buf;
	struct field rec, f, c, k;
	bool bad = false, have_snap = false;

	while (pb_next_field(&p, buf + len, &rec, &bad)) {
		const uint8_t *q = rec.d;

		while (pb_next_field(&q, rec.d + rec.len, &f, &bad)) {
			if (f.num == F_PKT_FTRACE_EVENTS)
				decode_bundle(f.d, f.len, d);
			if (f.num != F_PKT_CLOCK_SNAPSHOT || have_snap)
				continue;
			int64_t boot = 0, mono = 0;

			for (const uint8_t *s = f.d; pb_next_field(&s, f.d + f.len, &c, &bad);) {
				uint64_t id = 0, ts = 0;

				for (const uint8_t *t = c.d; c.num == F_CS_CLOCKS &&
				     pb_next_field(&t, c.d + c.len, &k, &bad);)
					k.num == F_CLK_ID ? (id = k.v) : (ts = k.v);
				if (id == CLOCK_ID_BOOTTIME)
					boot = (int64_t)ts;
				if (id == CLOCK_ID_MONOTONIC)
					mono = (int64_t)ts;
			}
			*boot_minus_mono = boot - mono;
			have_snap = true;
		}
	}
	CHECK(!bad && have_snap);
}

static const struct pf_sched_switch sw[] = {
	{ .ts = 1000, .prev_state = 0x100, .next_pid = 42, .next_prio = 120, .next_comm = "python3" },
	{ .ts = 900, .prev_state = 1, .next_pid = 0, .next_prio = 120, .next_comm = "swapper/1" },
	{ .ts = 5000, .prev_state = 2, .next_pid = 43, .next_prio = 110, .next_comm = "python3" },
};
static const struct pf_sched_waking wk[] = {
	{ .ts = 800, .pid = 42, .target_cpu = 1, .prio = 120, .comm = "python3" },
	{ .ts = 4000, .pid = 43, .target_cpu = 0, .prio = 110, .common_flags = 0x08,
	  .comm = "a-long-thread-name-cut" },
};

static void test_bundle(void)
{
	char path[] = "/tmp/ptbpf-test-sched-XXXXXX";
	int fd = mkstemp(path);
	struct pf_writer *w = pf_writer_open(fd);
	uint8_t *buf = malloc(1 << 20);
	int64_t off = 0;
	struct decoded d;
	ssize_t len;

	CHECK(w && buf);
	pf_sched_bundle(w, 3, sw, 3, wk, 2, true);
	CHECK_EQ(pf_writer_close(w), 0);
	len = pread(fd, buf, 1 << 20, 0);
	close(fd);
	unlink(path);
	read_trace(buf, (size_t)len, &off, &d);
	CHECK_EQ(d.cpu, 3);
	CHECK(d.lost);
	CHECK_EQ(d.n[F_SCHED_SW_TS], 3);
	CHECK_EQ(d.n[F_SCHED_SW_STATE], 3);
	CHECK_EQ(d.n[F_SCHED_SW_COMM], 3);
	CHECK_EQ(d.n[F_SCHED_WK_FLAGS], 2);
	/* In the order given (a step back wraps and unwraps), in BOOTTIME. */
	CHECK_EQ(d.v[F_SCHED_SW_TS][0], 1000 + off);
	CHECK_EQ(d.v[F_SCHED_SW_TS][1], 900 + off);
	CHECK_EQ(d.v[F_SCHED_SW_TS][2], 5000 + off);
	CHECK_EQ(d.v[F_SCHED_WK_TS][1], 4000 + off);
	CHECK_EQ(d.v[F_SCHED_SW_STATE][0], 0x100);
	CHECK_EQ(d.v[F_SCHED_SW_PID][1], 0);
	CHECK_EQ(d.v[F_SCHED_WK_FLAGS][1], 0x08);
	/* One table for both arrays; names cut at 15 bytes. */
	CHECK_EQ(d.nnames, 3);
	CHECK_EQ(d.v[F_SCHED_SW_COMM][0], d.v[F_SCHED_SW_COMM][2]);
	CHECK_EQ(d.v[F_SCHED_WK_COMM][0], d.v[F_SCHED_SW_COMM][0]);
	CHECK(!strcmp(d.names[d.v[F_SCHED_WK_COMM][1]], "a-long-thread-n"));
	CHECK(!strcmp(d.names[d.v[F_SCHED_SW_COMM][1]], "swapper/1"));
	free(buf);
}

/* A bundle as the writer makes it, alone in a buffer. */
static size_t one_bundle(uint8_t *out, size_t cap, int64_t *off)
{
	char path[] = "/tmp/ptbpf-test-sched-XXXXXX";
	int fd = mkstemp(path);
	struct pf_writer *w = pf_writer_open(fd);
	uint8_t *buf = malloc(1 << 20);
	const uint8_t *p;
	struct field rec, f;
	bool bad = false;
	size_t n = 0;
	ssize_t len;

	pf_sched_bundle(w, 1, sw, 3, wk, 2, false);
	pf_writer_close(w);
	len = pread(fd, buf, 1 << 20, 0);
	close(fd);
	unlink(path);
	for (p = buf; pb_next_field(&p, buf + len, &rec, &bad);) {
		for (const uint8_t *q = rec.d; pb_next_field(&q, rec.d + rec.len, &f, &bad);)
			if (f.num == F_PKT_FTRACE_EVENTS && f.len <= cap)
				memcpy(out, f.d, n = f.len);
	}
	{
		struct decoded d;

		read_trace(buf, (size_t)len, off, &d);
	}
	free(buf);
	return n;
}

static void test_merge_move(void)
{
	static uint8_t in[1 << 16];
	const struct merge_sched_shift sh = { .ts_off = 1000000, .pid_off = 1 << 22, .cpu_off = 8 };
	struct pb out = { 0 };
	struct decoded a, b;
	int64_t off;
	size_t n = one_bundle(in, sizeof(in), &off);
	uint32_t cpu;

	CHECK(n > 0);
	CHECK(merge_sched_cpu(in, n, &cpu) && cpu == 1);
	decode_bundle(in, n, &a);
	CHECK(merge_sched_bundle(&sh, in, n, &out));
	decode_bundle(out.buf, out.len, &b);
	CHECK_EQ(b.cpu, 9);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(b.v[F_SCHED_SW_TS][i], a.v[F_SCHED_SW_TS][i] + 1000000);
		CHECK_EQ(b.v[F_SCHED_SW_PID][i], a.v[F_SCHED_SW_PID][i] ?
			 a.v[F_SCHED_SW_PID][i] + (1 << 22) : 0);
		CHECK_EQ(b.v[F_SCHED_SW_STATE][i], a.v[F_SCHED_SW_STATE][i]);
	}
	CHECK_EQ(b.v[F_SCHED_WK_TS][1], a.v[F_SCHED_WK_TS][1] + 1000000);
	CHECK_EQ(b.v[F_SCHED_WK_PID][0], 42 + (1 << 22));
	CHECK_EQ(b.nnames, a.nnames);
	/* A shift that would take a timestamp below 0 drops the bundle. */
	{
		const struct merge_sched_shift back = { .ts_off = -(a.v[F_SCHED_SW_TS][0] + 1) };
		struct pb o2 = { 0 };

		CHECK(!merge_sched_bundle(&back, in, n, &o2));
		pb_free(&o2);
	}
	pb_free(&out);
}

int main(void)
{
	test_bundle();
	test_merge_move();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
