/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unit test of the line a second Ctrl-C prints (user/attach/leaving.c):
 * what it says for each agent state, with one or many processes, the
 * unfinished trace (said only once tracing started; before, removed), and
 * a path as long as PATH_MAX: always one whole line, as leaving_say()
 * writes it (fd 2 is a pipe here).
 */
#include "attach/leaving.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int pipe_fd[2];

/* What leaving_say(sig) writes. */
static const char *said(int sig)
{
	static char buf[1 << 14];
	int saved = dup(2);
	ssize_t n;

	dup2(pipe_fd[1], 2);
	leaving_say(sig);
	dup2(saved, 2);
	close(saved);
	n = read(pipe_fd[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

static void expect(int sig, const char *line, int i)
{
	const char *got = said(sig);

	CHECK(!strcmp(got, line), got, i);
}

int main(void)
{
	char path[PATH_MAX], tail[PATH_MAX + 64];
	const char *got;

	if (pipe(pipe_fd))
		return 2;
	expect(SIGINT, "ptbpf: second interrupt: leaving now; nothing this ptbpf attached stays "
	       "(its probes are taken out as it leaves)\n", 0);
	/* A trace file before tracing started holds no trace: removed, unsaid. */
	snprintf(path, sizeof(path), "/tmp/ptbpf-test-leaving-%d.partial", (int)getpid());
	close(open(path, O_CREAT | O_WRONLY, 0600));
	leaving_trace(path, false);
	expect(SIGINT, "ptbpf: second interrupt: leaving now; nothing this ptbpf attached stays "
	       "(its probes are taken out as it leaves)\n", 10);
	CHECK(access(path, F_OK) && errno == ENOENT, "the unstarted trace removed", 10);
	leaving_trace("/t/x.pftrace.partial", true);
	expect(SIGTERM, "ptbpf: second SIGTERM: leaving now; nothing this ptbpf attached stays "
	       "(its probes are taken out as it leaves); the unfinished trace stays in "
	       "/t/x.pftrace.partial\n", 1);
	leaving_agent(5, LEAVING_LOADING, false);
	expect(SIGINT, "ptbpf: second interrupt: leaving now; ptbpf was loading its agent into "
	       "pid 5: if that went through, it stays mapped, dormant; the unfinished trace "
	       "stays in /t/x.pftrace.partial\n", 2);
	leaving_agent(5, LEAVING_ON, true);
	leaving_agent(6, LEAVING_ON, false);
	leaving_agent(7, LEAVING_OFF, true);
	leaving_trace("", true);
	expect(SIGINT, "ptbpf: second interrupt: leaving now; ptbpf's agent stays mapped in pid 5 "
	       "and switches itself off once ptbpf's probe is gone; the agent in pid 6 (started "
	       "with it) switches itself off once ptbpf's probe is gone; ptbpf's agent stays "
	       "mapped in pid 7, switched off (run ptbpf -p 5 -p 7 again and stop it normally "
	       "to unload them)\n", 3);
	CHECK(leaving_agent_state(7) == LEAVING_OFF, "state of pid 7", 7);
	for (int pid = 5; pid <= 7; pid++)
		leaving_agent(pid, LEAVING_NONE, false);
	CHECK(leaving_agent_state(7) == LEAVING_NONE, "pid 7 forgotten", 7);
	for (int pid = 100; pid < 112; pid++)
		leaving_agent(pid, LEAVING_UNLOADING, true);
	expect(SIGINT, "ptbpf: second interrupt: leaving now; ptbpf was unloading its agent from "
	       "pids 100, 101, 102, 103, 104, 105, 106, 107 and 4 more: it is gone, or stays "
	       "mapped, switched off (run ptbpf -p 100 -p 101 -p 102 -p 103 -p 104 -p 105 -p 106 "
	       "-p 107 ... (4 more) again and stop it normally to unload them)\n", 4);
	/* The longest path, whole, on the one line. */
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = 0;
	leaving_trace(path, true);
	got = said(SIGINT);
	snprintf(tail, sizeof(tail), "; the unfinished trace stays in %s\n", path);
	CHECK(strlen(got) > strlen(tail) && !strcmp(got + strlen(got) - strlen(tail), tail),
	      "the whole path", strlen(got));
	CHECK(strchr(got, '\n') == got + strlen(got) - 1, "one line", strlen(got));
	return check_summary("test_leaving");
}
