# SPDX-License-Identifier: BSD-2-Clause
"""What each attach leaves in a job's memory, by what ptbpf switched on
and how it ended.

usage: attach_rss.py [--kind graphs] [--jobs 2] [--rounds 3] [--per-block 25]
                     [--variants V,V...] [--ptbpf build/ptbpf] [--heap-strings N]

Starts --jobs soak jobs (tests/soak/jobs.py KIND; the first without
profiler sessions of its own, the others with one every 3 s), then in each
round runs each variant's block in a shuffled order: --per-block attaches
of `ptbpf -p PID` to every job at once. Variants (default: all but the
last four): default, gpu-off (`--gpu-timeline off`), probes (`--ops
probes`), no-agent, none (the same time without ptbpf), each stopped by
Ctrl-C 0.2 s into tracing; killed and killed-gpu-off (SIGKILL instead),
sigint2 (Ctrl-C twice), early-int (Ctrl-C at a random moment of the
attach), stopped (SIGSTOP for 2 s first), long (2.2 s of tracing, as
stopped has, not stopped). What a kill leaves stays until
the next clean detach, and the run ends with one. After each block the
jobs pause, give freed memory back (gc, malloc_trim) and their RSS is
read: the growth that is left is memory still held. Prints kB per attach
for each variant and job (median over the rounds, and each round's), with
malloc's own totals (used, free) beside, the mappings that grew most over
the whole run, and with --heap-strings the strings the first job's heap
holds more of at the end (whose memory it is)."""
import argparse
import collections
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "soak"))
import probes  # noqa: E402
import soak  # noqa: E402

# name: (how ptbpf ends, its options); None: no ptbpf.
VARIANTS = {"default": ("int", []), "gpu-off": ("int", ["--gpu-timeline", "off"]),
            "probes": ("int", ["--ops", "probes"]), "no-agent": ("int", ["--no-agent"]),
            "killed": ("kill", []), "killed-gpu-off": ("kill", ["--gpu-timeline", "off"]),
            "sigint2": ("int2", []), "early-int": ("early", []), "stopped": ("stop", []),
            "long": ("long", []),
            "none": None}


def start_job(py, kind, device, sessions, seed, work):
    """A soak job (tests/soak/soak.py's Job) with a profiler session of
    its own every `sessions` seconds on average; exits if it does not
    start."""
    cue = os.path.join(work, "job%d" % seed)
    j = soak.Job("%s%d" % (kind, seed), [py, soak.JOBS, kind, "--device", device, "--seed",
                                          str(seed), "--session-every", str(sessions),
                                          "--cue", cue], cue, dict(os.environ))
    if not j.ready.wait(timeout=900) or not j.alive():
        sys.exit("job did not start: %s" % open(os.path.join(cue, "stderr")).read()[-2000:])
    j.sessions = sessions
    return j


def trimmed_rss(j):
    """RSS (kB) with no session running and freed memory given back; the
    job's malloc totals of the same moment go to j.malloc."""
    state = j.trimmed_state()
    if not state:
        sys.exit("job %d never paused (or died): %s" % (j.pid, open(
            os.path.join(j.cue, "stderr")).read()[-2000:]))
    j.malloc = state.get("malloc", {})
    return state["rss_kb"]


def malloc_text(before, after, n):
    """What malloc's own totals did per attach (kB): used and free."""
    return "/".join("%+.0f" % ((after.get(k, 0) - before.get(k, 0)) / n)
                    for k in ("used", "free")) if before and after else "-"


def attach_block(o, jobs, variant, n, work, rng):
    """n attaches to each job, all jobs at once; failures counted. How
    each ends: "int" Ctrl-C 0.2 s into tracing, "kill" SIGKILL then (the
    agent finds ptbpf gone), "int2" Ctrl-C twice, "early" Ctrl-C at a
    random moment of the attach, "stop" SIGSTOP for 2 s, SIGCONT, Ctrl-C."""
    failed = 0
    if variant is None:
        time.sleep(0.6 * n)
        return 0
    how, opts = variant
    ok_rc = {"kill": (0, -9), "int2": (0, 130), "early": (0, 130)}.get(how, (0,))
    for k in range(n):
        runs = [subprocess.Popen([o.ptbpf, "-p", str(j.pid), "--force", "-o",
                                  os.path.join(work, "t%d.pftrace" % j.pid)] + opts,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for j in jobs]
        for r in runs:
            r.head = []
        if how == "early":
            time.sleep(rng.uniform(0.02, 0.4))
        else:
            for r in runs:  # 0.2 s of tracing, as a short window
                for line in r.stderr:
                    r.head.append(line)
                    if line.startswith("ptbpf: tracing pid"):
                        break
            time.sleep(0.2)
        if how == "long":  # as long as "stop" traces, never stopped
            time.sleep(2)
        if how == "stop":
            for r in runs:
                r.send_signal(signal.SIGSTOP)
            time.sleep(2)
            for r in runs:
                r.send_signal(signal.SIGCONT)
        for r in runs:
            r.send_signal(signal.SIGKILL if how == "kill" else signal.SIGINT)
        if how == "int2":
            time.sleep(0.01)
            for r in runs:
                r.send_signal(signal.SIGINT)
        for r in runs:
            _, err = r.communicate(timeout=120)
            if r.returncode not in ok_rc:
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
    ap.add_argument("--variants", default="default,gpu-off,probes,no-agent,none")
    ap.add_argument("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    ap.add_argument("--python", default=os.environ.get("PTBPF_TEST_PYTHON", "/usr/bin/python3"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--heap-strings", type=int, default=0, metavar="N",
                    help="at the end, the N strings job 1's heap holds most more of")
    o = ap.parse_args()
    names = o.variants.split(",")
    for v in names:
        if v not in VARIANTS:
            sys.exit("--variants: %s: one of %s" % (v, ", ".join(VARIANTS)))
    work = tempfile.mkdtemp(prefix="attach-rss-")
    jobs = [start_job(o.python, o.kind, o.device, 100000 if i == 0 else 3, i + 1, work)
            for i in range(o.jobs)]
    rng = random.Random(o.seed)
    try:
        # One attach of each kind first: what the first one loads stays.
        untouched = {j.pid: trimmed_rss(j) for j in jobs}
        attach_block(o, jobs, VARIANTS["default"], 1, work, rng)
        attach_block(o, jobs, VARIANTS["probes"], 1, work, rng)
        once = {j.pid: trimmed_rss(j) for j in jobs}
        print("the first two attaches left: %s" % ", ".join(
            "job %d %+.1f MB" % (p, (once[p] - untouched[p]) / 1024) for p in once), flush=True)
        first = {j.pid: probes.rss_by_mapping(j.pid) for j in jobs}
        first_malloc = {j.pid: j.malloc for j in jobs}
        strings0 = (jobs[0].paused(probes.heap_strings) or collections.Counter()
                    if o.heap_strings else None)
        chunks0 = chunks_at = (jobs[0].paused(probes.heap_chunks) or {}
                               if o.heap_strings else None)
        grow = {(v, j.pid): [] for v in names for j in jobs}
        for rnd in range(o.rounds):
            order = names[:]
            rng.shuffle(order)
            for v in order:
                before = {j.pid: trimmed_rss(j) for j in jobs}
                malloc0 = {j.pid: j.malloc for j in jobs}
                maps0 = probes.rss_by_mapping(jobs[0].pid)
                t0 = time.time()
                failed = attach_block(o, jobs, VARIANTS[v], o.per_block, work, rng)
                after = {j.pid: trimmed_rss(j) for j in jobs}
                where = probes.rss_growth_by_mapping(maps0, probes.rss_by_mapping(jobs[0].pid), 2)
                sizes = []
                if o.heap_strings:  # which chunk sizes the block left more of
                    chunks1 = jobs[0].paused(probes.heap_chunks) or {}
                    sizes = probes.chunks_grown(chunks_at, chunks1, 3)
                    chunks_at = chunks1
                for j in jobs:
                    grow[(v, j.pid)].append((after[j.pid] - before[j.pid]) / o.per_block)
                print("round %d %-8s %4.0f s%s: %s; grown in job %d: %s%s" % (
                    rnd, v, time.time() - t0, " (%d failed)" % failed if failed else "",
                    ", ".join("job %d (%s) %+.1f kB/attach (malloc used/free %s)" % (
                        j.pid, "sessions" if j.sessions < 1000 else "no sessions",
                        grow[(v, j.pid)][-1], malloc_text(malloc0[j.pid], j.malloc,
                                                           o.per_block)) for j in jobs),
                    jobs[0].pid,
                    ", ".join("%s %+d kB" % (k.split(" ", 1)[1].rsplit("/", 1)[-1], kb)
                              for kb, k in where) or "-",
                    "; chunks in use: " + ", ".join("%d B x%+d" % (sz, n) for n, sz in sizes)
                    if sizes else ""), flush=True)
        print("\nkB of RSS left per attach (trimmed), median over %d rounds of %d:" % (
            o.rounds, o.per_block))
        for v in names:
            for j in jobs:
                g = grow[(v, j.pid)]
                print("  %-8s %-11s %+7.1f  (rounds %s)" % (
                    v, "sessions" if j.sessions < 1000 else "no sessions", statistics.median(g),
                    ", ".join("%+.1f" % x for x in g)))
        # A clean attach last: an agent a kill left loaded goes with it.
        attach_block(o, jobs, VARIANTS["default"], 1, work, rng)
        for j in jobs:
            end = trimmed_rss(j)
            print("job %d: %+.1f MB since the first two attaches (%+.1f MB since untouched); "
                  "malloc used/free %s kB" % (
                      j.pid, (end - once[j.pid]) / 1024, (end - untouched[j.pid]) / 1024,
                      malloc_text(first_malloc[j.pid], j.malloc, 1)))
            print("grown most since the first attaches, job %d: %s" % (j.pid, ", ".join(
                "%s %+.1f MB" % (k, kb / 1024) for kb, k in
                probes.rss_growth_by_mapping(first[j.pid], probes.rss_by_mapping(j.pid), 4))))
        if strings0 is not None:
            more = jobs[0].paused(probes.heap_strings) or collections.Counter()
            more.subtract(strings0)
            print("strings the heap of job %d holds more of than after the first attaches:"
                  % jobs[0].pid)
            for text, n in more.most_common(o.heap_strings):
                if n > 0:
                    print("  %+6d  %r" % (n, text))
            print("the heap of job %d since the first attaches: %s" % (
                jobs[0].pid, jobs[0].paused(lambda pid: probes.new_chunks_report(pid, chunks0))))
    finally:
        for j in jobs:
            j.cue_file("end", True)
        for j in jobs:
            try:
                j.p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                j.p.kill()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
