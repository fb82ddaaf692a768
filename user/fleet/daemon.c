// SPDX-License-Identifier: BSD-2-Clause
/*
 * `ptbpf daemon`: fleet mode. Every --every it opens a window of --window
 * seconds in which every process that maps libtorch is traced (--all), into
 * its own file in --out-dir; between windows no probe is attached. It also
 * captures on demand: SIGUSR1, a file named "capture-now" in --out-dir,
 * or POST /capture on the metrics server (capture.c: Alertmanager's
 * webhook among others), for the processes the trigger names, or when the
 * always-on layer (step_signal.c) sees a slow step.
 * Windows can start at epoch multiples of --every (--align), so every host
 * of a job captures the same steps. The directory is kept under
 * --max-bytes (and --keep files), oldest first, and a window is skipped
 * rather than fill the disk. Between windows the always-on layer keeps
 * the agents' step signals on and reads them (step_signal.c); nothing else is
 * kept in memory but the metrics, so a restarted daemon simply goes on.
 */
#define _GNU_SOURCE
#include "fleet/daemon.h"
#include "lib/files.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "attach/inject.h"
#include "fleet/capture.h"
#include "fleet/http.h"
#include "fleet/metrics.h"
#include "fleet/step_signal.h"
#include "fleet/web_config.h"

#define TRIGGER_FILE "capture-now"

static volatile sig_atomic_t triggered;

static void on_usr1(int sig)
{
	(void)sig;
	triggered = 1;
}

struct file {
	char name[256];
	time_t mtime;
	off_t size;
};

static int by_age(const void *a, const void *b)
{
	const struct file *x = a, *y = b;

	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* ptbpf-*.pftrace files of dir, oldest first; their count, or -1. */
static int list_traces(const char *dir, struct file **out, uint64_t *total)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct file *f = NULL;
	int n = 0, cap = 0;

	*total = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char path[4096];
		struct stat st;

		if (strncmp(de->d_name, "ptbpf-", 6) || len < 9 || len >= sizeof(f->name) ||
		    strcmp(de->d_name + len - 8, ".pftrace"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			struct file *g = realloc(f, (cap = cap ? cap * 2 : 64) * sizeof(*f));

			if (!g)
				break;
			f = g;
		}
		snprintf(f[n].name, sizeof(f[n].name), "%s", de->d_name);
		f[n].mtime = st.st_mtime;
		f[n].size = st.st_size;
		*total += st.st_size;
		n++;
	}
	closedir(d);
	qsort(f, n, sizeof(*f), by_age);
	*out = f;
	return n;
}

/* Deletes the oldest traces until the rest fit max_bytes and keep. */
static void retention(const struct options *opt)
{
	struct file *f = NULL;
	uint64_t total;
	int n = list_traces(opt->out_dir, &f, &total);

	for (int i = 0; i < n && (total > opt->max_bytes || (opt->keep && n - i > (int)opt->keep));
	     i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", opt->out_dir, f[i].name);
		if (!unlink(path)) {
			total -= f[i].size;
			log_msg("daemon: deleted %s (retention)\n", path);
		}
	}
	free(f);
}

/* Room for one more window: at most half of max_bytes, and the file
 * system keeps 5% free besides. */
static bool disk_ok(const struct options *opt)
{
	struct statvfs v;
	uint64_t free_bytes, reserve;

	if (statvfs(opt->out_dir, &v))
		return false;
	free_bytes = (uint64_t)v.f_bavail * v.f_frsize;
	reserve = (uint64_t)v.f_blocks * v.f_frsize / 20;
	return free_bytes > reserve + opt->max_bytes / 2;
}

static uint64_t realtime_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

static int local_trigger(struct capture_req *r, enum capture_source source, const char *reason)
{
	memset(r, 0, sizeof(*r));
	r->source = source;
	snprintf(r->reason, sizeof(r->reason), "%s", reason);
	return 1;
}

/* Waits until `when` (REALTIME seconds) or a trigger: 1 if triggered
 * (*r says by what), 0 at `when`, -1 once stopping. */
static int wait_until(const struct options *opt, struct capture *c, struct step_signal *st,
		      uint64_t when, struct capture_req *r, volatile sig_atomic_t *stop)
{
	char trigger[4096];

	snprintf(trigger, sizeof(trigger), "%s/" TRIGGER_FILE, opt->out_dir);
	while (!*stop) {
		if (triggered) {
			triggered = 0;
			return local_trigger(r, CAPTURE_SIGNAL, "SIGUSR1");
		}
		if (!unlink(trigger))
			return local_trigger(r, CAPTURE_FILE, TRIGGER_FILE " file");
		step_signal_tick(st);
		log_limited_flush(&http_refusals, false);
		if (capture_take(c, r))
			return 1;
		if (realtime_s() >= when)
			return 0;
		/* A thread an injection could not stop is let go as soon
		 * as it stops (attach/inject.h): look often while one is. */
		nanosleep(&(struct timespec){ 0, inject_reap() ? 10000000 : 200000000 }, NULL);
	}
	return -1;
}

/* The output folder, made if need be: 0, or 1 with one line why. */
static int out_dir_ok(const struct options *opt)
{
	if (mkdir(opt->out_dir, 0750) && errno != EEXIST) {
		log_msg("daemon: cannot create %s: %s\n", opt->out_dir, strerror(errno));
		return 1;
	}
	if (access(opt->out_dir, W_OK)) {
		log_msg("daemon: cannot write into %s: %s\n", opt->out_dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* A window's name in use: its trace, or the unfinished one a killed
 * daemon left (outfile_open refuses to replace either). */
static bool name_taken(const char *path)
{
	char tmp[4096 + sizeof(OUTFILE_SUFFIX)];

	snprintf(tmp, sizeof(tmp), "%s" OUTFILE_SUFFIX, path);
	return !access(path, F_OK) || !access(tmp, F_OK);
}

/* The metrics port (with the trigger queue, and the web config's TLS and
 * users): 0, or 1 with one line said. */
static int start_port(const struct options *opt, struct capture **c, struct web_config **wc,
		      struct metrics **m)
{
	char err[512];

	if ((opt->metrics_listen[0] || opt->slow_k || opt->hang_k) && !(*c = capture_new(opt))) {
		log_msg("daemon: out of memory\n");
		return 1;
	}
	if (opt->web_config[0] && !(*wc = web_config_load(opt->web_config, err, sizeof(err)))) {
		log_msg("daemon: %s\n", err);
		return 1;
	}
	if (opt->metrics_listen[0] && !(*m = metrics_start(opt->metrics_listen, *c, *wc,
							    opt->insecure_capture, err,
							    sizeof(err)))) {
		log_msg("daemon: %s\n", err);
		return 1;
	}
	if (*m && !metrics_loopback_only(*m) && !web_config_has_users(*wc) &&
	    !opt->insecure_capture)
		log_msg("daemon: %s is not a loopback address: POST /capture answers loopback "
			"clients only (403 to others), as the port has no users (--web-config's "
			"basic_auth_users); --insecure-capture takes triggers from anyone\n",
			opt->metrics_listen);
	return 0;
}

/* One window, counted where it traced a process. */
static void one_window(const struct options *opt, daemon_window_fn window, struct metrics *m,
		       struct capture *c, const struct capture_req *trig, const char *host)
{
	char path[4096], stamp[32];
	time_t now = time(NULL);
	bool traced;

	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime(&now));
	snprintf(path, sizeof(path), "%s/ptbpf-%s-%s%s.pftrace", opt->out_dir, host, stamp,
		 trig ? "-triggered" : "");
	/* Same second: a window before, or a killed daemon's unfinished
	 * one (FILE.partial), keeps its name. */
	for (int k = 2; name_taken(path) && k < 100; k++)
		snprintf(path, sizeof(path), "%s/ptbpf-%s-%s%s-%d.pftrace", opt->out_dir,
			 host, stamp, trig ? "-triggered" : "", k);
	/* Started before it is said: a request that follows the line
	 * meets --min-gap. */
	capture_window_started(c, trig);
	if (trig)
		log_msg("daemon: window %s (%s: %s)\n", path, capture_source_name(trig->source),
			trig->reason);
	else
		log_msg("daemon: window %s\n", path);
	traced = window(opt, path, m, trig) > 0;
	capture_window_ended(c, trig, traced);
}

int daemon_run(const struct options *opt, daemon_window_fn window, volatile sig_atomic_t *stop)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct metrics *m = NULL;
	struct capture *c = NULL;
	struct web_config *wc = NULL;
	struct step_signal *st = NULL;
	struct capture_req trig;
	uint64_t next;
	char host[64] = "host";
	int why, rc = 1;

	/* One malloc arena for the port's thread too: malloc_trim gives the
	 * main arena's free top back, not another arena's (glibc), so a burst
	 * of 1 MiB bodies would stay resident (+1.1 MB in 15 such). */
	mallopt(M_ARENA_MAX, 1);
	if (out_dir_ok(opt) || start_port(opt, &c, &wc, &m))
		goto out;
	if (!opt->no_step_signal && !opt->no_agent && !(st = step_signal_new(opt, c, m)))
		goto out;
	sigaction(SIGUSR1, &sa, NULL);
	gethostname(host, sizeof(host) - 1);
	retention(opt);
	next = realtime_s();
	if (opt->align)
		next = (next / opt->every_s + 1) * opt->every_s;
	log_msg("daemon: a %lus window every %lus into %s%s%s%s%s\n",
		(unsigned long)opt->window_s, (unsigned long)opt->every_s, opt->out_dir,
		opt->align ? ", epoch-aligned" : "", m ? "; metrics at http" : "",
		m && web_config_tls(wc) ? "s://" : m ? "://" : "", m ? opt->metrics_listen : "");
	if (st) {
		char slow[96] = "";

		if (opt->slow_k)
			snprintf(slow, sizeof(slow), "; a window when a step takes over %gx the "
				 "median of the %u before it", opt->slow_k, (unsigned)opt->slow_w);
		log_msg("daemon: step signal on%s%s\n", opt->keep_graphs ? ", CUDA graphs' "
			"capture map kept" : "", slow);
	}
	if (!st && opt->hang_k)
		log_msg("daemon: no hang capture (--hang): it reads the step signal, which %s "
			"leaves out\n", opt->no_agent ? "--no-agent" : "--no-step-signal");
	else if (st && opt->hang_k)
		log_msg("daemon: a capture of a job's ranks when one's step or collective has "
			"lasted over max(%gx its median step, %lu s) (--hang)\n", opt->hang_k,
			(unsigned long)opt->hang_floor_s);
	while ((why = wait_until(opt, c, st, next, &trig, stop)) >= 0) {
		if (!why) /* scheduled: the next one is one period on (skipping missed ones) */
			while (next <= realtime_s())
				next += opt->every_s;
		if (!disk_ok(opt)) {
			log_msg("daemon: window%s%s skipped: %s has less than 5%% + %lu MB "
				"free\n", why ? " for " : "", why ? trig.reason : "", opt->out_dir,
				(unsigned long)(opt->max_bytes / 2 >> 20));
			continue;
		}
		one_window(opt, window, m, c, why ? &trig : NULL, host);
		retention(opt);
	}
	rc = 0;
out:
	step_signal_free(st);
	metrics_stop(m);
	log_limited_flush(&http_refusals, true);
	capture_free(c);
	web_config_free(wc);
	return rc;
}
