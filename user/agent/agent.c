// SPDX-License-Identifier: BSD-2-Clause
/*
 * libptbpf-agent.so: ptbpf's in-process half. Loaded into a PyTorch
 * process (by ptbpf through ptrace, at start through CUDA_INJECTION64_PATH,
 * or LD_PRELOAD), it starts one thread that polls ptbpf's control block
 * (ptbpf_agent_ctl, include/ptbpf_agent.h) and switches on what ptbpf asks
 * for: ops from torch's RecordFunction callbacks (ops.c), the GPU timeline
 * and CUDA calls from CUPTI (cupti.c). Its records reach ptbpf through
 * rings ptbpf reads and through uprobes on the out-of-line ptbpf_agent_*
 * functions below; it has no other output channel.
 *
 * It is on only while ptbpf lives: ptbpf's probe on ptbpf_agent_status is
 * the proof (the kernel removes it when ptbpf exits, however it exits).
 * Asked to exit, it switches everything off, points every entry point it
 * handed out at an inert stub (stubs.c) and ends its thread; ptbpf then
 * unloads it once no thread is inside it.
 *
 * libcupti and libtorch are not linked: they are found in the process.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ptbpf_events.h"

/*
 * The uprobe entry points. noinline/noipa/used keep each one a real,
 * distinct function (noipa also stops identical-code folding, which would
 * turn one into a jump to another and give two symbols one address). The
 * memory clobber makes the caller materialize the record before the call.
 * Each body starts with a five-byte `nopl 0x0(%rax,%rax,1)` (the build
 * uses -fcf-protection=none, so there is no endbr64 before it): kernel
 * 6.18 turns a uprobe on it into a call to a trampoline, no trap at all,
 * and older kernels emulate it. A hit cost 215 ns on the CI VM (one-byte
 * `nop`, emulated after a trap: 450 ns; H200 machine: 300 against 543).
 * Spelled out in bytes: an assembler may shorten the `nopl` to 4 bytes,
 * which is single-stepped (4.4 us). tests/test_agent_build.py checks it.
 */
#if defined(__has_attribute) && __has_attribute(noipa)
#define PROBE_ENTRY EXPORT __attribute__((noinline, noipa, used))
#else
#define PROBE_ENTRY EXPORT __attribute__((noinline, used))
#endif
#define PROBE_NOP() asm volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00" ::: "memory")

PROBE_ENTRY void ptbpf_agent_correlate(uint32_t correlation_id, uint32_t cbid, uint32_t domain)
{
	PROBE_NOP();
}

/* --py-stacks: the op or CUDA call recorded at ts on this thread wants its
 * Python stack, which ptbpf's BPF program reads from here. */
PROBE_ENTRY void ptbpf_agent_pystack(uint64_t ts)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_kernel(const struct ptbpf_agent_kernel *r)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_memcpy(const struct ptbpf_agent_memcpy *r)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_memset(const struct ptbpf_agent_memset *r)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_graph_node(const struct ptbpf_agent_graph_node *r)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_graph_kept(const struct ptbpf_agent_graph_kept *r)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_dropped(uint64_t since_last, uint64_t total)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_status(int code, const char *msg, uint64_t value)
{
	PROBE_NOP();
}

PROBE_ENTRY void ptbpf_agent_wake(void)
{
	PROBE_NOP();
}

/* ptbpf copies a fixed AGENT_RAW_LEN bytes from each record pointer. */
_Static_assert(sizeof(struct ptbpf_agent_kernel) == 104, "kernel record layout");
_Static_assert(sizeof(struct ptbpf_agent_memcpy) == 64, "memcpy record layout");
_Static_assert(sizeof(struct ptbpf_agent_memset) == 56, "memset record layout");
_Static_assert(sizeof(struct ptbpf_agent_graph_node) == 32, "graph node record layout");
_Static_assert(sizeof(struct ptbpf_agent_graph_kept) == AGENT_RAW_LEN, "kept node record layout");
_Static_assert(sizeof(struct ptbpf_agent_kernel) <= AGENT_RAW_LEN, "kernel record too long");
_Static_assert(sizeof(struct ptbpf_agent_ctl) == 208, "control block layout");

EXPORT struct ptbpf_agent_ctl ptbpf_agent_ctl = {
	.magic = PTBPF_CTL_MAGIC, .version = PTBPF_CTL_VERSION,
};
EXPORT struct ptbpf_agent_busy ptbpf_agent_busy;
__thread int agent_busy_idx __attribute__((tls_model("initial-exec")));
static _Atomic int busy_next;

int agent_busy_assign(void)
{
	int i = atomic_fetch_add(&busy_next, 1);

	return i < PTBPF_AGENT_BUSY_THREADS ? i + 1 : -1;
}

/* State, changed only under state_lock (by the agent thread or by the
 * exported activate/deactivate). */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool active, active_by_ctl, gpu_on, ops_on, process_exiting;
static bool ever_on; /* callbacks were handed out once */
static int64_t steps_heard; /* the last sign of ptbpf's life the step signal saw */
static uint8_t probe_byte; /* ptbpf_agent_status's first byte, unprobed */
/* The agent thread's stack, the agent's own (glibc would keep a stack it
 * made in its cache after the thread ends): unmapped when unloaded. */
#define STACK_BYTES (256 << 10)
static void *stack;
static bool log_to_stderr;

/* Every status goes to ptbpf's uprobe; with PTBPF_AGENT_LOG=1 also to stderr. */
void agent_report(int code, uint64_t value, const char *fmt, ...)
{
	char msg[PTBPF_AGENT_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ptbpf_agent_status(code, msg, value);
	if (log_to_stderr)
		fprintf(stderr, "ptbpf-agent[%d]: %s (%d)\n", (int)getpid(), msg, code);
}

/* Whether ptbpf lives: its uprobe still sits on ptbpf_agent_status, and,
 * where it shares the agent's pid namespace (owner set), its pid is there
 * (the kernel may take seconds to remove a dead ptbpf's probes). */
static bool owner_gone(void)
{
	uint32_t owner = __atomic_load_n(&ptbpf_agent_ctl.owner, __ATOMIC_RELAXED);

	return owner && kill((pid_t)owner, 0) && errno == ESRCH;
}

static bool probe_there(void)
{
	return *(volatile const uint8_t *)(uintptr_t)ptbpf_agent_status != probe_byte;
}

static bool ptbpf_alive(void)
{
	return !owner_gone() && probe_there();
}

/* The step signal follows the words of every command (EXIT: off). */
static void steps_command_locked(bool want, const char *why_off)
{
	char why[200];

	steps_heard = agent_mono_ns();
	if (want && !agent_steps_is_on()) {
		if (agent_steps_on(why, sizeof(why))) {
			ever_on = true; /* torch holds its callback (and the map's) now */
			agent_report(PTBPF_AGENT_STEPS, 1, "steps: on (a USER_SCOPE RecordFunction "
				     "callback counts steps)");
		} else {
			agent_report(PTBPF_AGENT_ERR_STEPS, 0, "steps: %s", why);
		}
	} else if (!want && agent_steps_is_on()) {
		graphs_want(false, 0);
		agent_steps_off();
		agent_report(PTBPF_AGENT_STEPS, 0, "steps: off (%s)", why_off);
	}
}

/* Between capture windows no probe of ptbpf's is there: the step signal
 * lives on ptbpf's heartbeat, and goes once ptbpf is silent for
 * PTBPF_STEPS_LEASE_MS or its pid is gone. */
static void steps_check_locked(int64_t now)
{
	if (!agent_steps_is_on())
		return;
	if (agent_steps_heartbeat() || probe_there())
		steps_heard = now;
	if (owner_gone())
		steps_command_locked(false, "ptbpf is gone (its pid)");
	else if (now - steps_heard > PTBPF_STEPS_LEASE_MS * 1000000LL)
		steps_command_locked(false, "ptbpf is silent (no heartbeat, command or probe for "
				     "10 s)");
}

bool agent_cuda_loaded(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (h)
		dlclose(h);
	return h != NULL;
}

/* The GPU timeline if the process uses CUDA, then the ops if asked for. */
static void activate_locked(bool by_ctl, const char *words)
{
	bool want_ops = strstr(words, OPS_WORD_OPS) != NULL;
	const struct ptbpf_ops_desc *d;
	const char *st;
	unsigned every = 0;
	char why[200];

	if (active)
		return;
	stubs_init();
	/* The kept capture map first: before any kernel of the window. */
	graphs_send();
	if (strstr(words, OPS_WORD_NO_GPU)) {
		gpu_on = false; /* ptbpf says why */
	} else if (agent_cuda_loaded()) {
		gpu_on = cupti_activate(want_ops, &ptbpf_agent_ctl);
	} else {
		gpu_on = false;
		agent_report(PTBPF_AGENT_NO_CUDA, 0, "no libcuda.so.1 in the process: no GPU timeline");
	}
	ops_on = false;
	if (want_ops) {
		st = strstr(words, OPS_WORD_STACKS);
		if (st && sscanf(st + strlen(OPS_WORD_STACKS), "%u", &every) != 1)
			every = 0;
		d = agent_ops_start(why, sizeof(why), strstr(words, OPS_WORD_SHAPES) != NULL, every,
				    !strstr(words, OPS_WORD_KERNEL_CLOCK));
		if (d)
			agent_report(PTBPF_AGENT_OPS_ON, (uintptr_t)d,
				     "ops: RecordFunction callbacks on, %u rings of %u KiB at %#llx, "
				     "timestamps from %s",
				     d->nslots, (unsigned)(d->slot_bytes >> 10),
				     (unsigned long long)d->slots,
				     agent_clock.tsc ? "the TSC (once its line is set, in 10-40 ms)" :
				     "clock_gettime");
		else
			agent_report(PTBPF_AGENT_ERR_OPS, 0, "ops: %s", why);
		ops_on = d != NULL;
		if (ops_on && strstr(words, OPS_WORD_REGIONS))
			regions_on();
	}
	active = gpu_on || ops_on;
	active_by_ctl = by_ctl;
	ever_on |= active;
}

static void deactivate_locked(const char *why)
{
	if (!active)
		return;
	regions_off(false);
	if (ops_on)
		agent_ops_stop();
	if (gpu_on)
		cupti_deactivate();
	active = gpu_on = ops_on = false;
	agent_report(PTBPF_AGENT_DORMANT, 0, "dormant: %s", why);
}

EXPORT void ptbpf_agent_activate(void)
{
	pthread_mutex_lock(&state_lock);
	activate_locked(false, "");
	pthread_mutex_unlock(&state_lock);
}

EXPORT void ptbpf_agent_deactivate(void)
{
	pthread_mutex_lock(&state_lock);
	deactivate_locked("requested");
	pthread_mutex_unlock(&state_lock);
}

/* One command of ptbpf's: true when the thread is to end. */
static bool command_locked(uint64_t seq)
{
	struct ptbpf_agent_ctl *c = &ptbpf_agent_ctl;
	uint32_t cmd = __atomic_load_n(&c->cmd, __ATOMIC_ACQUIRE);
	char words[sizeof(c->words)];

	memcpy(words, c->words, sizeof(words));
	words[sizeof(words) - 1] = 0;
	/* Before an unload: torch's own objects back where they were. */
	if (cmd == PTBPF_CMD_EXIT)
		regions_off(true);
	/* A new session while an old one is on (ptbpf died and another came
	 * before the agent noticed): it starts over, so the new one hears
	 * how it went. */
	deactivate_locked(cmd == PTBPF_CMD_ON ? "a new ptbpf session" : "ptbpf switched it off");
	steps_command_locked(cmd != PTBPF_CMD_EXIT && strstr(words, OPS_WORD_STEPS),
			     "ptbpf switched it off");
	/* The kept capture map with it (it shares its callback). */
	graphs_want(cmd != PTBPF_CMD_EXIT && agent_steps_is_on() && strstr(words, OPS_WORD_GRAPHS),
		    agent_mono_ns());
	if (cmd == PTBPF_CMD_ON) {
		activate_locked(true, words);
		c->state = active ? PTBPF_STATE_ON : PTBPF_STATE_DORMANT;
	} else if (cmd == PTBPF_CMD_EXIT && (stubs_available() || !ever_on)) {
		/* Nothing handed out leads into the library any more. */
		stubs_retire();
		c->state = PTBPF_STATE_GONE;
		c->agent_tid = 0;
	} else if (cmd == PTBPF_CMD_EXIT) {
		/* Without stub pages (no executable memory to be had) torch and
		 * CUPTI hold the agent's own addresses: it must stay loaded. */
		agent_report(PTBPF_AGENT_DORMANT, 0, "staying loaded: no stub pages, so torch and "
			     "CUPTI may still call into it");
		c->state = PTBPF_STATE_DORMANT;
		cmd = PTBPF_CMD_OFF;
	} else {
		c->state = PTBPF_STATE_DORMANT;
	}
	__atomic_store_n(&c->ack, seq, __ATOMIC_RELEASE);
	return cmd == PTBPF_CMD_EXIT;
}

/* What was recorded or seen: it changes while the job does anything
 * the agent records. */
static uint64_t activity_locked(void)
{
	return (ops_on ? agent_ops_activity() : 0) + (gpu_on ? cupti_activity() : 0);
}

/*
 * Whether the agent's thread may go back from SCHED_IDLE to the job's
 * policy (as_job_thread below): with CAP_SYS_NICE, or an RLIMIT_NICE that
 * allows its nice value. An ordinary user's job has neither: there the
 * thread keeps the job's policy, lest CUPTI's threads start at SCHED_IDLE.
 */
static bool may_come_back(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	struct rlimit r;

	if (!syscall(SYS_capget, &h, d) && (d[0].effective & (1u << CAP_SYS_NICE)))
		return true;
	return !getrlimit(RLIMIT_NICE, &r) &&
	       (r.rlim_cur == RLIM_INFINITY || 20 - (long)r.rlim_cur <= getpriority(PRIO_PROCESS, 0));
}

/*
 * The agent's thread yields to the job's: SCHED_IDLE, so that it runs only
 * where a CPU has nothing else to run and never preempts a thread of the
 * job, and on any CPU the job may use, not only where the thread that
 * loaded it was pinned (threads inherit their creator's affinity: a job
 * pinned to one CPU had the agent's thread take 216 ms of that CPU in a
 * 6.4 s capture). Best effort: the kernel keeps what it refuses.
 */
static void agent_thread_yields(void)
{
	static int idle_ok = -1;
	struct sched_param none = { 0 };
	cpu_set_t all;

	if (idle_ok < 0)
		idle_ok = may_come_back();
	pthread_setname_np(pthread_self(), "ptbpf-agent");
	memset(&all, 0xff, sizeof(all));
	sched_setaffinity(0, sizeof(all), &all); /* within the job's cpuset */
	if (idle_ok)
		pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
}

/*
 * CUPTI starts threads of its own from the thread that calls it first, and
 * keeps them for the process's life: they inherit that thread's name,
 * policy and CPUs, and later serve the job's own profiler too (on the H200
 * two of them were "ptbpf-agent" at SCHED_IDLE). So while it acts on a
 * command (switching CUPTI on is one), the agent's thread is as a thread
 * of the job: the main thread's name, policy and CPUs.
 */
static void as_job_thread(void)
{
	struct sched_param param = { 0 };
	cpu_set_t cpus;
	char name[16] = "";
	FILE *f = fopen("/proc/self/comm", "re");
	int policy = sched_getscheduler(getpid());

	if (f) {
		if (fgets(name, sizeof(name), f))
			name[strcspn(name, "\n")] = 0;
		fclose(f);
	}
	if (name[0])
		pthread_setname_np(pthread_self(), name);
	if (!sched_getaffinity(getpid(), sizeof(cpus), &cpus))
		sched_setaffinity(0, sizeof(cpus), &cpus);
	sched_getparam(getpid(), &param);
	if (policy >= 0)
		pthread_setschedparam(pthread_self(), policy, &param);
}

/* How long the thread waits before its next tick: quick while something
 * happens or a command came lately, PTBPF_AGENT_IDLE_MS otherwise. */
#define QUIET_NS   200000000LL   /* on, nothing recorded for this long: idle */
#define AWAKE_NS   1000000000LL  /* after a command: quick this long */
#define STARTUP_NS 10000000000LL /* just loaded: a ptbpf is about to switch it on */

struct ticks {
	uint64_t seen;       /* the last command's seq */
	uint64_t act;        /* activity_locked() when it last changed */
	int64_t busy_until;  /* quick until then */
	int64_t quiet_since; /* when activity last changed */
	bool idle;           /* nothing recorded since QUIET_NS */
};

/* One tick: ptbpf's command, its life, CUPTI's and the op recorder's
 * upkeep; true when the thread is to end. */
static bool tick_locked(struct ticks *t, uint64_t seq, int64_t now)
{
	struct ptbpf_agent_ctl *c = &ptbpf_agent_ctl;
	bool done = false;
	uint64_t a;

	if (seq != t->seen) {
		t->seen = seq;
		t->busy_until = now + AWAKE_NS;
		done = command_locked(seq);
	}
	if (active && active_by_ctl && !ptbpf_alive()) {
		deactivate_locked("ptbpf is gone (its probe was removed)");
		c->state = PTBPF_STATE_DORMANT;
	}
	a = active ? activity_locked() : 0;
	if (a != t->act || now < t->busy_until) {
		t->act = a;
		t->quiet_since = now;
	}
	t->idle = now - t->quiet_since >= QUIET_NS;
	if (active && gpu_on)
		cupti_tick(now, t->idle);
	if (active && ops_on)
		regions_tick(now);
	if (active && ops_on && !t->idle) {
		agent_ops_busy();
		agent_ops_clock_tick();
		agent_ops_prefault();
	}
	steps_check_locked(now);
	graphs_tick(now);
	return done;
}

static void *agent_thread(void *arg)
{
	struct ptbpf_agent_ctl *c = &ptbpf_agent_ctl;
	struct ticks t = { .busy_until = agent_mono_ns() + STARTUP_NS };
	bool done = false;

	agent_thread_yields();
	c->agent_tid = (uint32_t)gettid();
	while (!done) {
		int64_t now = agent_mono_ns();
		uint64_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		bool command = seq != t.seen, recording;

		if (command)
			as_job_thread();
		pthread_mutex_lock(&state_lock);
		if (!process_exiting)
			done = tick_locked(&t, seq, now);
		recording = active && ops_on;
		pthread_mutex_unlock(&state_lock);
		if (command)
			agent_thread_yields();
		if (done)
			break;
		/* Idle and recording ops: the first record wakes it (ops.c). */
		if (t.idle && recording)
			agent_ops_idle(t.act, PTBPF_AGENT_IDLE_MS);
		else
			nanosleep(&(struct timespec){ 0, (t.idle ? PTBPF_AGENT_IDLE_MS :
							  PTBPF_AGENT_POLL_MS) * 1000000L }, NULL);
	}
	return NULL;
}

/* Only starts the thread: the constructor may run under the loader lock
 * (dlopen) or inside cuInit (injection), where blocking is not allowed.
 * The thread takes no signals meant for the target. */
static void agent_start(void)
{
	struct link_map *self = NULL;
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t tid;
	Dl_info di;
	const char *log = getenv("PTBPF_AGENT_LOG");

	log_to_stderr = log && *log && strcmp(log, "0");
	probe_byte = *(volatile const uint8_t *)(uintptr_t)ptbpf_agent_status;
	if (dladdr1((void *)agent_start, &di, (void **)&self, RTLD_DL_LINKMAP) && self) {
		/* Loaded by a ptbpf's ptrace, under the name only that uses (a
		 * process that loads it itself keeps it): a ptbpf unloads it at
		 * detach, even if the one that loaded it died first. Before the
		 * handle: ptbpf reads the block once that is set. */
		if (self->l_name && strstr(self->l_name, PTBPF_AGENT_INJECTED_NAME))
			ptbpf_agent_ctl.injected = 1;
		ptbpf_agent_ctl.handle = (uintptr_t)self;
	}
	stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		     MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstack(&attr, stack, STACK_BYTES);
	pthread_create(&tid, &attr, agent_thread, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static pthread_once_t agent_once = PTHREAD_ONCE_INIT;

__attribute__((constructor)) static void agent_init(void)
{
	pthread_once(&agent_once, agent_start);
}

/* At dlclose after an exit command (ptbpf made sure no thread is inside
 * the agent): what it allocated goes. At process exit: what the op rings
 * hold must reach ptbpf before the process's memory goes. */
__attribute__((destructor)) static void agent_fini(void)
{
	if (ptbpf_agent_ctl.state == PTBPF_STATE_GONE) {
		/* The thread ended (ptbpf saw its tid go) before this runs. */
		agent_ops_unload();
		cupti_unload();
		munmap(stack, STACK_BYTES);
		return;
	}
	/* From here on the agent thread leaves torch and CUPTI alone: their
	 * static objects are destroyed after this (the agent was loaded last,
	 * so its destructor runs first). */
	pthread_mutex_lock(&state_lock);
	process_exiting = true;
	pthread_mutex_unlock(&state_lock);
	agent_ops_exit();
}

/* Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this
 * library; the constructor has normally run already. */
EXPORT int InitializeInjection(void)
{
	pthread_once(&agent_once, agent_start);
	return 1;
}
