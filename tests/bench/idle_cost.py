# SPDX-License-Identifier: BSD-2-Clause
"""What ptbpf costs a job that does nothing (issue 43): the CPU time and
wake-ups of the agent's threads, and of ptbpf itself, over SECONDS of a
torch job asleep with ptbpf attached (its defaults, or ARGS).

usage: idle_cost.py [--python PY] [--device cpu|cuda] [--seconds 20]
                    [--ptbpf build/ptbpf] [--daemon] [--json FILE] [-- ARGS...]

With --daemon, `ptbpf daemon` selects the job (--match-env) with no window
due (--every 1h), and ARGS go to the daemon (--keep-graphs, ...): what its
always-on layer costs an idle job between windows, measured once the
daemon says the job's step signal is on.

The job imports torch, runs a few steps (on CUDA: kernels, so CUPTI and the
driver are up), then sleeps. ptbpf attaches; after a 3 s settle the
threads' /proc/PID/task/TID/schedstat (run ns, timeslices) are read, and
again SECONDS later. The agent's threads are those that appeared in the
job after the attach (its "ptbpf-agent" thread, and any CUDA or CUPTI
thread its calls started). Prints one line per thread group: CPU ms, the
share of one core, wake-ups; and each thread's name and policy."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

JOB = r"""
import os, sys, time, torch
dev = sys.argv[1]
m = torch.nn.Linear(256, 256).to(dev)
x = torch.randn(64, 256, device=dev)
for _ in range(20):
    m(x).relu().sum().item()
print("ready", os.getpid(), flush=True)
time.sleep(3600)
"""

POLICIES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle"}


def threads(pid):
    """{tid: (comm, run ns, timeslices, policy, nice)} of a process."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        d = "/proc/%d/task/%s/" % (pid, tid)
        try:
            comm = open(d + "comm").read().strip()
            run, _, slices = (int(v) for v in open(d + "schedstat").read().split())
            st = open(d + "stat").read().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        # stat fields after the comm: state is field 3; nice 19, policy 41.
        out[int(tid)] = (comm, run, slices, POLICIES.get(int(st[38]), st[38]), int(st[16]))
    return out


def group(before, after, tids):
    ns = sum(after[t][1] - before[t][1] for t in tids if t in before and t in after)
    wakes = sum(after[t][2] - before[t][2] for t in tids if t in before and t in after)
    return ns, wakes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    ap.add_argument("--daemon", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    env = dict(os.environ, PTBPF_IDLE_COST=str(os.getpid()))
    job = subprocess.Popen([a.python, "-c", JOB, a.device], stdout=subprocess.PIPE, text=True,
                           env=env)
    try:
        line = job.stdout.readline()
        if not line.startswith("ready"):
            sys.exit("idle_cost: the job did not start")
        before_attach = set(threads(job.pid))
        tmp = tempfile.mkdtemp(prefix="idle_cost")
        out = os.path.join(tmp, "t.pftrace")
        if a.daemon:
            argv = [a.ptbpf, "daemon", "--match-env", "PTBPF_IDLE_COST=%d" % os.getpid(),
                    "--every", "1h", "--out-dir", tmp]
            ready = "pid %d (python3): step signal on" % job.pid
        else:
            argv = [a.ptbpf, "-p", str(job.pid), "-o", out, "--force"]
            ready = "tracing pid"
        t = subprocess.Popen(argv + a.args, stderr=subprocess.PIPE, text=True)
        while True:
            err = t.stderr.readline()
            if not err:
                sys.exit("idle_cost: ptbpf ended before tracing")
            if ready in err:
                break
        time.sleep(3)
        b, lb = threads(job.pid), threads(t.pid)
        time.sleep(a.seconds)
        e, le = threads(job.pid), threads(t.pid)
        t.send_signal(signal.SIGINT)
        t.communicate(timeout=120)
        shutil.rmtree(tmp)
    finally:
        job.kill()
        job.wait()
    agent = sorted(set(e) - before_attach)
    job_own = sorted(set(e) & before_attach)
    res = {}
    for name, tids, bb, ee in (("agent", agent, b, e), ("job", job_own, b, e),
                               ("ptbpf", sorted(le), lb, le)):
        ns, wakes = group(bb, ee, tids)
        res[name] = {"cpu_ms": ns / 1e6, "core_pct": 100 * ns / 1e9 / a.seconds,
                     "wakeups": wakes,
                     "threads": ["%s(%s,nice %d)" % (ee[x][0], ee[x][3], ee[x][4])
                                 for x in tids if x in ee]}
        print("%-6s %8.1f ms CPU in %.0f s = %.3f%% of a core, %d wake-ups; threads: %s"
              % (name, ns / 1e6, a.seconds, res[name]["core_pct"], wakes,
                 ", ".join(res[name]["threads"][:12])))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
