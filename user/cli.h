/* SPDX-License-Identifier: BSD-2-Clause */
/* Command line and privileges: everything that is checked before ptbpf
 * touches a process. */
#ifndef PTBPF_CLI_H
#define PTBPF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report/report.h"

#define CLI_MAX_PIDS 64
#define CLI_MAX_MATCH_ENV 8

/* Where op begins and ends come from (--ops). */
enum ops_source {
	OPS_AUTO = 0, /* the agent's callbacks where the agent is loaded anyway
		       * (CUDA processes), else uprobes */
	OPS_AGENT,    /* the agent's RecordFunction callbacks; the agent is
		       * loaded into CPU-only processes too */
	OPS_PROBES,   /* uprobes on every op's entry and ret sites */
};

/* --gpu-timeline: where the agent records the GPU's own timeline (CUPTI). */
enum gpu_timeline_when {
	GPU_TL_AUTO = 0, /* every CUDA process but those running NCCL */
	GPU_TL_ON,       /* every CUDA process */
	GPU_TL_OFF,      /* none: CUDA calls from uprobes only */
};

struct options {
	int pids[CLI_MAX_PIDS];
	int npids;
	uint64_t duration_s;   /* 0: until stopped */
	char output[4096];
	uint32_t ring_bytes;   /* power of two, >= page size */
	bool force;            /* --force: replace existing output files */
	bool follow_children;
	bool entries_only;     /* no exit probes: ops become instants */
	char **run_argv;       /* `ptbpf run -- CMD ...`: the command, else NULL */
	bool no_agent;         /* never load the agent into a running process */
	enum ops_source ops;
	enum gpu_timeline_when gpu_timeline;
	bool kernel_clock; /* --op-clock kernel: the agent's records from clock_gettime */
	bool all;              /* --all: every process that maps libtorch_cpu.so */
	/* --match-env KEY=VALUE (--all, daemon): only processes whose
	 * environment has every one of these */
	char match_env[CLI_MAX_MATCH_ENV][256];
	int nmatch_env;
	bool memory;           /* --memory: the caching allocator's timeline */
	bool shapes;           /* --shapes: ops' input shapes (agent ops) */
	bool compiled_regions; /* --compiled-regions: torch.compile's regions (agent ops) */
	uint32_t py_stacks;    /* --py-stacks[=N]: a stack for one op in N (0: off) */
	bool no_sched;         /* --no-sched: no kernel view (thread states, blocking calls) */
	bool no_samples;       /* --no-samples: no CPU samples */
	bool bpf_stats;        /* --bpf-stats: time ptbpf's own BPF programs */
	bool no_idle_track;    /* --no-idle-track: no GPU idle track after the capture */
	uint32_t sample_hz;    /* --sample-hz: CPU samples per second of CPU time */
	/* `ptbpf daemon`: */
	bool daemon;
	bool daemon_opt;       /* a daemon option was given */
	uint64_t every_s, window_s; /* a window of window_s every every_s */
	bool align;            /* windows at epoch multiples of every_s */
	char out_dir[2048];
	uint64_t max_bytes;    /* the out dir's traces, in all */
	uint64_t keep;         /* at most this many traces (0: no limit) */
	double budget_pct;     /* estimated slowdown that ends a window early (0: off) */
	char metrics_listen[256];
	char web_config[4096]; /* --web-config: the port's TLS and users */
	bool insecure_capture; /* POST /capture from any client without a user */
	uint64_t min_gap_s;    /* a trigger this soon after a window's start is refused */
	bool no_step_signal;   /* --no-step-signal: no always-on layer between windows */
	bool keep_graphs;      /* the always-on layer keeps the capture map (the default,
				* with the layer; --keep-graphs asks for it outright) */
	bool no_keep_graphs;   /* --no-keep-graphs */
	double slow_k;         /* --slow-step K[,W]: a window when a step takes over K
				* times the median of the W before it (0: off) */
	uint32_t slow_w;
	/* --hang K[,FLOOR]: a capture of the job when a step under way, or a
	 * collective, has lasted over max(K x the median step, FLOOR) */
	double hang_k;         /* 0: off (--hang off) */
	uint64_t hang_floor_s;
	uint32_t window_steps; /* --steps N: a slow step's window ends after N whole steps */
	char raw_output[4096]; /* --raw: also keep the ring's records here */
};

/* Parses argv (`ptbpf [OPTIONS] -p PID`, `ptbpf run [OPTIONS] -- CMD ...` or
 * `ptbpf daemon [OPTIONS] --out-dir DIR`);
 * on error prints one line and returns -1 (a usage error) or 1 (an output
 * file that may not be written). In run mode the default
 * output name is left empty until the command's pid is known. */
int cli_parse(int argc, char **argv, struct options *opt);
/* Checks CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE and the pid
 * namespace; 0, or -1 with the reason in err. */
int cli_check_privileges(char *err, size_t errlen);

/* The offline commands (cli_offline.c): each parser fills its arguments,
 * or prints one line and returns 2 (a usage error; argp's own messages
 * for an unknown option also exit 2). */

struct report_args {
	struct report_opts opts;
	bool diff;
};
int cli_parse_report(int argc, char **argv, struct report_args *a);

struct export_args {
	const char *path, *out;
	bool force;
};
int cli_parse_export(int argc, char **argv, struct export_args *a);

/* merge and replay: inputs (the caller frees merge's), -o OUT. */
struct inputs_args {
	const char *command, *usage;
	const char **inputs;
	int n, max;
	const char *out;
	bool align_collectives, force;
};
int cli_parse_merge(int argc, char **argv, struct inputs_args *a);
int cli_parse_replay(int argc, char **argv, struct inputs_args *a);
#endif /* PTBPF_CLI_H */
