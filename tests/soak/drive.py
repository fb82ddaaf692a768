# SPDX-License-Identifier: BSD-2-Clause
"""ptbpf driven as a fleet drives it, over the soak's running jobs: attach
and detach cycles (`ptbpf -p PID`, one at a time per pid, several pids at
once), or `ptbpf daemon` windows; in both, a fraction of the runs is
killed (SIGKILL), interrupted (SIGINT, once or twice) or stopped for a
while (SIGSTOP, SIGCONT) at a random moment. Each run is judged by
classify.py; the jobs are looked at from outside (probes.py) after each."""
import os
import random
import signal
import statistics
import subprocess
import threading
import time

import classify
import probes

ACTIONS = ("sigkill", "sigint", "sigint2", "sigstop")


class Tracer:
    """A ptbpf process whose stderr lines are kept with their time (s
    since its start); on_line(t, text) sees each as it comes."""

    def __init__(self, argv, on_line=None):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL)
        self.lines, self.dead_refusals, self.hung, self.signals = [], [], None, []
        self.tracing = threading.Event()
        self.on_line = on_line
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.p.stderr:
            t = time.monotonic() - self.t0
            text = raw.decode(errors="replace").rstrip("\n")
            if classify.already_traced_by_the_dead(text):
                self.dead_refusals.append(text)
            self.lines.append((t, text))
            if text.startswith("ptbpf: tracing pid"):
                self.tracing.set()
            if self.on_line:
                self.on_line(t, text)

    def signal(self, sig):
        if self.p.poll() is None:
            try:
                self.p.send_signal(sig)
                self.signals.append("%s at %.2f s" % (signal.Signals(sig).name, self.now()))
            except ProcessLookupError:
                pass

    def sleep_until(self, t):
        """Sleeps until t s after the start, or until the process exits."""
        while self.p.poll() is None:
            left = self.t0 + t - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.02))

    def wait(self, timeout):
        """The exit status, or None if it is still running after timeout."""
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self.reader.join(timeout=10)
        return rc

    def now(self):
        return time.monotonic() - self.t0


def readable(ptbpf, path):
    """`ptbpf report` reads the trace (a cut one too): None, or why not."""
    r = subprocess.run([ptbpf, "report", path, "--json"], capture_output=True, text=True,
                       timeout=300)
    return None if r.returncode == 0 else "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:])


class Fleet:
    """What the drivers share: options, counters, and the results."""

    def __init__(self, opts, jobs, work, untraced=()):
        self.o, self.jobs, self.work = opts, jobs, work
        self.untraced = list(untraced)  # never traced: sampled beside each clean detach
        self.untraced_traced = []  # daemon lines that say otherwise
        self.lock = threading.Lock()
        self.cycles, self.windows, self.daemons = [], [], []
        self.issued = 0
        self.walls = []
        self.unreadable = []
        self.between_windows = dict(checked=0, agent_mapped=[], skipped={})

    def sample_untraced(self, key):
        for u in self.untraced:
            state = probes.steady_state(u.pid)
            if state:
                u.after_clean(key, state)

    def take_cycle(self, deadline):
        with self.lock:
            if self.issued >= self.o.cycles or time.monotonic() > deadline:
                return None
            self.issued += 1
            return self.issued

    def attach_estimate(self):
        with self.lock:
            recent = self.walls[-20:]
        return statistics.median(recent) / 1e3 if recent else 1.0

    def record(self, rec):
        with self.lock:
            self.cycles.append(rec)
            if rec.get("wall_ms") and rec["outcome"] == "ok":
                self.walls.append(rec["wall_ms"])

    def check_trace(self, path, n):
        every = self.o.validate_every
        if every and n % every == 0 and os.path.exists(path):
            why = readable(self.o.ptbpf, path)
            if why:
                self.unreadable.append("%s: %s" % (os.path.basename(path), why))


def pick_action(rng, fraction):
    return rng.choice(ACTIONS) if rng.random() < fraction else "stop"


def stop_run(tr, action, dur, use_d, rng, est, hang):
    """Ends the run as action says; returns its exit status (None if it
    would not exit). A run not 'tracing', or not gone, within hang seconds
    is hung: tr.hung says where it waited (then it is stopped, or killed)."""
    if action == "sigkill":
        tr.sleep_until(rng.uniform(0, est + dur))
        tr.signal(signal.SIGKILL)
    elif action in ("sigint", "sigint2"):
        tr.sleep_until(rng.uniform(0, est))
        tr.signal(signal.SIGINT)
        if action == "sigint2":  # later than 20 ms: not the first one again
            time.sleep(rng.uniform(0.025, 0.075))
            tr.signal(signal.SIGINT)
    else:
        if action == "sigstop":
            tr.sleep_until(rng.uniform(0, est + dur))
            tr.signal(signal.SIGSTOP)
            time.sleep(rng.uniform(0.1, 1.5))
            tr.signal(signal.SIGCONT)
        if not use_d:
            if not tr.tracing.wait(timeout=hang) and tr.p.poll() is None:
                tr.hung = "no 'tracing' within %d s; blocked in %s" % (
                    hang, probes.blocked_in(tr.p.pid))
            tr.sleep_until(tracing_at(tr) + dur)
            tr.signal(signal.SIGINT)
    rc = tr.wait(timeout=hang + dur)
    if rc is None:
        tr.hung = "no exit within %d s; blocked in %s" % (hang + dur, probes.blocked_in(tr.p.pid))
        tr.signal(signal.SIGKILL)
        tr.wait(timeout=60)
    return rc


def tracing_at(tr):
    """When the run said it was tracing (or now, if it has not)."""
    for t, text in list(tr.lines):
        if text.startswith("ptbpf: tracing pid"):
            return t
    return tr.now()


def one_cycle(fleet, job, n, rng, action=None):
    o = fleet.o
    dur = rng.uniform(o.dur_min, o.dur_max)
    action = action or pick_action(rng, o.kill_fraction)
    use_d = action == "stop" and dur >= 1 and rng.random() < 0.5
    if use_d:
        dur = float(round(dur))  # -d takes whole seconds
    out = os.path.join(fleet.work, "c%05d.pftrace" % n)
    argv = [o.ptbpf, "-p", str(job.pid), "-o", out, "-v", "--ops", o.ops,
            "--gpu-timeline", o.gpu_timeline]
    if use_d:
        argv += ["-d", "%d" % dur]
    before = probes.agent_mapped(job.pid)
    t0 = time.time()
    started = time.strftime("%H:%M:%S", time.gmtime(t0)) + ".%03d" % (t0 * 1000 % 1000)
    tr = Tracer(argv)
    rc = stop_run(tr, action, dur, use_d, rng, fleet.attach_estimate(), o.hang_seconds)
    after = probes.agent_mapped(job.pid)
    lines = list(tr.lines)
    timing, bpf_ms = classify.attach_timing(lines)
    buffers = classify.agent_buffers(lines)
    rec = dict(n=n, pid=job.pid, job=job.name, action=action, dur=round(dur, 2), use_d=use_d,
               rc=rc, agent_buffers=buffers, outcome="hung: " + tr.hung if tr.hung else classify.outcome(
                   rc, lines, action, job.pid),
               bpf_ms=bpf_ms, wall_ms=timing.get(job.pid, {}).get("wall_ms"),
               attach_ms=timing.get(job.pid, {}).get("attach_ms"),
               warnings=classify.warnings(lines), unclassified=classify.unclassified(lines),
               false=classify.false_messages(lines, rc, [job.pid]) + tr.dead_refusals,
               agent_before=before, agent_after=after, signals=tr.signals,
               last_line=lines[-1][1][:200] if lines else None)
    said_cannot = any(classify.CANNOT_LOAD.match(t) for _, t in lines)
    if said_cannot and after and not before:
        rec["false"].append("pid %d: 'cannot load the agent', and the agent is mapped after "
                            "ptbpf left" % job.pid)
    rec["agent_left"] = rec["outcome"] == "ok" and after and not any(
        classify.STAYS.search(t) for _, t in lines)
    if rec["agent_left"]:
        # Another user's ptbpf (--all, a daemon) may trace the job now.
        rec["foreign"] = probes.foreign_tracer(job.pid)
        rec["agent_left"] = not rec["foreign"]
    if (o.all_logs or rec["outcome"] != "ok" or rec["false"] or rec["agent_left"]
            or rec["warnings"]):
        with open(os.path.join(fleet.work, "cycle%05d.log" % n), "w") as f:
            f.write("%s\n%s: %s; started %s UTC\n" % (" ".join(argv), action,
                                                       ", ".join(tr.signals), started))
            f.write("".join("%9.3f %s\n" % (t, text) for t, text in lines))
    for path in (out, out + ".partial"):
        if os.path.exists(path):
            rec["trace_bytes"] = os.path.getsize(path)
            fleet.check_trace(path, n)
            if not o.keep_traces:
                os.unlink(path)
    if rec["outcome"] == "ok":
        state = probes.steady_state(job.pid)
        if state:
            rec["rss_kb"] = state["rss_kb"]
            job.after_clean(n, state)
            fleet.sample_untraced(n)
    return rec


def progress_line(rec, total):
    extra = ""
    if rec["false"]:
        extra += " FALSE: " + " | ".join(rec["false"])
    if rec["agent_left"]:
        extra += " AGENT LEFT MAPPED"
    return "cycle %d/%d %s pid %d %s%s rc=%s %s attach %s ms%s" % (
        rec["n"], total, rec["job"], rec["pid"], rec["action"],
        " -d %d" % rec["dur"] if rec["use_d"] else " %.2fs" % rec["dur"], rec["rc"],
        rec["outcome"], "%.0f" % rec["wall_ms"] if rec["wall_ms"] else "-", extra)


def cycle_worker(fleet, job, deadline):
    rng = random.Random(fleet.o.seed * 1000003 + job.pid)
    o = fleet.o
    while job.alive():
        n = fleet.take_cycle(deadline)
        if n is None:
            return
        time.sleep(rng.uniform(o.gap_min, o.gap_max))
        rec = one_cycle(fleet, job, n, rng)
        fleet.record(rec)
        print(progress_line(rec, o.cycles), flush=True)


def run_cycles(fleet):
    deadline = time.monotonic() + fleet.o.max_seconds
    threads = [threading.Thread(target=cycle_worker, args=(fleet, j, deadline), daemon=True)
               for j in fleet.jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def final_cleanup(fleet):
    """A killed ptbpf leaves its agent mapped (switched off) until the next
    one unloads it: a plain cycle on each job whose agent is mapped."""
    done = []
    for job in fleet.jobs:
        if job.alive() and probes.agent_mapped(job.pid):
            rec = one_cycle(fleet, job, 900000 + job.pid, random.Random(job.pid), "stop")
            rec["final_cleanup"] = True
            fleet.record(rec)
            print("cleanup " + progress_line(rec, fleet.o.cycles), flush=True)
            done.append(job.name)
    return done

