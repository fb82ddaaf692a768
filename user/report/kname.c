// SPDX-License-Identifier: BSD-2-Clause
/* Readable, distinct short kernel names. See kname.h. */
#define _GNU_SOURCE
#include "report/kname.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
	char *p;
	size_t n, cap;
};

static void put(struct buf *b, const char *s, size_t len)
{
	if (b->n + len >= b->cap)
		len = b->cap - b->n - 1;
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = 0;
}

static bool opener(char c)
{
	return c == '<' || c == '(' || c == '{' || c == '[';
}

static bool closer(char c)
{
	return c == '>' || c == ')' || c == '}' || c == ']';
}

/* s[i] opens or closes a bracket ('>' of "->" does not). */
static int bracket(const char *s, size_t i)
{
	if (opener(s[i]))
		return 1;
	if (closer(s[i]) && !(s[i] == '>' && i && s[i - 1] == '-'))
		return -1;
	return 0;
}

/* The index of the bracket that closes the one at s[i], or len if none. */
static size_t match(const char *s, size_t i, size_t len)
{
	int depth = 0;

	for (; i < len; i++) {
		depth += bracket(s, i);
		if (!depth)
			return i;
	}
	return len;
}

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '>';
}

/* Brackets simplified at most this deep, those deeper shown as "<...>" and
 * "(...)": each level is a call, and a scan of what it encloses, and a
 * name read from a trace may be anything (real kernel names nest a few
 * dozen deep at most; one nested 200,000 deep overflowed the stack). */
#define MAX_NEST 64

static void simplify(struct buf *b, const char *s, size_t len, int d, int depth, int nest);

/* One template argument or name: its last "::" component, with parameter
 * lists dropped and template arguments simplified one level down; nest:
 * the brackets around it. */
static void component(struct buf *b, const char *s, size_t len, int d, int depth, int nest)
{
	size_t start = 0, i;

	while (len && s[len - 1] == ' ')
		len--;
	if (len > 6 && !memcmp(s + len - 6, " const", 6))
		len -= 6;
	for (i = 0; i < len; i++) { /* the last top-level "::" */
		if (opener(s[i]))
			i = match(s, i, len);
		else if (s[i] == ':' && i + 1 < len && s[i + 1] == ':')
			start = i + 2, i++;
	}
	while (start < len && s[start] == ' ')
		start++;
	for (i = start; i < len; i++) {
		size_t end;

		if (!opener(s[i])) {
			put(b, s + i, 1);
			continue;
		}
		end = match(s, i, len);
		if (end == len) { /* unbalanced: as it is */
			put(b, s + i, len - i);
			return;
		}
		if (s[i] == '<' && ((d >= depth && depth >= 0) || nest >= MAX_NEST)) {
			put(b, "<...>", 5);
		} else if (s[i] == '<') {
			put(b, "<", 1);
			simplify(b, s + i + 1, end - i - 1, d + 1, depth, nest + 1);
			put(b, ">", 1);
		} else if (s[i] == '(' && i > start && ident_char(s[i - 1])) {
			; /* a parameter list */
		} else if (s[i] == '(' && nest >= MAX_NEST) {
			put(b, "(...)", 5);
		} else if (s[i] == '(') { /* a cast: "(at::native::ADAM_MODE)0" */
			put(b, "(", 1);
			simplify(b, s + i + 1, end - i - 1, d, depth, nest + 1);
			put(b, ")", 1);
		} else {
			put(b, s + i, end - i + 1);
		}
		i = end;
	}
}

/* A comma-separated list of template arguments at nesting depth d. */
static void simplify(struct buf *b, const char *s, size_t len, int d, int depth, int nest)
{
	size_t from = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && opener(s[i])) {
			i = match(s, i, len);
			continue;
		}
		if (i < len && s[i] != ',')
			continue;
		while (from < i && s[from] == ' ')
			from++;
		if (from)
			put(b, ", ", 2);
		component(b, s + from, i - from, d, depth, nest);
		from = i + 1;
	}
}

/* name simplified with template arguments down to depth (-1: all);
 * malloc'd, NULL when out of memory. */
static char *simplified(const char *name, int depth)
{
	size_t len = strlen(name);
	struct buf b = { .cap = 2 * len + 16 };

	b.p = malloc(b.cap);
	if (!b.p)
		return NULL;
	b.p[0] = 0;
	if (len > 5 && !strncmp(name, "void ", 5))
		name += 5, len -= 5;
	component(&b, name, len, 0, depth, 0);
	if (!b.n)
		put(&b, name, len);
	return b.p;
}

/* s cut after its last template argument that fits: "f<a, b, ...>". */
static bool cut_args(const char *s, size_t width, char *out)
{
	size_t best = 0;
	int depth = 0;

	for (size_t i = 0; s[i] && i + 6 <= width; i++) {
		depth += bracket(s, i);
		if (depth == 1 && s[i] == ',')
			best = i;
	}
	if (!best)
		return false;
	memcpy(out, s, best);
	memcpy(out + best, ", ...>", 7);
	return true;
}

/* s's head and tail, its middle left out. */
static void elide(const char *s, size_t width, char *out)
{
	size_t n = strlen(s), head, tail;

	if (n <= width) {
		memcpy(out, s, n + 1);
		return;
	}
	if (width < 8) {
		memcpy(out, s, width);
		out[width] = 0;
		return;
	}
	head = (width - 3) * 3 / 5;
	tail = width - 3 - head;
	memcpy(out, s, head);
	memcpy(out + head, "...", 3);
	memcpy(out + head + 3, s + n - tail, tail + 1);
}

static const int depths[] = { -1, 3, 2, 1 };
#define NDEPTHS (int)(sizeof(depths) / sizeof(depths[0]))

void kname_short(const char *name, size_t width, char *out)
{
	char *s = NULL;

	for (int d = 0; d < NDEPTHS; d++) { /* the most detail that fits */
		free(s);
		if (!(s = simplified(name, depths[d])))
			break;
		if (strlen(s) <= width) {
			memcpy(out, s, strlen(s) + 1);
			free(s);
			return;
		}
	}
	free(s);
	/* the first template arguments: as many as fit, at whichever depth
	 * shows more of them */
	for (int d = 2, best = 0; d >= 1; d--) {
		char *cut = malloc(width + 8);
		int args = 0, depth = 0;

		if (!cut || !(s = simplified(name, d)) || !cut_args(s, width, cut)) {
			free(cut);
			free(s);
			continue;
		}
		for (size_t i = 0; cut[i]; i++) {
			depth += bracket(cut, i);
			args += depth == 1 && cut[i] == ',';
		}
		if (args > best) {
			best = args;
			memcpy(out, cut, strlen(cut) + 1);
		}
		free(cut);
		free(s);
		if (d == 1 && best)
			return;
	}
	s = simplified(name, 0);
	elide(s ? s : name, width, out);
	free(s);
}

/* name[0..nlen) then rest, within width: each shortened in its middle,
 * the name to no less than 16 bytes. */
static void join_elided(const char *name, size_t nlen, const char *rest, size_t width,
			char *out)
{
	size_t rlen = strlen(rest), room;
	char *n = malloc(nlen + 1), *r = malloc(rlen + 1);

	if (!n || !r || width < 24) {
		elide(rest, width, out);
		goto out;
	}
	memcpy(n, name, nlen);
	n[nlen] = 0;
	if (rlen > width - 16)
		rlen = width - 16;
	elide(rest, rlen, r);
	room = width - strlen(r);
	elide(n, room, out);
	strcat(out, r);
out:
	free(n);
	free(r);
}

/* A simplified name's top-level template arguments. */
struct targs {
	size_t head;             /* the name before its '<' */
	const char *arg[64];
	size_t len[64];
	int n;
};

static bool split_args(const char *s, size_t slen, struct targs *t)
{
	const char *from = NULL;
	int depth = 0;

	t->n = 0;
	for (size_t i = 0; i < slen; i++) {
		int b = bracket(s, i);

		if (b > 0 && depth == 0) {
			if (s[i] != '<')
				return false;
			t->head = i;
			from = s + i + 1;
		}
		depth += b;
		if (from && ((depth == 1 && s[i] == ',') || (depth == 0 && b < 0))) {
			if (t->n < 64) {
				t->arg[t->n] = from;
				t->len[t->n++] = (size_t)(s + i - from);
			}
			if (!depth)
				break;
			from = s + i + (s[i + 1] == ' ' ? 2 : 1);
		}
	}
	return t->n > 0;
}

/* The index of the first template argument in which the rows differ. */
static int first_difference(const struct targs *t, size_t n)
{
	int k = 0;

	for (; k < t[0].n; k++) {
		bool differ = false;

		for (size_t i = 1; i < n && !differ; i++)
			differ = k >= t[i].n || t[i].len[k] != t[0].len[k] ||
				 memcmp(t[i].arg[k], t[0].arg[k], t[0].len[k]);
		if (differ)
			break;
	}
	return k;
}

/* Whether argument k of every row is the same template (its first *h
 * bytes): then the difference is looked for one level down. */
static bool same_template(const struct targs *t, size_t n, int k, size_t *h)
{
	struct targs sub0, sub;
	bool same = k < t[0].n && split_args(t[0].arg[k], t[0].len[k], &sub0);

	*h = same ? sub0.head : 0;
	for (size_t i = 1; same && i < n; i++)
		same = k < t[i].n && split_args(t[i].arg[k], t[i].len[k], &sub) &&
		       sub.head == *h && !memcmp(t[i].arg[k], t[0].arg[k], *h);
	return same;
}

/* A row's name with its differing argument (a, len bytes; the k-th, more
 * after it) shown between what encloses it (pre, tail), elided to width. */
static void show_row(char *full, struct targs *t, const char *pre, const char *tail,
		     const char *a, size_t len, int k, bool more, size_t cap, size_t width,
		     char *out)
{
	char *last = malloc(len + 1), *rest = malloc(cap + len + 16), *piece;

	if (last && rest) {
		memcpy(last, a, len);
		last[len] = 0;
		rest[0] = 0;
		split_args(full, strlen(full), t);
		for (int d = 1; d >= 0; d--) { /* its arguments too, if they fit */
			if (!(piece = simplified(last, d)))
				break;
			snprintf(rest, cap + len + 16, "<%s%s%s%s>%s", pre, k ? "..., " : "", piece,
				 more ? ", ..." : "", tail);
			free(piece);
			if (t->head + strlen(rest) <= width)
				break;
		}
		join_elided(full, t->head, rest, width, out);
	}
	free(rest);
	free(last);
}

static void free_rows(char **rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++)
		free(rows[i]);
	free(rows);
}

/* One level of show_difference: each row's k-th differing argument; true
 * if they are all the same template there (then cur is one level down). */
static bool show_level(char **full, char **pre, char **suf, const char **cur, size_t *curlen,
		       struct targs *t, size_t n, const size_t *rows, size_t cap, size_t width,
		       char **out, bool *ok)
{
	int k = 0;
	size_t h = 0;
	bool descend;

	for (size_t i = 0; *ok && i < n; i++)
		*ok = split_args(cur[i], curlen[i], &t[i]);
	k = *ok ? first_difference(t, n) : 0;
	descend = *ok && same_template(t, n, k, &h);
	for (size_t i = 0; *ok && i < n; i++) {
		const char *a = k < t[i].n ? t[i].arg[k] : "";
		size_t len = k < t[i].n ? t[i].len[k] : 0, pl = strlen(pre[i]);
		bool more = k + 1 < t[i].n;
		char *tail = strdup(suf[i]);

		if (!(*ok = tail != NULL))
			break;
		if (descend) { /* "Op<" in, ">, ...>" out */
			snprintf(pre[i] + pl, cap - pl, "%s%.*s<", k ? "..., " : "", (int)h, a);
			snprintf(suf[i], cap, ">%s%s", more ? ", ..." : "", tail);
			cur[i] = a;
			curlen[i] = len;
		} else {
			show_row(full[i], &t[i], pre[i], tail, a, len, k, more, cap, width,
				 out[rows[i]]);
		}
		free(tail);
	}
	return descend;
}

/* A group of rows that read the same (rows[0..n)): each shows the
 * template argument where their names first differ, going down into an
 * argument they all have ("f<..., Op<..., Mean<...>, ...>>"). False if
 * that does not tell them apart. */
static bool show_difference(const char *const *names, const size_t *rows, size_t n,
			    size_t width, char **out)
{
	char **full = calloc(n, sizeof(*full)), **pre = calloc(n, sizeof(*pre)),
	     **suf = calloc(n, sizeof(*suf));
	const char **cur = calloc(n, sizeof(*cur));
	size_t *curlen = calloc(n, sizeof(*curlen)), cap = 0;
	struct targs *t = calloc(n, sizeof(*t));
	bool ok = full && pre && suf && cur && curlen && t;

	for (size_t i = 0; ok && i < n; i++) {
		ok = (full[i] = simplified(names[rows[i]], -1)) != NULL;
		cap = ok && strlen(full[i]) * 2 + 64 > cap ? strlen(full[i]) * 2 + 64 : cap;
	}
	for (size_t i = 0; ok && i < n; i++) {
		ok = (pre[i] = calloc(1, cap)) && (suf[i] = calloc(1, cap));
		cur[i] = full[i];
		curlen[i] = ok ? strlen(full[i]) : 0;
	}
	for (int level = 0; ok && level < 8; level++)
		if (!show_level(full, pre, suf, cur, curlen, t, n, rows, cap, width, out, &ok))
			break;
	free_rows(full, n);
	free_rows(pre, n);
	free_rows(suf, n);
	free(cur);
	free(curlen);
	free(t);
	for (size_t i = 1; ok && i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (!strcmp(out[rows[i]], out[rows[j]]))
				return false;
	return ok;
}

static int by_name(const void *a, const void *b, void *ctx)
{
	char **out = ctx;

	return strcmp(out[*(const size_t *)a], out[*(const size_t *)b]);
}

/* Rows whose short names are the same: dup[i] = its rank among equals,
 * -1 for the first of such a group, 0 for a unique one. */
static bool find_dups(char **out, size_t n, size_t *order, int *dup)
{
	bool any = false;

	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), by_name, out);
	for (size_t i = 0; i < n; i++) {
		dup[order[i]] = 0;
		if (i && !strcmp(out[order[i]], out[order[i - 1]])) {
			if (!dup[order[i - 1]])
				dup[order[i - 1]] = -1;
			dup[order[i]] = abs(dup[order[i - 1]]) + 1;
			any = true;
		}
	}
	return any;
}

void kname_column(const char *const *names, size_t n, size_t width, char **out)
{
	size_t *order = malloc((n + 1) * sizeof(*order)), *rows = malloc((n + 1) * sizeof(*rows));
	int *dup = calloc(n + 1, sizeof(*dup));

	for (size_t i = 0; i < n; i++)
		kname_short(names[i], width, out[i]);
	if (!order || !rows || !dup || !find_dups(out, n, order, dup))
		goto out;
	for (size_t i = 0; i < n;) { /* each group of equals */
		size_t g = 0;

		do
			rows[g++] = order[i++];
		while (i < n && dup[order[i]] > 0);
		if (g > 1 && !show_difference(names, rows, g, width, out)) {
			for (size_t k = 0; k < g; k++) { /* head and tail in full */
				char *s = simplified(names[rows[k]], -1);

				if (s)
					elide(s, width, out[rows[k]]);
				free(s);
			}
		}
	}
	if (!find_dups(out, n, order, dup))
		goto out;
	for (size_t i = 0; i < n; i++) { /* the same even so: numbered */
		char tag[16];
		size_t tl, len;

		if (!dup[i])
			continue;
		tl = (size_t)snprintf(tag, sizeof(tag), " #%d", abs(dup[i]));
		len = strlen(out[i]);
		if (tl > width)
			continue;
		if (len + tl > width)
			len = width - tl;
		memcpy(out[i] + len, tag, tl + 1);
	}
out:
	free(order);
	free(rows);
	free(dup);
}
