# SPDX-License-Identifier: BSD-2-Clause
"""`make bench` (CPU) and `make gpu-check` (CUDA): ptbpf's overhead against
torch.profiler's and against the floors of what it does, interleaved in
one process so that a noisy machine moves all of them alike.

For each workload a bench_target.py process serves short timed phases.
A cycle runs every phase once, in an order shuffled anew each cycle:

  untraced         nothing attached
  ptbpf            `ptbpf -p PID` attached (the agent: ops from RecordFunction
                   callbacks, on CUDA also the CUDA calls and the GPU timeline
                   from CUPTI), stopped with SIGINT after the phase
  profiler         torch.profiler, CPU (+ CUDA) activities
  rf1              floor: torch's RecordFunction machinery, one empty callback
  w_ring_read      floor: one callback on every scope that takes what the agent
                   takes of each op and writes it into a 4 MiB ring of the
                   thread's, read every 20 ms by a thread of its own
                   (floor.c's FLOOR_W_*): the cost of the facts, nothing else
  rf7              the same on USER_SCOPE alone (record_function regions), as
                   the always-on step signal's callback (not a default phase)
  cupti_cb         floor (CUDA): CUPTI callbacks on the agent's CUDA calls, empty
  cupti_act        floor (CUDA): CUPTI activity, kernels/copies/sets, discarded
  floors           floor: those at once
  uprobe           reference: an entry uprobe on every op function whose BPF
                   program only counts (build/uprobe_floor): the eBPF floor for ops
  paired_X         (--paired X or X:switch) the floor X within its own phase:
                   blocks of steps, alternating, with torch's RecordFunction
                   on and off for the thread while X stays on, or with X
                   itself switched on or off before each block and one unit
                   run untimed (bench_target's `pair`); the one measure here
                   that the machine's drift between phases does not move.
                   sched:switch is ptbpf's kernel view (its programs and its
                   ring read) switched so, by build/sched_floor;
                   sched_nosys:switch the same without its system call
                   programs (the difference is what those cost);
                   graphs_kept:switch the daemon's kept capture map
                   (--keep-graphs) switched so over the step signal;
                   floors:switch every floor at once (rf1, and on CUDA
                   cupti_cb and cupti_act), with --paired profiler also
                   over the profiler's overhead: what any tracer built on
                   these mechanisms pays, against issue 23's step ratio
  paired_ptbpf     (--paired ptbpf) the whole of ptbpf within its own phase:
                   pairs of blocks, ptbpf attached before one of them (and
                   stopped, its trace complete, after it) and not the other,
                   in a random order; each block runs a tenth of a phase
                   untimed, then times a twentieth (bench_target's `block`).
                   ptbpf's start and stop are outside the timed blocks: what
                   it costs while it traces, after its first tens of ms
  paired_ptbpf_leanN (--paired ptbpf_lean0) the same with the Nth --lean-args:
                   what those leave out, each paired on its own
  paired_profiler  (--paired profiler) the same for torch.profiler (CPU +
                   CUDA), entered before the untimed units and left after
                   the timed ones; on CUDA in the twin process. With both,
                   the ratio of their medians (95% interval from resampling
                   the pairs) and of each cycle's: issue 23's step ratio
                   without the drift between phases
  steps            `ptbpf daemon`'s always-on layer between windows: the
                   agent's step signal (one USER_SCOPE callback timing
                   ProfilerStep, Optimizer.step and DataLoader regions; not
                   a default phase: with it the target loads the agent
                   itself at start, and every ptbpf phase uses that one)

Each phase's overhead is its time per unit over the same cycle's untraced
time per unit; the tables give the median over the cycles and the spread
(quartiles, min-max). On CUDA the profiler phases run in a twin process of
the same workload (with its own untraced phase in the same cycle): torch's
profiler keeps CUPTI's one callback subscriber for the life of a process
once it has run, and ptbpf's agent records no CUDA calls after that.
A first cycle warms everything up and is not counted.

Prints a Markdown section; --out appends it to a file (`make bench`: the
journal, docs/benchmarks-history.md)."""
import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tracestat  # noqa: E402
from stats import median_interval  # noqa: E402

UNIT = {"smallop": ("µs/op", 1e6), "step": ("ms/step", 1e3), "transformer": ("ms/step", 1e3),
        "gpubound": ("ms/step", 1e3), "graphs": ("ms/step", 1e3),
        "compiled": ("ms/step", 1e3)}
LABEL = {
    "ptbpf": "ptbpf (agent){}",
    "ptbpf_lean": "ptbpf{}",
    "profiler": "torch.profiler ({})",
    "profiler_cuda": "torch.profiler (CUDA only)",
    "profiler_cpu": "torch.profiler (CPU only)",
    "profiler_shapes": "torch.profiler (record_shapes)",
    "profiler_stack": "torch.profiler (with_stack)",
    "profiler_memory": "torch.profiler (profile_memory)",
    "rf1": "floor: empty RecordFunction callback",
    "rf4": "floor: empty RecordFunction callbacks, the agent's 4",
    "rf7": "floor: one empty RecordFunction callback on USER_SCOPE alone",
    "w_ring_read": "floor: the agent's facts per op (name, sequence numbers, unwinding, "
                   "TSC) written into a ring a thread reads every 20 ms, nothing else",
    "cupti_cb": "floor: CUPTI callbacks on the agent's CUDA calls, empty",
    "cupti_cb_rt": "floor: CUPTI callbacks, runtime API only, empty",
    "cupti_graph": "floor: CUPTI callbacks on CUDA graph nodes made or cloned (the agent's "
                   "capture map), empty",
    "cupti_graph_v2": "floor: CUPTI callbacks on CUDA graphs and their nodes made or cloned, "
                      "through cuptiSubscribe_v2 (the daemon's kept map's subscriber), empty",
    "cupti_act": "floor: CUPTI activity (kernels, copies, sets)",
    "cupti_act_api": "floor: CUPTI activity + runtime API records",
    "floors": "floors at once ({})",
    "uprobe": "reference: entry uprobe per op (counting BPF program)",
    "steps": "the daemon's always-on step signal (between windows)",
    "graphs_kept": "the daemon's kept capture map (--keep-graphs: CUPTI's graph callbacks and "
                   "the job's calls into libcupti hooked), over its step signal in both halves",
    "sched": "the kernel view (ptbpf's scheduler, system call and fault programs, "
             "build/sched_floor)",
    "sched_nosys": "the kernel view without its system call programs (build/sched_floor)",
}


def read_line(p, what):
    line = p.stdout.readline()
    if not line:
        raise RuntimeError("%s exited: %s" % (what, p.stderr.read() if p.stderr else ""))
    return line.strip()


class Target:
    """A bench_target.py process serving phases."""

    def __init__(self, args, workload, sched_dir=None):
        # Its stderr (warnings) to a file: a pipe nobody reads could fill.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(
            [args.python, os.path.join(HERE, "bench_target.py"), workload, "--device",
             args.device, "--phase-s", str(args.phase_s), "--profiler-s", str(args.profiler_s),
             "--floor-lib", args.floor_lib] + (["--steps"] if "steps" in args.floors else []) +
            (["--sched-floor", sched_dir] if sched_dir else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.pid = self.p.pid
        self.pair_x = args.pair_x

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            self.stderr.seek(0)
            raise RuntimeError("bench target exited: %s" % self.stderr.read()[-4000:])
        return line.strip()

    def ready(self):
        while True:
            words = self.read().split()
            if words[0] == "ready":
                self.units, self.prof_units = int(words[2]), int(words[3])
                return

    def run(self, phase):
        self.p.stdin.write("run %s\n" % phase)
        self.p.stdin.flush()
        while True:
            words = self.read().split()
            if words[0] == "value":
                self.cpu = float(words[4])  # the thread's CPU time per unit
                return float(words[2]), (float(words[3]) if words[3] != "-" else None)

    def pair(self, spec):
        """Pairs of blocks, SPEC "PHASE" (RecordFunction switched for the
        thread) or "PHASE:switch" (the phase itself switched around the
        block): on / off - 1 of each pair (bench_target's `pair`). Blocks of
        about a twentieth of a phase (15 ms on CUDA)."""
        phase, _, by = spec.partition(":")
        self.p.stdin.write("pair %s %d %s %g\n" % (phase, max(1, self.units // 20),
                                                     by or "thread", self.pair_x))
        self.p.stdin.flush()
        while True:
            words = self.read().split()
            if words[0] == "pairs":
                return [float(w) for w in words[2:]]

    def block(self, phase, k, settle):
        """bench_target's `block`: seconds for K units after SETTLE."""
        self.p.stdin.write("block %s %d %d\n" % (phase, k, settle))
        self.p.stdin.flush()
        while True:
            words = self.read().split()
            if words[0] == "block":
                return float(words[2])

    def quit(self):
        """Asks it to exit; the moment it is gone."""
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        self.p.wait()
        return time.monotonic()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class Ptbpf:
    def __init__(self, args, pid, trace, extra=()):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen([args.ptbpf, "-p", str(pid), "-o", trace, "--force"] +
                                  list(extra), stderr=subprocess.PIPE, text=True)
        self.err = ""
        while True:
            line = self.p.stderr.readline()
            if not line:
                raise RuntimeError("ptbpf did not attach: %s" % self.err)
            self.err += line
            if line.startswith("ptbpf: tracing pid"):
                self.attach_s = time.monotonic() - self.t0
                return

    def stop(self):
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGINT)
        return self.finish(t0)

    def finish(self, since):
        """Waits for it to exit: the trace is complete then."""
        self.err += self.p.stderr.read()
        self.p.wait()
        self.done_s = time.monotonic() - since
        if self.p.returncode:
            raise RuntimeError("ptbpf failed: %s" % self.err)
        return summary(self.err)


class UprobeFloor:
    def __init__(self, args, pid):
        self.p = subprocess.Popen([os.path.join(os.path.dirname(args.floor_lib), "uprobe_floor"),
                                   str(pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        if not read_line(self.p, "uprobe_floor").startswith("attached"):
            raise RuntimeError("uprobe_floor did not attach")

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        out, _ = self.p.communicate(timeout=60)
        m = re.search(r"hits (\d+)", out)
        return int(m.group(1)) if m else 0


class SchedFloor:
    """build/sched_floor: ptbpf's kernel view for the target, switched by
    the target itself through two FIFOs in DIR (`--paired sched:switch`)."""

    def __init__(self, args, pid, fifo_dir):
        self.p = subprocess.Popen([os.path.join(os.path.dirname(args.floor_lib), "sched_floor"),
                                   str(pid), os.path.join(fifo_dir, "cmd"),
                                   os.path.join(fifo_dir, "ack")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if read_line(self.p, "sched_floor") != "ready":
            raise RuntimeError("sched_floor did not load")

    def stop(self, fifo_dir):
        """After the target has exited: (records, lost)."""
        try:  # where the target never opened the FIFO, its end now
            os.close(os.open(os.path.join(fifo_dir, "cmd"), os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        out, err = self.p.communicate(timeout=60)
        m = re.search(r"records (\d+) sent \d+ lost (\d+)", out)
        if self.p.returncode or not m:
            raise RuntimeError("sched_floor failed: %s" % err.strip())
        return int(m.group(1)), int(m.group(2))


def summary(err):
    """What ptbpf's closing summary says."""
    out = {}
    pats = dict(events=r"events by kind:.* total (\d+)",
                lost_bpf=r"sent \d+ = received \d+ \+ lost (\d+)",
                lost_unread=r"agent op rings: written \d+ = read \d+ \+ gone unread (\d+)",
                lost_ops=r"agent op rings: written \d+ = read \d+ .*?; not written: (\d+)",
                kernels=r"GPU timeline \(agent\): kernels (\d+)",
                rss_mb=r"peak RSS ([\d.]+) MB", cpu_s=r"CPU [\d.]+ s in all, ([\d.]+) s while",
                no_corr=r"(no CUDA call callbacks)",
                # --bpf-stats (in --ptbpf-args): the kernel's count of its programs
                bpf_probes_ms=r"own time .*?probes and the agent's points \d+ runs, ([\d.]+) ms",
                bpf_sched_ms=r"own time .*?kernel view \d+ runs, ([\d.]+) ms",
                bpf_samples_ms=r"own time .*?CPU samples \d+ runs, ([\d.]+) ms",
                bpf_traced_s=r"of one CPU over the ([\d.]+) s counted",
                switches=r"kernel view: switches (\d+)",
                wakeups=r"kernel view: switches .*?, wakeups (\d+)",
                blocking=r"blocking system calls (\d+)")
    for k, pat in pats.items():
        m = re.search(pat, err)
        if m:
            out[k] = m.group(1) if k == "no_corr" else float(m.group(1))
    out["lost"] = out.get("lost_bpf", 0) + out.get("lost_ops", 0) + out.get("lost_unread", 0)
    return out


WHOLE = ("ptbpf", "profiler")  # --paired phases that are a whole tool


def is_whole(args, name):
    """A --paired phase that is a whole tool: ptbpf, profiler, or ptbpf
    with the Nth --lean-args (ptbpf_leanN)."""
    return name in WHOLE or name in lean_phases(args)


def whole_pairs(args, tgt, tool, trace, rng, runs):
    """--paired ptbpf / ptbpf_leanN / profiler: on / off - 1 of each pair
    of blocks, the tool on for one block of each (bench_target's `block`).
    ptbpf's closing summaries go to RUNS."""
    extra = args.ptbpf_args + lean_phases(args).get(tool, [])
    k, settle = max(1, tgt.units // 20), max(1, tgt.units // 10)
    out = []
    for _ in range(args.whole_pairs):
        t = {}
        for on in rng.sample((1, 0), 2):
            if tool != "profiler" and on:
                pt = Ptbpf(args, tgt.pid, trace, extra)
                t[on] = tgt.block("plain", k, settle)
                runs.append(pt.stop())
                time.sleep(args.settle_s)
            else:
                t[on] = tgt.block("profiler" if on else "plain", k, settle)
        out.append(t[1] / t[0] - 1)
    return out


def bench_workload(args, workload, log):
    twin_needed = args.profiler_in == "twin"
    # Traces go to memory where there is a tmpfs: writing them back to disk
    # would take CPU from the phases after.
    tmp = tempfile.mkdtemp(prefix="ptbpf-bench-",
                           dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    sched_dir = None
    if {"sched:switch", "sched_nosys:switch"} & set(args.paired):
        sched_dir = tmp
        os.mkfifo(os.path.join(tmp, "cmd"))
        os.mkfifo(os.path.join(tmp, "ack"))
    main = Target(args, workload, sched_dir)
    twin = Target(args, workload) if twin_needed else None
    rng = random.Random(1)
    lean = lean_phases(args)
    cycles, runs = [], []
    sched_floor, sched_records = None, None
    try:
        main.ready()
        if sched_dir:
            sched_floor = SchedFloor(args, main.pid, sched_dir)
        if twin:
            twin.ready()
        in_twin = {"paired_profiler"} if twin else set()
        paired = ["paired_" + p for p in args.paired]
        phases = (["untraced", "ptbpf"] + list(lean) + args.floors +
                  [p for p in paired if p not in in_twin] + ([] if twin else args.profilers))
        twin_phases = (["twin_untraced"] + ["twin_" + p for p in args.profilers] +
                       ["twin_" + p for p in paired if p in in_twin]) if twin else []
        whole_runs = []
        t_start = time.monotonic()
        for c in range(args.cycles + 1):
            if (args.max_seconds and c > 1 and
                    time.monotonic() - t_start > args.max_seconds):
                log("%s: %d of %d cycles after %.0f s (--max-seconds)" % (
                    workload, c - 1, args.cycles, time.monotonic() - t_start))
                break
            values, post = {}, {}
            order = phases + twin_phases
            rng.shuffle(order)
            for ph in order:
                tgt = twin if ph.startswith("twin_") else main
                name = ph[5:] if ph.startswith("twin_") else ph
                if name == "ptbpf":
                    pt = Ptbpf(args, tgt.pid, os.path.join(tmp, "t.pftrace"), args.ptbpf_args)
                    values[ph], _ = tgt.run("plain")
                    values["cpu:" + ph] = tgt.cpu
                    s = pt.stop()
                    s.update(attach_s=pt.attach_s, stop_s=pt.done_s)
                    runs.append(s)
                    time.sleep(args.settle_s)
                elif name in lean:
                    pt = Ptbpf(args, tgt.pid, os.path.join(tmp, "t.pftrace"),
                               args.ptbpf_args + lean[name])
                    values[ph], _ = tgt.run("plain")
                    values["cpu:" + ph] = tgt.cpu
                    pt.stop()
                    time.sleep(args.settle_s)
                elif is_whole(args, name[len("paired_"):]):
                    values[name] = whole_pairs(args, tgt, name[len("paired_"):],
                                               os.path.join(tmp, "t.pftrace"), rng, whole_runs)
                elif name.startswith("paired_"):
                    values[ph] = tgt.pair(name[len("paired_"):])
                elif name == "uprobe":
                    up = UprobeFloor(args, tgt.pid)
                    values[ph], _ = tgt.run("plain")
                    values["uprobe_hits"] = up.stop() / tgt.units
                    time.sleep(args.settle_s)
                else:
                    values[ph], post[ph] = tgt.run("plain" if name == "untraced" else name)
                    values["cpu:" + ph] = tgt.cpu
            log("%s cycle %d: %s" % (workload, c, " ".join(
                "%s=%.4g" % (k, v * UNIT[workload][1]) for k, v in values.items()
                if not k.endswith("_hits") and not k.startswith(("cpu:", "paired_")))))
            if c > 0:  # cycle 0 warms up
                values["post"] = post
                cycles.append(values)
        # Last: the trace's contents, and how soon it is complete once the
        # process exits.
        trace = os.path.join(tmp, "exit.pftrace")
        pt = Ptbpf(args, main.pid, trace, args.ptbpf_args)
        main.run("plain")
        gone = main.quit()
        s = pt.finish(gone)
        if sched_floor:
            sched_records = sched_floor.stop(sched_dir)
        stat = tracestat.scan(trace)
        exit_info = dict(exit_s=pt.done_s, units=main.units, stat=stat, summary=s,
                         bytes=os.path.getsize(trace))
    finally:
        main.kill()
        if twin:
            twin.kill()
        if sched_floor and sched_floor.p.poll() is None:
            sched_floor.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return dict(cycles=cycles, runs=runs, exit=exit_info, units=main.units,
                prof_units=main.prof_units, sched_records=sched_records,
                whole_lost=sum(x.get("lost", 0) for x in whole_runs),
                whole_attaches=len(whole_runs),
                whole_gpu=sum(1 for x in whole_runs if x.get("kernels", 0) > 0))


def lean_phases(args):
    """The ptbpf phases with --lean-args added, by phase name."""
    return {"ptbpf_lean%d" % i: a for i, a in enumerate(args.lean_args)}


def quartiles(v):
    v = sorted(v)
    if len(v) < 2:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[1], q[2]


def overheads(res, phase):
    """Per-cycle overhead of phase over its own process's untraced phase
    ("cpu:PHASE": in the timing thread's CPU time)."""
    cpu = "cpu:" if phase.startswith("cpu:") else ""
    base = cpu + ("twin_untraced" if phase[len(cpu):].startswith("twin_") else "untraced")
    return [c[phase] / c[base] - 1 for c in res["cycles"] if phase in c]


def fmt_spread(v, pct=True):
    if not v:
        return "| | | |"
    q1, m, q3 = quartiles(v)
    f = (lambda x: "%+.1f%%" % (x * 100)) if pct else (lambda x: "%.2f" % x)
    return "| %s | %s .. %s | %s .. %s |" % (f(m), f(q1), f(q3), f(min(v)), f(max(v)))


def ratios(a, b):
    return [x / y for x, y in zip(a, b) if y > 0]


def ratio_to_profiler(res, phase, what):
    """The table rows of paired PHASE's overhead over the paired profiler's:
    the ratio of the pairs' medians, with a 95% interval from 2,000
    resamplings of the pairs, and the median of the cycles' own ratios."""
    key = "paired_" + phase
    a = [x for c in res["cycles"] for x in c.get(key, [])]
    b = [x for c in res["cycles"] for x in c.get("paired_profiler", [])]
    if not a or not b or statistics.median(b) <= 0:
        return []
    rng = random.Random(2)
    boot = sorted(statistics.median(rng.choices(a, k=len(a))) /
                  statistics.median(rng.choices(b, k=len(b))) for _ in range(2000))
    cyc = [statistics.median(c[key]) / statistics.median(c["paired_profiler"])
           for c in res["cycles"] if c.get(key) and c.get("paired_profiler")]
    clo, chi = median_interval(cyc)
    ratio = statistics.median(a) / statistics.median(b)
    return ["| %s / the profiler's, both paired: the pairs' medians %.3f (95%% "
            "interval from 2,000 resamplings of the pairs %.3f .. %.3f); of the %d cycles' "
            "own: %.3f (%.3f .. %.3f) | %.2f | | |" % (
                what, ratio, boot[49], boot[1949], len(cyc), statistics.median(cyc), clo, chi,
                ratio)]


def report(args, workload, res):
    name, scale = UNIT[workload]
    cuda = args.device == "cuda"
    prof_key = ("twin_" if args.profiler_in == "twin" else "") + "profiler"
    base = statistics.median(c["untraced"] for c in res["cycles"])
    lines = ["", "#### %s (untraced %.3f %s; %d cycles, %d units a phase, %d under the "
             "profiler)" % (workload, base * scale, name, len(res["cycles"]), res["units"],
                           res["prof_units"]), "",
             "| phase | overhead (median) | quartiles | min .. max |", "|---|---|---|---|"]
    lean = lean_phases(args)
    keys = ["ptbpf"] + list(lean) + [prof_key] + ["twin_" + p if args.profiler_in == "twin" else p
                                  for p in args.profilers if p != "profiler"] + args.floors
    what = {"ptbpf": (" (ops + CUDA calls + GPU timeline)" if cuda else " (ops)") +
            ("".join(" " + a for a in args.ptbpf_args)),
            "profiler": "CPU+CUDA" if cuda else "CPU",
            "floors": "RecordFunction + CUPTI callbacks + activity" if cuda else "RecordFunction"}
    what.update((k, "".join(" " + a for a in args.ptbpf_args + v)) for k, v in lean.items())

    def label(k):
        bare = k[5:] if k.startswith("twin_") else k
        return LABEL["ptbpf_lean" if bare in lean else bare].format(what.get(bare, ""))
    for k in keys:
        lines.append("| %s %s" % (label(k), fmt_spread(overheads(res, k))))
    for ph in args.paired:
        v = [x for c in res["cycles"] for x in c.get("paired_" + ph, [])]
        if not v:
            continue
        lo, hi = median_interval(v)
        # Pairs of one cycle share its conditions; the cycles' own medians
        # are independent, and their interval does not assume the pairs are.
        cm = [statistics.median(c["paired_" + ph]) for c in res["cycles"]
              if c.get("paired_" + ph)]
        clo, chi = median_interval(cm)
        name, _, by = ph.partition(":")
        how = ("switched before each block, on or off, and %s settled" % (
            "a block's worth" if name == "graphs_kept" else "one unit") if by else
               "attached or started before one block of each pair, a tenth of a phase "
               "settled" if is_whole(args, name) else "RecordFunction on / off for the thread")
        lines.append("| %s, within the phase (%s), %d pairs of blocks (95%% interval of the "
                     "median %+.2f%% .. %+.2f%%; of the %d cycles' medians: %+.2f%%, %+.2f%% .. "
                     "%+.2f%%) %s" % (
                         label(name), how, len(v), lo * 100, hi * 100,
                         len(cm), statistics.median(cm) * 100, clo * 100, chi * 100,
                         fmt_spread(v)))
    if "profiler" in args.paired:
        if "ptbpf" in args.paired:
            lines += ratio_to_profiler(res, "ptbpf", "ptbpf's overhead")
            lines.append("| (ptbpf attached %d times for its pairs, %d events lost%s) | | | |" % (
                res.get("whole_attaches", 0), res.get("whole_lost", 0),
                ", kernels recorded in %d" % res.get("whole_gpu", 0) if cuda else ""))
        if "floors:switch" in args.paired:
            lines += ratio_to_profiler(res, "floors:switch", "the floors' overhead, all at once")
        if "w_ring_read:switch" in args.paired:
            lines += ratio_to_profiler(res, "w_ring_read:switch", "the per-op facts' overhead")
    if res.get("sched_records"):
        lines.append("| (build/sched_floor read %d records of the kernel view, %d lost) | | | |"
                     % res["sched_records"])
    p = overheads(res, "ptbpf")
    r = overheads(res, prof_key)
    floor_parts = ["rf1"] + (["cupti_cb", "cupti_act"] if cuda else [])
    fsum = None
    if all(f in args.floors for f in floor_parts):
        fsum = [sum(c[f] / c["untraced"] - 1 for f in floor_parts) for c in res["cycles"]]
    for k, v in lean.items():
        lines.append("| what %s leaves out (ptbpf / ptbpf %s, per cycle) %s" % (
            " ".join(v), " ".join(v), fmt_spread([c["ptbpf"] / c[k] - 1 for c in res["cycles"]])))
    lines.append("| ptbpf's overhead / the profiler's (per cycle) %s" %
                 fmt_spread(ratios(p, r), pct=False))
    if fsum:
        lines.append("| ptbpf's overhead / the sum of its floors (%s) %s" % (
            " + ".join(floor_parts), fmt_spread(ratios(p, fsum), pct=False)))
    # The same in the timing thread's CPU time: what the job's thread
    # spent itself, less exposed to other processes on a shared host
    # (and blind to waits, e.g. on a GPU that work made slower).
    for k in ["ptbpf"] + list(lean) + [prof_key]:
        lines.append("| CPU time: %s %s" % (label(k), fmt_spread(overheads(res, "cpu:" + k))))
    for k, v in lean.items():
        lines.append("| CPU time: what %s leaves out %s" % (" ".join(v), fmt_spread(
            [c["cpu:ptbpf"] / c["cpu:" + k] - 1 for c in res["cycles"]])))
    lines.append("| CPU time: ptbpf's overhead / the profiler's %s" % fmt_spread(
        ratios(overheads(res, "cpu:ptbpf"), overheads(res, "cpu:" + prof_key)), pct=False))
    runs = res["runs"]
    med = lambda k: statistics.median(x.get(k, 0) for x in runs)  # noqa: E731
    post = [c["post"].get(prof_key) for c in res["cycles"] if c["post"].get(prof_key)]
    lines.append("")
    ex = res["exit"]
    st = ex["stat"]
    lines.append(
        "ptbpf, median of %d attaches: attach %.0f ms (to `tracing pid`), stop to complete "
        "trace %.0f ms, %d events (%d lost), loader peak RSS %.1f MB. Process exit to complete "
        "trace %.0f ms. Last trace: %d track events, %.1f bytes per track event%s. "
        "Profiler post-processing %.2f s a phase." % (
            len(runs), med("attach_s") * 1e3, med("stop_s") * 1e3, med("events"), med("lost"),
            med("rss_mb"), ex["exit_s"] * 1e3, st["events"], ex["bytes"] / max(st["events"], 1),
            "; CUDA calls NOT recorded in %d of the attaches (%s)" % (
                sum(1 for x in runs if x.get("no_corr")), runs[-1].get("no_corr"))
            if any(x.get("no_corr") for x in runs) else "",
            statistics.median(post) if post else 0))
    lines += bpf_share(runs)
    if any("switches" in x for x in runs):
        lines += ["", "The kernel view, median of the attaches: %d context switches, %d wakeups "
                  "and %d blocking system calls of the traced threads; %.1f, %.1f and %.1f a "
                  "unit of the phase (the attach holds a phase and ptbpf's start and stop)." % (
                      med("switches"), med("wakeups"), med("blocking"),
                      med("switches") / res["units"], med("wakeups") / res["units"],
                      med("blocking") / res["units"])]
    lines += per_unit(args, workload, res, base)
    return "\n".join(lines)


def bpf_share(runs):
    """With --ptbpf-args=--bpf-stats: ptbpf's BPF programs' own run time,
    by part, as a share of one CPU over the time each attach counted it
    (the kernel's count; what they can have taken from the job's thread at
    most, besides the uprobes' breakpoints and the tracepoints' dispatch),
    median and min-max over the attaches of the ptbpf phase."""
    have = [r for r in runs if r.get("bpf_traced_s")]
    if not have:
        return []
    out = ["", "ptbpf's BPF programs' own time (`--bpf-stats`, the kernel's count), per "
           "attach, as a share of one CPU over the time it counted: "]
    parts = []
    for key, name in (("bpf_sched_ms", "kernel view"), ("bpf_samples_ms", "CPU samples"),
                      ("bpf_probes_ms", "probes and the agent's points")):
        v = [r[key] / 10 / r["bpf_traced_s"] for r in have if key in r]
        if v:
            parts.append("%s %.3f%% (%.3f .. %.3f%%)" % (name, statistics.median(v), min(v),
                                                         max(v)))
    out[-1] += "; ".join(parts) + " (%d attaches)." % len(have)
    return out


def per_unit(args, workload, res, base):
    """The phases' costs per op and per launch (counts from the last trace)."""
    st = res["exit"]["stat"]
    units = res["exit"]["units"]
    ops = st["begins"].get("cpu_op", 0) / units
    launches = st["launches"] / units
    kernels = st["begins"].get("kernel", 0) / units
    if not ops:
        return []
    hits = statistics.median(c.get("uprobe_hits", 0) for c in res["cycles"])

    def cost(phase, per):
        v = [c[phase] - c["twin_untraced" if phase.startswith("twin_") else "untraced"]
             for c in res["cycles"] if phase in c]
        return statistics.median(v) / per * 1e9 if v and per else float("nan")
    prof_key = ("twin_" if args.profiler_in == "twin" else "") + "profiler"
    parts = ["%.1f ops (RecordFunction begins of ops), %.1f CUDA launches, %.1f kernels and "
             "%.0f uprobe hits a unit. Median cost per op: ptbpf %.0f ns, torch.profiler "
             "%.0f ns" % (ops, launches, kernels, hits, cost("ptbpf", ops), cost(prof_key, ops))]
    if "rf1" in args.floors:
        parts.append("empty RecordFunction callback %.0f ns" % cost("rf1", ops))
    if "rf4" in args.floors:
        parts.append("the agent's 4 empty callbacks %.0f ns" % cost("rf4", ops))
    if "uprobe" in args.floors:
        parts.append("counting uprobe %.0f ns a hit" % cost("uprobe", hits))
    text = "; ".join(parts) + "."
    if launches:
        extra = []
        for f in ("cupti_cb", "cupti_cb_rt", "cupti_act", "cupti_act_api"):
            if f in args.floors:
                extra.append("%s %.0f ns" % (LABEL[f].split(": ", 1)[1], cost(f, launches)))
        if extra:
            text += " Per launch: " + "; ".join(extra) + "."
    return ["", text]


def loader_throughput(args, log, n=0, seconds=0):
    """aten::add at the target's full speed, with the agent: n of them, or
    for `seconds` (ptbpf -d): what the loader sustains per CPU-second, its
    peak RSS, the losses, and how soon the trace is complete."""
    ctl = tempfile.mkdtemp(prefix="ptbpf-bench-")
    out_dir = tempfile.mkdtemp(prefix="ptbpf-bench-",
                               dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    go, trace = os.path.join(ctl, "go"), os.path.join(out_dir, "burst.pftrace")
    target = subprocess.Popen([args.python, os.path.join(ROOT, "tests", "workloads",
                                                         "workload.py"), "burst",
                               "--steps", str(n or 10 ** 10), "--go", go],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ,
                                       WORKLOAD_BURST_LIST=str(args.loader_list),
                                       WORKLOAD_BURST_THREADS=str(args.loader_threads)))
    try:
        while not read_line(target, "burst target").startswith("ready"):
            pass
        args_extra = ["-d", str(seconds)] if seconds else []
        pt = Ptbpf(args, target.pid, trace, args_extra)
        t0 = time.monotonic()
        open(go, "w").close()
        if seconds:
            pt.p.wait()
            wall = time.monotonic() - t0
            r = pt.finish(pt.t0 + pt.attach_s + seconds)  # from when -d ran out
            target.kill()
        else:
            target.wait()
            wall = time.monotonic() - t0
            r = pt.finish(time.monotonic())
        size = os.path.getsize(trace)
        stat = tracestat.scan(trace) if size < 300e6 else None
    finally:
        target.kill()
        shutil.rmtree(ctl, ignore_errors=True)
        shutil.rmtree(out_dir, ignore_errors=True)
    log("burst: %s" % r)
    what = "%d aten::add" % n if n else "%d s of aten::add" % seconds
    if args.loader_list:
        what += ", %d a time from aten::_foreach_add in %d thread%s" % (
            args.loader_list, args.loader_threads, "s" if args.loader_threads > 1 else "")
    per_event = ("%.1f bytes per track event" % (size / max(stat["events"], 1)) if stat else
                 "%.1f bytes per event received" % (size / max(r.get("events", 1), 1)))
    return ("- %s in %.2f s (%.2f M events/s): %d events, %d lost; loader CPU %.2f s "
            "= %.2f M events per CPU-second; peak RSS %.1f MB; trace %.1f MB, %s; "
            "complete %.0f ms after %s.\n" % (
                what, wall, r.get("events", 0) / wall / 1e6, r.get("events", 0),
                r.get("lost", 0), r.get("cpu_s", 0),
                r.get("events", 0) / max(r.get("cpu_s", 0), 1e-9) / 1e6, r.get("rss_mb", 0),
                size / 1e6, per_event, pt.done_s * 1e3,
                "ptbpf's -d ran out" if seconds else "the process exited"))


def ring_bench(args):
    """The agent's op recorder alone (build/ring_bench), in ns per op."""
    exe = os.path.join(os.path.dirname(args.floor_lib), "ring_bench")
    if not os.path.exists(exe):
        return ""
    out = subprocess.run([exe], capture_output=True, text=True).stdout
    m = re.search(r"empty callbacks ([\d.]+) ns/op\nagent callbacks ([\d.]+) ns/op", out)
    return ("The agent's op recorder alone (build/ring_bench: torch's callbacks for a begin "
            "and an end, a stand-in RecordFunction): %s ns per op, empty callbacks %s ns.\n" %
            (m.group(2), m.group(1))) if m else ""


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def machine(args):
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpu = ""
    if args.device == "cuda":
        gpu = subprocess.run([args.python, "-c", "import torch; print(torch.cuda.get_device_name())"],
                             capture_output=True, text=True).stdout.strip() + ", "
    return "%s%s, %d CPUs, kernel %s" % (gpu, cpu, os.cpu_count(), platform.release())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    ap.add_argument("--floor-lib", default=os.path.join(ROOT, "build", "libptbpf-floor.so"))
    ap.add_argument("--cycles", type=int, default=10, help="counted cycles (plus one warm-up)")
    ap.add_argument("--phase-s", type=float,
                    help="seconds of untraced work a phase times (default 1.0 CPU, 0.3 CUDA)")
    ap.add_argument("--profiler-s", type=float, help="the same under the profiler (default "
                    "0.5 CPU, 0.1 CUDA)")
    ap.add_argument("--settle-s", type=float, default=0.2,
                    help="pause after ptbpf or the uprobe floor detached")
    ap.add_argument("--workloads", help="default: step,transformer,smallop (+gpubound on "
                    "CUDA); also graphs (CUDA: torch.compile's reduce-overhead), compiled "
                    "(CUDA: Inductor's default mode); none: only "
                    "the loader sections")
    ap.add_argument("--floors", help="floor phases; default: rf1,rf4,uprobe on the CPU, "
                    "rf1,cupti_cb,cupti_act,floors,uprobe on CUDA (also: cupti_cb_rt, "
                    "cupti_graph, cupti_act_api, w_ring_read)")
    ap.add_argument("--paired", default="",
                    help="also these floor phases measured within the phase, in alternating "
                    "blocks: rf1, rf4, rf7, w_ring_read or steps with RecordFunction switched "
                    "for the thread; any of those or cupti_cb, cupti_act, floors, sched, "
                    "sched_nosys with ':switch' (rf7:switch): the floor itself switched "
                    "before each block; "
                    "ptbpf, ptbpf_leanN (with the Nth --lean-args), profiler: the whole tool on "
                    "for one block of each pair")
    ap.add_argument("--pair-x", type=float, default=3, metavar="X",
                    help="each --paired phase runs X phases' worth of units (default 3): "
                    "more pairs a cycle, for a run that measures little else")
    ap.add_argument("--max-seconds", type=float, default=0, metavar="S",
                    help="start no cycle of a workload after S seconds of it (at least one "
                    "counted cycle runs): a device call's limit kept")
    ap.add_argument("--whole-pairs", type=int, default=8, metavar="N",
                    help="pairs a cycle for --paired ptbpf and profiler (each ptbpf pair "
                    "attaches and stops it: about 1 s)")
    ap.add_argument("--profilers", default="profiler",
                    help="profiler phases: profiler, profiler_cuda, profiler_cpu, "
                    "profiler_shapes, profiler_stack, profiler_memory")
    ap.add_argument("--ptbpf-args", default="",
                    help="more arguments for ptbpf, e.g. --shapes (compare with "
                    "--profilers profiler,profiler_shapes)")
    ap.add_argument("--lean-args", action="append",
                    help="also a phase of ptbpf with these arguments added, e.g. "
                    "\"--no-sched --no-samples\": the cost of what they turn off; once "
                    "per phase (--lean-args=--no-samples for one word)")
    ap.add_argument("--profiler-in", choices=["same", "twin"],
                    help="default: same on the CPU, twin on CUDA (see above)")
    ap.add_argument("--loader-ops", type=int, default=0,
                    help="also a burst of this many aten::add: loader throughput")
    ap.add_argument("--loader-list", type=int, default=0,
                    help="the burst's aten::add come this many at a time from one "
                    "aten::_foreach_add (torch's C++ calls them: faster than Python can)")
    ap.add_argument("--loader-threads", type=int, default=1,
                    help="with --loader-list: this many Python threads at once")
    ap.add_argument("--loader-s", type=int, default=0,
                    help="also aten::add at full speed for this many seconds: the "
                    "loader's RSS over a long capture")
    ap.add_argument("--out", help="append the Markdown section to this file")
    ap.add_argument("--json", help="write every cycle's values (and paired blocks) here")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-cycle lines on stderr")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    args.workloads = (args.workloads.split(",") if args.workloads else
                      ["step", "transformer", "smallop"] + (["gpubound"] if cuda else []))
    args.workloads = [w for w in args.workloads if w != "none"]
    args.floors = (args.floors.split(",") if args.floors else
                   ["rf1", "cupti_cb", "cupti_act", "floors", "uprobe"] if cuda else
                   ["rf1", "rf4", "uprobe"])
    args.profilers = args.profilers.split(",")
    args.paired = [p for p in args.paired.split(",") if p]
    args.lean_args = [a.split() for a in args.lean_args or []]
    rf = {"rf1", "rf4", "rf7", "w_ring_read", "steps"}
    if set(args.paired) - rf - set(WHOLE) - set(lean_phases(args)) - {p + ":switch" for p in
                                             rf | {"cupti_cb", "cupti_graph",
                                                   "cupti_graph_v2", "cupti_act",
                                                   "floors", "sched", "sched_nosys",
                                                   "graphs_kept"}}:
        ap.error("--paired takes rf1, rf4, rf7, w_ring_read, steps, ptbpf, ptbpf_leanN (the "
                 "Nth --lean-args) and profiler, and with ':switch' also cupti_cb, cupti_graph, "
                 "cupti_graph_v2, "
                 "cupti_act, floors, sched, sched_nosys and graphs_kept")
    if {"steps", "steps:switch", "graphs_kept:switch"} & set(args.paired) and \
            "steps" not in args.floors:
        args.floors.append("steps")  # the target loads the agent for it
    args.ptbpf_args = args.ptbpf_args.split()
    args.profiler_in = args.profiler_in or ("twin" if cuda else "same")
    # On CUDA the profiler's post-processing (seconds for a tenth of a
    # second of the launch-bound step) is most of a cycle: short phases.
    args.phase_s = args.phase_s or (0.3 if cuda else 1.0)
    args.profiler_s = args.profiler_s or (0.1 if cuda else 0.5)

    def log(s):
        if not args.quiet:
            print(s, file=sys.stderr, flush=True)
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    t0 = time.monotonic()
    load0 = loadavg()
    parts, raw = [], {}
    for w in args.workloads:
        raw[w] = bench_workload(args, w, log)
        parts.append(report(args, w, raw[w]))
    if args.json:  # every cycle's values and pairs, to pool runs later
        with open(args.json, "w") as f:
            json.dump(raw, f)
    if args.loader_ops or args.loader_s:
        parts.append("\n#### loader throughput (agent)\n\n" +
                     (loader_throughput(args, log, n=args.loader_ops) if args.loader_ops else "") +
                     (loader_throughput(args, log, seconds=args.loader_s) if args.loader_s
                      else ""))
    head = ("\n### Interleaved benchmark, %s, %s, torch %s (%s)\n\n`bench.py --device %s "
            "--cycles %d`; %s; each overhead is a phase's time per unit over the same "
            "cycle's untraced time; %.0f s in all; load average %s before, %s after.\n" % (
                datetime.date.today().isoformat(), args.device, torch_version, machine(args),
                args.device, args.cycles, "the profiler in a twin process" if
                args.profiler_in == "twin" else "all phases in one process",
                time.monotonic() - t0, load0, loadavg()))
    text = head + "\n" + ring_bench(args) + "\n".join(parts) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
