# SPDX-License-Identifier: BSD-2-Clause
"""The CPU samples' cost (issue 20, part 3). A CPU training-like loop (a
small torch MLP step on one intra-op thread, then a pure-Python loop)
prints each step's time; phases, in an order shuffled anew each cycle:

  none        no ptbpf
  samples     ptbpf -p PID --sample-hz HZ (kernel view and CPU samples)
  no-samples  ptbpf -p PID --no-samples (the kernel view alone)

each recording SECS of steps after ptbpf says it is tracing (plus a
second to settle). A phase's step time is the median of its steps, in wall time and in the
thread's CPU time (which leaves out other processes taking the CPU on a
shared host, and keeps what the samples' interrupts cost the thread); the
samples' cost per cycle is samples / no-samples - 1, ptbpf's all of it
samples / none - 1; the loader's own CPU per second of tracing is given; the table gives the median over the cycles with
min-max. Then, with kernel.bpf_stats_enabled for one samples phase (set
back after), the kernel's count of the sampler program's runs and run time
(runs on every CPU, most of them filtered out at once) and ptbpf's count
of the samples it kept in that phase: the program's cost per run and per
kept sample. Prints a Markdown section."""
import argparse
import datetime
import json
import os
import random
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PTBPF = os.path.join(ROOT, "build", "ptbpf")
PYTHON = "/usr/bin/python3"

STEPS = r"""
import time, torch, torch.nn as nn
torch.set_num_threads(1)
m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(64, 256)
def py_part():
    s = 0
    for i in range(20000):
        s += i * i % 7
    return s
print("ready", flush=True)
while True:
    t0, c0 = time.monotonic_ns(), time.thread_time_ns()
    for _ in range(4):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    py_part()
    t1, c1 = time.monotonic_ns(), time.thread_time_ns()
    print("s %d %d %d" % (t1, t1 - t0, c1 - c0), flush=True)
"""
IDLE = "import time, torch\nprint('ready', flush=True)\ntime.sleep(1e6)\n"
SAMPLES = re.compile(r"CPU samples \((\d+) Hz\): (\d+) in the trace, lost (\d+)")
LOADER = re.compile(r"CPU [\d.]+ s in all, ([\d.]+) s while tracing")


class Steps:
    """The loop's steps as they come: (end, wall ns, thread CPU ns)."""

    def __init__(self):
        self.p = subprocess.Popen([PYTHON, "-c", STEPS], stdout=subprocess.PIPE, text=True,
                                  bufsize=1)
        assert self.p.stdout.readline().strip() == "ready"
        self.s = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            f = line.split()
            if f and f[0] == "s":
                self.s.append((int(f[1]), int(f[2]), int(f[3])))

    def between(self, lo, hi):
        return [(d, c) for end, d, c in self.s if end - d >= lo and end <= hi]


def prog_stats(pid):
    """run_time_ns and run_cnt of process pid's cpu_sample program."""
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                info = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except OSError:
            continue
        if "prog_id" not in info:
            continue
        r = subprocess.run(["bpftool", "-j", "prog", "show", "id", info["prog_id"].strip()],
                           capture_output=True, text=True)
        if r.returncode == 0:
            j = json.loads(r.stdout)
            if j.get("name") == "cpu_sample":
                return j.get("run_time_ns", 0), j.get("run_cnt", 0)
    return None


def kept_between(path, lo, hi):
    """The trace's samples stamped in [lo, hi)."""
    import sys
    sys.path.insert(0, os.path.dirname(HERE))
    import pftrace
    return sum(1 for s in pftrace.Trace(path).samples if lo <= s.ts < hi)


class BusyError(Exception):
    pass


HZ = []  # --sample-hz for the samples phases (main sets it)


def phase(mode, steps, secs, tmp, stats=False, pid=None):
    """phase_once, tried again while another ptbpf (another test's --all on
    a shared host) holds the process."""
    for _ in range(60):
        try:
            return phase_once(mode, steps, secs, tmp, stats, pid)
        except BusyError:
            time.sleep(2)
    raise AssertionError("the process stayed traced by another ptbpf")


def phase_once(mode, steps, secs, tmp, stats=False, pid=None):
    """One phase: its steps' times, and with stats the sampler's numbers
    (of process pid, if given: an idle one, whose samples are all filtered
    out)."""
    tracer, out = None, {"loader_cpu": 0.0}
    trace = os.path.join(tmp, "t.pftrace")
    if mode != "none":
        args = [PTBPF, "-p", str(pid or steps.p.pid), "-o", trace, "-F"]
        if mode == "no-samples":
            args.append("--no-samples")
        else:
            args += ["--sample-hz", str(HZ[0])]
        tracer = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        for line in tracer.stderr:
            if "tracing pid" in line:
                t_on = time.monotonic_ns()
                break
            if "already traced" in line:
                tracer.kill()
                tracer.wait()
                raise BusyError(line)
    time.sleep(1)
    t0 = time.monotonic_ns()
    before = prog_stats(tracer.pid) if stats else None
    lo = time.monotonic_ns()
    time.sleep(secs)
    hi = time.monotonic_ns()
    after = prog_stats(tracer.pid) if stats else None
    t1 = time.monotonic_ns()
    if tracer:
        t_off = time.monotonic_ns()
        tracer.send_signal(signal.SIGINT)
        err = tracer.stderr.read()
        tracer.wait()
        m, c = SAMPLES.search(err), LOADER.search(err)
        out["loader_cpu"] = float(c.group(1)) / ((t_off - t_on) / 1e9) if c else 0.0
        if stats and m and before and after:
            out = {"run_ns": after[0] - before[0], "runs": after[1] - before[1],
                   "kept": kept_between(trace, (t0 + lo) // 2, (hi + t1) // 2),
                   "lost": int(m.group(3))}
    return steps.between(lo, hi), out


def pct(x):
    return "%+.1f%%" % (100 * x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=7)
    ap.add_argument("--secs", type=float, default=4)
    ap.add_argument("--hz", type=int, default=999)
    a = ap.parse_args()
    HZ.append(a.hz)
    steps = Steps()
    tmp = tempfile.mkdtemp(prefix="ptbpf-samples-bench-")
    rows = {k: [] for k in ("samples", "ptbpf", "samples_cpu", "ptbpf_cpu")}
    med = {m: {"wall": [], "cpu": [], "loader": []} for m in ("none", "samples", "no-samples")}
    try:
        for _ in range(a.cycles):
            modes = ["none", "samples", "no-samples"]
            random.shuffle(modes)
            got = {}
            for m in modes:
                st_, o = phase(m, steps, a.secs, tmp)
                got[m] = (statistics.median(w for w, _ in st_),
                          statistics.median(c for _, c in st_))
                med[m]["wall"].append(got[m][0] / 1e6)
                med[m]["cpu"].append(got[m][1] / 1e6)
                med[m]["loader"].append(100 * o["loader_cpu"])
            for k, i in (("", 0), ("_cpu", 1)):
                rows["samples" + k].append(got["samples"][i] / got["no-samples"][i] - 1)
                rows["ptbpf" + k].append(got["samples"][i] / got["none"][i] - 1)
        path = "/proc/sys/kernel/bpf_stats_enabled"
        old = open(path).read().strip()
        with open(path, "w") as f:
            f.write("1")
        try:
            st_steps, st = phase("samples", steps, a.secs, tmp, stats=True)
            idle = subprocess.Popen([PYTHON, "-c", IDLE], stdout=subprocess.PIPE, text=True)
            assert idle.stdout.readline().strip() == "ready"
            try:
                _, st_idle = phase("samples", steps, a.secs, tmp, stats=True, pid=idle.pid)
            finally:
                idle.kill()
                idle.wait()
        finally:
            with open(path, "w") as f:
                f.write(old)
    finally:
        steps.p.kill()
    print("#### CPU samples' cost at %d Hz, %s (%d cycles of %.0f s phases, %d CPUs, kernel %s)"
          "\n" % (a.hz, datetime.date.today(), a.cycles, a.secs, os.cpu_count(),
                  os.uname().release))
    print("| phase | step ms, wall (median of the cycles' medians; min .. max) | step ms, the "
          "thread's CPU time | the loader's CPU while tracing |\n|---|---|---|---|")
    for m in ("none", "no-samples", "samples"):
        w, c, ld = med[m]["wall"], med[m]["cpu"], med[m]["loader"]
        print("| %s | %.3f (%.3f .. %.3f) | %.3f (%.3f .. %.3f) | %s |" % (
            m, statistics.median(w), min(w), max(w), statistics.median(c), min(c), max(c),
            "-" if m == "none" else "%.1f%% of a CPU (%.1f .. %.1f)" % (
                statistics.median(ld), min(ld), max(ld))))
    print("\n| effect on the step | wall: median (min .. max) | thread CPU: median (min .. max) |"
          "\n|---|---|---|")
    for k, what in (("samples", "samples / no-samples (the samples' own cost)"),
                    ("ptbpf", "samples / none (ptbpf with its defaults)")):
        print("| %s | %s (%s .. %s) | %s (%s .. %s) |" % (
            what, pct(statistics.median(rows[k])), pct(min(rows[k])), pct(max(rows[k])),
            pct(statistics.median(rows[k + "_cpu"])), pct(min(rows[k + "_cpu"])),
            pct(max(rows[k + "_cpu"]))))
    if st and st_idle:
        filtered = st_idle["run_ns"] / max(st_idle["runs"], 1)
        per_kept = (st["run_ns"] - (st["runs"] - st["kept"]) * filtered) / max(st["kept"], 1)
        print("\nThe sampler program, kernel.bpf_stats_enabled over %.0f s phases: traced "
              "(the loop) %d runs, %d of them kept samples (0 lost: %s), %.0f ns a run on "
              "average; elsewhere (ptbpf -p an idle process: every run filtered out) %d runs, "
              "%.0f ns a run. Per kept sample: %.1f us (the traced phase's run time less its "
              "filtered runs at the idle phase's cost)." %
              (a.secs, st["runs"], st["kept"], st["lost"] == 0, st["run_ns"] / max(st["runs"], 1),
               st_idle["runs"], filtered, per_kept / 1e3))
        print("\nRAW %s %s" % (json.dumps(st), json.dumps(st_idle)))


if __name__ == "__main__":
    main()
