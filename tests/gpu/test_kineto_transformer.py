# SPDX-License-Identifier: BSD-2-Clause
"""GPU machine: `ptbpf export --kineto` of a transformer's training (bf16
autocast, AdamW, gradient clipping, a DataLoader with pinned memory; 20
steps, tests/workloads/transformer.py) against torch.profiler's own Kineto
trace of the same deterministic steps, field by field: top-level metadata,
categories, each category's args keys, names and counts, flows, launch
configurations, copies' bytes, steps and GPU annotations.

Every difference is listed (not just the first); with PTBPF_SAVE_DIR both
JSON files, the ptbpf trace and the list of differences are kept there,
for `../shared/tools/hta-check` on them."""
import collections
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import PTBPF, PYTHON, run_traced  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRANSFORMER = os.path.join(ROOT, "tests", "workloads", "transformer.py")
STEPS = 20
# Kineto's own bookkeeping, not events of the job.
NOT_JOB = {"overhead", "Trace"}


def profiler_trace(tmp_path):
    out, go = tmp_path / "profiler.json", tmp_path / "go-profiler"
    go.write_text("")
    r = subprocess.run([PYTHON, TRANSFORMER, "--steps", str(STEPS), "--go", str(go), "--profile",
                        str(out), "--linger", "0"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text())


def ptbpf_trace(tmp_path):
    run = run_traced(tmp_path, [PYTHON, TRANSFORMER, "--steps", str(STEPS), "--go", "{go}"],
                     ["--ops", "agent"])
    assert run.rc == 0, run.err
    out = tmp_path / "ptbpf.json"
    r = subprocess.run([PTBPF, "export", "--kineto", str(out), run.trace_path],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return run.trace_path, json.loads(out.read_text())


def xs(k, cat=None):
    return [e for e in k["traceEvents"] if e.get("ph") == "X" and e.get("cat") not in NOT_JOB
            and (cat is None or e.get("cat") == cat)]


def short(name):
    # Demanglers of different libstdc++ versions spell template arguments
    # and lambdas differently: compare up to the first '<'.
    return name.split("<")[0].strip()[:120]


def counter_diff(what, theirs, ours, out, limit=15):
    if theirs == ours:
        return
    keys = sorted(set(theirs) | set(ours), key=lambda k: -abs(theirs[k] - ours[k]))
    shown = ["%s: profiler %d, ptbpf %d" % (k, theirs[k], ours[k]) for k in keys
             if theirs[k] != ours[k]][:limit]
    out.append("%s differ (%d names): %s" % (what, sum(theirs[k] != ours[k] for k in keys),
                                              "; ".join(shown)))


def compare_metadata(theirs, ours, out):
    for key in sorted(set(theirs) - set(ours) - {"traceEvents"}):
        out.append("top level: %r missing (profiler: %s)" % (key, json.dumps(theirs[key])[:200]))
    t_dev, o_dev = theirs.get("deviceProperties", []), ours.get("deviceProperties", [])
    if t_dev and not o_dev:
        out.append("deviceProperties empty (profiler: %d devices)" % len(t_dev))
    elif t_dev:
        missing = set(t_dev[0]) - set(o_dev[0])
        if missing:
            out.append("deviceProperties[0] lacks %s" % sorted(missing))
        for k in set(t_dev[0]) & set(o_dev[0]):
            if t_dev[0][k] != o_dev[0][k]:
                out.append("deviceProperties[0][%r]: profiler %r, ptbpf %r" %
                           (k, t_dev[0][k], o_dev[0][k]))
    for key in ("cupti_version", "cuda_runtime_version", "cuda_driver_version"):
        if key in theirs and key in ours and theirs[key] != ours[key]:
            out.append("%s: profiler %r, ptbpf %r" % (key, theirs[key], ours[key]))


def compare_args(theirs, ours, out):
    t_cats, o_cats = {e["cat"] for e in xs(theirs)}, {e["cat"] for e in xs(ours)}
    for c in sorted(t_cats - o_cats):
        out.append("category %r missing (profiler: %d events)" % (c, len(xs(theirs, c))))
    for c in sorted(o_cats - t_cats - {"cuda_driver"}):
        out.append("category %r is not the profiler's" % c)
    for c in sorted(t_cats & o_cats):
        t_ev, o_ev = xs(theirs, c), xs(ours, c)
        every = set.intersection(*(set(e.get("args", {})) for e in t_ev))
        some = set.union(*(set(e.get("args", {})) for e in t_ev))
        o_some = set.union(*(set(e.get("args", {})) for e in o_ev))
        for k in sorted(every):
            n = sum(k not in e.get("args", {}) for e in o_ev)
            if n:
                out.append("%s: %r missing on %d of %d events (on every one of the "
                           "profiler's)" % (c, k, n, len(o_ev)))
        for k in sorted(some - every - o_some):
            out.append("%s: %r never given (the profiler has it on %d of %d)" %
                       (c, k, sum(k in e.get("args", {}) for e in t_ev), len(t_ev)))


def compare_names(theirs, ours, out):
    count = lambda k, c, f=lambda n: n: collections.Counter(f(e["name"]) for e in xs(k, c))
    aten = lambda k: collections.Counter(e["name"] for e in xs(k, "cpu_op")
                                         if e["name"].startswith("aten::"))
    counter_diff("aten op counts", aten(theirs), aten(ours), out)
    counter_diff("kernel counts", count(theirs, "kernel", short), count(ours, "kernel", short), out)
    counter_diff("memcpy names", count(theirs, "gpu_memcpy"), count(ours, "gpu_memcpy"), out)
    counter_diff("memset names", count(theirs, "gpu_memset"), count(ours, "gpu_memset"), out)
    runtime = count(theirs, "cuda_runtime")
    # Kineto synchronizes the device when its trace ends: the profiler's own.
    runtime["cudaDeviceSynchronize"] -= 1
    counter_diff("CUDA runtime calls", +runtime, count(ours, "cuda_runtime"), out)
    family = lambda n: re.sub(r"#\d+$", "#N", n)
    for c in ("user_annotation", "gpu_user_annotation"):
        t, o = set(count(theirs, c, family)), set(count(ours, c, family))
        if t != o:
            out.append("%s names: only the profiler's %s; only ptbpf's %s" %
                       (c, sorted(t - o), sorted(o - t)))


def launch_configs(k):
    return collections.Counter(
        (short(e["name"]), tuple(e["args"].get("grid", ())), tuple(e["args"].get("block", ())),
         e["args"].get("registers per thread"), e["args"].get("shared memory"),
         e["args"].get("est. achieved occupancy %")) for e in xs(k, "kernel"))


def compare_gpu(theirs, ours, out):
    counter_diff("kernel launch configurations (name, grid, block, registers, shared memory, "
                 "occupancy)", launch_configs(theirs), launch_configs(ours), out, limit=5)
    copies = lambda k: collections.Counter((e["name"], e["args"].get("bytes"))
                                           for e in xs(k, "gpu_memcpy") + xs(k, "gpu_memset"))
    counter_diff("copies and sets (name, bytes)", copies(theirs), copies(ours), out)
    o_gpu = xs(ours, "kernel") + xs(ours, "gpu_memcpy") + xs(ours, "gpu_memset")
    calls = {e["args"].get("correlation") for e in xs(ours, "cuda_runtime") + xs(ours, "cuda_driver")}
    unmatched = [e["name"] for e in o_gpu if e["args"].get("correlation") not in calls]
    if unmatched:
        out.append("%d of %d GPU activities have no CUDA call with their correlation: %s" %
                   (len(unmatched), len(o_gpu), collections.Counter(unmatched).most_common(5)))
    ext = {e["args"]["External id"] for e in xs(ours, "cpu_op") + xs(ours, "user_annotation")
           if "External id" in e.get("args", {})}
    dangling = [e["name"] for e in o_gpu if e["args"].get("External id", 0) and
                e["args"]["External id"] not in ext]
    if dangling:
        out.append("%d GPU activities name an External id no op has" % len(dangling))


def compare_flows(theirs, ours, out):
    for cat in ("ac2g", "fwdbwd"):
        t = collections.Counter(e["ph"] for e in theirs["traceEvents"] if e.get("cat") == cat)
        o = collections.Counter(e["ph"] for e in ours["traceEvents"] if e.get("cat") == cat)
        for ph in ("s", "f"):
            if abs(t[ph] - o[ph]) > max(2, t[ph] // 50):
                out.append("%s %r flow events: profiler %d, ptbpf %d" % (cat, ph, t[ph], o[ph]))
    o_f = {e["id"] for e in ours["traceEvents"] if e.get("cat") == "ac2g" and e["ph"] == "f"}
    gpu = xs(ours, "kernel") + xs(ours, "gpu_memcpy") + xs(ours, "gpu_memset")
    n = sum(e["args"].get("correlation") not in o_f for e in gpu)
    if n:
        out.append("%d of %d GPU activities end no ac2g flow" % (n, len(gpu)))


def compare_steps(theirs, ours, out):
    def steps(k):
        # The training loop's thread (on CUDA, backward runs on autograd's
        # device thread, which has more ops): the one stepping the optimizer.
        main = next(e["tid"] for e in xs(k, "user_annotation")
                    if e["name"].startswith("Optimizer.step#"))
        s = [e for e in xs(k, "user_annotation") if e["name"].startswith("ProfilerStep#")]
        return main, s
    t_main, t_steps = steps(theirs)
    o_main, o_steps = steps(ours)
    names = ["ProfilerStep#%d" % i for i in range(STEPS)]
    if [e["name"] for e in o_steps][:STEPS] != names:
        out.append("ptbpf's steps: %s" % [e["name"] for e in o_steps])
    if {e["tid"] for e in o_steps} != {o_main}:
        out.append("ptbpf's steps are on %s, its ops on %s" % ({e["tid"] for e in o_steps}, o_main))
    if len(t_steps) < STEPS:
        out.append("the profiler has %d steps" % len(t_steps))
    if {e["tid"] for e in t_steps} != {t_main}:
        out.append("the profiler's steps are on %s, its loop on %s" %
                   ({e["tid"] for e in t_steps}, t_main))


def test_kineto_export_of_a_transformer_run_matches_the_profiler(tmp_path):
    theirs = profiler_trace(tmp_path)
    trace, ours = ptbpf_trace(tmp_path)
    diffs = []
    for check in (compare_metadata, compare_args, compare_names, compare_gpu, compare_flows,
                  compare_steps):
        check(theirs, ours, diffs)
    save = os.environ.get("PTBPF_SAVE_DIR")
    if save:
        with open(os.path.join(save, "kineto_transformer.profiler.json"), "w") as f:
            json.dump(theirs, f)
        with open(os.path.join(save, "kineto_transformer.ptbpf.json"), "w") as f:
            json.dump(ours, f)
        shutil.copy(trace, os.path.join(save, "kineto_transformer.pftrace"))
        with open(os.path.join(save, "kineto_transformer.differences.txt"), "w") as f:
            f.write("\n".join(diffs) + "\n")
    assert diffs == [], "%d differences:\n%s" % (len(diffs), "\n".join(diffs))
