# SPDX-License-Identifier: BSD-2-Clause
"""What each attach leaves in a job's memory, by what ptbpf switched on.

usage: attach_rss.py [--kind graphs] [--jobs 2] [--rounds 3] [--per-block 25]
                     [--variants default,gpu-off,probes,no-agent,killed,sigint2,none] [--ptbpf build/ptbpf]

Starts --jobs soak jobs (tests/soak/jobs.py KIND; the first without
profiler sessions of its own, the others with one every 3 s), then in each
round runs each variant's block in a shuffled order: --per-block attaches
of `ptbpf -p PID`, stopped 0.2 s into tracing, to every job at once with the variant's options
("none": the same time without ptbpf; "killed": SIGKILL instead of
Ctrl-C, "sigint2": Ctrl-C twice; what those leave stays until the next
clean detach, and the run ends with one). After each block the jobs pause,
give freed memory back (gc, malloc_trim) and their RSS is read: the
growth that is left is memory still held. Prints kB per attach for each
variant and job (median over the rounds, and each round's), and the
mappings that grew most over the whole run."""
import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "soak"))
import probes  # noqa: E402

VARIANTS = {"default": [], "gpu-off": ["--gpu-timeline", "off"], "probes": ["--ops", "probes"],
            "no-agent": ["--no-agent"], "killed": ["KILL"],
            "killed-gpu-off": ["KILL", "--gpu-timeline", "off"],
            "sigint2": ["INT2"], "none": None}


class Job:
    def __init__(self, py, kind, device, sessions, seed, work):
        self.cue = os.path.join(work, "job%d" % seed)
        os.makedirs(self.cue)
        self.err = open(os.path.join(self.cue, "stderr"), "w")
        self.p = subprocess.Popen(
            [py, os.path.join(ROOT, "tests", "soak", "jobs.py"), kind, "--device", device,
             "--seed", str(seed), "--session-every", str(sessions), "--cue", self.cue],
            stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL, text=True)
        self.sessions = sessions
        for line in self.p.stdout:
            if line.startswith("ready"):
                break
        else:
            sys.exit("job did not start: %s" % open(self.err.name).read()[-2000:])
        self.pid = self.p.pid
        threading.Thread(target=lambda: [print("  job %d: %s" % (self.pid, line.strip()[:300]))
                                         for line in self.p.stdout], daemon=True).start()

    def trimmed_rss(self):
        """RSS (kB) with no session running and freed memory given back."""
        open(os.path.join(self.cue, "pause"), "w").close()
        quiet = os.path.join(self.cue, "quiet")
        deadline = time.time() + 120
        while not os.path.exists(quiet) and time.time() < deadline:
            time.sleep(0.05)
        rss = probes.steady_state(self.pid)["rss_kb"]
        os.unlink(os.path.join(self.cue, "pause"))
        while os.path.exists(quiet) and time.time() < deadline:
            time.sleep(0.05)
        return rss


def attach_block(o, jobs, opts, n, work):
    """n attaches to each job, all jobs at once; failures counted. "KILL"
    in opts: SIGKILL instead of Ctrl-C (the agent finds ptbpf gone)."""
    failed = 0
    sig, twice = signal.SIGINT, False
    if opts and opts[0] == "KILL":
        opts, sig = opts[1:], signal.SIGKILL
    elif opts and opts[0] == "INT2":
        opts, twice = opts[1:], True
    for k in range(n):
        if opts is None:
            time.sleep(0.6)
            continue
        runs = [subprocess.Popen([o.ptbpf, "-p", str(j.pid), "--force", "-o",
                                  os.path.join(work, "t%d.pftrace" % j.pid)] + opts,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for j in jobs]
        for r in runs:  # 0.2 s of tracing, then Ctrl-C, as a short window
            r.head = []
            for line in r.stderr:
                r.head.append(line)
                if line.startswith("ptbpf: tracing pid"):
                    break
        time.sleep(0.2)
        for r in runs:
            r.send_signal(sig)
        if twice:
            time.sleep(0.01)
            for r in runs:
                r.send_signal(sig)
        for r in runs:
            _, err = r.communicate(timeout=120)
            if r.returncode and not (sig == signal.SIGKILL and r.returncode == -9) and not (
                    twice and r.returncode == 130):
                failed += 1
                if failed <= 3:
                    print("  ptbpf failed (%d): %s" % (r.returncode, ("".join(r.head) + err)
                                                       .strip()[-300:]), flush=True)
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", default="graphs")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-block", type=int, default=25)
    ap.add_argument("--variants", default="default,gpu-off,probes,no-agent,killed,sigint2,none")
    ap.add_argument("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    ap.add_argument("--python", default=os.environ.get("PTBPF_TEST_PYTHON", "/usr/bin/python3"))
    ap.add_argument("--seed", type=int, default=1)
    o = ap.parse_args()
    names = o.variants.split(",")
    for v in names:
        if v not in VARIANTS:
            sys.exit("--variants: %s: one of %s" % (v, ", ".join(VARIANTS)))
    work = tempfile.mkdtemp(prefix="attach-rss-")
    jobs = [Job(o.python, o.kind, o.device, 100000 if i == 0 else 3, i + 1, work)
            for i in range(o.jobs)]
    rng = random.Random(o.seed)
    try:
        # One attach of each kind first: what the first one loads stays.
        untouched = {j.pid: j.trimmed_rss() for j in jobs}
        attach_block(o, jobs, [], 1, work)
        attach_block(o, jobs, ["--ops", "probes"], 1, work)
        once = {j.pid: j.trimmed_rss() for j in jobs}
        print("the first two attaches left: %s" % ", ".join(
            "job %d %+.1f MB" % (p, (once[p] - untouched[p]) / 1024) for p in once), flush=True)
        first = {j.pid: probes.rss_by_mapping(j.pid) for j in jobs}
        grow = {(v, j.pid): [] for v in names for j in jobs}
        for rnd in range(o.rounds):
            order = names[:]
            rng.shuffle(order)
            for v in order:
                before = {j.pid: j.trimmed_rss() for j in jobs}
                t0 = time.time()
                failed = attach_block(o, jobs, VARIANTS[v], o.per_block, work)
                after = {j.pid: j.trimmed_rss() for j in jobs}
                for j in jobs:
                    grow[(v, j.pid)].append((after[j.pid] - before[j.pid]) / o.per_block)
                print("round %d %-8s %4.0f s%s: %s" % (
                    rnd, v, time.time() - t0, " (%d failed)" % failed if failed else "",
                    ", ".join("job %d (%s) %+.1f kB/attach" % (
                        j.pid, "sessions" if j.sessions < 1000 else "no sessions",
                        grow[(v, j.pid)][-1]) for j in jobs)), flush=True)
        print("\nkB of RSS left per attach (trimmed), median over %d rounds of %d:" % (
            o.rounds, o.per_block))
        for v in names:
            for j in jobs:
                g = grow[(v, j.pid)]
                print("  %-8s %-11s %+7.1f  (rounds %s)" % (
                    v, "sessions" if j.sessions < 1000 else "no sessions", statistics.median(g),
                    ", ".join("%+.1f" % x for x in g)))
        # A clean attach last: an agent a kill left loaded goes with it.
        attach_block(o, jobs, [], 1, work)
        for j in jobs:
            end = j.trimmed_rss()
            print("job %d: %+.1f MB since the first two attaches (%+.1f MB since untouched)" % (
                j.pid, (end - once[j.pid]) / 1024, (end - untouched[j.pid]) / 1024))
            print("grown most since the first attaches, job %d: %s" % (j.pid, ", ".join(
                "%s %+.1f MB" % (k, kb / 1024) for kb, k in
                probes.rss_growth_by_mapping(first[j.pid], probes.rss_by_mapping(j.pid), 4))))
    finally:
        for j in jobs:
            open(os.path.join(j.cue, "end"), "w").close()
        for j in jobs:
            try:
                j.p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                j.p.kill()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
