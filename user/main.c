// SPDX-License-Identifier: BSD-2-Clause
/*
 * ptbpf's commands, in one table. The live capture (`ptbpf -p PID`, `run`,
 * `--all`, each `daemon` window) is live/: targets.c attaches (attach/),
 * read.c reads the BPF ring and the agents' op rings in time order,
 * record/route.c hands each record to its decoder, record/join.c pairs
 * begins and ends into slices, trace/perfetto.c writes them. The offline
 * tools (report, export, merge) read traces with trace/trace_read.c;
 * replay re-makes a trace from a raw capture (record/raw.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "live/session.h"
#include "lib/log.h"
#include "attach/agent_ctl.h"
#include "attach/agent_probes.h"
#include "attach/claim.h"
#include "attach/keeper.h"
#include "attach/leaving.h"
#include "attach/target.h"
#include "fleet/daemon.h"
#include "fleet/metrics.h"
#include "fleet/step_signal.h"
#include "offline/export.h"
#include "offline/gap_track.h"
#include "offline/merge.h"
#include "report/report.h"
#include "record/raw.h"
#include "ptbpf_agent.h"

/* A second Ctrl-C leaves at once, which is safe at every instant (the
 * kernel drops ptbpf's probes; an agent whose ptbpf is gone switches
 * itself off), saying what stays (attach/leaving.h); with 128 + signal,
 * or, once the trace is written and said, the run's own status. The same signal from
 * the same process within 20 ms is the first one again: GNU timeout (and
 * supervisors like it) sends it to ptbpf and then to ptbpf's process
 * group, microseconds apart, and `timeout -s INT 60 ptbpf ...` must stop
 * ptbpf normally, not leave its agent in the job. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	static uint64_t first_at;
	static pid_t first_from;
	uint64_t now = clock_mono_ns();

	(void)uc;
	if (session_exiting) {
		if (sig == session_exiting && si && si->si_code == SI_USER &&
		    si->si_pid == first_from && now - first_at < 20000000)
			return;
		_exit(leaving_say(sig));
	}
	first_at = now;
	first_from = si && si->si_code == SI_USER ? si->si_pid : -1;
	session_exiting = sig;
}

/* `ptbpf run -- CMD`: start CMD with the agent, and trace it as -p once it
 * has loaded torch (agent_wait_for_libraries says what else will do). */
static int start_command(struct options *opt, pid_t *child)
{
	char agent[PATH_MAX];
	int status = 0, ret;

	if (agent_library_path(agent, sizeof(agent), false)) {
		log_msg("run: %s not found next to ptbpf\n", agent);
		return -1;
	}
	*child = agent_run_command(opt->run_argv, agent);
	if (*child < 0)
		return -1;
	ret = agent_wait_for_libraries(*child, 600000, &status);
	if (ret == -ESRCH) {
		log_msg("run: %s exited before it loaded torch or CUDA (status %d)\n",
			opt->run_argv[0], WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		return -1;
	}
	if (ret) {
		log_msg("run: %s loaded neither torch nor CUDA within 10 minutes\n",
			opt->run_argv[0]);
		return -1;
	}
	opt->pids[opt->npids++] = *child;
	if (!opt->output[0]) {
		char stamp[32];
		time_t now = time(NULL);

		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
		snprintf(opt->output, sizeof(opt->output), "ptbpf-%d-%s.pftrace", *child, stamp);
	}
	return 0;
}

/* In run mode, ptbpf exits with the command's status once it has exited;
 * one that runs on (ptbpf stopped or failed first) is left to run, and
 * that is said. */
static int command_status(const struct options *opt, pid_t child, int rc)
{
	int status = 0;
	pid_t r = child > 0 ? waitpid(child, &status, WNOHANG) : -1;

	if (r == 0)
		log_msg("run: %s (pid %d) runs on, no longer traced; ptbpf's exit status is "
			"its own\n", opt->run_argv[0], child);
	if (r != child) /* runs on, or reaped already (it exited before torch) */
		return rc;
	if (rc)
		return rc;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One daemon window: a fresh session over every torch process; 1 if it
 * traced one, 0 if none, -1 if it could not start. */
static int run_window(const struct options *opt, const char *path, struct metrics *m,
		      const struct capture_req *trigger)
{
	static struct session s;

	memset(&s, 0, sizeof(s));
	s.opt = *opt;
	s.opt.all = true;
	s.opt.duration_s = opt->window_s;
	snprintf(s.opt.output, sizeof(s.opt.output), "%s", path);
	s.win.metrics = m;
	s.win.trigger = trigger;
	s.win.max_trace_bytes = opt->max_bytes / 2;
	if (session_setup_bpf(&s) || session_setup_trace(&s)) {
		s.discard_output = true;
		session_finish(&s, 1);
		log_msg("daemon: the window could not start (said above); nothing written, and "
			"it is not counted\n");
		return -1;
	}
	/* The always-on layer's agents go back to their step signal at the
	 * end, and the ones this window loads join it. */
	if (!opt->no_step_signal && !opt->no_agent)
		agent_probes_keep(s.agents, step_signal_words(opt));
	metrics_window(m, true, false);
	targets_scan_all(&s);
	s.win.targets_cpu0 = budget_targets_cpu(&s);
	budget_steps_start(&s);
	if (session_loop(&s) && !s.win.stopped_why[0])
		snprintf(s.win.stopped_why, sizeof(s.win.stopped_why), "reading failed");
	if (session_exiting && !s.win.stopped_why[0])
		snprintf(s.win.stopped_why, sizeof(s.win.stopped_why), "stopped by a signal");
	if (!s.traced) /* session_finish leaves no file */
		log_msg("daemon: no PyTorch process traced in this window%s; nothing written\n",
			opt->nmatch_env || (trigger && trigger->nsel) ?
			" (none matched --match-env or the trigger's job/rank)" : "");
	read_pump(&s, 0);
	budget_publish_metrics(&s);
	if (s.win.stopped_why[0])
		log_msg("daemon: window ended early: %s\n", s.win.stopped_why);
	session_finish(&s, 0);
	metrics_window(m, false, s.traced);
	return s.traced;
}

/* `ptbpf [run|daemon] OPTIONS`: a live capture. */
static int cmd_trace(int argc, char **argv)
{
	static struct session s;
	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO };
	pid_t child = 0;
	char err[512];
	int rc = 1, i;

	rc = cli_parse(argc, argv, &s.opt);
	if (rc)
		return rc > 0 ? rc : 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (cli_check_privileges(err, sizeof(err))) {
		log_msg("%s\n", err);
		return 1;
	}
	if (s.opt.daemon)
		return daemon_run(&s.opt, run_window, &session_exiting);
	if (s.opt.run_argv && start_command(&s.opt, &child))
		return command_status(&s.opt, child, 1);
	/* Refuse bad pids before anything touches a process or the disk. */
	for (i = 0; i < s.opt.npids; i++) {
		struct target t;
		int ret = target_open(s.opt.pids[i], &t, err, sizeof(err));

		if (!ret)
			ret = target_claim(&t, err, sizeof(err));
		if (ret) {
			/* One that was there and went meanwhile is no bad pid. */
			if (ret != -ESRCH && target_gone(s.opt.pids[i]))
				snprintf(err, sizeof(err), "pid %d exited during the attach: nothing "
					 "of it was traced", s.opt.pids[i]);
			log_msg("%s\n", err);
			target_close(&t);
			return command_status(&s.opt, child, 1);
		}
		target_close(&t);
	}
	if (session_setup_bpf(&s) || session_setup_trace(&s)) {
		s.discard_output = true; /* nothing was traced: leave no file */
		return command_status(&s.opt, child, session_finish(&s, 1));
	}
	/* Tracing starts once every target is attached: a run that fails
	 * before leaves no file (targets_add said why). */
	for (i = 0; i < s.opt.npids && !session_exiting; i++) {
		if (targets_add(&s, s.opt.pids[i], false) && !session_exiting) {
			s.discard_output = true;
			return command_status(&s.opt, child, session_finish(&s, 1));
		}
	}
	if (s.opt.all && !session_exiting) {
		targets_scan_all(&s);
		log_msg("--all: tracing %d processes; looking for more %s\n",
			s.ntargets, s.find.exec_probes ? "as they start (exec tracepoint; /proc every 5 s)" :
			"every second (/proc)");
	}
	/* A Ctrl-C that came once every attach had said "tracing pid N" is
	 * a stop: the trace is written. */
	if (s.attach_cut || (session_exiting && i < s.opt.npids)) {
		log_msg("interrupted during attach; detaching, nothing written%s\n", s.traced ?
			" (a trace is written only once every process given is attached)" : "");
		s.discard_output = true;
		return command_status(&s.opt, child, session_finish(&s, 128 + session_exiting));
	}
	rc = session_loop(&s) ? 1 : 0;
	if (!s.traced) { /* --all found no process: session_finish leaves no file */
		log_msg("--all: no PyTorch process was traced; nothing written\n");
		rc = 1;
	}
	return command_status(&s.opt, child, session_finish(&s, rc));
}

static int cmd_report(int argc, char **argv)
{
	struct report_args a;
	int rc = cli_parse_report(argc, argv, &a);

	return rc ? rc : report_run(&a.opts);
}

static int cmd_export(int argc, char **argv)
{
	struct export_args a;
	int rc = cli_parse_export(argc, argv, &a);

	return rc ? rc : export_kineto(a.path, a.out, a.force);
}

static int cmd_merge(int argc, char **argv)
{
	struct inputs_args a;
	int rc = cli_parse_merge(argc, argv, &a);

	if (!rc)
		rc = merge_traces(a.inputs, a.n, a.out, a.align_collectives, a.force);
	free(a.inputs);
	return rc;
}

static int cmd_replay(int argc, char **argv)
{
	struct inputs_args a;
	int rc = cli_parse_replay(argc, argv, &a);

	return rc ? rc : raw_replay(a.inputs[0], a.out, a.force, gap_track_append);
}

/* argv[1] names the command; any other first word is the live capture's
 * (`ptbpf -p PID ...`). Each command parses its own options with argp
 * (cli.c, cli_offline.c). */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "run", cmd_trace },    /* start a command with the agent and trace it */
	{ "daemon", cmd_trace }, /* fleet mode: --all in windows, with metrics */
	{ "report", cmd_report },
	{ "export", cmd_export },
	{ "merge", cmd_merge },
	{ "replay", cmd_replay },
};

int main(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], KEEPER_ARGV0))
		return keeper_main(); /* ptbpf's own, started by keeper.c */
	/* libbpf reads and parses the kernel's BTF (5.5 MB) once per BPF
	 * object, up to 6 an attach. glibc serves blocks that big with fresh
	 * mmaps whose pages fault in anew each time, dear on these VMs;
	 * from the heap, kept when freed (up to 32 MB), they fault in once:
	 * "BPF programs loaded" in 229-269 ms instead of 502-507 (CI VM,
	 * 2026-11-29), at 8 MB more peak RSS. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
	for (size_t i = 0; argc >= 2 && i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc, argv);
	return cmd_trace(argc, argv);
}
