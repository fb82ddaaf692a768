# SPDX-License-Identifier: BSD-2-Clause
"""`ptbpf daemon` over the soak's jobs until enough windows were written,
with a fraction of its windows met by a SIGKILL (then restarted, as a
fleet's supervisor would), a SIGINT (once or twice; restarted) or a
SIGSTOP of a while. Each window is judged from its own lines; between
windows no agent may be mapped in any job."""
import os
import random
import re
import signal
import threading
import time

import classify
import probes
from drive import ACTIONS, Tracer, readable

WINDOW = re.compile(r"^ptbpf: daemon: window (\S+)$")
DELETED = re.compile(r"^ptbpf: daemon: deleted (\S+) \(retention\)")


def seconds(duration):
    """"2s", "1m" -> seconds (ptbpf's --every/--window forms)."""
    m = re.fullmatch(r"(\d+)([smh]?)", duration)
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


class DaemonRun:
    """One daemon process, its windows (each with its own lines), and what
    the soak did to it."""

    def __init__(self, fleet, out_dir, group):
        o = fleet.o
        self.fleet, self.action, self.rc = fleet, None, None
        self.group = group
        self.jobs = [j for j in fleet.jobs if j.group == group]
        self.head, self.windows = [], []
        self.lock = threading.Lock()
        # Windows alone: the always-on step signal keeps an agent in every
        # job between windows by design (tests/test_step_signal.py), which
        # the between-windows check here would take for one left behind.
        argv = [o.ptbpf, "daemon", "--out-dir", out_dir, "--every", o.every, "--window",
                o.window, "--budget", o.budget, "--max-bytes", o.max_bytes, "--ops", o.ops, "-v",
                "--no-step-signal"]
        if o.daemons > 1 or fleet.untraced:
            argv += ["--match-env", "PTBPF_SOAK_GROUP=%d" % group]
        self.tr = Tracer(argv, on_line=self.on_line)
        with fleet.lock:  # judged from here on
            self.number = len(fleet.daemons) + 1
            fleet.daemons.append(self)

    def on_line(self, t, text):
        traced = classify.TRACING.match(text)
        if traced and int(traced.group(1)) in {u.pid for u in self.fleet.untraced}:
            with self.fleet.lock:
                self.fleet.untraced_traced.append("daemon %s: %s" % (getattr(self, "number", "?"), text))
        m = WINDOW.match(text)
        with self.lock:
            if m:
                self.windows.append(dict(path=m.group(1), t=t, lines=[], size=None, end=None,
                                         hung=None))
                return
            if not self.windows:
                self.head.append((t, text))
                return
            w = self.windows[-1]
            w["lines"].append((t, text))
            n = len(self.windows)
        if classify.WROTE.match(text) or "nothing written" in text or "window skipped" in text:
            w["end"] = t
        wrote = classify.WROTE.match(text)
        if wrote:
            path = wrote.group(1)
            w["size"] = os.path.getsize(path) if os.path.exists(path) else None
            self.between_windows(n)

    def between_windows(self, n):
        """Right after a window's end, before the next one can load BPF: no
        agent in any job, and a sample of each job's footprint. This runs
        on the thread that reads the daemon's lines, which may lag behind
        the daemon (a loaded host at the soak's start): the next window may
        have begun though its line is not read yet. A window holds its
        jobs' claims (tests/soak/probes.claim_holders) from before it injects
        to after it unloads, so the check counts only where the daemon
        held no claim both before and after the jobs were looked at
        (on the H200, 2026-11-29, 9 of 202 checks at the soak's start saw
        the next window's agent, its 'tracing' line read with the window's
        own, 0.05 ms apart)."""
        jobs = [j for j in self.jobs if j.alive()]
        # ptbpf lets its claims go last, a few ms after its 'wrote' line
        # (and a daemon's next window may take them 10 ms later).
        deadline = time.monotonic() + 0.1
        while self.tracing_now(jobs):
            if time.monotonic() > deadline:
                return self.skipped("a window held a claim")
            time.sleep(0.005)
        mapped = [j.name for j in jobs if probes.agent_mapped(j.pid)]
        states = {j.name: probes.steady_state(j.pid) for j in jobs}
        if self.tracing_now(jobs):  # the next window began while we looked
            return self.skipped("a window held a claim")
        bw = self.fleet.between_windows
        with self.fleet.lock:
            bw["checked"] += 1
        # Another user's ptbpf (--all, a daemon) may trace a job now.
        foreign = {name: probes.foreign_tracer(j.pid, [self.tr.p.pid]) for j in jobs
                   for name in [j.name] if name in mapped}
        for name, who in foreign.items():
            if who:
                bw.setdefault("foreign", []).append("%s: %s" % (name, who))
        mapped = [name for name in mapped if not foreign[name]]
        if mapped:
            bw["agent_mapped"].append("after %s: %s" % (
                os.path.basename(self.windows[n - 1]["path"]), ", ".join(mapped)))
        for j in jobs:
            if states.get(j.name):
                j.after_clean("w%d" % n, states[j.name])
        self.fleet.sample_untraced("w%d" % n)

    def skipped(self, why):
        bw = self.fleet.between_windows
        with self.fleet.lock:
            bw["skipped"][why] = bw["skipped"].get(why, 0) + 1

    def tracing_now(self, jobs):
        """Whether this daemon holds a claim on one of jobs (a window runs)."""
        holders = probes.claim_holders()
        return any(holders.get(j.pid) == self.tr.p.pid for j in jobs)

    def alive(self):
        return self.tr.p.poll() is None

    def hung_window(self, limit):
        """The open window, if it has been open for longer than limit s."""
        with self.lock:
            w = self.windows[-1] if self.windows else None
        if w and w["end"] is None and not w["hung"] and self.tr.now() - w["t"] > limit:
            return w
        return None


def window_record(w, run, pids):
    """One window judged: written, nothing to trace, skipped, cut (by the
    soak's kill or stop), or unexplained; its false messages and timing."""
    lines = w["lines"]
    said = lambda s: classify.lines_say(lines, s)
    last = w is run.windows[-1]
    if w["hung"]:
        state = "hung: " + w["hung"]
    elif any(classify.WROTE.match(t) for _, t in lines):
        state = "written"
    elif said("no PyTorch process in this window") or said("no PyTorch process traced in "
                                                            "this window"):
        state = "nothing written" + (", stopped by a signal" if said("stopped by a signal")
                                     else "")
    elif said("window skipped"):
        state = "skipped"
    elif last and run.action in ("sigkill", "sigint2"):
        state = "cut by " + run.action
    else:
        state = "unexplained: no 'wrote', exit %s after %s" % (run.rc, run.action)
    early = [t.split("ended early: ", 1)[1] for _, t in lines if "window ended early" in t]
    timing, _ = classify.attach_timing(lines, w["t"])
    ours = [timing.get(p, {}) for p in pids]
    walls = [x.get("wall_ms") for x in ours]
    parts = [x.get("attach_ms") for x in ours]
    events = sum(int(m.group(1)) for _, t in lines
                 for m in [re.search(r"^ptbpf: events by kind:.* total (\d+)$", t)] if m)
    per_event = round(w["size"] / events, 1) if w["size"] and events else None
    return dict(path=w["path"], state=state, size=w["size"], bytes_per_event=per_event,
                gpu_paused=said("GPU timeline paused"),
                ended_early=early[0] if early else None,
                wall_ms=max(walls) if walls and None not in walls else None,
                attach_ms=parts,
                attach_line_ms=max(parts) if parts and None not in parts else None,
                warnings=classify.warnings(lines), unclassified=classify.unclassified(lines),
                cannot_load=[t for _, t in lines if classify.CANNOT_LOAD.match(t)])


def run_outcome(run):
    rc, action = run.rc, run.action
    if rc is None:
        return "hung"
    if rc == 0 and action in ("sigint", "final", "sigint after a hung window"):
        return "ok"
    if rc == -9 and action == "sigkill":
        return "killed"
    if action == "sigint2" and rc in (0, 130, -2):
        return "explained: a second SIGINT leaves at once" if rc == 130 else "ok"
    if action in ("sigint", "final") and rc == -2:
        return "explained: SIGINT before ptbpf set its handler"
    return "unexplained: exit %s after %s" % (rc, action)


def act(run, action, rng):
    """What the soak does to a daemon; returns True if it will exit."""
    if action == "sigkill":
        run.tr.signal(signal.SIGKILL)
    elif action in ("sigint", "sigint2"):
        run.tr.signal(signal.SIGINT)
        if action == "sigint2":
            time.sleep(rng.uniform(0, 0.05))
            run.tr.signal(signal.SIGINT)
    else:
        run.tr.signal(signal.SIGSTOP)
        time.sleep(rng.uniform(0.2, 2.0))
        run.tr.signal(signal.SIGCONT)
        return False
    run.action = action
    return True


def written(fleet):
    return sum(1 for r in fleet.daemons for w in r.windows if w["size"] is not None)


def progress(fleet):
    """A line every 10 windows written, with the rate so far."""
    n = written(fleet)
    if n and n % 10 == 0 and n != fleet.between_windows.get("reported"):
        fleet.between_windows["reported"] = n
        took = time.monotonic() - fleet.daemon_t0
        print("daemon: %d windows written in %.0f s (%.1f s each)" % (n, took, took / n),
              flush=True)


def drive_one(fleet, run, rng, deadline):
    """Until the daemon exits: plan an action at a random moment of a
    fraction of its windows, end it once enough windows were written."""
    o = fleet.o
    # A moment in the window's attach, tracing, detach, or the gap after.
    span = max(seconds(o.every), seconds(o.window) + 2)
    seen, planned = 0, None
    while run.alive():
        now = time.monotonic()
        progress(fleet)
        if len(run.windows) > seen:
            seen = len(run.windows)
            if planned is None and rng.random() < o.kill_fraction:
                planned = (now + rng.uniform(0, span), rng.choice(ACTIONS))
                print("daemon window %d: %s planned in %.1f s" % (
                    written(fleet) + 1, planned[1], planned[0] - now), flush=True)
        hung = run.hung_window(seconds(o.window) + o.hang_seconds)
        if hung:
            hung["hung"] = "open %.0f s (window %s); blocked in %s" % (
                run.tr.now() - hung["t"], o.window, probes.blocked_in(run.tr.p.pid))
            print("daemon window %s HUNG: %s" % (os.path.basename(hung["path"]), hung["hung"]),
                  flush=True)
            run.tr.signal(signal.SIGINT)
            run.action = "sigint after a hung window"
            break
        if planned and now >= planned[0]:
            action, planned = planned[1], None
            if act(run, action, rng):
                break
        if written(fleet) >= o.windows or now > deadline:
            run.tr.signal(signal.SIGINT)
            run.action = "final"
            break
        time.sleep(0.05)
    run.rc = run.tr.wait(timeout=120)
    if run.rc is None:
        run.tr.signal(signal.SIGKILL)
        run.tr.wait(timeout=60)
    with open(os.path.join(fleet.work, "daemon-run%d.log" % run.number), "w") as f:
        f.write("".join("%9.3f %s\n" % (t, text) for t, text in run.tr.lines))


def run_daemon(fleet):
    """--daemons daemons at once, each over its group of jobs, each
    restarted after a kill until the windows written (by all) are enough."""
    o = fleet.o
    deadline = time.monotonic() + o.max_seconds
    fleet.daemon_t0 = time.monotonic()
    groups = sorted({j.group for j in fleet.jobs})
    threads = [threading.Thread(target=daemon_loop, args=(fleet, g, deadline)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    judge(fleet)


def daemon_loop(fleet, group, deadline):
    o = fleet.o
    out_dir = os.path.join(fleet.work, "daemon" if o.daemons == 1 else "daemon%d" % group)
    rng = random.Random(o.seed * 31 + 7 + group)
    while True:
        run = DaemonRun(fleet, out_dir, group)
        drive_one(fleet, run, rng, deadline)
        print("daemon run %d (jobs %s): exit %s after %s; %d windows written in all" % (
            run.number, ",".join(j.name for j in run.jobs), run.rc, run.action, written(fleet)),
            flush=True)
        if run.action == "final" or written(fleet) >= o.windows or time.monotonic() > deadline:
            break
        time.sleep(rng.uniform(0, 1.0))


def judge(fleet):
    """Every window and daemon run judged, once all are over."""
    pids = [j.pid for j in fleet.jobs]
    fleet.daemons.sort(key=lambda r: r.number)
    deleted = {m.group(1) for r in fleet.daemons for w in r.windows for _, t in w["lines"]
               for m in [DELETED.match(t)] if m}
    every = fleet.o.validate_every
    alive = all(j.alive() for j in fleet.jobs)
    for i, run in enumerate(fleet.daemons):
        run.outcome = run_outcome(run)
        run.false = list(run.tr.dead_refusals)
        for w in run.windows:
            rec = window_record(w, run, [j.pid for j in run.jobs])
            rec["run"], rec["group"] = i, run.group
            # A SIGKILLed daemon says nothing of the window it had open (its
            # .partial stays, unsaid); the run's other statuses are not the
            # window's.
            killed = -9 if run.rc == -9 else None
            rec["false"] = classify.false_messages(w["lines"], killed, pids, deleted)
            rec["agent_buffers"] = classify.agent_buffers(w["lines"])
            # "traced": true where the window was stopped before it attached.
            none = classify.lines_say(w["lines"], "no PyTorch process in this window") or (
                classify.lines_say(w["lines"], "no PyTorch process traced in this window") and
                "signal" not in rec["state"])
            if alive and none:
                rec["false"].append("'no PyTorch process in this window' while the soak's %d "
                                    "jobs ran" % len(pids))
            others = classify.pids_named(w["lines"]) - set(pids)
            rec["false_others"] = [x for x in classify.false_messages(w["lines"], killed, others)
                                   if x.startswith("pid ") and "forked" not in x]
            partial = w["path"] + ".partial"
            if rec["state"] == "written" and every and len(fleet.windows) % every == 0 and \
                    os.path.exists(w["path"]):
                check = w["path"]
            else:
                check = partial if os.path.exists(partial) else None
            if check:
                why = readable(fleet.o.ptbpf, check)
                if why:
                    fleet.unreadable.append("%s: %s" % (os.path.basename(check), why))
            fleet.windows.append(rec)
