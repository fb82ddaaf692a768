// SPDX-License-Identifier: BSD-2-Clause
/* Command line, privileges, output file. See cli.h. */
#define _GNU_SOURCE
#include "cli.h"

#include <argp.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/files.h"
#include "attach/sample_probes.h"
#include "attach/target.h"
#include "version.h"

const char *argp_program_version = "ptbpf " PTBPF_VERSION;
const char *argp_program_bug_address = "the ptbpf issue tracker";

static const char doc[] =
	"ptbpf: trace a running PyTorch process into a Perfetto trace.\n"
	"\n"
	"Records every ATen op, backward node and record_function region, every\n"
	"CUDA/HIP launch, copy and sync, and the GPU's own kernel timeline, on every\n"
	"thread, into a .pftrace file that opens in https://ui.perfetto.dev. Ops come\n"
	"from a small agent loaded into the process (torch's RecordFunction and\n"
	"CUPTI callbacks; the default), or from eBPF uprobes on libtorch (--ops\n"
	"probes). The target is not restarted, and is left as it was.\n"
	"\n"
"EXAMPLES:\n"
	"  sudo ptbpf -p 1234                  trace until Ctrl-C or until 1234 exits\n"
	"  sudo ptbpf -p 1234 -d 10 -o a.pftrace  trace 10 seconds into a.pftrace\n"
	"  sudo ptbpf -p 1234 -p 1300          two processes, one trace\n"
	"  sudo ptbpf -p 1234 --follow-children  also trace DataLoader workers it forks\n"
	"  sudo ptbpf -p 1234 --raw a.raw      keep the raw records too; later:\n"
	"  ptbpf replay a.raw -o a.pftrace      re-make the trace from them\n"
	"  sudo ptbpf run -- python3 train.py  start a command with the in-process agent\n"
	"                                      (CUDA_INJECTION64_PATH) and trace it\n"
	"  sudo ptbpf --all -d 30              every PyTorch process on the host, 30 s\n"
	"  sudo ptbpf daemon --out-dir /var/lib/ptbpf --every 10m --window 5s --align \\\n"
	"       --metrics-listen 127.0.0.1:9464  fleet mode: 5 s of every process every\n"
	"                                      10 minutes, and a Prometheus endpoint\n"
	"  sudo ptbpf daemon --out-dir DIR --match-env TORCHELASTIC_RUN_ID=job1 \\\n"
	"       --metrics-listen 0.0.0.0:9464  job1's processes only; windows also\n"
	"                                      on POST /capture (Alertmanager)\n"
	"  ptbpf merge r0.pftrace r1.pftrace -o job.pftrace  ranks on one timeline\n"
	"  sudo ptbpf -p PID --memory --shapes --py-stacks=10  also GPU memory, input\n"
	"                                      shapes, and one Python stack in 10\n"
	"  ptbpf report a.pftrace [--json]     step, operator and kernel tables\n"
	"  ptbpf export --kineto a.json a.pftrace  Kineto-style Chrome JSON\n"
	"\n"
	"OUTPUT FILES (the trace, --raw, replay -o, merge -o, export --kineto): each is\n"
	"written as FILE.partial and renamed to FILE when complete, so a failed or killed\n"
	"run never destroys an older FILE (its partial output stays as FILE.partial, and\n"
	"report, export, merge and the Perfetto UI read a partial trace up to its cut);\n"
	"an existing FILE is replaced only with --force; an output that is one of the\n"
	"inputs is refused. A trace is written only once tracing has started (each -p\n"
	"process attached): a run that fails before that leaves no file, no .partial.\n";

enum { OPT_NO_SCHED = 0x100, OPT_NO_SAMPLES, OPT_SAMPLE_HZ, OPT_SLOW_STEP, OPT_NO_STEP_SIGNAL,
       OPT_KEEP_GRAPHS, OPT_NO_KEEP_GRAPHS, OPT_STEPS, OPT_NO_IDLE_TRACK, OPT_GPU_TIMELINE,
       OPT_OP_CLOCK, OPT_BPF_STATS, OPT_WEB_CONFIG, OPT_INSECURE_CAPTURE, OPT_HANG,
       OPT_COMPILED_REGIONS }; /* long-only options */

static const struct argp_option options[] = {
	{ "pid", 'p', "PID", 0, "Process to trace (repeatable)", 0 },
	{ "all", 'a', NULL, 0, "Trace every process on the host that maps libtorch_cpu.so, "
	  "those started later too (until -d or Ctrl-C)", 0 },
	{ "match-env", 'x', "KEY=VALUE", 0, "With --all or daemon: only processes whose "
	  "environment has KEY=VALUE (repeatable: all must hold), e.g. "
	  "TORCHELASTIC_RUN_ID=job1, on a host other jobs share", 0 },
	{ "duration", 'd', "SECONDS", 0, "Stop after SECONDS (default: until Ctrl-C or exit)", 0 },
	{ "output", 'o', "FILE", 0, "Trace file (default ptbpf-<pid>-<YYYYmmdd-HHMMSS>.pftrace)", 0 },
	{ "ring-size", 'r', "SIZE", 0, "BPF ring buffer size, e.g. 16M (default), 4K..1G; "
	  "rounded up to a power of two", 0 },
	{ "follow-children", 'f', NULL, 0, "Also trace processes the targets fork", 0 },
	{ "raw", 'w', "FILE", 0, "Also write the raw records to FILE, to re-make the trace "
	  "later with `ptbpf replay FILE -o OUT`", 0 },
	{ "force", 'F', NULL, 0, "Replace existing output files (-o, --raw). Outputs are "
	  "written as FILE.partial and renamed to FILE when complete; without --force an "
	  "existing FILE is never replaced", 0 },
	{ "no-agent", 'n', NULL, 0, "Do not load the agent into the process (ptrace): ops "
	  "come from uprobes, launches are still traced, no GPU timeline; implies "
	  "--ops=probes", 0 },
	{ "entries-only", 'e', NULL, 0, "Probe op entries only: ops appear as instants, without "
	  "durations or nesting, at a fraction of the cost (no single-stepped ret probes); "
	  "implies --ops=probes", 0 },
	{ "ops", 'O', "SOURCE", 0, "Where ops come from: 'agent' (RecordFunction callbacks of "
	  "the in-process agent, loaded by ptrace if need be: exact spans at a fraction of the "
	  "cost), 'probes' (uprobes on every op's entry and exits; nothing loaded), or 'auto' "
	  "(default: the agent wherever it can be loaded, else probes)", 0 },
	{ "gpu-timeline", OPT_GPU_TIMELINE, "WHEN", 0, "Where the agent records the GPU's own "
	  "timeline (CUPTI activity): 'auto' (default) in every CUDA process except those "
	  "that run NCCL (DDP, FSDP) when ptbpf attaches, where CUPTI 13.0's activity thread "
	  "crashed jobs under it (README, known blind spots); 'on' there too; 'off' nowhere. "
	  "CUDA and NCCL calls are traced either way", 0 },
	{ "op-clock", OPT_OP_CLOCK, "CLOCK", 0, "Where the agent's op and CUDA-call timestamps "
	  "come from: 'tsc' (default: the CPU's invariant TSC, converted in the process to "
	  "CLOCK_MONOTONIC along a line checked every 20 ms; clock_gettime where the TSC is not "
	  "invariant or the kernel's clock is not built on it) or 'kernel' (clock_gettime for "
	  "every record: 10-40 ns more per op on a VM's kvm-clock)", 0 },
	{ "memory", 'm', NULL, 0, "Record GPU memory: every block PyTorch's CUDA caching "
	  "allocator hands out or takes back, as allocated/reserved counters per device, with "
	  "the bytes each op allocated (one uprobe hit per allocation)", 0 },
	{ "shapes", 's', NULL, 0, "Record each op's input shapes and dtypes, as "
	  "torch.profiler's record_shapes (ops from the agent; torch then boxes every op's "
	  "arguments, which costs as it does under the profiler)", 0 },
	{ "compiled-regions", OPT_COMPILED_REGIONS, NULL, 0, "Also record torch.compile's "
	  "regions as torch.profiler names them (## Call CompiledFxGraph ##, Pregraph bytecode, "
	  "one per Triton launch...; ops from the agent, torch 2.2 and later): torch then runs "
	  "its profiler-only Python paths (H200, a 3.6 ms compiled step: ptbpf +18.4% with it, "
	  "+15.9% without); torch's regions reach the job's own profiler sessions as without it", 0 },
	{ "py-stacks", 'S', "N", OPTION_ARG_OPTIONAL, "Record the Python stack (CPython "
	  "3.10-3.13, read by eBPF) of every op and CUDA call, or with N of one in N: shown on "
	  "the slice as py_stack, summed by call site in `ptbpf report`", 0 },
	{ "no-sched", OPT_NO_SCHED, NULL, 0, "Leave out the kernel view: thread states (running, "
	  "runnable, sleeping) and CPU tracks from the scheduler's tracepoints, the system "
	  "calls and page faults threads blocked in, and the faults they took on CPU (on by "
	  "default)", 0 },
	{ "no-samples", OPT_NO_SAMPLES, NULL, 0, "Leave out the CPU samples of the traced "
	  "threads (native and Python stacks, on by default)", 0 },
	{ "sample-hz", OPT_SAMPLE_HZ, "N", 0, "CPU samples per second of CPU time (1-10000, "
	  "default 99)", 0 },
	{ "no-idle-track", OPT_NO_IDLE_TRACK, NULL, 0, "Leave out the GPU idle track: after "
	  "a capture with a GPU timeline, each stream's idle gaps (10 us or more) named by "
	  "their cause, as `ptbpf report` finds them (reading the trace once more)", 0 },
	{ "bpf-stats", OPT_BPF_STATS, NULL, 0, "Measure what ptbpf's own BPF programs cost: "
	  "the kernel's count of their runs and run time (its BPF statistics, on while ptbpf "
	  "runs; two clock reads more per run), printed at the end by part (probes and the "
	  "agent's points, kernel view, CPU samples) and kept in the trace", 0 },
	{ "verbose", 'v', NULL, 0, "Verbose output: how long each part of an attach took, "
	  "libbpf's messages", 0 },
	{ NULL, 0, NULL, 0, "ptbpf daemon (fleet mode; --all in bounded windows):", 1 },
	{ "out-dir", 'D', "DIR", 0, "Where window traces go (created if missing)", 1 },
	{ "every", 'E', "DURATION", 0, "Start a window every DURATION (default 10m; s, m, h)", 1 },
	{ "window", 'W', "DURATION", 0, "Each window's length (default 5s)", 1 },
	{ "align", 'A', NULL, 0, "Start windows at multiples of --every since the epoch, so "
	  "that every host captures the same steps", 1 },
	{ "max-bytes", 'M', "SIZE", 0, "Keep the traces in --out-dir under SIZE in all, oldest "
	  "deleted first (default 1G); a window stops at half of it", 1 },
	{ "keep", 'K', "N", 0, "Keep at most N traces", 1 },
	{ "budget", 'B', "PERCENT", 0, "End a window early once ptbpf's estimated cost passes "
	  "PERCENT of the traced processes' CPU time (default 2; 0: off)", 1 },
	{ "metrics-listen", 'L', "ADDR:PORT", 0, "Serve Prometheus metrics at "
	  "http://ADDR:PORT/metrics, and take triggers at POST http://ADDR:PORT/capture "
	  "(a reason and a job/rank filter, or Alertmanager's webhook payload)", 1 },
	{ "web-config", OPT_WEB_CONFIG, "FILE", 0, "TLS and basic auth for --metrics-listen, "
	  "from a web config as Prometheus exporters read it (tls_server_config: cert_file, "
	  "key_file; basic_auth_users: name: bcrypt hash): with users, every request needs one "
	  "(401 otherwise)", 1 },
	{ "insecure-capture", OPT_INSECURE_CAPTURE, NULL, 0, "Take POST /capture from any "
	  "client without a user of --web-config (by default, without users, only loopback "
	  "clients may trigger: others get 403)", 1 },
	{ "min-gap", 'G', "DURATION", 0, "Refuse (and count) a POST /capture trigger that comes "
	  "less than DURATION after the last triggered window started (default 60s; 0: none)",
	  1 },
	{ "slow-step", OPT_SLOW_STEP, "K[,W]", 0, "Open a window when a step takes over K times "
	  "the median of the W steps before it (W: default 50), or runs that long still "
	  "unfinished; held to --min-gap (e.g. 3)", 1 },
	{ "hang", OPT_HANG, "K[,FLOOR]", 0, "Capture every rank of a job on this host (their "
	  "Python stacks, what each thread blocks in, their last collectives) when one's step "
	  "under way, or a collective it waits in, has lasted over max(K times its median "
	  "step, FLOOR) (default 10,60s; off: none); once per hang, held to --min-gap", 1 },
	{ "steps", OPT_STEPS, "N", 0, "A window a slow step opened ends once N whole steps of "
	  "that process (those after the step under way at its start) are in it, or at "
	  "--window", 1 },
	{ "no-step-signal", OPT_NO_STEP_SIGNAL, NULL, 0, "No always-on layer: between windows "
	  "the processes are left alone, and there are no step metrics", 1 },
	{ "keep-graphs", OPT_KEEP_GRAPHS, NULL, 0, "The always-on layer keeps each process's "
	  "CUDA-graph capture map (CUPTI's graph callbacks, and the ops open while a graph is "
	  "captured), so that windows put replayed kernels under the op that captured them "
	  "(the default; given, an error where there is no always-on layer)", 1 },
	{ "no-keep-graphs", OPT_NO_KEEP_GRAPHS, NULL, 0, "No capture map between windows: "
	  "kernels replayed from graphs captured outside a window have no op (counted)", 1 },
	{ 0 },
};


/* s as a whole number: digits only (no sign, space or suffix). */
static bool whole_number(const char *s, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return !errno && !*end;
}

static int parse_u64(const char *s, const char *what, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (!whole_number(s, &v) || v < min || v > max) {
		log_msg("invalid %s '%s': expected a whole number from %llu to %llu\n",
			what, s, (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

/* --py-stacks[=N]: one op in N (every op without N). */
static int parse_py_stacks(const char *arg, struct options *o)
{
	uint64_t v = 1;

	if (arg && parse_u64(arg, "--py-stacks", 1, 1000000, &v))
		return -1;
	o->py_stacks = (uint32_t)v;
	return 0;
}

/* --match-env KEY=VALUE: a key of letters, digits and '_', then '='. */
static int add_match_env(struct options *o, const char *arg)
{
	size_t klen = strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");

	if (!klen || arg[klen] != '=' || strlen(arg) >= sizeof(o->match_env[0])) {
		log_msg("invalid --match-env '%s': give KEY=VALUE, e.g. TORCHELASTIC_RUN_ID=job1\n",
			arg);
		return -1;
	}
	if (o->nmatch_env == CLI_MAX_MATCH_ENV) {
		log_msg("--match-env: at most %d\n", CLI_MAX_MATCH_ENV);
		return -1;
	}
	strcpy(o->match_env[o->nmatch_env++], arg);
	return 0;
}

/* The keys of the options that belong to `ptbpf daemon`. */
#define DAEMON_KEYS "DEWAMKBLG"

/* s without its last character if that is one of units (the unit's index
 * + 1 in *unit), else s (*unit 0), in buf. */
static bool split_unit(const char *s, const char *units, char *buf, size_t len, int *unit)
{
	size_t n = strlen(s);
	const char *u;

	if (n == 0 || n >= len)
		return false;
	memcpy(buf, s, n + 1);
	u = strchr(units, buf[n - 1]);
	*unit = u ? (int)(u - units) + 1 : 0;
	if (u)
		buf[n - 1] = 0;
	return true;
}

/* "90", "90s", "10m", "2h" -> seconds, 1 s to 7 days. */
static int parse_duration(const char *s, const char *what, uint64_t *out)
{
	static const uint64_t mult[] = { 1, 1, 60, 3600 };
	char buf[32];
	uint64_t v;
	int unit;

	if (!split_unit(s, "smh", buf, sizeof(buf), &unit) || !whole_number(buf, &v) ||
	    v < 1 || v > 7ull * 86400 / mult[unit] || v * mult[unit] > 7ull * 86400) {
		log_msg("invalid %s '%s': expected 1s to 7 days, e.g. 30s, 10m, "
			"1h\n", what, s);
		return -1;
	}
	*out = v * mult[unit];
	return 0;
}

/* "64K", "16M", "1G" or bytes -> bytes, within [min, max]. */
static int parse_bytes(const char *s, const char *what, uint64_t min, uint64_t max,
		       uint64_t *out)
{
	static const uint64_t mult[] = { 1, 1ull << 10, 1ull << 10, 1ull << 20, 1ull << 20,
					 1ull << 30, 1ull << 30 };
	char buf[32];
	uint64_t v;
	int unit;

	if (!split_unit(s, "KkMmGg", buf, sizeof(buf), &unit) || !whole_number(buf, &v) ||
	    v > max / mult[unit] || v * mult[unit] < min) {
		log_msg("invalid %s '%s': expected %lluK to %lluG (K, M or G "
			"suffix)\n", what, s, (unsigned long long)(min >> 10),
			(unsigned long long)(max >> 30));
		return -1;
	}
	*out = v * mult[unit];
	return 0;
}

/* The ring size: 4K..1G, rounded up to a power of two. */
static int parse_size(const char *s, uint32_t *out)
{
	uint64_t v;

	if (parse_bytes(s, "ring size", 4096, 1ull << 30, &v))
		return -1;
	*out = 4096;
	while (*out < v)
		*out <<= 1;
	return 0;
}

static int add_pid(struct options *o, const char *arg)
{
	uint64_t v;

	if (parse_u64(arg, "pid", 1, 4194304, &v))
		return -1;
	for (int i = 0; i < o->npids; i++) {
		if (o->pids[i] == (int)v) {
			log_msg("note: pid %d is given twice; it is traced once\n", (int)v);
			return 0;
		}
	}
	if (o->npids >= CLI_MAX_PIDS) {
		log_msg("at most %d -p options\n", CLI_MAX_PIDS);
		return -1;
	}
	o->pids[o->npids++] = (int)v;
	return 0;
}

/* arg as one of words (its index, in the order of the option's enum), or
 * -1 once the error is said. */
static int one_of(const char *arg, const char *opt, const char *const *words, int n,
		  const char *say)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(arg, words[i]))
			return i;
	log_msg("invalid %s '%s': %s\n", opt, arg, say);
	return -1;
}

static int parse_choice(int key, const char *arg, struct options *o)
{
	static const char *const ops[] = { "auto", "agent", "probes" };
	static const char *const when[] = { "auto", "on", "off" };
	static const char *const clock[] = { "tsc", "kernel" };
	int i;

	if (key == 'O' && (i = one_of(arg, "--ops", ops, 3, "use agent, probes or auto")) >= 0)
		o->ops = (enum ops_source)i;
	else if (key == OPT_GPU_TIMELINE &&
		 (i = one_of(arg, "--gpu-timeline", when, 3, "auto, on or off")) >= 0)
		o->gpu_timeline = (enum gpu_timeline_when)i;
	else if (key == OPT_OP_CLOCK && (i = one_of(arg, "--op-clock", clock, 2, "tsc or kernel")) >= 0)
		o->kernel_clock = i == 1;
	else
		return EINVAL;
	return 0;
}

/* --slow-step K[,W]: K above 1, W 3 to 1000 steps. */
static int parse_slow_step(const char *arg, struct options *o)
{
	uint64_t w = 50;
	char *end = NULL;

	o->slow_k = strtod(arg, &end);
	if (end != arg && *end == ',' && parse_u64(end + 1, "--slow-step's W", 3, 1000, &w))
		return -1;
	if (end == arg || (*end && *end != ',') || !(o->slow_k > 1 && o->slow_k <= 1000)) {
		log_msg("invalid --slow-step '%s': K[,W], K a factor over 1 (e.g. 3), W a number of "
			"steps (e.g. 50)\n", arg);
		return -1;
	}
	o->slow_w = (uint32_t)w;
	return 0;
}

/* --hang K[,FLOOR]: K at least 1, FLOOR a duration; or "off". */
static int parse_hang(const char *arg, struct options *o)
{
	char *end = NULL;

	if (!strcmp(arg, "off")) {
		o->hang_k = 0;
		return 0;
	}
	o->hang_k = strtod(arg, &end);
	if (end == arg || (*end && *end != ',') || !(o->hang_k >= 1 && o->hang_k <= 1000)) {
		log_msg("invalid --hang '%s': K[,FLOOR], K a factor of 1 or more (e.g. 10), FLOOR "
			"a duration (e.g. 60s), or off\n", arg);
		return -1;
	}
	if (*end == ',' && parse_duration(end + 1, "--hang's FLOOR", &o->hang_floor_s))
		return -1;
	return 0;
}

/* The switches of `ptbpf daemon`. */
static bool *daemon_flag(int key, struct options *o)
{
	switch (key) {
	case 'A':
		return &o->align;
	case OPT_NO_STEP_SIGNAL:
		return &o->no_step_signal;
	case OPT_KEEP_GRAPHS:
		return &o->keep_graphs;
	case OPT_NO_KEEP_GRAPHS:
		return &o->no_keep_graphs;
	case OPT_INSECURE_CAPTURE:
		return &o->insecure_capture;
	}
	return NULL;
}

/* The options of `ptbpf daemon` (DAEMON_KEYS). */
static error_t daemon_opt(int key, const char *arg, struct options *o)
{
	bool *flag = daemon_flag(key, o);

	if (flag) {
		*flag = true;
		return 0;
	}
	switch (key) {
	case 'D':
		if (!*arg || strlen(arg) >= sizeof(o->out_dir)) {
			log_msg("invalid --out-dir\n");
			return EINVAL;
		}
		strcpy(o->out_dir, arg);
		break;
	case 'E':
		if (parse_duration(arg, "--every", &o->every_s))
			return EINVAL;
		break;
	case 'W':
		if (parse_duration(arg, "--window", &o->window_s))
			return EINVAL;
		break;
	case 'M':
		if (parse_bytes(arg, "--max-bytes", 64u << 10, 1ull << 50, &o->max_bytes))
			return EINVAL;
		break;
	case 'K':
		if (parse_u64(arg, "--keep", 1, 1000000, &o->keep))
			return EINVAL;
		break;
	case 'B': {
		char *end;

		o->budget_pct = strtod(arg, &end);
		if (end == arg || *end || o->budget_pct < 0 || o->budget_pct > 100) {
			log_msg("invalid --budget '%s': a percentage, 0 to 100\n",
				arg);
			return EINVAL;
		}
		break;
	}
	case 'G':
		if (strcmp(arg, "0") && parse_duration(arg, "--min-gap", &o->min_gap_s))
			return EINVAL;
		if (!strcmp(arg, "0"))
			o->min_gap_s = 0;
		break;
	case OPT_SLOW_STEP:
		return parse_slow_step(arg, o) ? EINVAL : 0;
	case OPT_HANG:
		return parse_hang(arg, o) ? EINVAL : 0;
	case OPT_STEPS: {
		uint64_t n;

		if (parse_u64(arg, "--steps", 1, 100000, &n))
			return EINVAL;
		o->window_steps = (uint32_t)n;
		break;
	}
	case 'L':
		if (!*arg || strlen(arg) >= sizeof(o->metrics_listen)) {
			log_msg("invalid --metrics-listen\n");
			return EINVAL;
		}
		strcpy(o->metrics_listen, arg);
		break;
	case OPT_WEB_CONFIG:
		if (!*arg || strlen(arg) >= sizeof(o->web_config)) {
			log_msg("invalid --web-config\n");
			return EINVAL;
		}
		strcpy(o->web_config, arg);
		break;
	}
	return 0;
}

/* The options that switch something on or off: true if key is one. */
static bool flag_opt(int key, struct options *o)
{
	bool *flag = key == 'f' ? &o->follow_children : key == 'e' ? &o->entries_only :
		     key == 'n' ? &o->no_agent : key == 'm' ? &o->memory :
		     key == 's' ? &o->shapes : key == 'a' ? &o->all : key == 'F' ? &o->force :
		     key == OPT_NO_SCHED ? &o->no_sched : key == OPT_NO_SAMPLES ? &o->no_samples :
		     key == OPT_NO_IDLE_TRACK ? &o->no_idle_track :
		     key == OPT_COMPILED_REGIONS ? &o->compiled_regions :
		     key == OPT_BPF_STATS ? &o->bpf_stats : NULL;

	if (flag)
		*flag = true;
	return flag != NULL;
}

static error_t parse_opt(int key, char *arg, struct argp_state *state)
{
	struct options *o = state->input;

	if (flag_opt(key, o))
		return 0;

	if ((key > 0 && key < 128 && strchr(DAEMON_KEYS, key)) || key == OPT_SLOW_STEP ||
	    key == OPT_HANG ||
	    key == OPT_NO_STEP_SIGNAL || key == OPT_KEEP_GRAPHS || key == OPT_NO_KEEP_GRAPHS ||
	    key == OPT_STEPS ||
	    key == OPT_WEB_CONFIG || key == OPT_INSECURE_CAPTURE) {
		o->daemon_opt = true;
		return daemon_opt(key, arg, o);
	}
	switch (key) {
	case 'p':
		return add_pid(o, arg) ? EINVAL : 0;
	case 'd':
		if (parse_u64(arg, "duration", 1, 365ull * 86400, &o->duration_s))
			return EINVAL;
		break;
	case 'o':
		if (!*arg || strlen(arg) >= sizeof(o->output)) {
			log_msg("invalid output path\n");
			return EINVAL;
		}
		strcpy(o->output, arg);
		break;
	case 'r':
		if (parse_size(arg, &o->ring_bytes))
			return EINVAL;
		break;
	case 'S':
		return parse_py_stacks(arg, o) ? EINVAL : 0;
	case OPT_SAMPLE_HZ: {
		uint64_t hz;

		if (parse_u64(arg, "--sample-hz", 1, SAMPLE_HZ_MAX, &hz))
			return EINVAL;
		o->sample_hz = (uint32_t)hz;
		break;
	}
	case 'x':
		return add_match_env(o, arg) ? EINVAL : 0;
	case 'O':
	case OPT_GPU_TIMELINE:
	case OPT_OP_CLOCK:
		return parse_choice(key, arg, o);
	case 'w':
		if (!*arg || strlen(arg) >= sizeof(o->raw_output)) {
			log_msg("invalid raw capture path\n");
			return EINVAL;
		}
		strcpy(o->raw_output, arg);
		break;
	case 'v':
		log_set_verbose(true);
		break;
	case ARGP_KEY_ARG:
		log_msg("unexpected argument '%s' (pids go after -p)\n", arg);
		return EINVAL;
	case ARGP_KEY_END:
		if (!o->npids && !o->run_argv && !o->all && !o->daemon) {
			log_msg("no process given: use -p PID (see --help)\n");
			return EINVAL;
		}
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* Options that do not go together; one line and -1 if any. */
static int check_options(struct options *opt)
{
	if (opt->ops == OPS_AGENT && (opt->no_agent || opt->entries_only)) {
		log_msg("--ops=agent cannot be combined with %s\n",
			opt->no_agent ? "--no-agent" : "--entries-only");
		return -1;
	}
	/* What only the agent records. */
	if ((opt->shapes || opt->compiled_regions) &&
	    (opt->ops == OPS_PROBES || opt->no_agent || opt->entries_only)) {
		log_msg("%s: it cannot be combined with --ops=probes, --no-agent or "
			"--entries-only\n", opt->shapes ?
			"--shapes reads inputs where the agent records ops" :
			"--compiled-regions is recorded by the agent");
		return -1;
	}
	if (opt->shapes || opt->compiled_regions)
		opt->ops = OPS_AGENT;
	if (opt->no_agent || opt->entries_only)
		opt->ops = OPS_PROBES;
	if (opt->daemon) {
		if (!opt->out_dir[0] || opt->npids || opt->all || opt->output[0] ||
		    opt->duration_s) {
			log_msg("daemon: give --out-dir DIR (and no -p, --all, -o "
				"or -d: it traces every torch process, in windows)\n");
			return -1;
		}
		if (opt->window_s > opt->every_s) {
			log_msg("daemon: --window is longer than --every\n");
			return -1;
		}
		if (opt->window_steps && !opt->slow_k) {
			log_msg("daemon: --steps counts the steps of a slow step's window: give "
				"--slow-step too\n");
			return -1;
		}
		if (opt->keep_graphs && opt->no_keep_graphs) {
			log_msg("daemon: --keep-graphs and --no-keep-graphs: give one\n");
			return -1;
		}
		if (opt->keep_graphs && (opt->no_step_signal || opt->no_agent)) {
			log_msg("daemon: --keep-graphs is kept by the always-on layer (the agent's), "
				"which --no-step-signal and --no-agent leave out\n");
			return -1;
		}
		opt->keep_graphs = !opt->no_keep_graphs && !opt->no_step_signal && !opt->no_agent;
		if (opt->slow_k && (opt->no_step_signal || opt->no_agent)) {
			log_msg("daemon: --slow-step needs the step signal (the agent's), which "
				"--no-step-signal and --no-agent leave out\n");
			return -1;
		}
		if ((opt->web_config[0] || opt->insecure_capture) && !opt->metrics_listen[0]) {
			log_msg("daemon: --web-config and --insecure-capture are for the port of "
				"--metrics-listen: give it\n");
			return -1;
		}
		return 0;
	}
	if (opt->daemon_opt) {
		log_msg("--out-dir, --every, --window, --align, --max-bytes, --keep, "
			"--budget, --min-gap, --metrics-listen, --web-config, --insecure-capture, "
			"--slow-step, --hang, --steps, --no-step-signal and --(no-)keep-graphs belong to "
			"`ptbpf daemon`\n");
		return -1;
	}
	if (opt->nmatch_env && !opt->all) {
		log_msg("--match-env selects among the processes of --all or `ptbpf daemon`\n");
		return -1;
	}
	if (opt->all && (opt->npids || opt->run_argv)) {
		log_msg("--all cannot be combined with %s\n",
			opt->npids ? "-p" : "a command");
		return -1;
	}
	if (opt->run_argv && opt->npids) {
		log_msg("run: -p cannot be combined with a command\n");
		return -1;
	}
	return 0;
}

int cli_parse(int argc, char **argv, struct options *opt)
{
	static const struct argp argp = { options, parse_opt, NULL, doc, NULL, NULL, NULL };

	int dd = 0;

	memset(opt, 0, sizeof(*opt));
	opt->ring_bytes = 16u << 20;
	opt->sample_hz = SAMPLE_HZ_DEFAULT;
	opt->every_s = 600;
	opt->window_s = 5;
	opt->max_bytes = 1ull << 30;
	opt->budget_pct = 2;
	opt->min_gap_s = 60;
	opt->hang_k = 10;
	opt->hang_floor_s = 60;
	argp_err_exit_status = 2;
	if (argc > 1 && !strcmp(argv[1], "daemon")) {
		opt->daemon = true;
		argv[1] = argv[0];
		argv++;
		argc--;
	} else if (argc > 1 && !strcmp(argv[1], "run")) {
		for (dd = 2; dd < argc && strcmp(argv[dd], "--"); dd++)
			;
		if (dd + 1 >= argc) {
			log_msg("run: no command given: ptbpf run [OPTIONS] -- CMD ...\n");
			return -1;
		}
		opt->run_argv = &argv[dd + 1];
		argv[1] = argv[0]; /* parse the options between "run" and "--" */
		argv++;
		argc = dd - 1;
	}
	if (argp_parse(&argp, argc, argv, 0, NULL, opt))
		return -1;
	if (check_options(opt))
		return -1;
	if (opt->daemon)
		return 0;
	if (!opt->output[0] && !opt->run_argv) {
		char stamp[32];
		time_t now = time(NULL);

		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
		if (opt->all)
			snprintf(opt->output, sizeof(opt->output), "ptbpf-all-%s.pftrace", stamp);
		else
			snprintf(opt->output, sizeof(opt->output), "ptbpf-%d-%s.pftrace",
				 opt->pids[0], stamp);
	}
	if (opt->raw_output[0] && opt->output[0] && outfile_same(opt->output, opt->raw_output)) {
		log_msg("the trace (-o) and the raw capture (--raw) are the same "
			"file, %s: give them different names\n", opt->raw_output);
		return -1;
	}
	/* Before anything is started or attached (checked again when written). */
	if ((opt->output[0] && outfile_check(opt->output, opt->force, "")) ||
	    (opt->raw_output[0] && outfile_check(opt->raw_output, opt->force, "")))
		return 1;
	return 0;
}

int cli_check_privileges(char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	static const struct { int cap; const char *name; } need[] = {
		{ CAP_BPF, "CAP_BPF" }, { CAP_PERFMON, "CAP_PERFMON" },
		{ CAP_SYS_ADMIN, "CAP_SYS_ADMIN (uprobes)" },
		{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE (reading the target's /proc)" },
	};
	char missing[256] = "";

	if (syscall(SYS_capget, &hdr, data)) {
		snprintf(err, errlen, "cannot read capabilities: %s", strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!(data[need[i].cap / 32].effective & (1u << (need[i].cap % 32))))
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
				 "%s%s", missing[0] ? ", " : "", need[i].name);
	if (missing[0]) {
		snprintf(err, errlen, "missing privileges: %s; run as root (sudo ptbpf ...)", missing);
		return -1;
	}
	if (!target_in_initial_pidns()) {
		snprintf(err, errlen, "ptbpf must run in the host's (initial) pid namespace: BPF "
			 "sees host pids; run it outside the container and give the host pid");
		return -1;
	}
	return 0;
}
