// SPDX-License-Identifier: BSD-2-Clause
/*
 * The Prometheus endpoint of `ptbpf daemon --metrics-listen ADDR:PORT`:
 * the text exposition format at /metrics, on the daemon's port (http.c,
 * its own thread), beside POST /capture (capture.c). The tracing loop
 * hands in each window's running totals; counters carry over from window
 * to window (a counter only grows while a window is open), so
 * Prometheus' rate() gives op, launch and step rates, and GPU time by
 * kernel.
 */
#define _GNU_SOURCE
#include "fleet/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "lib/clock.h"
#include "fleet/capture.h"
#include "fleet/http.h"
#include "record/gpu_timeline.h"
#include "record/join.h"
#include "attach/keeper.h"
#include "attach/target.h"
#include "ptbpf_agent.h"

#define MAX_PROCS   512
#define MAX_KERNELS 4096

struct mproc {
	int pid;
	char comm[64], rank[32], job[96];
	uint64_t base[2], cur[2]; /* ops, launches */
	bool has_steps;           /* the step signal's counters, while it reads them */
	struct ptbpf_agent_steps steps;
};

struct mkernel {
	int pid;
	char name[160];
	uint64_t base_count, base_ns, cur_count, cur_ns;
};

struct metrics {
	pthread_mutex_t lock;
	struct http_server *http;
	struct http_route routes[2];
	struct mproc procs[MAX_PROCS];
	int nprocs;
	struct mkernel kernels[MAX_KERNELS];
	int nkernels;
	uint64_t windows, lost_base, lost_cur, dropped_series;
	bool window_open;
	struct capture *capture; /* POST /capture, or NULL */
};

static void esc(struct evbuffer *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

static void labels(struct evbuffer *b, const struct mproc *p)
{
	evbuffer_add_printf(b, "pid=\"%d\",comm=\"", p->pid);
	esc(b, p->comm);
	evbuffer_add(b, "\",rank=\"", 8);
	esc(b, p->rank);
	evbuffer_add(b, "\",run_id=\"", 10);
	esc(b, p->job);
	evbuffer_add(b, "\"", 1);
}

static const struct mproc *proc_of(const struct metrics *m, int pid)
{
	for (int i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid)
			return &m->procs[i];
	return NULL;
}

/* One per-kernel counter: GPU seconds, or kernels run. */
static void render_kernels(const struct metrics *m, struct evbuffer *b, const char *metric,
			   const char *help, bool seconds)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s counter\n", metric, help, metric);
	for (int i = 0; i < m->nkernels; i++) {
		const struct mkernel *k = &m->kernels[i];
		const struct mproc *p = proc_of(m, k->pid);

		if (!p)
			continue;
		evbuffer_add_printf(b, "%s{", metric);
		labels(b, p);
		evbuffer_add(b, ",kernel=\"", 9);
		esc(b, k->name);
		if (seconds)
			evbuffer_add_printf(b, "\"} %.9f\n", (k->base_ns + k->cur_ns) / 1e9);
		else
			evbuffer_add_printf(b, "\"} %lu\n",
					    (unsigned long)(k->base_count + k->cur_count));
	}
}

/* One value of the step signal per process that has it. */
static void render_step_value(const struct metrics *m, struct evbuffer *b, const char *metric,
			      const char *type, const char *help, int field)
{
	uint64_t now = clock_mono_ns();
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
	for (int i = 0; i < m->nprocs; i++) {
		const struct ptbpf_agent_steps *st = &m->procs[i].steps;
		double v = field == 0 ? st->steps : field == 1 ? st->loader_ns / 1e9 :
			   field == 2 ? st->optim_ns / 1e9 : field == 4 ? st->loader_n :
			   field == 5 ? st->optim_n : field == 6 ? st->coll_left :
			   field == 7 ? st->coll_wait_ns / 1e9 : field == 8 ? st->coll_entered :
			   field == 9 ? (st->coll_open_ts && now > st->coll_open_ts ?
					 (now - st->coll_open_ts) / 1e9 : 0) :
			   st->steps ? st->recent[(st->steps - 1) % PTBPF_STEPS_RECENT] / 1e9 : 0;

		if (!m->procs[i].has_steps || (field == 3 && !st->steps) ||
		    (field >= 6 && !st->coll_entered))
			continue;
		evbuffer_add_printf(b, "%s{", metric);
		labels(b, &m->procs[i]);
		evbuffer_add_printf(b, "} %.9g\n", v);
	}
}

/* The always-on step signal (user/fleet/step_signal.c reads it from each
 * process's agent): the step-time histogram, and counters. */
static void render_steps(const struct metrics *m, struct evbuffer *b)
{
	static const uint64_t le[PTBPF_STEPS_BUCKETS - 1] = PTBPF_STEPS_BOUNDS_NS;

	evbuffer_add_printf(b, "# HELP ptbpf_step_seconds Step time (ProfilerStep#N regions, or "
			    "from one Optimizer.step end to the next), per process, always on.\n"
			    "# TYPE ptbpf_step_seconds histogram\n");
	for (int i = 0; i < m->nprocs; i++) {
		const struct ptbpf_agent_steps *st = &m->procs[i].steps;
		uint64_t cum = 0;

		if (!m->procs[i].has_steps)
			continue;
		for (int k = 0; k < PTBPF_STEPS_BUCKETS; k++) {
			cum += st->bucket[k];
			evbuffer_add(b, "ptbpf_step_seconds_bucket{", 26);
			labels(b, &m->procs[i]);
			if (k < PTBPF_STEPS_BUCKETS - 1)
				evbuffer_add_printf(b, ",le=\"%g\"} %lu\n", le[k] / 1e9,
						    (unsigned long)cum);
			else
				evbuffer_add_printf(b, ",le=\"+Inf\"} %lu\n", (unsigned long)cum);
		}
		evbuffer_add(b, "ptbpf_step_seconds_sum{", 23);
		labels(b, &m->procs[i]);
		evbuffer_add_printf(b, "} %.9f\n", st->sum_ns / 1e9);
		evbuffer_add(b, "ptbpf_step_seconds_count{", 25);
		labels(b, &m->procs[i]);
		evbuffer_add_printf(b, "} %lu\n", (unsigned long)cum);
	}
	render_step_value(m, b, "ptbpf_steps_total", "counter", "Steps ended, per process, "
			  "always on.", 0);
	render_step_value(m, b, "ptbpf_dataloader_wait_seconds_total", "counter", "Time in "
			  "enumerate(DataLoader)#...__next__ regions, always on.", 1);
	render_step_value(m, b, "ptbpf_dataloader_waits_total", "counter", "enumerate(DataLoader)#"
			  "...__next__ regions ended, always on.", 4);
	render_step_value(m, b, "ptbpf_optimizer_seconds_total", "counter", "Time in "
			  "Optimizer.step#... regions, always on.", 2);
	render_step_value(m, b, "ptbpf_optimizer_steps_total", "counter", "Optimizer.step#... "
			  "regions ended, always on.", 5);
	render_step_value(m, b, "ptbpf_last_step_seconds", "gauge", "The last step's time, "
			  "always on.", 3);
	/* c10d's collectives (any backend): a rank that waits little where
	 * the others wait much is the one they wait for; one whose entered
	 * count lags the others' is the one they wait in a collective for. */
	render_step_value(m, b, "ptbpf_collective_wait_seconds_total", "counter", "Time in c10d "
			  "collectives (entry to end; gloo:*, nccl:*, ... regions), per process, "
			  "always on.", 7);
	render_step_value(m, b, "ptbpf_collectives_total", "counter", "c10d collectives ended, "
			  "always on.", 6);
	render_step_value(m, b, "ptbpf_collectives_entered_total", "counter", "c10d collectives "
			  "entered (the last one's sequence number), always on.", 8);
	render_step_value(m, b, "ptbpf_collective_waiting_seconds", "gauge", "How long the "
			  "oldest collective still open has been waited in (0: none), always on.",
			  9);
}

static void render(struct metrics *m, struct evbuffer *b)
{
	static const char *const counters[2][2] = {
		{ "ptbpf_ops_total", "Ops (ATen ops, with the agent every RecordFunction) recorded" },
		{ "ptbpf_launches_total", "CUDA/HIP kernel and graph launches recorded" },
	};
	struct rusage ru;
	long rss_pages = 0;
	FILE *f;

	for (int c = 0; c < 2; c++) {
		evbuffer_add_printf(b, "# HELP %s %s, per process, in capture windows.\n"
				    "# TYPE %s counter\n", counters[c][0], counters[c][1],
				    counters[c][0]);
		for (int i = 0; i < m->nprocs; i++) {
			evbuffer_add_printf(b, "%s{", counters[c][0]);
			labels(b, &m->procs[i]);
			evbuffer_add_printf(b, "} %lu\n", (unsigned long)(m->procs[i].base[c] +
									  m->procs[i].cur[c]));
		}
	}
	render_steps(m, b);
	render_kernels(m, b, "ptbpf_gpu_kernel_seconds_total",
		       "GPU time by kernel (from the agent's CUPTI records).", true);
	render_kernels(m, b, "ptbpf_gpu_kernels_total", "GPU kernels by name.", false);
	getrusage(RUSAGE_SELF, &ru);
	f = fopen("/proc/self/statm", "re");
	if (f) {
		if (fscanf(f, "%*s %ld", &rss_pages) != 1)
			rss_pages = 0;
		fclose(f);
	}
	evbuffer_add_printf(b,
		"# HELP ptbpf_lost_events_total Events lost (ring buffers full), all windows.\n"
		"# TYPE ptbpf_lost_events_total counter\nptbpf_lost_events_total %lu\n"
		"# HELP ptbpf_windows_total Capture windows that traced a process (counted as each "
		"ends).\n"
		"# TYPE ptbpf_windows_total counter\nptbpf_windows_total %lu\n"
		"# HELP ptbpf_window_open 1 while a capture window is open (probes attached).\n"
		"# TYPE ptbpf_window_open gauge\nptbpf_window_open %d\n"
		"# HELP ptbpf_series_dropped_total Processes or kernels past the metric tables.\n"
		"# TYPE ptbpf_series_dropped_total counter\nptbpf_series_dropped_total %lu\n"
		"# HELP ptbpf_cpu_seconds_total ptbpf's own CPU time, its link keeper's included.\n"
		"# TYPE ptbpf_cpu_seconds_total counter\nptbpf_cpu_seconds_total %.3f\n"
		"# HELP ptbpf_resident_memory_bytes ptbpf's own resident memory.\n"
		"# TYPE ptbpf_resident_memory_bytes gauge\nptbpf_resident_memory_bytes %ld\n",
		(unsigned long)(m->lost_base + m->lost_cur), (unsigned long)m->windows,
		m->window_open ? 1 : 0, (unsigned long)m->dropped_series,
		ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6 +
			keeper_cpu_seconds(),
		rss_pages * sysconf(_SC_PAGESIZE));
}

/* GET /metrics: the page (http.h's handler, on its thread). */
static void on_metrics(void *ctx, const struct http_req *req, struct http_reply *rep)
{
	struct metrics *m = ctx;

	pthread_mutex_lock(&m->lock);
	render(m, rep->body);
	pthread_mutex_unlock(&m->lock);
	if (m->capture)
		capture_render(m->capture, rep->body);
	http_render(req->server, rep->body);
	rep->type = "text/plain; version=0.0.4; charset=utf-8";
}

struct metrics *metrics_start(const char *listen, struct capture *capture, struct web_config *wc,
			      bool insecure_capture, char *err, size_t errlen)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m) {
		snprintf(err, errlen, "metrics: out of memory");
		return NULL;
	}
	pthread_mutex_init(&m->lock, NULL);
	m->capture = capture;
	m->routes[0] = (struct http_route){ "/metrics", HTTP_GET | HTTP_HEAD, false, on_metrics, m };
	m->routes[1] = (struct http_route){ "/capture", HTTP_POST, true, capture_http, capture };
	m->http = http_start(listen, m->routes, capture ? 2 : 1, wc, insecure_capture, err, errlen);
	if (!m->http) {
		metrics_stop(m);
		return NULL;
	}
	return m;
}

bool metrics_loopback_only(const struct metrics *m)
{
	return http_loopback_only(m->http);
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	http_stop(m->http);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void metrics_window(struct metrics *m, bool open, bool traced)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	if (!open) { /* fold this window's totals into the carried ones */
		m->windows += traced;
		for (int i = 0; i < m->nprocs; i++)
			for (int c = 0; c < 2; c++) {
				m->procs[i].base[c] += m->procs[i].cur[c];
				m->procs[i].cur[c] = 0;
			}
		for (int i = 0; i < m->nkernels; i++) {
			m->kernels[i].base_count += m->kernels[i].cur_count;
			m->kernels[i].base_ns += m->kernels[i].cur_ns;
			m->kernels[i].cur_count = m->kernels[i].cur_ns = 0;
		}
		m->lost_base += m->lost_cur;
		m->lost_cur = 0;
	}
	m->window_open = open;
	pthread_mutex_unlock(&m->lock);
}

/* The process's row, made on first sight; NULL if the table is full.
 * With m->lock held. */
static struct mproc *mproc_for(struct metrics *m, const struct target *t)
{
	const char *rank = target_label(t, "RANK"), *job = target_label(t, "TORCHELASTIC_RUN_ID");

	if (!job)
		job = target_label(t, "SLURM_JOB_ID");
	for (int i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == t->pid && !strcmp(m->procs[i].comm, t->comm))
			return &m->procs[i];
	if (m->nprocs == MAX_PROCS) {
		m->dropped_series++;
		return NULL;
	}
	struct mproc *p = &m->procs[m->nprocs++];

	memset(p, 0, sizeof(*p));
	p->pid = t->pid;
	snprintf(p->comm, sizeof(p->comm), "%s", t->comm);
	snprintf(p->rank, sizeof(p->rank), "%s", rank ? rank : "");
	snprintf(p->job, sizeof(p->job), "%s", job ? job : "");
	return p;
}

void metrics_update(struct metrics *m, const struct join *j, const struct gpu_timeline *gt,
		    const struct target *targets,
		    int ntargets, uint64_t lost)
{
	struct join_proc_stats st[256];
	const struct gpu_kernel_stat *ks;
	int n, nk;

	if (!m)
		return;
	n = join_process_stats(j, st, 256);
	nk = gpu_timeline_kernel_stats(gt, &ks);
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < n; i++) {
		const struct target *t = NULL;
		struct mproc *p;

		for (int k = 0; k < ntargets && !t; k++)
			if (targets[k].pid == st[i].pid)
				t = &targets[k];
		if (!t || !(p = mproc_for(m, t)))
			continue;
		p->cur[0] = st[i].ops;
		p->cur[1] = st[i].launches;
	}
	for (int i = 0; i < nk; i++) {
		int k;

		for (k = 0; k < m->nkernels; k++)
			if (m->kernels[k].pid == ks[i].pid &&
			    !strncmp(m->kernels[k].name, ks[i].name, sizeof(m->kernels[k].name) - 1))
				break;
		if (k == m->nkernels) {
			if (m->nkernels == MAX_KERNELS) {
				m->dropped_series++;
				continue;
			}
			memset(&m->kernels[k], 0, sizeof(m->kernels[k]));
			m->kernels[k].pid = ks[i].pid;
			snprintf(m->kernels[k].name, sizeof(m->kernels[k].name), "%s", ks[i].name);
			m->nkernels++;
		}
		m->kernels[k].cur_count = ks[i].count;
		m->kernels[k].cur_ns = ks[i].ns;
	}
	m->lost_cur = lost;
	pthread_mutex_unlock(&m->lock);
}

void metrics_steps(struct metrics *m, const struct target *t, const struct ptbpf_agent_steps *st)
{
	struct mproc *p;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	p = mproc_for(m, t);
	if (p && st) {
		p->steps = *st;
		p->has_steps = true;
	} else if (p) {
		p->has_steps = false;
	}
	pthread_mutex_unlock(&m->lock);
}
