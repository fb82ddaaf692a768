// SPDX-License-Identifier: BSD-2-Clause
/*
 * The offline commands' command lines (report, export, merge, replay),
 * parsed with argp as the live command's are (cli.c). See cli.h.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"

/* argp over argv[1..] as "ptbpf CMD", so that messages and --help name the
 * command; a usage error is one line and 2. */
static int parse_command(const struct argp *argp, int argc, char **argv, void *input)
{
	char name[32];
	char **args = calloc((size_t)argc, sizeof(*args));
	int err;

	if (!args)
		return 1;
	snprintf(name, sizeof(name), "ptbpf %s", argv[1]);
	args[0] = name;
	for (int i = 2; i < argc; i++)
		args[i - 1] = argv[i];
	argp_err_exit_status = 2;
	err = argp_parse(argp, argc - 1, args, 0, NULL, input);
	free(args);
	return err ? 2 : 0;
}

/* --- report --- */

static const struct argp_option report_options[] = {
	{ "json", 'j', NULL, 0, "The report as one JSON object", 0 },
	{ "top", 't', "N", 0, "Rows per table (default 25)", 0 },
	{ "group-by-shape", 'g', NULL, 0, "Operators by name and input shapes (traces "
	  "recorded with --shapes)", 0 },
	{ "html", 'H', "OUT.html", 0, "The report as one page, with charts", 0 },
	{ "diff", 'd', NULL, 0, "Compare two traces: A.pftrace B.pftrace (B - A)", 0 },
	{ "force", 'F', NULL, 0, "Replace an existing --html file", 0 },
	{ 0 },
};

static error_t report_opt(int key, char *arg, struct argp_state *state)
{
	struct report_args *a = state->input;
	char *end;

	switch (key) {
	case 'j':
		a->opts.json = true;
		break;
	case 'g':
		a->opts.by_shape = true;
		break;
	case 'H':
		a->opts.html = arg;
		break;
	case 'F':
		a->opts.force = true;
		break;
	case 'd':
		a->diff = true;
		break;
	case 't':
		errno = 0;
		a->opts.top = (int)strtol(arg, &end, 10);
		if (errno || end == arg || *end || a->opts.top < 1) {
			log_msg("report: --top takes a positive number, not '%s'\n", arg);
			return EINVAL;
		}
		break;
	case ARGP_KEY_ARG:
		if (a->opts.path_b || (a->opts.path && !a->diff)) {
			log_msg("report: unexpected argument '%s'\n", arg);
			return EINVAL;
		}
		*(a->opts.path ? &a->opts.path_b : &a->opts.path) = arg;
		break;
	case ARGP_KEY_END:
		if (!a->opts.path || (a->diff && !a->opts.path_b) ||
		    (a->opts.force && !a->opts.html)) {
			log_msg("usage: ptbpf report FILE.pftrace [--json] [--top N] "
				"[--group-by-shape] [--html OUT.html [--force]] | ptbpf report "
				"--diff A.pftrace B.pftrace [--json] [--top N] [--html OUT.html "
				"[--force]]\n");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cli_parse_report(int argc, char **argv, struct report_args *a)
{
	static const struct argp argp = { report_options, report_opt, "FILE.pftrace",
		"Step, operator and kernel tables of a trace (text, --json or --html); "
		"with --diff, of two.\v"
		"EXAMPLES:\n"
		"  ptbpf report a.pftrace\n"
		"  ptbpf report a.pftrace --json --top 50\n"
		"  ptbpf report a.pftrace --html a.html\n"
		"  ptbpf report --diff before.pftrace after.pftrace", NULL, NULL, NULL };

	*a = (struct report_args){ .opts.top = 25 };
	return parse_command(&argp, argc, argv, a);
}

/* --- export --- */

static const struct argp_option export_options[] = {
	{ "kineto", 'k', "OUT.json", 0, "Write Kineto's Chrome-trace JSON (what "
	  "torch.profiler's export_chrome_trace writes; HTA and TensorBoard read it)", 0 },
	{ "force", 'F', NULL, 0, "Replace an existing OUT.json", 0 },
	{ 0 },
};

static error_t export_opt(int key, char *arg, struct argp_state *state)
{
	struct export_args *a = state->input;

	switch (key) {
	case 'k':
		a->out = arg;
		break;
	case 'F':
		a->force = true;
		break;
	case ARGP_KEY_ARG:
		if (a->path) {
			log_msg("export: unexpected argument '%s'\n", arg);
			return EINVAL;
		}
		a->path = arg;
		break;
	case ARGP_KEY_END:
		if (!a->path || !a->out) {
			log_msg("usage: ptbpf export --kineto OUT.json FILE.pftrace [--force]\n");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cli_parse_export(int argc, char **argv, struct export_args *a)
{
	static const struct argp argp = { export_options, export_opt, "FILE.pftrace",
		"A trace in another format.\v"
		"EXAMPLES:\n"
		"  ptbpf export --kineto a.json a.pftrace", NULL, NULL, NULL };

	*a = (struct export_args){ 0 };
	return parse_command(&argp, argc, argv, a);
}

/* --- merge and replay: inputs, -o OUT --- */

static const struct argp_option merge_options[] = {
	{ "output", 'o', "OUT.pftrace", 0, "The merged trace", 0 },
	{ "align-collectives", 'c', NULL, 0, "Shift each input so that its NCCL "
	  "collectives line up with the first input's", 0 },
	{ "force", 'F', NULL, 0, "Replace an existing OUT.pftrace", 0 },
	{ 0 },
};

static const struct argp_option replay_options[] = {
	{ "output", 'o', "OUT.pftrace", 0, "The trace", 0 },
	{ "force", 'F', NULL, 0, "Replace an existing OUT.pftrace", 0 },
	{ 0 },
};

static error_t inputs_opt(int key, char *arg, struct argp_state *state)
{
	struct inputs_args *a = state->input;

	switch (key) {
	case 'o':
		a->out = arg;
		break;
	case 'c':
		a->align_collectives = true;
		break;
	case 'F':
		a->force = true;
		break;
	case ARGP_KEY_ARG:
		if (a->n >= a->max) {
			log_msg("%s: unexpected argument '%s'\n", a->command, arg);
			return EINVAL;
		}
		a->inputs[a->n++] = arg;
		break;
	case ARGP_KEY_END:
		if (!a->out || a->n < 1) {
			log_msg("usage: %s\n", a->usage);
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cli_parse_merge(int argc, char **argv, struct inputs_args *a)
{
	static const struct argp argp = { merge_options, inputs_opt, "A.pftrace B.pftrace ...",
		"Traces of one job (its ranks, its hosts) on one timeline, each process "
		"apart.\v"
		"EXAMPLES:\n"
		"  ptbpf merge r0.pftrace r1.pftrace -o job.pftrace\n"
		"  ptbpf merge --align-collectives r*.pftrace -o job.pftrace", NULL, NULL, NULL };

	*a = (struct inputs_args){ .command = "merge", .max = argc, .usage = "ptbpf merge "
		"[--align-collectives] [--force] A.pftrace B.pftrace ... -o OUT.pftrace" };
	a->inputs = calloc((size_t)argc, sizeof(*a->inputs));
	if (!a->inputs)
		return 1;
	return parse_command(&argp, argc, argv, a);
}

int cli_parse_replay(int argc, char **argv, struct inputs_args *a)
{
	static const struct argp argp = { replay_options, inputs_opt, "RAW",
		"Re-make a trace from a raw capture (ptbpf --raw RAW).\v"
		"EXAMPLES:\n"
		"  ptbpf replay a.raw -o a.pftrace", NULL, NULL, NULL };
	static const char *input;

	*a = (struct inputs_args){ .command = "replay", .inputs = &input, .max = 1,
		.usage = "ptbpf replay RAW -o OUT.pftrace [--force]" };
	return parse_command(&argp, argc, argv, a);
}
