# SPDX-License-Identifier: BSD-2-Clause
"""The kernel view's cost per scheduler event (issue 20). A process (with
libcudart mapped, so ptbpf takes it, and `ptbpf --all` runs of other tests
on the same host do not) and a child it forks pass one byte back and forth
through two pipes, both
pinned to one CPU: every round trip is two context switches, two wakeups
and four system calls that block or wake (about 100 k switches a second on
the 2-vCPU CI VM). The parent prints its round trips every 0.2 s. With
--work faults the process takes minor page faults instead (fresh memory
written, then unmapped), and the unit is a page. Phases,
in an order shuffled anew each cycle:

  none        no ptbpf
  traced      ptbpf -p PARENT (the kernel view on: the parent's switches,
              wakeups and blocking calls are recorded)
  no-sched    ptbpf -p PARENT --no-sched (the same, without the view)
  elsewhere   ptbpf -p OTHER, an idle such process: the view's programs
              run for every switch on the host, and filter these out

Other work on the host only adds time to a window, so each phase is taken
at the 20th percentile of its 0.2 s windows. The cost of the view per
round trip is traced - no-sched (recording) and elsewhere - none
(filtering only), per cycle; the tables give the median over the cycles
with min-max. Then, with kernel.bpf_stats_enabled for a traced and an
elsewhere phase (set back after), the kernel's own count of each program's
runs and run time: the programs' cost per run, without the tracepoints'
dispatch. Prints a Markdown section; with --out it is appended to that
file."""
import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PTBPF = os.path.join(ROOT, "build", "ptbpf")
PYTHON = "/usr/bin/python3"

CUDART = "/usr/local/cuda-13.0/lib64/libcudart.so.13"

PINGPONG = r"""
import ctypes, os, sys, time
ctypes.CDLL(sys.argv[2])
cpu = int(sys.argv[1])
a_r, a_w = os.pipe()
b_r, b_w = os.pipe()
os.sched_setaffinity(0, {cpu})
if os.fork() == 0:
    os.close(a_w)
    os.close(b_r)
    while os.read(a_r, 1):
        os.write(b_w, b"y")
    os._exit(0)
print("ready", flush=True)
n, last = 0, time.monotonic_ns()
while True:
    os.write(a_w, b"x")
    os.read(b_r, 1)
    n += 1
    if n % 1000 == 0:
        now = time.monotonic_ns()
        if now - last >= 200000000:
            print("w %d %d" % (now, n), flush=True)
            last, n = now, 0
"""

# --work faults: the process maps 4 MiB of fresh anonymous memory, writes
# it (a minor fault per 4 KiB page: the page zeroed, mapped, rss_stat) and
# unmaps it, over and over on one CPU; it prints its pages every 0.2 s.
FAULTS = r"""
import ctypes, os, sys, time
ctypes.CDLL(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
os.sched_setaffinity(0, {int(sys.argv[1])})
size = 4 << 20
print("ready", flush=True)
n, last = 0, time.monotonic_ns()
while True:
    p = libc.mmap(None, size, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    libc.memset(p, 1, size)
    libc.munmap(p, size)
    n += size // 4096
    now = time.monotonic_ns()
    if now - last >= 200000000:
        print("w %d %d" % (now, n), flush=True)
        last, n = now, 0
"""

IDLE = "import ctypes, sys, time\nctypes.CDLL(sys.argv[1])\nprint('ready', flush=True)\ntime.sleep(1e6)\n"


def start(src, *args):
    p = subprocess.Popen([PYTHON, "-c", src] + list(args), stdout=subprocess.PIPE, text=True,
                         bufsize=1)
    assert p.stdout.readline().strip() == "ready"
    return p


class Windows:
    """The parent's reports, read in a thread: (end ns, round trips, ns)."""

    def __init__(self, proc):
        import threading
        self.w = []
        self.proc = proc
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        prev = None
        for line in self.proc.stdout:
            _, now, n = line.split()
            now, n = int(now), int(n)
            if prev is not None:
                self.w.append((now, n, now - prev))
            prev = now

    def trips(self, lo, hi):
        """ns per round trip of each window inside [lo, hi), sorted."""
        return sorted(d / n for end, n, d in self.w if end - d >= lo and end <= hi and n)


def phase(mode, pingpong, idle, secs, tmp, stats=None):
    """Runs one phase; its [start, end) in CLOCK_MONOTONIC ns (the part
    where ptbpf, if any, was recording), and the summary's lines on the
    kernel view. Tried again while another test's ptbpf holds the process."""
    for _ in range(30):
        try:
            return phase_once(mode, pingpong, idle, secs, tmp, stats)
        except BusyError:
            time.sleep(2)
    raise AssertionError("the process stayed traced by another ptbpf")


class BusyError(Exception):
    pass


def prog_ids(pid):
    """The BPF programs process pid holds: id -> name."""
    out = {}
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                info = f.read()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("prog_id:"):
                out[int(line.split()[1])] = None
    for i in out:
        r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)], capture_output=True,
                           text=True)
        if r.returncode == 0:
            out[i] = json.loads(r.stdout).get("name")
    return out


def prog_stats(ids):
    """name -> (runs, ns) of the programs ids."""
    out = {}
    for i, name in ids.items():
        r = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)], capture_output=True,
                           text=True)
        if r.returncode == 0:
            j = json.loads(r.stdout)
            runs, ns = out.get(name, (0, 0))
            out[name] = (runs + j.get("run_cnt", 0), ns + j.get("run_time_ns", 0))
    return out


SCHED_PROGS = ("on_switch", "on_waking", "on_wakeup_new", "on_sys_enter", "on_sys_exit",
               "on_fault", "on_rss")


def phase_once(mode, pingpong, idle, secs, tmp, stats=None):
    if mode == "none":
        t0 = time.monotonic_ns()
        time.sleep(secs)
        return t0, time.monotonic_ns(), ""
    pid = idle.pid if mode == "elsewhere" else pingpong.pid
    args = [PTBPF, "-p", str(pid), "-o", os.path.join(tmp, "t.pftrace"), "--force"]
    if mode == "no-sched":
        args.append("--no-sched")
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    head = ""
    for line in p.stderr:
        head += line
        if line.startswith("ptbpf: tracing pid"):
            break
    else:
        p.wait()
        if "already traced by another ptbpf" in head:
            raise BusyError()
        raise AssertionError((mode, p.returncode, head))
    t0 = time.monotonic_ns()
    if stats is not None:
        ids = {i: n for i, n in prog_ids(p.pid).items() if n in SCHED_PROGS}
        before = prog_stats(ids)
    time.sleep(secs)
    t1 = time.monotonic_ns()
    if stats is not None:
        after = prog_stats(ids)
        for name in after:
            stats[name] = (after[name][0] - before[name][0], after[name][1] - before[name][1])
    p.send_signal(2)
    err = head + p.communicate(timeout=60)[1]
    assert p.returncode == 0, (mode, p.returncode, err)
    view = [ln for ln in err.splitlines() if "kernel view" in ln]
    return t0, t1, "\n".join(view)


def bpf_stats_phase(mode, pingpong, idle, secs, tmp):
    """The programs' runs and run time over one phase, kernel.bpf_stats_enabled
    on meanwhile (set back after)."""
    path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(path) as f:
        was = f.read().strip()
    stats = {}
    try:
        with open(path, "w") as f:
            f.write("1")
        phase(mode, pingpong, idle, secs, tmp, stats)
    finally:
        with open(path, "w") as f:
            f.write(was)
    return stats


def spread(v):
    return "%.0f (%.0f .. %.0f)" % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--work", choices=["pingpong", "faults"], default="pingpong")
    ap.add_argument("--ptbpf", default=PTBPF, help="the ptbpf to measure (another build)")
    a = ap.parse_args()
    globals()["PTBPF"] = a.ptbpf
    pingpong = start(PINGPONG if a.work == "pingpong" else FAULTS, str(a.cpu), CUDART)
    idle = start(IDLE, CUDART)
    win = Windows(pingpong)
    modes = ["none", "traced", "no-sched", "elsewhere"]
    per = {m: [] for m in modes}
    fastest = {}
    views = []
    rng = random.Random(20)
    with tempfile.TemporaryDirectory(prefix="ptbpf-sched-bench-") as tmp:
        time.sleep(1)
        for c in range(a.cycles + 1):
            order = modes[:]
            rng.shuffle(order)
            for m in order:
                t0, t1, view = phase(m, pingpong, idle, a.secs, tmp)
                got = win.trips(t0 + 300000000, t1)
                if c and got:  # the first cycle warms up
                    per[m].append(got[len(got) // 5])
                    fastest[m] = min(fastest.get(m, got[0]), got[0])
                if view and m == "traced":
                    views.append(view)
        own = {m: bpf_stats_phase(m, pingpong, idle, a.secs, tmp) for m in ("traced", "elsewhere")}
    pingpong.kill()
    idle.kill()
    n = min(len(v) for v in per.values())
    rec = [per["traced"][i] - per["no-sched"][i] for i in range(n)]
    filt = [per["elsewhere"][i] - per["none"][i] for i in range(n)]
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    what = ("scheduler event", "round trip", "round trip (2 switches, 2 wakeups, 4 calls)",
            "context switch", 2) if a.work == "pingpong" else \
        ("page fault", "page", "page (a minor fault, its rss_stat, its unmap)", "fault", 1)
    out = ["### The kernel view's cost per %s: %s, CI VM (%s, %d CPUs, kernel %s)"
           % (what[0], datetime.date.today(), cpu, os.cpu_count(), os.uname().release), "",
           "tests/bench/sched_bench.py --work %s, %d cycles of %.0f s phases (medians over "
           "cycles, min .. max):" % (a.work, n, a.secs), "",
           "| phase | ns per %s | %ss/s |" % (what[2], what[1]),
           "|---|---|---|"]
    for m in modes:
        out.append("| %s | %s | %.0f k |" % (m, spread(per[m]),
                                             1e6 / statistics.median(per[m])))
    out += ["", "Fastest 0.2 s window of each phase over all cycles (ns per %s): " % what[1] +
            ", ".join("%s %.0f" % (m, fastest[m]) for m in modes) +
            "; recording %.0f, filtering %.0f." % (fastest["traced"] - fastest["no-sched"],
                                                   fastest["elsewhere"] - fastest["none"])]
    out += ["", "| cost | ns per %s | ns per %s |" % (what[1], what[3]), "|---|---|---|",
            "| recording (traced - no-sched) | %s | %s |" % (
                spread(rec), spread([x / what[4] for x in rec])),
            "| filtering another process's (elsewhere - none) | %s | %s |" % (
                spread(filt), spread([x / what[4] for x in filt])), "",
            "The programs' own time per run (kernel.bpf_stats_enabled, one phase each; "
            "\"elsewhere\": every run filters the event out):", "",
            "| program | traced: runs/s | ns/run | elsewhere: runs/s | ns/run |",
            "|---|---|---|---|---|"]
    for name in SCHED_PROGS:
        row = []
        for m in ("traced", "elsewhere"):
            runs, ns = own[m].get(name, (0, 0))
            row += ["%.0f k" % (runs / a.secs / 1e3), "%.0f" % (ns / runs) if runs else "-"]
        out.append("| %s | %s |" % (name, " | ".join(row)))
    out += ["", "The last traced phase's summary:", "", "```"] + views[-1:] + ["```", ""]
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    sys.exit(main())
