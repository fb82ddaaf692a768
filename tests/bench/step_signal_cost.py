# SPDX-License-Identifier: BSD-2-Clause
"""What an always-on step signal would cost the job per op, measured in one
process with the candidates interleaved (issue 22): each cycle runs every
phase once, in an order shuffled anew, and times two loops per phase,
ATen ops (torch.add on 1-element tensors, the cheapest op: the per-op cost
is largest relative to it) and record_function regions (what
Optimizer.step and ProfilerStep# are made of, a few per step):

  none        nothing registered, nothing attached
  user_cb     one empty RecordFunction callback on USER_SCOPE only
              (build/libptbpf-floor.so, floor_rf_on(7))
  sampled     one empty callback on every scope, torch-sampled, p = 1e-3
  all_cb      one empty callback on every scope (the agent's floor)
  agent4_cb   four empty callbacks, by scope, as the agent registers them
  agent_steps the agent's always-on step signal as `ptbpf daemon` leaves it
              between windows (build/libptbpf-agent.so loaded in-process,
              switched through its control block, OFF with " steps"): one
              USER_SCOPE callback that compares each region's name and times
              ProfilerStep/Optimizer.step/DataLoader regions into its
              counter block
  uprobe      an entry uprobe whose BPF program only counts, on the function
              every record_function region enters with its name, callbacks
              or not: torch::autograd::profiler::record_function_enter_new
              (2.x); on 1.13, whose record_function calls the older enter
              op and RecordFunction::before() only with callbacks, the
              RecordFunction(RecordScope) constructor, which regions call
              (ops build theirs from StepCallbacks, and only with callbacks)
              (build/uprobe_floor PID PATTERN): no callback at all
  ptbpf_ops   `ptbpf -p PID --no-sched --no-samples`: the agent's op
              recording as a capture has it (callbacks on every scope, the
              per-thread rings, ptbpf draining them), nothing else of the
              kernel view (issue 23: its cost against all_cb, the floor)
  ptbpf_ops_kclock  ptbpf_ops with --op-clock kernel: every record's
              timestamp from clock_gettime() instead of the TSC
  ptbpf       `ptbpf -p PID` as users run it (the kernel view, CPU samples)
  spin        a process spinning on the other CPU, this one kept off it:
              what a busy neighbour (ptbpf's loader) costs the thread
              through the shared machine alone
  w_name, w_peek, w_uncaught, w_clock, w_tsc, w_torch, w_agent
              one callback on every scope (as all_cb) that does a piece of
              the agent's work per op (floor_rf_work_on): torch's
              RecordFunction::name() and strnlen at begin; the sequence
              number's peek() at end; std::uncaught_exceptions() at end; a
              clock_gettime at each; an rdtsc at each; w_torch: name, peek
              and uncaught; w_agent: those and clock_gettime (all the agent
              asks of torch and the clock, without its rings). Their cost
              against all_cb attributes the agent's cost above the floor

Prints, per phase, the median ns per op (wall, and the thread's CPU time)
and per region over the cycles
with the min-max spread, and the median difference from `none` of the
same cycle, with a 95% interval of that median (order statistics), and
each ptbpf phase's ops against its records. Needs root (the uprobe,
ptbpf).

usage: step_signal_cost.py [--cycles N] [--ops N] [--regions N] [--phases a,b]"""
import argparse
import ctypes
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
ENTER_2X = "_ZN5torch8autograd8profiler25record_function_enter_new*"
ENTER_113 = "_ZN2at14RecordFunctionC1ENS_11RecordScopeE"
# floor.c's FLOOR_W_* bits for the w_ phases.
WORK = {"w_name": 1, "w_peek": 2, "w_uncaught": 4, "w_clock": 8, "w_tsc": 16, "w_torch": 7,
        "w_agent": 15}
PHASES = ["none", "user_cb", "sampled", "all_cb", "agent4_cb", "agent_steps", "uprobe",
          "ptbpf_ops", "ptbpf_ops_kclock", "ptbpf", "spin"] + list(WORK)
PTBPF_ARGS = {"ptbpf_ops": ["--no-sched", "--no-samples"],
              "ptbpf_ops_kclock": ["--no-sched", "--no-samples", "--op-clock", "kernel"],
              "ptbpf": []}
# include/ptbpf_agent.h: struct ptbpf_agent_ctl's words, cmd, seq, ack, owner.
CTL_WORDS, CTL_CMD, CTL_SEQ, CTL_ACK, CTL_OWNER = 56, 24, 16, 184, 28


def time_ops(n):
    a, b, c = torch.ones(1), torch.ones(1), torch.empty(1)
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(n):
        torch.add(a, b, out=c)
    return (time.perf_counter_ns() - t0) / n, (time.thread_time_ns() - c0) / n


def time_regions(n):
    rf = torch.autograd.profiler.record_function
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with rf("Optimizer.step#bench"):
            pass
    return (time.perf_counter_ns() - t0) / n


class Phases:
    def __init__(self):
        self.floor = ctypes.CDLL(os.path.join(BUILD, "libptbpf-floor.so"))
        self.floor.floor_rf_sampled_on.argtypes = [ctypes.c_double]
        self.probe = None
        self.enter = ENTER_113 if torch.__version__.startswith("1.") else ENTER_2X
        self.agent = ctypes.CDLL(os.path.join(BUILD, "libptbpf-agent.so"))
        self.ctl = ctypes.addressof(ctypes.c_uint8.in_dll(self.agent, "ptbpf_agent_ctl"))
        self.steps = ctypes.addressof(ctypes.c_uint8.in_dll(self.agent, "ptbpf_agent_steps"))
        self.tmp = tempfile.mkdtemp(prefix="ptbpf-cost-")

    def agent_words(self, words):
        """PTBPF_CMD_OFF with these words, as ptbpf sends it; waits for the ack."""
        raw = words.encode() + b"\0"
        ctypes.memmove(self.ctl + CTL_WORDS, raw, len(raw))
        ctypes.c_uint32.from_address(self.ctl + CTL_CMD).value = 0
        # This process is its owner (a ptbpf phase before named itself,
        # and the agent switches off once its owner is gone).
        ctypes.c_uint32.from_address(self.ctl + CTL_OWNER).value = os.getpid()
        seq = ctypes.c_uint64.from_address(self.ctl + CTL_SEQ)
        seq.value += 1
        deadline = time.time() + 5
        while ctypes.c_uint64.from_address(self.ctl + CTL_ACK).value != seq.value:
            if time.time() > deadline:
                sys.exit("the agent did not answer its control block")
            time.sleep(0.002)
        return ctypes.c_uint32.from_address(self.steps + 12).value  # its `on`

    def on(self, name):
        rc = 0
        if name == "user_cb":
            rc = self.floor.floor_rf_on(7)
        elif name == "sampled":
            rc = self.floor.floor_rf_sampled_on(1e-3)
        elif name == "all_cb":
            rc = self.floor.floor_rf_on(1)
        elif name == "agent4_cb":
            rc = self.floor.floor_rf_on(4)
        elif name == "spin":
            cpus = sorted(os.sched_getaffinity(0))
            self.probe = subprocess.Popen(["taskset", "-c", str(cpus[-1]), sys.executable, "-c",
                                           "while True: pass"])
            os.sched_setaffinity(0, cpus[:-1] or cpus)
            time.sleep(0.2)
        elif name in WORK:
            rc = self.floor.floor_rf_work_on(WORK[name])
        elif name == "agent_steps":
            if self.agent_words(" steps") != 1:
                sys.exit("the agent's step signal did not go on")
        elif name == "uprobe":
            self.probe = subprocess.Popen([os.path.join(BUILD, "uprobe_floor"), str(os.getpid()),
                                           self.enter], stdout=subprocess.PIPE, text=True)
            line = self.probe.stdout.readline()
            if not line.startswith("attached"):
                sys.exit("uprobe_floor did not attach: %r" % line)
        elif name in PTBPF_ARGS:
            self.trace = os.path.join(self.tmp, name + ".pftrace")
            self.probe = subprocess.Popen([os.path.join(BUILD, "ptbpf"), "-p", str(os.getpid()),
                                           "-o", self.trace, "--force"] + PTBPF_ARGS[name],
                                          stderr=subprocess.PIPE, text=True)
            for line in self.probe.stderr:
                if "ptbpf: tracing pid" in line:
                    break
            else:
                sys.exit("ptbpf did not attach: %s" % self.probe.communicate()[1][-2000:])
        if rc:
            sys.exit("floor: %s" % ctypes.c_char_p(self.floor.floor_why()).value)

    def off(self, name):
        if name in PTBPF_ARGS:
            self.probe.send_signal(2)
            err = self.probe.communicate(timeout=120)[1]
            rc, self.probe = self.probe.returncode, None
            if rc:
                sys.exit("ptbpf exited %d: %s" % (rc, err[-2000:]))
            rings = [l.strip() for l in err.splitlines() if "agent op rings:" in l]
            clock = [l.strip() for l in err.splitlines() if "op timestamps:" in l]
            return "\n# ".join((rings[-1:] or ["no agent op rings line"]) + clock[-1:])
        if name == "spin":
            self.probe.kill()
            self.probe.wait()
            self.probe = None
            os.sched_setaffinity(0, range(os.cpu_count()))
            return ""
        if name == "uprobe":
            self.probe.terminate()
            hits = self.probe.communicate()[0]
            self.probe = None
            return hits.strip()
        if name == "agent_steps":
            self.agent_words("")
        elif name != "none":
            self.floor.floor_rf_off()
        return ""


def median_interval(v):
    """A 95% interval of the median of v: the order statistics at
    n/2 -+ 0.98 sqrt(n) (the normal approximation of the binomial)."""
    v = sorted(v)
    n = len(v)
    k = 0.98 * n ** 0.5
    return v[max(0, int(n / 2 - k))], v[min(n - 1, int(n / 2 + k))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=9)
    ap.add_argument("--ops", type=int, default=200000)
    ap.add_argument("--regions", type=int, default=20000)
    ap.add_argument("--phases", default=",".join(PHASES))
    args = ap.parse_args()
    phases = args.phases.split(",")
    if "none" not in phases or set(phases) - set(PHASES):
        sys.exit("--phases: some of %s, none among them" % ",".join(PHASES))
    torch.set_num_threads(1)
    ph = Phases()
    res = {p: {"op": [], "op_cpu": [], "region": []} for p in PHASES}
    for cycle in range(args.cycles + 1):  # the first one warms up
        order = phases[:]
        random.shuffle(order)
        for p in order:
            ph.on(p)
            (op, op_cpu), region = time_ops(args.ops), time_regions(args.regions)
            hits = ph.off(p)
            if cycle:
                res[p]["op"].append(op)
                res[p]["op_cpu"].append(op_cpu)
                res[p]["region"].append(region)
            if cycle == 1 and hits:
                print("# %s phase: %s" % (p, hits))
    print("| phase | ns/op (median, min-max) | vs none (95% interval) | the thread's CPU ns/op "
          "| vs none (95% interval) | ns/region (median, min-max) | vs none (95% interval) |")
    print("|---|---|---|---|---|---|---|")
    for p in phases:
        row = [p]
        for k in ("op", "op_cpu", "region"):
            v = res[p][k]
            d = [x - y for x, y in zip(v, res["none"][k])]
            lo, hi = median_interval(d)
            row.append("%.0f (%.0f-%.0f)" % (statistics.median(v), min(v), max(v)))
            row.append("%+.0f (%+.0f..%+.0f)" % (statistics.median(d), lo, hi))
        print("| " + " | ".join(row) + " |")
    for p in WORK:
        if p in phases and "all_cb" in phases:
            for k in ("op", "op_cpu"):
                d = [x - y for x, y in zip(res[p][k], res["all_cb"][k])]
                lo, hi = median_interval(d)
                print("# %s above all_cb (%s): median %+.0f ns/op, 95%% interval %+.0f..%+.0f" %
                      (p, "wall" if k == "op" else "thread CPU", statistics.median(d), lo, hi))
    for a, b in (("ptbpf_ops", "all_cb"), ("ptbpf_ops", "agent4_cb"),
                 ("ptbpf_ops_kclock", "all_cb"), ("ptbpf", "all_cb")):
        if a in phases and b in phases:
            for k in ("op", "op_cpu"):
                r = [(x - n) / (y - n) for x, y, n in zip(res[a][k], res[b][k], res["none"][k])
                     if y > n]
                if r:
                    lo, hi = median_interval(r)
                    print("# %s's cost per op / %s's (%s, per cycle where %s cost > 0): "
                          "median %.2f, 95%% interval %.2f..%.2f, %d cycles" %
                          (a, b, "wall" if k == "op" else "thread CPU", b,
                           statistics.median(r), lo, hi, len(r)))


if __name__ == "__main__":
    main()
