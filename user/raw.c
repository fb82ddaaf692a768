// SPDX-License-Identifier: BSD-2-Clause
/* Raw captures and replaying them. See raw.h. */
#define _GNU_SOURCE
#include "raw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "join.h"
#include "perfetto.h"
#include "target.h"

#define MAGIC "PTBPFRAW1\n"
#define MAX_ITEM (1u << 20)

struct raw_writer {
	FILE *f;
	uint32_t ops_written;
	int err;
};

struct raw_writer *raw_open(const char *path)
{
	int fd = cli_open_output(path);
	struct raw_writer *r;

	if (fd < 0)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->f = fdopen(fd, "w"))) {
		fprintf(stderr, "ptbpf: %s: %s\n", path, strerror(errno));
		close(fd);
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

int raw_close(struct raw_writer *r)
{
	int err;

	if (!r)
		return 0;
	if (fclose(r->f) && !r->err)
		r->err = -errno;
	err = r->err;
	free(r);
	return err;
}

/* Replay: the op table grows as 'O' items come, in index order. */
static int add_op(struct op_table *ops, uint32_t idx, const char *payload, uint32_t len)
{
	const char *ov = memchr(payload, 0, len);

	if (!ov || idx != ops->n || !memchr(ov + 1, 0, len - (ov + 1 - payload)))
		return -EINVAL;
	return op_table_add(ops, payload, ov + 1);
}

static int replay_items(FILE *in, struct join *j, struct op_table *ops)
{
	uint8_t *buf = malloc(MAX_ITEM);
	uint32_t len;
	uint8_t tag;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while (!err && fread(&tag, 1, 1, in) == 1) {
		if (fread(&len, 4, 1, in) != 1 || len > MAX_ITEM || fread(buf, 1, len, in) != len) {
			err = -EIO;
			break;
		}
		if (tag == 'O' && len > 4) {
			uint32_t idx;

			memcpy(&idx, buf, 4);
			err = add_op(ops, idx, (char *)buf + 4, len - 4);
		} else if (tag == 'P' && len == sizeof(struct raw_process)) {
			struct raw_process p;
			struct target t = { 0 };

			memcpy(&p, buf, sizeof(p));
			t.pid = p.pid;
			t.ns_pid = p.ns_pid;
			memcpy(t.comm, p.comm, sizeof(t.comm));
			memcpy(t.cmdline, p.cmdline, sizeof(t.cmdline));
			t.comm[sizeof(t.comm) - 1] = t.cmdline[sizeof(t.cmdline) - 1] = 0;
			join_add_process(j, &t);
		} else if (tag == 'R') {
			join_event(j, buf, len);
		} else {
			err = -EINVAL;
		}
	}
	free(buf);
	return err;
}

int raw_replay(const char *raw_path, const char *out_path)
{
	struct op_table ops = { 0 };
	char magic[sizeof(MAGIC) - 1];
	struct pf_writer *w = NULL;
	struct join *j = NULL;
	FILE *in, *out = NULL;
	int fd, err = -EINVAL;

	in = fopen(raw_path, "re");
	if (!in) {
		fprintf(stderr, "ptbpf: replay: %s: %s\n", raw_path, strerror(errno));
		return 1;
	}
	if (fread(magic, 1, sizeof(magic), in) != sizeof(magic) ||
	    memcmp(magic, MAGIC, sizeof(magic))) {
		fprintf(stderr, "ptbpf: replay: %s is not a ptbpf raw capture\n", raw_path);
		fclose(in);
		return 1;
	}
	fd = cli_open_output(out_path);
	if (fd < 0) {
		fclose(in);
		return 1;
	}
	if ((out = fdopen(fd, "w")) && (w = pf_writer_open(out)) &&
	    (j = join_new(w, &ops, false))) {
		err = replay_items(in, j, &ops);
		if (err == -EIO) { /* the capturing ptbpf was killed mid-record */
			fprintf(stderr, "ptbpf: replay: %s ends in a partial record; "
				"replayed up to it\n", raw_path);
			err = 0;
		}
		join_finish(j, join_last_ts(j));
		pf_clock_snapshot(w);
	}
	if (err)
		fprintf(stderr, "ptbpf: replay: %s: %s\n", raw_path, strerror(-err));
	join_free(j);
	if (w && pf_writer_close(w) && !err)
		err = -EIO;
	if (out)
		fclose(out);
	fclose(in);
	op_table_free(&ops);
	return err ? 1 : 0;
}
