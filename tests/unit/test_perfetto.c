/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the Perfetto writer (user/trace/perfetto*.c). Writes traces that use
 * every function and field, decodes them with protoc against
 * user/trace/perfetto_trace.proto and checks the text field by field (each track's
 * events on a sequence of its own, stamped by their distance from the one
 * before, with names interned per sequence); checks with
 * --decode_raw that repeated fixed64 fields are unpacked; checks the end
 * marker, that a full device makes the writer report -ENOSPC, that a write
 * cut short (a full disk) leaves whole packets only, that buffered packets
 * reach the file within 100 ms, and the copy writer (ptbpf merge); and
 * the protobuf encoder and varint decoder under it (pbwrite.h, pbread.h).
 *
 * Usage: test_perfetto <dir holding perfetto_trace.proto>
 */
#define _GNU_SOURCE
#include "trace/perfetto.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trace/pbread.h"
#include "trace/pbwrite.h"
#include "trace/pf_fields.h"

static int passed, failed;

#define CHECK(cond) check((cond), __LINE__, "%s", #cond)
#define CHECK_MSG(cond, ...) check((cond), __LINE__, __VA_ARGS__)
#define CHECK_EQ(a, b) check_eq((long long)(a), (long long)(b), __LINE__, #a, #b)

static bool check(bool ok, int line, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		return true;
	}
	failed++;
	fprintf(stderr, "FAIL line %d: ", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return false;
}

/* Evaluates each side once (sides may be calls such as pf_writer_close). */
static bool check_eq(long long a, long long b, int line, const char *sa, const char *sb)
{
	return check(a == b, line, "%s == %s (%lld vs %lld)", sa, sb, a, b);
}

/* ---- decoded text: lines, trimmed, split into top-level packets ---- */

struct decoded {
	char *text;
	char **line;  /* trimmed lines */
	int nlines;
	int *pkt;     /* index of the first line inside each packet */
	int *pkt_end; /* index of its closing "}" */
	int npkts;
	int status;   /* protoc's exit status */
};

static char *run_capture(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	size_t n;

	if (!p || !buf) {
		perror(cmd);
		exit(2);
	}
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				exit(2);
		}
	}
	buf[len] = '\0';
	*status = pclose(p);
	return buf;
}

static void decode(struct decoded *d, const char *protodir, const char *trace, bool raw)
{
	char cmd[4096];
	int cap = 1024;

	if (raw)
		snprintf(cmd, sizeof(cmd), "protoc --decode_raw < '%s' 2>&1", trace);
	else
		snprintf(cmd, sizeof(cmd),
			 "protoc --decode=perfetto.protos.Trace -I '%s' '%s/perfetto_trace.proto'"
			 " < '%s' 2>&1", protodir, protodir, trace);
	memset(d, 0, sizeof(*d));
	d->text = run_capture(cmd, &d->status);
	d->line = malloc(cap * sizeof(*d->line));
	d->pkt = malloc(cap * sizeof(int));
	d->pkt_end = malloc(cap * sizeof(int));
	for (char *s = d->text, *nl; s && *s; s = nl) {
		nl = strchr(s, '\n');
		if (nl)
			*nl++ = '\0';
		if (d->nlines == cap || d->npkts == cap) {
			cap *= 2;
			d->line = realloc(d->line, cap * sizeof(*d->line));
			d->pkt = realloc(d->pkt, cap * sizeof(int));
			d->pkt_end = realloc(d->pkt_end, cap * sizeof(int));
		}
		/* Top-level records: "packet {" (decode) or "1 {" (decode_raw). */
		if (!strcmp(s, raw ? "1 {" : "packet {"))
			d->pkt[d->npkts] = d->nlines + 1;
		else if (!strcmp(s, "}"))
			d->pkt_end[d->npkts++] = d->nlines;
		while (*s == ' ')
			s++;
		d->line[d->nlines++] = s;
	}
}

static void decoded_free(struct decoded *d)
{
	free(d->text);
	free(d->line);
	free(d->pkt);
	free(d->pkt_end);
}

static int count_in(const struct decoded *d, int from, int to, const char *line)
{
	int n = 0;

	for (int i = from; i < to; i++)
		n += !strcmp(d->line[i], line);
	return n;
}

static int pkt_count(const struct decoded *d, int k, const char *line)
{
	if (k >= d->npkts)
		return -1;
	return count_in(d, d->pkt[k], d->pkt_end[k], line);
}

static int all_count(const struct decoded *d, const char *line)
{
	return count_in(d, 0, d->nlines, line);
}

/* Does packet k hold these lines consecutively (NULL-terminated list)? */
static bool pkt_seq(const struct decoded *d, int k, ...)
{
	const char *want[64];
	int n = 0;
	va_list ap;

	va_start(ap, k);
	while (n < 64 && (want[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	if (k >= d->npkts)
		return false;
	for (int i = d->pkt[k]; i + n <= d->pkt_end[k]; i++) {
		int j = 0;

		while (j < n && !strcmp(d->line[i + j], want[j]))
			j++;
		if (j == n)
			return true;
	}
	return false;
}

#define PKT_HAS(d, k, line) CHECK_MSG(pkt_count(d, k, line) == 1, \
				      "packet %d has once: %s (count %d)", k, line, pkt_count(d, k, line))
#define PKT_LACKS(d, k, line) CHECK_MSG(pkt_count(d, k, line) == 0, \
					"packet %d lacks: %s", k, line)
#define PKT_SEQ(d, k, ...) CHECK_MSG(pkt_seq(d, k, __VA_ARGS__, (const char *)NULL), \
				     "packet %d has sequence starting %s", k, #__VA_ARGS__)

static const char *fmt(const char *f, ...)
{
	static char bufs[8][8192];
	static int next;
	char *b = bufs[next++ % 8];
	va_list ap;

	va_start(ap, f);
	vsnprintf(b, sizeof(bufs[0]), f, ap);
	va_end(ap);
	return b;
}

static int temp_file(char *path, size_t len)
{
	int fd;

	snprintf(path, len, "%s/test_perfetto.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		exit(2);
	}
	return fd;
}

static off_t file_size(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? -1 : st.st_size;
}

/* ---- the main trace ---- */

struct tracks {
	uint64_t proc, thread, gpu, stream, mem, kernels;
};

enum {
	P_FIRST, P_SNAP0, P_ATTR_STR, P_ATTR_INT, P_PROC, P_THREAD, P_GPU, P_STREAM,
	P_MEM, P_KERNELS, P_SNAP1, P_SEQ_THREAD, P_ADDMM, P_MM, P_END_MM, P_END_ADDMM,
	P_SEQ_STREAM, P_KERNEL, P_KERNEL_END, P_SEQ_GPU, P_SYNC, P_ADDMM2, P_END_ADDMM2,
	P_SEQ_MEM, P_COUNT_MEM, P_SEQ_KERN, P_COUNT_KERN, P_LOSS, P_LONG, P_MANY_ARGS,
	P_END_MANY, P_OLDER, P_AFTER_OLDER, P_ORPHAN_END, P_ORPHAN_START, P_END_MARKER,
	P_NPACKETS
};

/* Sequences: 1 the writer's own, then one per track in the order their
 * first events came. */
enum { SEQ_THREAD = 2, SEQ_STREAM, SEQ_GPU, SEQ_MEM, SEQ_KERN };

static const char *const cmdline[] = { "python", "train.py", "--epochs=3" };
static const char *const labels[] = { "RANK=1", "WORLD_SIZE=8" };
static char long_name[PF_STR_MAX + 100];  /* cut */
static char long_value[PF_STR_MAX + 2];          /* cut at a UTF-8 boundary */

static void write_tracks(struct pf_writer *w, struct tracks *t)
{
	pf_trace_attr_str(w, "dev.ptbpf.version", "0.1.0");
	pf_trace_attr_int(w, "dev.ptbpf.lost", -42);
	t->proc = pf_track_process(w, 1234, "python", cmdline, 3, labels, 2);
	t->thread = pf_track_thread(w, 1234, 1240, "pt_main_thread");
	t->gpu = pf_track_child(w, t->proc, "GPU 0");
	t->stream = pf_track_child(w, t->gpu, "GPU0 stream 7");
	t->mem = pf_track_counter(w, t->proc, "cuda mem", PF_UNIT_BYTES);
	t->kernels = pf_track_counter(w, t->proc, "kernels", PF_UNIT_COUNT);
	CHECK_EQ(pf_clock_snapshot(w), 0);
}

static void write_slices(struct pf_writer *w, const struct tracks *t)
{
	const struct pf_arg op_args[] = {
		{ .name = "int", .type = PF_ARG_INT, .i = -5 },
		{ .name = "uint", .type = PF_ARG_UINT, .u = UINT64_MAX },
		{ .name = "real", .type = PF_ARG_DOUBLE, .d = 2.5 },
		{ .name = "shape", .type = PF_ARG_STR, .s = "float32[64,128]" },
		{ .name = "flag", .type = PF_ARG_BOOL, .b = true },
		{ .name = "ptr", .type = PF_ARG_PTR, .ptr = 0xdeadbeef },
	};
	const struct pf_arg seq_arg[] = { { .name = "seq", .type = PF_ARG_UINT, .u = 7 } };
	const struct pf_arg end_args[] = {
		{ .name = "out", .type = PF_ARG_PTR, .ptr = 0x1000 },
		{ .name = "int", .type = PF_ARG_INT, .i = 3 },
	};
	const uint64_t flows[] = { 12345, UINT64_MAX };
	const uint64_t term[] = { 12345 };
	const uint64_t step[] = { UINT64_MAX };
	struct pf_event addmm = { .track = t->thread, .ts = 1000, .name = "aten::addmm",
				  .category = "op", .args = op_args, .nargs = 6,
				  .flows = flows, .nflows = 2 };
	struct pf_event mm = { .track = t->thread, .ts = 1100, .name = "aten::mm",
			       .category = "op", .args = seq_arg, .nargs = 1 };
	struct pf_event kernel = { .track = t->stream, .ts = 1400, .name = "gemm_kernel",
				   .category = "cuda", .term_flows = term, .nterm = 1,
				   .flows = step, .nflows = 1 };
	struct pf_event sync = { .track = t->gpu, .ts = 1600, .name = "sync",
				 .term_flows = step, .nterm = 1 };

	pf_slice_begin(w, &addmm);
	pf_slice_begin(w, &mm);
	pf_slice_end(w, &(struct pf_event){ .track = t->thread, .ts = 1200, .args = end_args, .nargs = 2 });
	pf_slice_end(w, &(struct pf_event){ .track = t->thread, .ts = 1300, .args = NULL, .nargs = 0 });
	pf_slice_begin(w, &kernel);
	pf_slice_end(w, &(struct pf_event){ .track = t->stream, .ts = 1500, .args = NULL, .nargs = 0 });
	pf_instant(w, &sync);
	addmm.ts = 2000;
	addmm.nflows = 0;
	pf_slice_begin(w, &addmm);
	pf_slice_end(w, &(struct pf_event){ .track = t->thread, .ts = 2100, .args = NULL, .nargs = 0 });
}

static void write_misc(struct pf_writer *w, const struct tracks *t)
{
	static const uint64_t orphan[] = { 777 };
	struct pf_arg many[PF_MAX_ARGS + 3];
	struct pf_arg val = { .name = "long", .type = PF_ARG_STR, .s = long_value };
	struct pf_event loss = { .track = t->thread, .ts = 2500, .name = "after_loss" };
	struct pf_event lng = { .track = t->thread, .ts = 2600, .name = long_name,
				.category = long_name, .args = &val, .nargs = 1 };
	struct pf_event m = { .track = t->thread, .ts = 2700, .name = "many",
			      .args = many, .nargs = PF_MAX_ARGS + 3 };

	pf_counter(w, t->mem, 2200, 1048576);
	pf_counter(w, t->kernels, 2300, -3);
	pf_mark_loss(w);
	pf_instant(w, &loss);
	memset(long_name, 'n', sizeof(long_name) - 1);
	memset(long_value, 'v', PF_STR_MAX - 1);
	strcpy(long_value + PF_STR_MAX - 1, "\xc3\xa9"); /* U+00E9 straddles the cut */
	pf_instant(w, &lng);
	for (int i = 0; i < PF_MAX_ARGS + 3; i++)
		many[i] = (struct pf_arg){ .name = "i", .type = PF_ARG_INT, .i = i };
	pf_slice_begin(w, &m);
	pf_slice_end(w, &(struct pf_event){ .track = t->thread, .ts = 2800, .args = many, .nargs = -1 });
	/* Older than the sequence's last: in full; the next one goes on from
	 * the last one's time. */
	pf_instant(w, &(struct pf_event){ .track = t->thread, .ts = 2750, .name = "many" });
	pf_instant(w, &(struct pf_event){ .track = t->thread, .ts = 2900, .name = "many" });
	/* A flow's end before its start: both keep the flow's own id. */
	pf_instant(w, &(struct pf_event){ .track = t->thread, .ts = 3000, .name = "many",
		   .term_flows = orphan, .nterm = 1 });
	pf_instant(w, &(struct pf_event){ .track = t->thread, .ts = 3100, .name = "many",
		   .flows = orphan, .nflows = 1 });
}

/* ---- checks of the decoded main trace ---- */

static void check_header(const struct decoded *d)
{
	PKT_HAS(d, P_FIRST, "trusted_packet_sequence_id: 1");
	PKT_HAS(d, P_FIRST, "sequence_flags: 1");
	PKT_HAS(d, P_FIRST, "first_packet_on_sequence: true");
	PKT_SEQ(d, P_FIRST, "trace_packet_defaults {", "timestamp_clock_id: 3", "}");
	PKT_LACKS(d, P_FIRST, "previous_packet_dropped: 1");
	CHECK_EQ(all_count(d, "first_packet_on_sequence: true"), 6);
	CHECK_EQ(all_count(d, "sequence_flags: 1"), 6);
	for (int k = P_SNAP0; k <= P_SNAP1; k += P_SNAP1 - P_SNAP0) {
		PKT_HAS(d, k, "clock_snapshot {");
		PKT_HAS(d, k, "clock_id: 6");
		PKT_HAS(d, k, "clock_id: 3");
		PKT_HAS(d, k, "clock_id: 1");
		PKT_HAS(d, k, "primary_trace_clock: BUILTIN_CLOCK_BOOTTIME");
		PKT_HAS(d, k, "timestamp_clock_id: 6");
		PKT_HAS(d, k, "trusted_packet_sequence_id: 1");
		/* The packet is stamped with the BOOTTIME reading, in BOOTTIME. */
		const char *boot = d->line[d->pkt[k] + 3];
		CHECK_MSG(!strncmp(boot, "timestamp: ", 11), "boottime reading: %s", boot);
		PKT_SEQ(d, k, "clocks {", "clock_id: 6", boot, "}");
		PKT_SEQ(d, k, "primary_trace_clock: BUILTIN_CLOCK_BOOTTIME", "}", boot,
			"trusted_packet_sequence_id: 1", "timestamp_clock_id: 6");
		PKT_LACKS(d, k, "sequence_flags: 2");
	}
	PKT_SEQ(d, P_ATTR_STR, "trusted_packet_sequence_id: 1", "trace_attributes {",
		"attribute {", "key: \"dev.ptbpf.version\"", "string_value: \"0.1.0\"", "}");
	PKT_SEQ(d, P_ATTR_INT, "trace_attributes {", "attribute {",
		"key: \"dev.ptbpf.lost\"", "long_value: -42", "}");
}

/* A sequence's first packet: its track by default, its incremental clock
 * starting at ts (MONOTONIC). */
static void check_seq_start(const struct decoded *d, int k, int seq, uint64_t track, int ts)
{
	PKT_SEQ(d, k, "clock_snapshot {", "clocks {", "clock_id: 64", fmt("timestamp: %d", ts),
		"is_incremental: true", "}", "clocks {", "clock_id: 3", fmt("timestamp: %d", ts),
		"}", "}", fmt("timestamp: %d", ts), fmt("trusted_packet_sequence_id: %d", seq),
		"sequence_flags: 1", "timestamp_clock_id: 3", "trace_packet_defaults {",
		"track_event_defaults {", fmt("track_uuid: %" PRIu64, track), "}",
		"timestamp_clock_id: 64", "}", "first_packet_on_sequence: true");
}

static void check_tracks(const struct decoded *d, const struct tracks *t)
{
	for (int k = P_PROC; k <= P_KERNELS; k++) {
		PKT_HAS(d, k, "sequence_flags: 2");
		PKT_HAS(d, k, "trusted_packet_sequence_id: 1");
		CHECK_MSG(!strncmp(d->line[d->pkt[k]], "timestamp: ", 11), "descriptor %d stamped", k);
	}
	PKT_SEQ(d, P_PROC, "track_descriptor {", fmt("uuid: %" PRIu64, t->proc), "process {",
		"pid: 1234", "cmdline: \"python\"", "cmdline: \"train.py\"",
		"cmdline: \"--epochs=3\"", "process_name: \"python\"",
		"process_labels: \"RANK=1\"", "process_labels: \"WORLD_SIZE=8\"", "}", "}");
	PKT_SEQ(d, P_THREAD, "track_descriptor {", fmt("uuid: %" PRIu64, t->thread), "thread {",
		"pid: 1234", "tid: 1240", "thread_name: \"pt_main_thread\"", "}", "}");
	PKT_SEQ(d, P_GPU, "track_descriptor {", fmt("uuid: %" PRIu64, t->gpu), "name: \"GPU 0\"",
		fmt("parent_uuid: %" PRIu64, t->proc),
		"sibling_merge_behavior: SIBLING_MERGE_BEHAVIOR_NONE", "}");
	PKT_SEQ(d, P_STREAM, fmt("uuid: %" PRIu64, t->stream), "name: \"GPU0 stream 7\"",
		fmt("parent_uuid: %" PRIu64, t->gpu),
		"sibling_merge_behavior: SIBLING_MERGE_BEHAVIOR_NONE");
	PKT_SEQ(d, P_MEM, fmt("uuid: %" PRIu64, t->mem), "name: \"cuda mem\"",
		fmt("parent_uuid: %" PRIu64, t->proc), "counter {", "unit: UNIT_SIZE_BYTES", "}");
	PKT_SEQ(d, P_KERNELS, fmt("uuid: %" PRIu64, t->kernels), "name: \"kernels\"",
		fmt("parent_uuid: %" PRIu64, t->proc), "counter {", "unit: UNIT_COUNT", "}");
	/* Process and thread descriptors stand alone. */
	CHECK_EQ(all_count(d, fmt("parent_uuid: %" PRIu64, t->proc)), 3);
	CHECK_EQ(pkt_count(d, P_THREAD, fmt("parent_uuid: %" PRIu64, t->proc)), 0);
	const uint64_t u[] = { t->proc, t->thread, t->gpu, t->stream, t->mem, t->kernels };
	for (int i = 0; i < 6; i++) {
		CHECK(u[i] != 0);
		for (int j = 0; j < i; j++)
			CHECK(u[i] != u[j]);
	}
	check_seq_start(d, P_SEQ_THREAD, SEQ_THREAD, t->thread, 1000);
	check_seq_start(d, P_SEQ_STREAM, SEQ_STREAM, t->stream, 1400);
	check_seq_start(d, P_SEQ_GPU, SEQ_GPU, t->gpu, 1600);
	check_seq_start(d, P_SEQ_MEM, SEQ_MEM, t->mem, 2200);
	check_seq_start(d, P_SEQ_KERN, SEQ_KERN, t->kernels, 2300);
}

static void check_addmm(const struct decoded *d)
{
	int k = P_ADDMM;

	PKT_HAS(d, k, "timestamp: 0");
	PKT_HAS(d, k, fmt("trusted_packet_sequence_id: %d", SEQ_THREAD));
	PKT_SEQ(d, k, "event_categories {", "iid: 1", "name: \"op\"", "}");
	PKT_SEQ(d, k, "event_names {", "iid: 1", "name: \"aten::addmm\"", "}");
	const char *args[] = { "int", "uint", "real", "shape", "flag", "ptr" };
	for (int i = 0; i < 6; i++)
		PKT_SEQ(d, k, "debug_annotation_names {", fmt("iid: %d", i + 1),
			fmt("name: \"%s\"", args[i]), "}");
	PKT_SEQ(d, k, "debug_annotation_string_values {", "iid: 1", "str: \"float32[64,128]\"",
		"}");
	PKT_SEQ(d, k, "track_event {", "category_iids: 1",
		"debug_annotations {", "name_iid: 1", "int_value: -5", "}",
		"debug_annotations {", "name_iid: 2", "uint_value: 18446744073709551615", "}",
		"debug_annotations {", "name_iid: 3", "double_value: 2.5", "}",
		"debug_annotations {", "name_iid: 4", "string_value_iid: 1", "}",
		"debug_annotations {", "name_iid: 5", "bool_value: true", "}",
		"debug_annotations {", "name_iid: 6", "pointer_value: 3735928559", "}",
		"type: TYPE_SLICE_BEGIN", "name_iid: 1",
		"flow_ids_old: 1", "flow_ids_old: 2", "}");
	PKT_LACKS(d, k, "terminating_flow_ids_old: 1");
}

static void check_events(const struct decoded *d, const struct tracks *t)
{
	check_addmm(d);
	PKT_SEQ(d, P_MM, "event_names {", "iid: 2", "name: \"aten::mm\"", "}");
	PKT_SEQ(d, P_MM, "debug_annotation_names {", "iid: 7", "name: \"seq\"", "}");
	PKT_LACKS(d, P_MM, "event_categories {");
	PKT_HAS(d, P_MM, "timestamp: 100");
	PKT_SEQ(d, P_MM, "category_iids: 1", "debug_annotations {", "name_iid: 7",
		"uint_value: 7", "}", "type: TYPE_SLICE_BEGIN", "name_iid: 2");
	/* END: no name, no category; its args reuse and add interned names. */
	PKT_SEQ(d, P_END_MM, "debug_annotation_names {", "iid: 8", "name: \"out\"", "}");
	PKT_SEQ(d, P_END_MM, "track_event {", "debug_annotations {", "name_iid: 8",
		"pointer_value: 4096", "}", "debug_annotations {", "name_iid: 1", "int_value: 3",
		"}", "type: TYPE_SLICE_END", "}");
	PKT_HAS(d, P_END_MM, "timestamp: 100");
	PKT_SEQ(d, P_END_ADDMM, "timestamp: 100", fmt("trusted_packet_sequence_id: %d", SEQ_THREAD),
		"track_event {", "type: TYPE_SLICE_END", "}");
	/* No name (10 or 23) or category (3 or 22) on any END. */
	const int ends[] = { P_END_MM, P_END_ADDMM, P_KERNEL_END, P_END_ADDMM2, P_END_MANY };
	for (int i = 0; i < 5; i++) {
		int k = ends[i];

		PKT_HAS(d, k, "type: TYPE_SLICE_END");
		for (int j = d->pkt[k]; j < d->pkt_end[k]; j++)
			CHECK_MSG(strncmp(d->line[j], "categor", 7) &&
				  (k == P_END_MM || strncmp(d->line[j], "name", 4)),
				  "END packet %d: %s", k, d->line[j]);
	}
	/* A name is defined once on each sequence it is used on, with the
	 * same iid everywhere. */
	PKT_SEQ(d, P_KERNEL, "event_categories {", "iid: 2", "name: \"cuda\"", "}");
	/* Flows: short ids from their start to their end (2 steps here). */
	PKT_SEQ(d, P_KERNEL, "category_iids: 2", "type: TYPE_SLICE_BEGIN", "name_iid: 3",
		"flow_ids_old: 2", "terminating_flow_ids_old: 1", "}");
	PKT_HAS(d, P_KERNEL, "timestamp: 0");
	PKT_HAS(d, P_KERNEL_END, "timestamp: 100");
	PKT_HAS(d, P_KERNEL_END, fmt("trusted_packet_sequence_id: %d", SEQ_STREAM));
	PKT_SEQ(d, P_SYNC, "type: TYPE_INSTANT", "name_iid: 4",
		"terminating_flow_ids_old: 2", "}");
	PKT_LACKS(d, P_SYNC, "event_categories {");
	/* Re-used names: no interned_data at all. */
	PKT_LACKS(d, P_ADDMM2, "interned_data {");
	PKT_SEQ(d, P_ADDMM2, "type: TYPE_SLICE_BEGIN", "name_iid: 1");
	PKT_LACKS(d, P_ADDMM2, "flow_ids_old: 1");
	PKT_HAS(d, P_ADDMM2, "timestamp: 700");
	CHECK_EQ(all_count(d, "name: \"aten::addmm\""), 1);
	CHECK_EQ(all_count(d, "name: \"op\""), 1);
	CHECK_EQ(all_count(d, "name: \"int\""), 1);
	CHECK_EQ(all_count(d, "flow_ids_old: 1"), 1);
	CHECK_EQ(all_count(d, "flow_ids_old: 2"), 2);
	CHECK_EQ(all_count(d, "terminating_flow_ids_old: 1"), 1);
	CHECK_EQ(all_count(d, "terminating_flow_ids_old: 2"), 1);
	PKT_HAS(d, P_ORPHAN_END, "terminating_flow_ids: 777");
	PKT_HAS(d, P_ORPHAN_START, "flow_ids: 777");
	CHECK_EQ(all_count(d, "type: TYPE_SLICE_BEGIN"), 5);
	CHECK_EQ(all_count(d, "type: TYPE_SLICE_END"), 5);
	CHECK_EQ(all_count(d, "type: TYPE_INSTANT"), 7);
	/* Events carry no track: their sequence's default is theirs. */
	CHECK_EQ(all_count(d, fmt("track_uuid: %" PRIu64, t->thread)), 1);
	CHECK_EQ(all_count(d, fmt("track_uuid: %" PRIu64, t->stream)), 1);
}

static void check_misc(const struct decoded *d, const struct tracks *t)
{
	PKT_SEQ(d, P_COUNT_MEM, "timestamp: 0", fmt("trusted_packet_sequence_id: %d", SEQ_MEM),
		"track_event {", "type: TYPE_COUNTER", "counter_value: 1048576", "}");
	PKT_SEQ(d, P_COUNT_KERN, "type: TYPE_COUNTER", "counter_value: -3");
	PKT_HAS(d, P_COUNT_KERN, fmt("trusted_packet_sequence_id: %d", SEQ_KERN));
	PKT_HAS(d, P_LOSS, "previous_packet_dropped: 1");
	CHECK_EQ(all_count(d, "previous_packet_dropped: 1"), 1);
	PKT_SEQ(d, P_LOSS, "event_names {", "iid: 5", "name: \"after_loss\"", "}");
	PKT_SEQ(d, P_LOSS, "type: TYPE_INSTANT", "name_iid: 5");
	PKT_HAS(d, P_LOSS, "timestamp: 400");
	PKT_LACKS(d, P_LOSS, "category_iids: 1");
	/* Cut to PF_STR_MAX (at a UTF-8 boundary), then interned as cut. */
	char want[PF_STR_MAX + 32];
	snprintf(want, sizeof(want), "name: \"%.*s\"", PF_STR_MAX, long_name);
	PKT_SEQ(d, P_LONG, "event_categories {", "iid: 3", want, "}");
	PKT_SEQ(d, P_LONG, "event_names {", "iid: 6", want, "}");
	snprintf(want, sizeof(want), "str: \"%.*s\"", PF_STR_MAX - 1, long_value);
	PKT_SEQ(d, P_LONG, "debug_annotation_string_values {", "iid: 2", want, "}");
	PKT_SEQ(d, P_LONG, "type: TYPE_INSTANT", "name_iid: 6");
	/* Past PF_MAX_ARGS args are left out. */
	CHECK_EQ(pkt_count(d, P_MANY_ARGS, "debug_annotations {"), PF_MAX_ARGS);
	PKT_HAS(d, P_MANY_ARGS, fmt("int_value: %d", PF_MAX_ARGS - 1));
	PKT_LACKS(d, P_MANY_ARGS, fmt("int_value: %d", PF_MAX_ARGS));
	PKT_LACKS(d, P_END_MANY, "debug_annotations {");
	/* Older than its sequence's last event: stamped in full, in MONOTONIC;
	 * the next goes on from the last (2800). */
	PKT_SEQ(d, P_OLDER, "timestamp: 2750", fmt("trusted_packet_sequence_id: %d", SEQ_THREAD));
	PKT_HAS(d, P_OLDER, "timestamp_clock_id: 3");
	PKT_HAS(d, P_AFTER_OLDER, "timestamp: 100");
	PKT_LACKS(d, P_AFTER_OLDER, "timestamp_clock_id: 3");
}

static void check_decoded(const struct decoded *d, const struct tracks *t)
{
	CHECK_EQ(d->status, 0);
	CHECK_EQ(d->npkts, P_NPACKETS);
	if (d->npkts != P_NPACKETS) {
		for (int i = 0; i < d->nlines && i < 20; i++)
			fprintf(stderr, "  %s\n", d->line[i]);
		return;
	}
	for (int i = 0; i < d->nlines; i++)
		CHECK_MSG(d->line[i][0] < '0' || d->line[i][0] > '9',
			  "no unknown field: %s", d->line[i]);
	/* Events need no flag: every sequence starts cleared. */
	for (int k = P_ADDMM; k < P_END_MARKER; k++)
		PKT_LACKS(d, k, "sequence_flags: 2");
	check_header(d);
	check_tracks(d, t);
	check_events(d, t);
	check_misc(d, t);
}

/* Each flow id has its own key (short ids varints 36 and 42, others fixed64
 * 47 and 48: wire type 1), never a packed run. */
static void check_raw(const struct decoded *d)
{
	int flows = 0, term = 0;

	CHECK_EQ(d->status, 0);
	CHECK_EQ(d->npkts, P_NPACKETS);
	for (int i = 0; i < d->nlines; i++) {
		const char *l = d->line[i];

		flows += !strncmp(l, "47: 0x", 6) + !strncmp(l, "36: ", 4);
		term += !strncmp(l, "48: 0x", 6) + !strncmp(l, "42: ", 4);
		CHECK_MSG(strncmp(l, "47: \"", 5) && strncmp(l, "48: \"", 5) &&
			  strncmp(l, "36: \"", 5) && strncmp(l, "42: \"", 5) &&
			  strcmp(l, "47 {") && strcmp(l, "48 {"), "packed flow ids: %s", l);
	}
	/* (42 is also TracePacket.previous_packet_dropped, on P_LOSS.) */
	CHECK_EQ(pkt_count(d, P_LOSS, "42: 1"), 1);
	CHECK_EQ(flows, 4);
	CHECK_EQ(term - 1, 3);
	CHECK_EQ(all_count(d, "36: 1"), 1);
	CHECK_EQ(all_count(d, "36: 2"), 2);
	CHECK_EQ(all_count(d, "42: 1") - 1, 1);
	CHECK_EQ(all_count(d, "47: 0x0000000000000309"), 1);
	CHECK_EQ(all_count(d, "48: 0x0000000000000309"), 1);
	/* category_iids (TrackEvent field 3) is an unpacked varint too. */
	CHECK_EQ(pkt_count(d, P_ADDMM, "3: 1"), 1);
	CHECK_EQ(pkt_count(d, P_KERNEL, "3: 2"), 1);
	/* The incremental clock is clock 64 of the sequence's snapshot. */
	CHECK_EQ(pkt_count(d, P_SEQ_THREAD, "1: 64"), 1);
}

static void test_main_trace(const char *protodir)
{
	char path[512];
	int fd = temp_file(path, sizeof(path));
	struct tracks t;
	struct pf_writer *w = pf_writer_open(fd);
	struct decoded d;

	if (!CHECK(w != NULL))
		exit(1);
	write_tracks(w, &t);
	write_slices(w, &t);
	write_misc(w, &t);
	CHECK_EQ(pf_writer_error(w), 0);
	/* 3 strings cut, 3 args over the limit. */
	CHECK_EQ(pf_items_clipped(w), 6);
	uint64_t bytes = pf_bytes_written(w);
	CHECK_EQ(pf_writer_close(w), 0);
	/* The end marker: the last packet, its value its own offset. */
	CHECK(file_size(fd) > (off_t)bytes && file_size(fd) < (off_t)bytes + 64);
	close(fd);
	decode(&d, protodir, path, false);
	check_decoded(&d, &t);
	if (d.npkts == P_NPACKETS) {
		PKT_HAS(&d, P_END_MARKER, "key: \"" PF_END_MARKER_KEY "\"");
		PKT_HAS(&d, P_END_MARKER, fmt("long_value: %lu", (unsigned long)bytes));
	}
	decoded_free(&d);
	decode(&d, protodir, path, true);
	check_raw(&d);
	decoded_free(&d);
	unlink(path);
}

/* ---- intern tables past their capacity ---- */

static void write_many_names(struct pf_writer *w, uint64_t track)
{
	char name[32], cat[32], arg[32];
	struct pf_arg a = { .name = arg, .type = PF_ARG_INT };
	struct pf_event e = { .track = track, .name = name, .category = cat, .args = &a, .nargs = 1 };

	for (int i = 1; i <= PF_INTERN_MAX + 2; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		snprintf(cat, sizeof(cat), "c%d", i);
		snprintf(arg, sizeof(arg), "a%d", i);
		e.ts = (uint64_t)i;
		a.i = i;
		pf_instant(w, &e);
	}
	/* An early name is still interned once the tables are full. */
	snprintf(name, sizeof(name), "n1");
	snprintf(cat, sizeof(cat), "c1");
	snprintf(arg, sizeof(arg), "a1");
	pf_instant(w, &e);
}

static void test_intern_overflow(const char *protodir)
{
	char path[512];
	int fd = temp_file(path, sizeof(path));
	struct pf_writer *w = pf_writer_open(fd);
	struct decoded d;
	int first, last;

	if (!CHECK(w != NULL))
		exit(1);
	write_many_names(w, pf_track_thread(w, 1, 1, "main"));
	CHECK_EQ(pf_writer_close(w), 0);
	close(fd);
	decode(&d, protodir, path, false);
	CHECK_EQ(d.status, 0);
	first = 4; /* first, snapshot, thread descriptor, the thread's sequence */
	last = d.npkts - 2; /* then the end marker */
	CHECK_EQ(d.npkts, first + PF_INTERN_MAX + 4);
	if (d.npkts == first + PF_INTERN_MAX + 4) {
		int k = first + PF_INTERN_MAX - 1; /* the last one interned */

		PKT_SEQ(&d, k, "event_names {", fmt("iid: %d", PF_INTERN_MAX),
			fmt("name: \"n%d\"", PF_INTERN_MAX));
		PKT_HAS(&d, k, fmt("category_iids: %d", PF_INTERN_MAX));
		for (k = first + PF_INTERN_MAX; k < last; k++) {
			int i = k - first + 1;

			PKT_LACKS(&d, k, "interned_data {");
			PKT_SEQ(&d, k, "debug_annotations {", fmt("int_value: %d", i),
				fmt("name: \"a%d\"", i), "}", "type: TYPE_INSTANT");
			PKT_SEQ(&d, k, fmt("categories: \"c%d\"", i), fmt("name: \"n%d\"", i));
		}
		PKT_LACKS(&d, last, "interned_data {");
		PKT_SEQ(&d, last, "category_iids: 1", "debug_annotations {", "name_iid: 1",
			fmt("int_value: %d", PF_INTERN_MAX + 2), "}", "type: TYPE_INSTANT",
			"name_iid: 1");
	}
	CHECK_EQ(all_count(&d, "event_names {"), PF_INTERN_MAX);
	CHECK_EQ(all_count(&d, "event_categories {"), PF_INTERN_MAX);
	CHECK_EQ(all_count(&d, "debug_annotation_names {"), PF_INTERN_MAX);
	decoded_free(&d);
	unlink(path);
}

/* ---- a track whose events go back in time for good ---- */

/* A few late events are stamped in full on the track's sequence; once
 * the events keep coming from before its last one, the track starts over
 * on a new sequence (a snapshot that moved its incremental clock back
 * would not be taken), and its names are defined there again. */
static void test_back_in_time(const char *protodir)
{
	char path[512];
	int fd = temp_file(path, sizeof(path));
	struct pf_writer *w = pf_writer_open(fd);
	struct pf_event e = { .name = "k", .category = "kernel" };
	struct decoded d;
	int full;

	if (!CHECK(w != NULL))
		exit(1);
	e.track = pf_track_thread(w, 1, 1, "stream");
	e.ts = 100000;
	pf_instant(w, &e);
	for (int i = 0; i < 3; i++) { /* late, then in order again */
		e.ts = 50000 + (uint64_t)i;
		pf_instant(w, &e);
	}
	e.ts = 100001;
	pf_instant(w, &e);
	for (int i = 0; i < 40; i++) { /* back for good */
		e.ts = 1000 + 10 * (uint64_t)i;
		pf_instant(w, &e);
	}
	CHECK_EQ(pf_writer_close(w), 0);
	close(fd);
	decode(&d, protodir, path, false);
	CHECK_EQ(d.status, 0);
	/* 45 events and two sequence starts. */
	CHECK_EQ(all_count(&d, "trusted_packet_sequence_id: 2") +
		 all_count(&d, "trusted_packet_sequence_id: 3"), 45 + 2);
	CHECK_EQ(all_count(&d, fmt("track_uuid: %" PRIu64, e.track)), 2);
	CHECK_EQ(all_count(&d, "name: \"k\""), 2);
	full = all_count(&d, "timestamp_clock_id: 3");
	/* In full: the snapshot packets (one per sequence), the late ones. */
	CHECK_MSG(full > 2 + 3 && full < 2 + 40, "events stamped in full: %d", full - 2);
	CHECK(all_count(&d, "trusted_packet_sequence_id: 3") > 10);
	decoded_free(&d);
	unlink(path);
}

/* ---- write errors ---- */

static void test_full_device(void)
{
	int fd = open("/dev/full", O_WRONLY);
	struct pf_writer *w;
	struct pf_event e = { .name = "x", .category = "y" };

	if (!CHECK(fd >= 0))
		return;
	/* Small: everything sits in the writer's buffer until the close. */
	w = pf_writer_open(fd);
	if (CHECK(w != NULL)) {
		e.track = pf_track_thread(w, 1, 1, "t");
		pf_slice_begin(w, &e);
		CHECK_EQ(pf_writer_error(w), 0);
		CHECK_EQ(pf_writer_close(w), -ENOSPC);
	}
	/* Large: a flush fails midway; the writer stops and keeps the error. */
	w = pf_writer_open(fd);
	if (CHECK(w != NULL)) {
		for (int i = 0; i < 100000; i++) {
			e.ts = (uint64_t)i;
			pf_instant(w, &e);
		}
		CHECK_EQ(pf_writer_error(w), -ENOSPC);
		uint64_t bytes = pf_bytes_written(w);
		pf_instant(w, &e);
		pf_counter(w, 1, 1, 1);
		CHECK_EQ(pf_bytes_written(w), bytes);
		CHECK_EQ(pf_writer_close(w), -ENOSPC);
	}
	close(fd);
	errno = 0;
	CHECK(pf_writer_open(-1) == NULL && errno == EBADF);
}

/* A file size limit cuts a write part way, as a full disk does: the file
 * is cut back to its last whole packet, which protoc then decodes. Returns
 * whether the cut was needed (the limit fell inside a packet). */
static bool cut_write(const char *protodir, rlim_t limit)
{
	struct rlimit old, small = { limit, RLIM_INFINITY };
	char path[512];
	int fd = temp_file(path, sizeof(path));
	struct pf_writer *w;
	struct pf_event e = { .name = "aten::add", .category = "cpu_op" };
	struct decoded d;
	off_t size;

	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	small.rlim_max = old.rlim_max;
	CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
	w = pf_writer_open(fd);
	if (!CHECK(w != NULL))
		exit(1);
	e.track = pf_track_thread(w, 1, 1, "main");
	for (int i = 0; i < 100000 && !pf_writer_error(w); i++) {
		e.ts = 1000 + (uint64_t)i;
		pf_slice_begin(w, &e);
		pf_slice_end(w, &e);
	}
	size = file_size(fd);
	CHECK_EQ(pf_writer_error(w), -EFBIG);
	CHECK_EQ(size, (off_t)pf_bytes_written(w));
	CHECK_MSG(size > 200000 && size <= (off_t)limit, "size %ld", (long)size);
	CHECK_EQ(pf_writer_close(w), -EFBIG);
	setrlimit(RLIMIT_FSIZE, &old);
	close(fd);
	decode(&d, protodir, path, false);
	CHECK_EQ(d.status, 0);
	CHECK(d.npkts > 1000);
	CHECK_EQ(all_count(&d, "key: \"" PF_END_MARKER_KEY "\""), 0);
	decoded_free(&d);
	unlink(path);
	return size < (off_t)limit;
}

/* A limit may fall on a packet boundary (packets' sizes depend on the
 * random track uuid): a byte further each time, until a packet is cut
 * back (about every other run; 20 tries). */
static void test_cut_write(const char *protodir)
{
	rlim_t limit = 300017;

	while (!cut_write(protodir, limit) && limit < 300037)
		limit++;
	CHECK(limit < 300037);
}

/* Packets reach the file within FLUSH_NS (100 ms) of the first buffered
 * one, at the next packet: a killed writer loses at most that much. */
static void test_timely_flush(void)
{
	char path[512];
	int fd = temp_file(path, sizeof(path));
	struct pf_writer *w = pf_writer_open(fd);
	uint64_t track;

	if (!CHECK(w != NULL))
		exit(1);
	track = pf_track_thread(w, 1, 1, "main");
	pf_counter(w, track, 1, 1); /* (the track's sequence starts) */
	CHECK_EQ(file_size(fd), 0);
	nanosleep(&(struct timespec){ 0, 150000000 }, NULL);
	pf_counter(w, track, 2, 1);
	CHECK_EQ(file_size(fd), (off_t)pf_bytes_written(w));
	CHECK_EQ(pf_writer_close(w), 0);
	close(fd);
	unlink(path);
}

/* The copy writer (merge): packets as given, then an end marker with no
 * sequence of its own. */
static void test_copy_writer(const char *protodir)
{
	/* TracePacket { timestamp: 5, trusted_packet_sequence_id: 7 } */
	static const uint8_t pkt[] = { 0x40, 0x05, 0x50, 0x07 };
	char path[512];
	int fd = temp_file(path, sizeof(path));
	struct pf_writer *w = pf_writer_open_copy(fd);
	struct decoded d;

	if (!CHECK(w != NULL))
		exit(1);
	pf_write_packet(w, pkt, sizeof(pkt));
	pf_write_packet(w, pkt, sizeof(pkt));
	CHECK_EQ(pf_writer_close(w), 0);
	close(fd);
	decode(&d, protodir, path, false);
	CHECK_EQ(d.status, 0);
	CHECK_EQ(d.npkts, 3);
	if (d.npkts == 3) {
		PKT_HAS(&d, 0, "trusted_packet_sequence_id: 7");
		PKT_HAS(&d, 2, "key: \"" PF_END_MARKER_KEY "\"");
		PKT_HAS(&d, 2, "long_value: 12");
		PKT_LACKS(&d, 2, "trusted_packet_sequence_id: 1");
	}
	decoded_free(&d);
	unlink(path);
}

/* The wire format under both (pbwrite.h, pbread.h): a growing buffer and
 * a fixed one encode alike, a fixed one that fills fails whole, and varints
 * read back, cut short (0) or endless (-1). */
static void test_pb_wire(void)
{
	/* TrackDescriptor { uuid: 300, process { pid: -1 } }, then fixed64 7 */
	static const uint8_t want[] = { 0x08, 0xac, 0x02, 0x1a, 0x0b, 0x08, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x39, 7, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t endless[11] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
					     0x80, 0x80, 0x01 };
	uint8_t fixed[sizeof(want)];
	struct pb grow = { 0 }, fix = { .buf = fixed, .cap = sizeof(fixed), .fixed = true };
	struct pb *bufs[] = { &grow, &fix };
	uint64_t v;

	for (int i = 0; i < 2; i++) {
		struct pb *b = bufs[i];
		size_t at;

		pb_uint(b, F_TD_UUID, 300);
		at = pb_begin(b, F_TD_PROCESS);
		pb_int(b, F_PD_PID, -1);
		pb_end(b, at);
		pb_fixed64(b, 7, 7);
		CHECK(!b->failed && b->len == sizeof(want) && !memcmp(b->buf, want, sizeof(want)));
	}
	pb_uint(&fix, 1, 1); /* no room left */
	CHECK(fix.failed && fix.len == sizeof(want));
	for (int i = 0; i < 1000; i++) /* grows past its first allocation */
		pb_bytes(&grow, 2, want, sizeof(want));
	CHECK(!grow.failed && grow.len == sizeof(want) * 1001 + 2 * 1000);
	pb_free(&grow);
	CHECK_EQ(pb_varint_get(want + 1, 2, &v), 2);
	CHECK_EQ(v, 300);
	CHECK_EQ(pb_varint_get(want + 1, 1, &v), 0);
	CHECK_EQ(pb_varint_get(endless, 10, &v), -1);
	CHECK_EQ(pb_varint_get(endless, 9, &v), 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s <dir holding perfetto_trace.proto>\n", argv[0]);
		return 2;
	}
	test_pb_wire();
	test_main_trace(argv[1]);
	test_intern_overflow(argv[1]);
	test_back_in_time(argv[1]);
	test_full_device();
	test_cut_write(argv[1]);
	test_timely_flush();
	test_copy_writer(argv[1]);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
