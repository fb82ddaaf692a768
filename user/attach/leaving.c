// SPDX-License-Identifier: BSD-2-Clause
/*
 * What stays should ptbpf leave now. See leaving.h. The line is formatted
 * into whichever of two slots the handler is not reading, then that one
 * becomes current; the handler copies it with plain loads and write(2),
 * and unlink(2)s the slot's file, if any.
 */
#define _GNU_SOURCE
#include "attach/leaving.h"
#include "attach/target.h"
#include "lib/text.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_PIDS 256
#define LISTED_PIDS 8
#define LINE_BYTES (PATH_MAX + 4096)
#define NOTHING_STAYS "; nothing this ptbpf attached stays (its probes are taken out as it leaves)"

static struct {
	int pid;
	enum leaving_agent st;
	bool later_unloads;
} agents[MAX_PIDS];
static int nagents;
static char trace_path[PATH_MAX];
static bool trace_started;
static bool tty;
static volatile sig_atomic_t settled_rc = -1;

static struct {
	char line[LINE_BYTES];
	size_t len;
	char unlink[PATH_MAX]; /* a trace file that never started: removed */
} slots[2] = { { NOTHING_STAYS "\n", sizeof(NOTHING_STAYS), "" } };
static int cur;

/* What is said of the processes whose agent is in st; later: a later
 * ptbpf unloads it (1), the process started with it (0), either (-1). */
static const struct {
	enum leaving_agent st;
	signed char later;
	const char *fmt;
} clauses[] = {
	{ LEAVING_LOADING, -1, "ptbpf was loading its agent into %s: if that went through, it "
			       "stays mapped, dormant" },
	{ LEAVING_DORMANT, -1, "ptbpf's agent stays mapped in %s, dormant (never switched on)" },
	{ LEAVING_ON, 1, "ptbpf's agent stays mapped in %s and switches itself off once ptbpf's "
			 "probe is gone" },
	{ LEAVING_ON, 0, "the agent in %s (started with it) switches itself off once ptbpf's "
			 "probe is gone" },
	{ LEAVING_OFF, 1, "ptbpf's agent stays mapped in %s, switched off" },
	{ LEAVING_OFF, 0, "the agent in %s (started with it) stays, switched off" },
	{ LEAVING_STEPS, 1, "ptbpf's agent stays mapped in %s; its step signal switches itself "
			    "off once ptbpf's pid is gone (or, where it cannot see it, within 10 s)" },
	{ LEAVING_STEPS, 0, "the agent in %s (started with it) switches its step signal off once "
			    "ptbpf's pid is gone (or, where it cannot see it, within 10 s)" },
	{ LEAVING_UNLOADING, -1, "ptbpf was unloading its agent from %s: it is gone, or stays "
				 "mapped, switched off" },
};

static bool listed(int i, enum leaving_agent st, int later)
{
	return agents[i].st == st && (later < 0 || agents[i].later_unloads == later);
}

/* The pids whose agent is in st (later: as in clauses), as "pid 5",
 * "pids 5, 6 and 7", "pids 5, 6, ... and 40 more", or as arguments
 * ("-p 5 -p 6"); how many there are. */
static int list_pids(char *b, size_t len, enum leaving_agent st, int later, bool as_args)
{
	int n = 0, total = 0;
	size_t o = 0;

	for (int i = 0; i < nagents; i++)
		total += listed(i, st, later);
	b[0] = 0;
	for (int i = 0; i < nagents && n < LISTED_PIDS; i++) {
		if (!listed(i, st, later))
			continue;
		if (as_args)
			text_append(b, len, &o, "%s-p %d", n ? " " : "", agents[i].pid);
		else
			text_append(b, len, &o, "%s%d", n ? (n + 1 == total ? " and " : ", ") :
			       total > 1 ? "pids " : "pid ", agents[i].pid);
		n++;
	}
	if (total > n)
		text_append(b, len, &o, as_args ? " ... (%d more)" : " and %d more", total - n);
	return total;
}

/* The advice for the agents a later ptbpf unloads. */
static void advise(char *b, size_t len, size_t *o)
{
	char args[LISTED_PIDS * 16 + 32], pids[sizeof(args)];
	size_t a = 0;
	int total = 0;

	for (enum leaving_agent st = LEAVING_LOADING; st <= LEAVING_UNLOADING; st++) {
		int n = list_pids(pids, sizeof(pids), st, 1, true);

		if (n)
			text_append(args, sizeof(args), &a, "%s%s", total ? " " : "", pids);
		total += n;
	}
	if (total)
		text_append(b, len, o, " (run ptbpf %s again and stop it normally to unload %s)",
		       args, total > 1 ? "them" : "it");
}

static void format_line(void)
{
	int next = !__atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	char *b = slots[next].line, pids[LISTED_PIDS * 16 + 32];
	size_t o = 0;

	tty = isatty(2);
	for (size_t i = 0; i < sizeof(clauses) / sizeof(clauses[0]); i++)
		if (list_pids(pids, sizeof(pids), clauses[i].st, clauses[i].later, false)) {
			text_append(b, LINE_BYTES - 1, &o, "; ");
			text_append(b, LINE_BYTES - 1, &o, clauses[i].fmt, pids);
		}
	if (o)
		advise(b, LINE_BYTES - 1, &o);
	else
		text_append(b, LINE_BYTES - 1, &o, "%s", NOTHING_STAYS);
	if (trace_path[0] && trace_started)
		text_append(b, LINE_BYTES - 1, &o, "; the unfinished trace stays in %s", trace_path);
	b[o++] = '\n';
	slots[next].len = o;
	snprintf(slots[next].unlink, PATH_MAX, "%s", trace_started ? "" : trace_path);
	__atomic_store_n(&cur, next, __ATOMIC_RELEASE);
}

void leaving_agent(int pid, enum leaving_agent st, bool later_unloads)
{
	int i;

	for (i = 0; i < nagents && agents[i].pid != pid; i++)
		;
	if (i == nagents && (st == LEAVING_NONE || nagents == MAX_PIDS))
		return;
	if (st == LEAVING_NONE) {
		agents[i] = agents[--nagents];
	} else {
		nagents += i == nagents;
		agents[i].pid = pid;
		agents[i].st = st;
		agents[i].later_unloads = later_unloads;
	}
	format_line();
}

enum leaving_agent leaving_agent_state(int pid)
{
	for (int i = 0; i < nagents; i++)
		if (agents[i].pid == pid)
			return agents[i].st;
	return LEAVING_NONE;
}

void leaving_prune(void)
{
	for (int i = 0; i < nagents; i++)
		if (!target_alive(agents[i].pid))
			agents[i--] = agents[--nagents];
	format_line();
}

void leaving_trace(const char *partial, bool started)
{
	snprintf(trace_path, sizeof(trace_path), "%s", partial);
	trace_started = started;
	if (!started)
		settled_rc = -1;
	format_line();
}

void leaving_settled(int rc)
{
	settled_rc = rc;
}

int leaving_say(int sig)
{
	static char out[LINE_BYTES + 64];
	const char *pre = sig == SIGINT ? "ptbpf: second interrupt: leaving now" :
		sig == SIGTERM ? "ptbpf: second SIGTERM: leaving now" : "ptbpf: leaving now";
	int c = __atomic_load_n(&cur, __ATOMIC_ACQUIRE);
	size_t n = 0;
	ssize_t w;

	if (tty)
		out[n++] = '\n';
	while (*pre)
		out[n++] = *pre++;
	for (size_t i = 0; i < slots[c].len; i++)
		out[n++] = slots[c].line[i];
	if (slots[c].unlink[0])
		unlink(slots[c].unlink);
	for (size_t o = 0; o < n; o += w)
		if ((w = write(2, out + o, n - o)) <= 0)
			break;
	return settled_rc >= 0 ? settled_rc : 128 + sig;
}
