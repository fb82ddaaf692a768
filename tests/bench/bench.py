# SPDX-License-Identifier: BSD-2-Clause
"""`make bench`: ptbpf's overhead next to torch.profiler's, in the same
process and the same run.

For each workload a bench_target.py process times rounds of
untraced / traced by ptbpf / after ptbpf detached / under torch.profiler.
The traced rounds cycle through ptbpf's op sources: the agent's
RecordFunction callbacks (--ops agent: the default in CUDA processes; with
CUDA also launches and the CUPTI timeline), full uprobe spans (--ops probes:
entry + single-stepped ret probes) and --entries-only (entry probes only),
which separates the cost of an emulated probe hit from a single-stepped
one. Prints a Markdown section; with --out it is appended to that file
(BENCHMARKS.md)."""
import argparse
import datetime
import os
import platform
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


def read_line(p):
    line = p.stdout.readline()
    if not line:
        raise RuntimeError("bench target exited: %s" % p.stderr.read())
    return line.strip()


def wait_tracing(tracer):
    err = b""
    while True:
        line = tracer.stderr.readline()
        if not line:
            raise RuntimeError("ptbpf did not attach: %s" % err.decode())
        err += line
        m = re.search(rb"planned in (\d+) ms, attached in (\d+) ms", line)
        if line.startswith(b"ptbpf: tracing pid"):
            return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def parse_summary(err):
    out = {}
    m = re.search(r"sent (\d+) = received (\d+) \+ lost (\d+)", err)
    if m:
        out["sent"], out["received"], out["lost"] = map(int, m.groups())
    m = re.search(r"events by kind:.* total (\d+)", err)
    if m:  # BPF events and agent op records alike
        out["received"] = int(m.group(1))
    m = re.search(r"agent op rings: written \d+ = read \d+ .*?; not written: (\d+)", err)
    if m:
        out["lost"] = out.get("lost", 0) + int(m.group(1))
    m = re.search(r"peak RSS ([\d.]+) MB, CPU ([\d.]+) s in all, ([\d.]+) s while tracing", err)
    if m:
        out["rss_mb"] = float(m.group(1))
        out["cpu_s"] = float(m.group(3))
    m = re.search(r"GPU timeline \(agent\): kernels (\d+)", err)
    out["kernels"] = int(m.group(1)) if m else 0
    m = re.search(r"wrote .* \(([\d.]+) MB\)", err)
    if m:
        out["mb"] = float(m.group(1))
    return out


# (name, ptbpf arguments, the torch.profiler variant it is compared with)
# of the traced rounds; --modes picks which run, in turn.
ALL_MODES = [("agent", ["--ops", "agent"], "plain"), ("probes", ["--ops", "probes"], "plain"),
             ("entries", ["--entries-only"], "plain"),
             ("shapes", ["--ops", "agent", "--shapes"], "shapes"),
             ("stacks", ["--ops", "agent", "--py-stacks"], "stack"),
             ("stacks10", ["--ops", "agent", "--py-stacks=10"], "stack"),
             ("memory", ["--ops", "agent", "--memory"], "memory")]
MODES = ALL_MODES[:3]


def bench_workload(args, workload):
    ctl = tempfile.mkdtemp(prefix="ptbpf-bench-")
    target = subprocess.Popen([args.python, os.path.join(HERE, "bench_target.py"), workload,
                               "--device", args.device, "--ctl", ctl,
                               "--rounds", str(args.rounds), "--profilers",
                               ",".join(sorted(set(m[2] for m in MODES)))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    values, runs = {}, []
    tracer = None
    try:
        while True:
            line = read_line(target)
            words = line.split()
            if words[0] == "value":
                phase, rnd, v = words[1], int(words[2]), float(words[3])
                if phase == "untraced" and rnd >= args.rounds:
                    rnd -= args.rounds
                if phase == "traced":
                    phase = "traced_" + MODES[rnd % len(MODES)][0]
                values.setdefault(phase, []).append(v)
                # The target times each profiler variant once a round, last.
                post = sum(len(v) for k, v in values.items() if k.endswith("postprocess"))
                if post == args.rounds * len(set(m[2] for m in MODES)):
                    break
            elif words[0] == "barrier" and words[1].startswith("attached"):
                rnd = int(words[1][len("attached"):])
                mode, extra, _ = MODES[rnd % len(MODES)]
                trace = os.path.join(ctl, "t%d.pftrace" % rnd)
                t0 = time.time()
                tracer = subprocess.Popen([args.ptbpf, "-p", str(target.pid), "-o", trace] + extra,
                                          stderr=subprocess.PIPE)
                plan_ms, attach_ms = wait_tracing(tracer)
                runs.append(dict(mode=mode, plan_ms=plan_ms,
                                 attach_ms=attach_ms, wall_attach_s=time.time() - t0))
                open(os.path.join(ctl, words[1]), "w").close()
            elif words[0] == "barrier" and words[1].startswith("detached"):
                tracer.send_signal(signal.SIGINT)
                _, err = tracer.communicate(timeout=600)
                runs[-1].update(parse_summary(err.decode()))
                tracer = None
                open(os.path.join(ctl, words[1]), "w").close()
    finally:
        if tracer:
            tracer.kill()
        target.kill()
        target.wait()
        shutil.rmtree(ctl, ignore_errors=True)
    return values, runs


def loader_throughput(args, extra, n=1000000):
    """A burst of n aten::add (2n events) at the target's full speed, with
    the default ring: what the loader sustains, and whether anything is lost."""
    ctl = tempfile.mkdtemp(prefix="ptbpf-bench-")
    go, trace = os.path.join(ctl, "go"), os.path.join(ctl, "burst.pftrace")
    target = subprocess.Popen([args.python, os.path.join(ROOT, "tests", "workloads",
                                                         "workload.py"), "burst",
                               "--steps", str(n), "--go", go],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not read_line(target).startswith("ready"):
            pass
        tracer = subprocess.Popen([args.ptbpf, "-p", str(target.pid), "-o", trace] + extra,
                                  stderr=subprocess.PIPE)
        wait_tracing(tracer)
        t0 = time.time()
        open(go, "w").close()
        target.wait()
        wall = time.time() - t0
        _, err = tracer.communicate(timeout=600)
        r = parse_summary(err.decode())
    finally:
        target.kill()
        shutil.rmtree(ctl, ignore_errors=True)
    return ("\n#### loader throughput (%s)\n\n%d aten::add in %.2f s of target time: %d events "
            "received (%.0f k/s), %d lost; loader CPU while tracing %.2f s = %.2f M events "
            "per CPU-second; trace %.1f MB = %.1f bytes/event; loader peak RSS %.1f MB.\n" % (
                " ".join(extra), n, wall, r.get("received", 0), r.get("received", 0) / wall / 1e3,
                r.get("lost", 0), r.get("cpu_s", 0),
                r.get("received", 0) / max(r.get("cpu_s", 0), 1e-9) / 1e6, r.get("mb", 0),
                r.get("mb", 0) * 1e6 / max(r.get("received", 1), 1), r.get("rss_mb", 0)))


def med(v):
    return statistics.median(v) if v else float("nan")


def report(args, results):
    unit = {"smallop": ("µs/op", 1e6), "step": ("ms/step", 1e3), "gpubound": ("ms/step", 1e3)}
    lines = []
    for workload, (values, runs) in results.items():
        name, scale = unit[workload]
        base = med(values["untraced"])
        lines.append("\n#### %s (%s, median of %d rounds)\n" % (workload, name, args.rounds))
        label = {"traced_agent": "ptbpf --ops agent (callbacks%s)" % (
                     " + launches + CUPTI" if args.device == "cuda" else ""),
                 "traced_probes": "ptbpf --ops probes (uprobe spans%s)" % (
                     " + launches + CUPTI" if args.device == "cuda" else ""),
                 "traced_entries": "ptbpf --entries-only",
                 "traced_shapes": "ptbpf --shapes", "traced_stacks": "ptbpf --py-stacks",
                 "traced_stacks10": "ptbpf --py-stacks=10", "traced_memory": "ptbpf --memory",
                 "after_detach": "after ptbpf detached", "profiler": "torch.profiler",
                 "profiler_shapes": "torch.profiler(record_shapes=True)",
                 "profiler_stack": "torch.profiler(with_stack=True)",
                 "profiler_memory": "torch.profiler(profile_memory=True)"}

        def prof_of(variant):
            key = "profiler" if variant == "plain" else "profiler_" + variant
            return med(values.get(key, [])) / base - 1

        lines.append("| phase | %s | vs untraced | overhead / profiler's (same options) |" % name)
        lines.append("|---|---|---|---|")
        variants = sorted(set(m[2] for m in MODES), key=lambda v: v != "plain")
        for phase in (["untraced"] + ["traced_" + m[0] for m in MODES] + ["after_detach"] +
                      ["profiler" if v == "plain" else "profiler_" + v for v in variants]):
            v = med(values.get(phase, []))
            mode = next((m for m in MODES if "traced_" + m[0] == phase), None)
            prof = prof_of(mode[2]) if mode else 0
            lines.append("| %s | %.3f | %+.1f%% | %s |" % (
                label.get(phase, phase), v * scale, (v / base - 1) * 100,
                "%.2f" % ((v / base - 1) / prof) if mode and prof > 0 else ""))
        lines.append("| profiler post-processing | %.2f s | |" %
                     med(values.get("profiler_postprocess", [])))
        for r in [[r for r in runs if r["mode"] == m][-1] for m, _, _ in MODES
                  if any(r["mode"] == m for r in runs)]:
            events = r.get("received", 0)
            lines.append("")
            lines.append("ptbpf (" + r["mode"] + ", last round): plan %d ms + attach %d ms; %d events "
                         "(%d lost), %d GPU kernels from the agent; trace %.1f MB = %.1f "
                         "bytes/event; loader peak RSS %.1f MB" % (
                             r["plan_ms"], r["attach_ms"], events, r.get("lost", 0),
                             r.get("kernels", 0),
                             r.get("mb", 0), r.get("mb", 0) * 1e6 / max(events, 1),
                             r.get("rss_mb", 0)))
        if workload == "smallop" and [m[0] for m in MODES[:3]] == ["agent", "probes",
                                                                   "entries"]:
            entry = med(values["traced_entries"]) - base
            ret = med(values["traced_probes"]) - med(values["traced_entries"])
            lines.append("")
            lines.append("Cost per op (one aten::add): agent callbacks %.2f µs; uprobes: entry "
                         "(emulated `push`) %.2f µs + ret (single-stepped) %.2f µs; "
                         "torch.profiler %.2f µs." % (
                             (med(values["traced_agent"]) - base) * 1e6, entry * 1e6, ret * 1e6,
                             (med(values["profiler"]) - base) * 1e6))
    return "\n".join(lines)


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return "%s, %d CPUs, kernel %s" % (cpu, os.cpu_count(), platform.release())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    ap.add_argument("--rounds", type=int, default=6, help="a multiple of the number of --modes")
    ap.add_argument("--workloads", default=None)
    ap.add_argument("--out")
    ap.add_argument("--raw", action="store_true", help="print every round's value")
    ap.add_argument("--modes", default="agent,probes,entries",
                    help="traced modes, in turn: " + ",".join(m[0] for m in ALL_MODES))
    args = ap.parse_args()
    global MODES
    MODES = [next(m for m in ALL_MODES if m[0] == name) for name in args.modes.split(",")]
    if args.rounds % len(MODES):
        ap.error("--rounds must be a multiple of the number of --modes")
    workloads = (args.workloads.split(",") if args.workloads else
                 ["smallop", "step"] + (["gpubound"] if args.device == "cuda" else []))
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    results = {w: bench_workload(args, w) for w in workloads}
    if args.raw:
        for w, (values, _) in results.items():
            for phase, v in values.items():
                print(w, phase, " ".join("%.4g" % x for x in v), file=sys.stderr)
    head = "\n### %s, %s, torch %s (%s)\n" % (
        datetime.date.today().isoformat(), args.device, torch_version, machine())
    text = head + report(args, results) + "\n" + "".join(
        loader_throughput(args, extra) for extra in (["--ops", "probes"], ["--ops", "agent"]))
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
