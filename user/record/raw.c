// SPDX-License-Identifier: BSD-2-Clause
/* Raw captures and replaying them. See raw.h. */
#define _GNU_SOURCE
#include "record/raw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/files.h"
#include "record/gpu_timeline.h"
#include "record/inductor.h"
#include "record/route.h"
#include "record/samples.h"
#include "trace/perfetto.h"
#include "attach/target.h"

#define MAGIC "PTBPFRAW1\n"
#define MAX_ITEM (1u << 20)

struct raw_writer {
	struct outfile out;
	FILE *f;          /* on a dup of out.fd: fclose leaves out.fd to outfile */
	uint32_t ops_written;
	uint32_t lists_cut; /* Triton kernels' lists cut to fit an item */
	int err;
};

struct raw_writer *raw_open(const char *path, bool force)
{
	struct raw_writer *r = calloc(1, sizeof(*r));
	int fd;

	if (!r || outfile_open(&r->out, path, force, NULL, 0, "")) {
		free(r);
		return NULL;
	}
	fd = dup(r->out.fd);
	if (fd < 0 || !(r->f = fdopen(fd, "w"))) {
		outfile_cannot_write("", r->out.tmp, errno);
		if (fd >= 0)
			close(fd);
		outfile_discard(&r->out);
		free(r);
		return NULL;
	}
	fputs(MAGIC, r->f);
	return r;
}

static void item(struct raw_writer *r, uint8_t tag, const void *a, uint32_t alen,
		 const void *b, uint32_t blen)
{
	uint32_t len = alen + blen;

	if (fwrite(&tag, 1, 1, r->f) != 1 || fwrite(&len, 4, 1, r->f) != 1 ||
	    fwrite(a, 1, alen, r->f) != alen || (blen && fwrite(b, 1, blen, r->f) != blen))
		r->err = r->err ? r->err : -errno;
}

void raw_ops(struct raw_writer *r, const struct op_table *ops)
{
	char buf[1024];

	for (; r->ops_written < ops->n; r->ops_written++) {
		int n = snprintf(buf, sizeof(buf), "%s%c%s", ops->name[r->ops_written], 0,
				 ops->overload[r->ops_written]);

		item(r, 'O', &r->ops_written, 4, buf, (uint32_t)n + 1);
	}
}

void raw_process(struct raw_writer *r, const struct target *t)
{
	struct raw_process p = { .pid = t->pid, .ns_pid = t->ns_pid };

	snprintf(p.comm, sizeof(p.comm), "%s", t->comm);
	snprintf(p.cmdline, sizeof(p.cmdline), "%s", t->cmdline);
	item(r, 'P', &p, sizeof(p), NULL, 0);
}

void raw_record(struct raw_writer *r, const void *data, uint64_t size)
{
	if (size <= MAX_ITEM)
		item(r, 'R', data, (uint32_t)size, NULL, 0);
}

/* Its five strings, NUL-separated, in one item of at most MAX_ITEM: a node
 * or op list that would not fit is cut (said once, on stderr), not dropped. */
void raw_inductor(void *ctx, int pid, const char *name, const struct inductor_kernel *k)
{
	struct raw_writer *r = ctx;
	const char *f[5] = { name, k->aten ? k->aten : "", k->nodes ? k->nodes : "",
			     k->module ? k->module : "", k->graph ? k->graph : "" };
	size_t len[5], total = 4, room = MAX_ITEM;
	int32_t p = pid;
	char *buf, *at;

	for (int i = 0; i < 5; i++)
		total += (len[i] = strlen(f[i])) + 1;
	for (int i = 2; i >= 1 && total > room; i--) { /* the node list, then the ATen ops */
		size_t cut = total - room < len[i] ? total - room : len[i];

		len[i] -= cut;
		total -= cut;
		if (!r->lists_cut++)
			log_msg("raw capture: a Triton kernel's ATen op or node list is over "
				"1 MiB and was cut to fit\n");
	}
	if (total > room) { /* a kernel name or module path of a MiB: none is */
		log_msg("raw capture: Triton kernel %.64s...'s sources are over 1 MiB without "
			"their lists: not written\n", name);
		return;
	}
	if (!(buf = malloc(total - 4))) {
		r->err = r->err ? r->err : -ENOMEM;
		return;
	}
	at = buf;
	for (int i = 0; i < 5; i++) {
		memcpy(at, f[i], len[i]);
		at += len[i];
		*at++ = 0;
	}
	item(r, 'I', &p, sizeof(p), buf, (uint32_t)(total - 4));
	free(buf);
}

/* Replay: an 'I' item into the timeline's Triton sources. */
static int add_inductor(struct route *r, const char *payload, uint32_t len)
{
	const char *f[5] = { 0 }, *end = payload + len;
	struct inductor_kernel k;
	int32_t pid;
	int n = 1;

	if (len < 4 + 4 || payload[len - 1])
		return -EINVAL;
	memcpy(&pid, payload, 4);
	f[0] = payload + 4;
	for (const char *z; n < 5 && (z = memchr(f[n - 1], 0, end - f[n - 1])) && z + 1 < end; n++)
		f[n] = z + 1;
	if (n < 4)
		return -EINVAL;
	k = (struct inductor_kernel){ .aten = *f[1] ? f[1] : NULL, .nodes = *f[2] ? f[2] : NULL,
				      .module = *f[3] ? f[3] : NULL,
				      .graph = f[4] && *f[4] ? f[4] : NULL };
	inductor_add(gpu_timeline_inductor(route_decoders(r)->timeline), pid, f[0], &k);
	return 0;
}

int raw_close(struct raw_writer *r, bool keep)
{
	int rc = 0;

	if (!r)
		return 0;
	if (fclose(r->f) && !r->err)
		r->err = -errno;
	if (!keep) {
		outfile_discard(&r->out);
	} else if (r->err) {
		outfile_keep_partial(&r->out);
		log_msg("writing %s failed: %s (what was written stays there; "
			"`ptbpf replay` reads it)\n", r->out.tmp, strerror(-r->err));
		rc = -1;
	} else if (outfile_commit(&r->out, "")) {
		rc = -1;
	}
	free(r);
	return rc;
}

/* Replay: the op table grows as 'O' items come, in index order. */
static int add_op(struct op_table *ops, uint32_t idx, const char *payload, uint32_t len)
{
	const char *ov = memchr(payload, 0, len);

	if (!ov || idx != ops->n || !memchr(ov + 1, 0, len - (ov + 1 - payload)))
		return -EINVAL;
	return op_table_add(ops, payload, ov + 1);
}

/* How a capture ended. */
struct replay_end {
	uint64_t items, offset; /* items read whole, and the bytes they took */
	bool cut;               /* a last item cut short (the capture stopped there) */
	bool damaged;           /* an item that is no item (its tag or length) */
};

static int replay_items(FILE *in, struct route *r, struct op_table *ops, struct replay_end *e)
{
	uint8_t *buf = malloc(MAX_ITEM);
	uint32_t len;
	uint8_t tag;

	if (!buf)
		return -ENOMEM;
	e->offset = sizeof(MAGIC) - 1;
	while (fread(&tag, 1, 1, in) == 1) {
		if (fread(&len, 4, 1, in) != 1) {
			e->cut = true;
			break;
		}
		if (len > MAX_ITEM || !strchr("OPRI", tag) || !tag) {
			e->damaged = true;
			break;
		}
		if (fread(buf, 1, len, in) != len) {
			e->cut = true;
			break;
		}
		if (tag == 'O') {
			uint32_t idx;

			memcpy(&idx, buf, 4);
			if (len <= 4 || add_op(ops, idx, (char *)buf + 4, len - 4)) {
				e->damaged = true;
				break;
			}
		} else if (tag == 'P') {
			struct raw_process p;
			struct target t = { 0 };

			if (len != sizeof(p)) {
				e->damaged = true;
				break;
			}
			memcpy(&p, buf, sizeof(p));
			t.pid = p.pid;
			t.ns_pid = p.ns_pid;
			memcpy(t.comm, p.comm, sizeof(t.comm));
			memcpy(t.cmdline, p.cmdline, sizeof(t.cmdline));
			t.comm[sizeof(t.comm) - 1] = t.cmdline[sizeof(t.cmdline) - 1] = 0;
			join_add_process(route_join(r), &t);
		} else if (tag == 'I') {
			if (add_inductor(r, (char *)buf, len)) {
				e->damaged = true;
				break;
			}
		} else {
			route_event(r, buf, len);
		}
		e->items++;
		e->offset += 5 + (uint64_t)len;
	}
	free(buf);
	return 0;
}

/* The capture's header: 0, or -1 with the reason printed. */
static int check_magic(FILE *in, const char *path)
{
	char magic[sizeof(MAGIC) - 1];
	size_t n = fread(magic, 1, sizeof(magic), in);

	if (n == 0 && !ferror(in)) {
		log_msg("replay: %s is empty: not a ptbpf raw capture\n", path);
		return -1;
	}
	if (n != sizeof(magic) || memcmp(magic, MAGIC, sizeof(magic))) {
		log_msg("replay: %s is not a ptbpf raw capture (those start with "
			"PTBPFRAW1; write one with --raw)\n", path);
		return -1;
	}
	return 0;
}

int raw_replay(const char *raw_path, const char *out_path, bool force,
	       long (*on_gpu_trace)(const char *path, int fd))
{
	struct op_table ops = { 0 };
	struct replay_end end = { 0 };
	struct outfile out = { .fd = -1 };
	struct pf_writer *w = NULL;
	struct route *r = NULL;
	const struct gpu_timeline_counts *d;
	int fd, err = 0, rc = 1;
	bool gpu = false;
	FILE *in = NULL;

	fd = infile_open(raw_path, "replay");
	if (fd < 0)
		return 1;
	in = fdopen(fd, "r");
	if (!in) {
		log_msg("replay: cannot read %s: %s\n", raw_path, strerror(errno));
		close(fd);
		return 1;
	}
	if (check_magic(in, raw_path) ||
	    outfile_open(&out, out_path, force, (const char *const[]){ raw_path }, 1, "replay"))
		goto done;
	w = pf_writer_open(out.fd);
	r = w ? route_new(w, &ops, false) : NULL;
	if (r) {
		sample_view_replay(route_decoders(r)->samples);
		inductor_replay(gpu_timeline_inductor(route_decoders(r)->timeline));
	}
	if (!w || !r) {
		outfile_cannot_write("replay", out.tmp, errno);
		goto done;
	}
	err = replay_items(in, r, &ops, &end);
	if (err) {
		log_msg("replay: %s: %s\n", raw_path, strerror(-err));
		goto done;
	}
	if (end.cut || end.damaged)
		log_msg("replay: warning: %s %s at byte %lu; replayed the %lu "
			"records before it\n", raw_path, end.cut ? "ends in a cut record (the "
			"capture was stopped there)" : "is damaged (not a record)",
			(unsigned long)end.offset, (unsigned long)end.items);
	route_finish(r, 0);
	pf_clock_snapshot(w);
	d = gpu_timeline_counts(route_decoders(r)->timeline);
	gpu = d->kernels + d->memcpys + d->memsets > 0;
	route_free(r);
	r = NULL;
	err = pf_writer_close(w);
	w = NULL;
	if (err) {
		outfile_keep_partial(&out);
		log_msg("replay: writing %s failed: %s (what was written stays "
			"there)\n", out.tmp, strerror(-err));
	} else {
		if (gpu && on_gpu_trace) /* as a capture has it */
			on_gpu_trace(out.tmp, out.fd);
		if (!outfile_commit(&out, "replay"))
			rc = 0;
	}
done:
	route_free(r);
	if (w)
		pf_writer_close(w);
	outfile_discard(&out);
	fclose(in);
	op_table_free(&ops);
	return rc;
}
