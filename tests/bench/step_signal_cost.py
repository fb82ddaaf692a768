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
  ptbpf_ops_alt  ptbpf_ops with another build's ptbpf and agent (--alt
              DIR, where DIR holds both): two agents compared in one run
  profiler    torch.profiler.profile in the process (CPU activity, and
              CUDA with --device cuda), entered before the phase's loops
              and left after them (its trace made and dropped, untimed):
              the cost ptbpf's is compared with (issue 23: a third of it);
              on CUDA not with the cupti_* phases (Kineto stays subscribed)
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
              asks of torch and the clock, without its rings); w_agent_tsc:
              the same with rdtsc, as the agent reads its clock; w_ring:
              w_agent_tsc and a record into a 4 MiB ring of the thread's at
              begin and end, as the agent's (no reader); w_ring_l2: the
              same into a 64 KiB ring, which stays in the core's L2;
              w_ring_read: w_ring with a thread that copies what was
              written every 20 ms, as ptbpf's loader reads the rings from
              another CPU. Their
              cost against all_cb attributes the agent's cost above the
              floor

Each phase also times backward nodes (--nodes; chains of 100 multiplies
on the CPU): every node the engine runs sets its thread's RecordFunction
state, which on torch 2.x copies the registered global callbacks of any
scope, so a USER_SCOPE callback costs per node what no op or region shows.

With --device cuda, each phase also times a loop of CUDA launches
(torch.add on 1-element CUDA tensors: one op and one cudaLaunchKernel
each, then a synchronize), and the phases of the GPU path join in
(issue 23's cost per launch):

  cupti_cb    CUPTI callbacks on the CUDA calls the agent subscribes to,
              empty (floor_cupti_cb_on(0)); what they saw per launch is
              counted by callback id
  cupti_act   CUPTI activity: kernels, copies and sets, records walked
  cupti_both  both at once: the floor of a GPU timeline joined to its
              launches
  ptbpf_calls `ptbpf -p PID --no-sched --no-samples --gpu-timeline off`:
              ops and CUDA calls from the agent, no GPU timeline
  (ptbpf_ops is then ops, CUDA calls and the GPU timeline: the agent's
  whole in-process path)

Where the thread's hardware counters can be read (perf_event_open), the
op loop's cycles and instructions per op are given too.

Prints, per phase, the median ns per op (wall, and the thread's CPU time)
and per region over the cycles
with the min-max spread, and the median difference from `none` of the
same cycle, with a 95% interval of that median (order statistics), and
each ptbpf phase's ops against its records. Needs root (the uprobe,
ptbpf).

usage: step_signal_cost.py [--cycles N] [--ops N] [--regions N] [--nodes N] [--launches N]
                           [--device cpu|cuda] [--phases a,b] [--paired B]
                           [--alt DIR]"""
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

import agentsteps  # beside this script
from stats import median_interval  # beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
ENTER_2X = "_ZN5torch8autograd8profiler25record_function_enter_new*"
ENTER_113 = "_ZN2at14RecordFunctionC1ENS_11RecordScopeE"
# floor.c's FLOOR_W_* bits for the w_ phases.
WORK = {"w_name": 1, "w_peek": 2, "w_uncaught": 4, "w_clock": 8, "w_tsc": 16, "w_torch": 7,
        "w_agent": 15, "w_agent_tsc": 23, "w_ring": 55, "w_ring_l2": 87, "w_ring_read": 183}
CUPTI = {"cupti_cb": (True, False), "cupti_act": (False, True), "cupti_both": (True, True)}
PHASES = ["none", "user_cb", "sampled", "all_cb", "agent4_cb", "agent_steps", "uprobe",
          "ptbpf_ops", "ptbpf_ops_kclock", "ptbpf", "profiler", "spin"] + list(WORK)
CUDA_PHASES = list(CUPTI) + ["ptbpf_calls"]
SWITCHED = ("user_cb", "agent_steps", "all_cb")  # --switched-nodes
PTBPF_ARGS = {"ptbpf_ops": ["--no-sched", "--no-samples"],
              "ptbpf_ops_alt": ["--no-sched", "--no-samples"],
              "ptbpf_ops_kclock": ["--no-sched", "--no-samples", "--op-clock", "kernel"],
              "ptbpf_calls": ["--no-sched", "--no-samples", "--gpu-timeline", "off"],
              "ptbpf": []}


class Counters:
    """The thread's cycles and instructions, where the machine has them."""

    def __init__(self, floor):
        self.floor = floor
        self.why = None
        if floor.floor_perf_open():
            self.why = floor.floor_why().decode()
        self.v = (ctypes.c_uint64 * 2)()

    def read(self):
        if self.why or self.floor.floor_perf_read(self.v):
            return None
        return self.v[0], self.v[1]


def time_ops(n, counters, device="cpu"):
    """ns per op (wall, thread CPU) and cycles and instructions per op."""
    a, b, c = (torch.ones(1, device=device), torch.ones(1, device=device),
               torch.empty(1, device=device))
    if device == "cuda":
        torch.cuda.synchronize()
    k0 = counters.read()
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(n):
        torch.add(a, b, out=c)
    if device == "cuda":
        torch.cuda.synchronize()
    t, c = (time.perf_counter_ns() - t0) / n, (time.thread_time_ns() - c0) / n
    k1 = counters.read()
    if k0 and k1:
        return t, c, (k1[0] - k0[0]) / n, (k1[1] - k0[1]) / n
    return t, c, None, None


def time_paired(floor, n, block, regions=False):
    """A phase's own cost per op (or region), measured within the phase:
    n units in blocks of `block`, each block run once with torch's
    RecordFunction on for this thread and once off (floor_rf_thread: no
    callback of any kind is reached), in a random order per pair. Off is
    what `none` measures, a millisecond away, so the machine's drift
    between phases (2.4x between cycles on the GPU host) cancels. Returns
    the median over the pairs of (on - off) ns per unit, and off's mean
    ns per unit. What does not go through RecordFunction (a uprobe, the
    loader's work on another CPU, CUPTI) is in both halves and not seen."""
    rf = torch.autograd.profiler.record_function
    a, b, c = torch.ones(1), torch.ones(1), torch.empty(1)
    diffs, off = [], 0
    for _ in range(max(1, n // (2 * block))):
        t = {}
        for on in random.sample((1, 0), 2):
            floor.floor_rf_thread(on)
            t0 = time.perf_counter_ns()
            if regions:
                for _ in range(block):
                    with rf("Optimizer.step#bench"):
                        pass
            else:
                for _ in range(block):
                    torch.add(a, b, out=c)
            t[on] = time.perf_counter_ns() - t0
        diffs.append((t[1] - t[0]) / block)
        off += t[0]
    floor.floor_rf_thread(1)
    return statistics.median(diffs), off / (block * len(diffs))


def time_nodes(n, chain=100):
    """ns per backward node: backward through chains of `chain` multiplies
    of a 1-element CPU tensor. The autograd engine sets its thread's
    RecordFunction state around every node it runs (ThreadLocalStateGuard),
    which on torch 2.x copies the registered global callbacks, any scope:
    what a USER_SCOPE-only callback costs that no region or op shows."""
    x = torch.ones(1, requires_grad=True)
    w = torch.ones(1)
    t0 = time.perf_counter_ns()
    for _ in range(max(1, n // chain)):
        y = x
        for _ in range(chain):
            y = y * w
        y.backward()
    return (time.perf_counter_ns() - t0) / (max(1, n // chain) * chain)


def time_nodes_switched(ph, phase, pairs, block):
    """A callback's cost per backward node with the callback itself
    switched: pairs of blocks of `block` nodes, in a random order per pair,
    each block after the phase is set on or off (the agent is told either
    way, so both halves wait alike) and 100 nodes run untimed. ns per node,
    on - off, one value per pair."""
    out, state = [], False
    for _ in range(pairs):
        t = {}
        for on in random.sample((1, 0), 2):
            if phase == "agent_steps":
                if ph.steps.command(" steps" if on else "") != bool(on):
                    sys.exit("the agent's step signal did not switch")
            elif on and not state:
                ph.on(phase)
            elif not on and state:
                ph.off(phase)
            state = bool(on)
            time_nodes(100)
            t[on] = time_nodes(block)
        out.append(t[1] - t[0])
    if phase == "agent_steps":
        ph.steps.command("")
    elif state:
        ph.off(phase)
    return out


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
        self.floor.floor_why.restype = ctypes.c_char_p
        self.floor.floor_rf_sampled_on.argtypes = [ctypes.c_double]
        self.probe = None
        self.enter = ENTER_113 if torch.__version__.startswith("1.") else ENTER_2X
        self.steps = agentsteps.StepSignal(BUILD)
        self.tmp = tempfile.mkdtemp(prefix="ptbpf-cost-")
        self.alt = None
        self.cuda = False
        self.prof = None

    def on(self, name):
        rc = 0
        if name in CUPTI:
            cb, act = CUPTI[name]
            rc = (cb and self.floor.floor_cupti_cb_on(0)) or (act and self.floor.floor_cupti_act_on(0))
        elif name == "user_cb":
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
        elif name == "profiler":
            act = [torch.profiler.ProfilerActivity.CPU]
            if self.cuda:
                act.append(torch.profiler.ProfilerActivity.CUDA)
            self.prof = torch.profiler.profile(activities=act)
            self.prof.__enter__()
        elif name == "agent_steps":
            self.steps.on()
        elif name == "uprobe":
            self.probe = subprocess.Popen([os.path.join(BUILD, "uprobe_floor"), str(os.getpid()),
                                           self.enter], stdout=subprocess.PIPE, text=True)
            line = self.probe.stdout.readline()
            if not line.startswith("attached"):
                sys.exit("uprobe_floor did not attach: %r" % line)
        elif name in PTBPF_ARGS:
            self.trace = os.path.join(self.tmp, name + ".pftrace")
            where = self.alt if name == "ptbpf_ops_alt" else BUILD
            self.probe = subprocess.Popen([os.path.join(where, "ptbpf"), "-p", str(os.getpid()),
                                           "-o", self.trace, "--force"] + PTBPF_ARGS[name],
                                          stderr=subprocess.PIPE, text=True)
            for line in self.probe.stderr:
                if "ptbpf: tracing pid" in line:
                    break
            else:
                sys.exit("ptbpf did not attach: %s" % self.probe.communicate()[1][-2000:])
        if rc:
            sys.exit("floor: %s" % self.floor.floor_why().decode())

    def off(self, name):
        if name in PTBPF_ARGS:
            self.probe.send_signal(2)
            err = self.probe.communicate(timeout=120)[1]
            rc, self.probe = self.probe.returncode, None
            if rc:
                sys.exit("ptbpf exited %d: %s" % (rc, err[-2000:]))
            rings = [l.strip() for l in err.splitlines() if "agent op rings:" in l]
            clock = [l.strip() for l in err.splitlines() if "op timestamps:" in l]
            gpu = [l.strip() for l in err.splitlines() if "GPU" in l or "CUDA" in l]
            return "\n# ".join((rings[-1:] or ["no agent op rings line"]) + clock[-1:] + gpu)
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
        if name == "profiler":
            self.prof.__exit__(None, None, None)
            n = len(self.prof.profiler.function_events) if self.prof.profiler else 0
            self.prof = None
            return "events %d" % n
        if name == "agent_steps":
            self.steps.off()
        elif name in CUPTI:
            self.floor.floor_cupti_cb_off()
            self.floor.floor_cupti_act_off()
            if CUPTI[name][0]:
                buf = ctypes.create_string_buffer(8192)
                self.floor.floor_cupti_cb_counts(buf, len(buf))
                return "callbacks seen:\n#   " + "\n#   ".join(
                    buf.value.decode().strip().splitlines())
        elif name != "none":
            self.floor.floor_rf_off()
        return ""


def table(res, phases, cols):
    """One Markdown table: per column key (title, key), the phase's median
    with its min-max, and the median difference from `none` of the same
    cycle with its 95% interval."""
    print("| phase | " + " | ".join("%s (median, min-max) | vs none (95%% interval)" % t
                                    for t, _ in cols) + " |")
    print("|---|" + "---|---|" * len(cols))
    for p in phases:
        row = [p]
        for _, k in cols:
            v = res[p][k]
            if not v or None in v:
                row += ["-", "-"]
                continue
            d = [x - y for x, y in zip(v, res["none"][k])]
            lo, hi = median_interval(d)
            row.append("%.0f (%.0f-%.0f)" % (statistics.median(v), min(v), max(v)))
            row.append("%+.0f (%+.0f..%+.0f)" % (statistics.median(d), lo, hi))
        print("| " + " | ".join(row) + " |")


def paired_table(res, phases):
    """Each phase's own cost measured within it (--paired): the median
    over the cycles of its on - off ns per op and per region, with a 95%
    interval, off's ns per op beside (what `none` is), and each one's ratio
    to all_cb's of the same cycle."""
    print("| phase (paired within the phase) | ns/op on - off (median, 95% interval) | off ns/op "
          "| / all_cb (median, 95% interval) | ns/region on - off | / all_cb |")
    print("|---|---|---|---|---|---|")
    for p in phases:
        row = [p]
        for k in ("op", "region"):
            v = res[p][k + "_pair"]
            r = [x / y for x, y in zip(v, res["all_cb"][k + "_pair"]) if y > 0] \
                if "all_cb" in phases and p != "all_cb" else []
            lo, hi = median_interval(v)
            row.append("%+.1f (%+.1f..%+.1f)" % (statistics.median(v), lo, hi))
            if k == "op":
                row.append("%.0f" % statistics.median(res[p]["op_off"]))
            if r:
                lo, hi = median_interval(r)
                row.append("%.2f (%.2f..%.2f)" % (statistics.median(r), lo, hi))
            else:
                row.append("-")
        print("| " + " | ".join(row) + " |")


def paired_ratios(res, phases, base="profiler"):
    """Per cycle, each ptbpf phase's paired cost per op and per region over
    base's of the same cycle: median and 95% interval (issue 23's ratio to
    torch.profiler, measured per op rather than from step times)."""
    if base not in phases:
        return
    for p in [p for p in phases if p.startswith("ptbpf")]:
        for k in ("op", "region"):
            r = [x / y for x, y in zip(res[p][k + "_pair"], res[base][k + "_pair"]) if y > 0]
            if r:
                lo, hi = median_interval(r)
                print("# %s's cost per %s / %s's (paired): median %.2f, 95%% interval "
                      "%.2f..%.2f, %d cycles" % (p, k, base, statistics.median(r), lo, hi,
                                                 len(r)))


def above(res, a, b, k):
    """Per cycle, a's cost over b's (both over none), for key k: median and
    95% interval."""
    d = [x - y for x, y in zip(res[a][k], res[b][k])]
    lo, hi = median_interval(d)
    return statistics.median(d), lo, hi


def launch_above_op(res, p, k="launch", ko="op"):
    """Per cycle, p's cost per launch above its op's: (launch loop - none)
    - (op loop - none)."""
    return [(l - ln) - (o - on) for l, ln, o, on in
            zip(res[p][k], res["none"][k], res[p][ko], res["none"][ko])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=9)
    ap.add_argument("--ops", type=int, default=200000)
    ap.add_argument("--regions", type=int, default=20000)
    ap.add_argument("--launches", type=int, default=50000)
    ap.add_argument("--nodes", type=int, default=20000,
                    help="backward nodes a phase (0: none)")
    ap.add_argument("--switched-nodes", type=int, default=0, metavar="P",
                    help="also P pairs a cycle of 2,000-node blocks with user_cb, agent_steps "
                    "or all_cb itself switched (those of --phases): the callback's cost per "
                    "backward node, registration and all")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--phases")
    ap.add_argument("--alt", metavar="DIR",
                    help="a directory with another build's ptbpf and libptbpf-agent.so: "
                    "phase ptbpf_ops_alt")
    ap.add_argument("--paired", type=int, default=0, metavar="B",
                    help="also time each phase's own cost within it: blocks of B ops (B/10 "
                    "regions) with RecordFunction on and off for the thread, alternating")
    ap.add_argument("--max-seconds", type=float,
                    help="start no cycle after this many seconds (at least 2 are run)")
    args = ap.parse_args()
    deadline = time.time() + args.max_seconds if args.max_seconds else None
    cuda = args.device == "cuda"
    known = PHASES + (CUDA_PHASES if cuda else []) + (["ptbpf_ops_alt"] if args.alt else [])
    phases = args.phases.split(",") if args.phases else known
    if "none" not in phases or set(phases) - set(known):
        sys.exit("--phases: some of %s, none among them" % ",".join(known))
    if cuda and "profiler" in phases and set(phases) & set(CUPTI):
        # Kineto keeps its CUPTI subscriber after its first session (H200,
        # torch 2.11): floor.c's cuptiSubscribe fails from then on.
        sys.exit("--phases: profiler and %s cannot share a process on CUDA (Kineto stays "
                 "subscribed to CUPTI); run them apart" % ",".join(sorted(set(phases) & set(CUPTI))))
    torch.set_num_threads(1)
    ph = Phases()
    ph.alt = args.alt
    ph.cuda = cuda
    counters = Counters(ph.floor)
    if args.paired and ph.floor.floor_rf_thread(1):
        sys.exit("--paired: %s" % ph.floor.floor_why().decode())
    keys = ["op", "op_cpu", "op_cyc", "op_ins", "region", "node", "launch", "launch_cpu",
            "node_sw", "op_pair",
            "op_off", "region_pair", "region_off"]
    res = {p: {k: [] for k in keys} for p in known}
    print("# %d ops, %d regions%s a phase; %d cycles after a warm-up; torch %s%s" % (
        args.ops, args.regions, ", %d launches" % args.launches if cuda else "", args.cycles,
        torch.__version__, ", %s" % torch.cuda.get_device_name() if cuda else ""))
    for cycle in range(args.cycles + 1):  # the first one warms up
        if deadline and cycle > 2 and time.time() > deadline:
            print("# stopped after %d cycles (--max-seconds)" % (cycle - 1))
            break
        order = phases[:]
        random.shuffle(order)
        for p in order:
            ph.on(p)
            got = dict(zip(("op", "op_cpu", "op_cyc", "op_ins"), time_ops(args.ops, counters)))
            got["region"] = time_regions(args.regions)
            if args.nodes:
                got["node"] = time_nodes(args.nodes)
            if args.paired:
                got["op_pair"], got["op_off"] = time_paired(ph.floor, args.ops, args.paired)
                got["region_pair"], got["region_off"] = time_paired(
                    ph.floor, args.regions, max(1, args.paired // 10), regions=True)
            if cuda:
                got["launch"], got["launch_cpu"], _, _ = time_ops(args.launches, counters, "cuda")
            hits = ph.off(p)
            if args.switched_nodes and p in SWITCHED:
                sw = time_nodes_switched(ph, p, args.switched_nodes, 2000)
                if cycle:
                    res[p]["node_sw"] += sw
            if cycle:
                for k, v in got.items():
                    res[p][k].append(v)
            if cycle == 1 and hits:
                print("# %s phase: %s" % (p, hits))
    if counters.why:
        print("# no hardware counters: %s" % counters.why)
    table(res, phases, [("ns/op", "op"), ("the thread's CPU ns/op", "op_cpu"),
                        ("ns/region", "region")] +
          ([("ns/backward node", "node")] if args.nodes else []))
    if not counters.why:
        print()
        table(res, phases, [("cycles/op", "op_cyc"), ("instructions/op", "op_ins")])
    if cuda:
        print()
        table(res, phases, [("ns/launch", "launch"), ("the thread's CPU ns/launch", "launch_cpu")])
    if args.switched_nodes:
        print()
        print("| phase (switched around blocks of 2,000 backward nodes) | pairs | ns/node on - off "
              "(median, 95% interval) |")
        print("|---|---|---|")
        for p in phases:
            v = res[p]["node_sw"]
            if v:
                lo, hi = median_interval(v)
                print("| %s | %d | %+.0f (%+.0f..%+.0f) |" % (p, len(v), statistics.median(v),
                                                            lo, hi))
    if args.paired:
        print()
        paired_table(res, phases)
        paired_ratios(res, phases)
    for p in WORK:
        if p in phases and "all_cb" in phases:
            for k in ("op", "op_cpu"):
                m, lo, hi = above(res, p, "all_cb", k)
                print("# %s above all_cb (%s): median %+.0f ns/op, 95%% interval %+.0f..%+.0f" %
                      (p, "wall" if k == "op" else "thread CPU", m, lo, hi))
    pairs = [("ptbpf_ops", "all_cb", "op"), ("ptbpf_ops", "agent4_cb", "op"),
             ("ptbpf_ops_kclock", "all_cb", "op"), ("ptbpf", "all_cb", "op"),
             ("ptbpf_ops_alt", "all_cb", "op")]
    if cuda:
        # A launch is an op too: its cost above the op's floor is the
        # launch's, against CUPTI's floors.
        pairs += [("ptbpf_calls", "all_cb", "launch"), ("ptbpf_ops", "all_cb", "launch")]
    for a, b, base in pairs:
        if a in phases and b in phases:
            for k in (base, base + "_cpu"):
                r = [(x - n) / (y - n) for x, y, n in zip(res[a][k], res[b][k], res["none"][k])
                     if y > n]
                if r:
                    lo, hi = median_interval(r)
                    print("# %s's cost per %s / %s's (%s, per cycle where %s cost > 0): "
                          "median %.2f, 95%% interval %.2f..%.2f, %d cycles" %
                          (a, base, b, "wall" if k == base else "thread CPU", b,
                           statistics.median(r), lo, hi, len(r)))
    if cuda:
        # Per launch above the op: (launch loop - none) - (op loop - none).
        for p in phases:
            if p == "none":
                continue
            for k, ko in (("launch", "op"), ("launch_cpu", "op_cpu")):
                d = launch_above_op(res, p, k, ko)
                lo, hi = median_interval(d)
                print("# %s per launch above its op (%s): median %+.0f ns, 95%% interval "
                      "%+.0f..%+.0f" % (p, "wall" if k == "launch" else "thread CPU",
                                        statistics.median(d), lo, hi))
        for a, b in (("ptbpf_ops", "cupti_both"), ("ptbpf_calls", "cupti_cb")):
            if a in phases and b in phases:
                for k, ko in (("launch", "op"), ("launch_cpu", "op_cpu")):
                    r = [x / y for x, y in zip(launch_above_op(res, a, k, ko),
                                               launch_above_op(res, b, k, ko)) if y > 0]
                    if r:
                        lo, hi = median_interval(r)
                        print("# %s's cost per launch above its op / %s's (%s): median %.2f, "
                              "95%% interval %.2f..%.2f, %d cycles" %
                              (a, b, "wall" if k == "launch" else "thread CPU",
                               statistics.median(r), lo, hi, len(r)))


if __name__ == "__main__":
    main()
