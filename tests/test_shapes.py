# SPDX-License-Identifier: BSD-2-Clause
"""--shapes: each op's input shapes, read by the agent at op entry, equal
what torch.profiler(record_shapes=True) records for the same workload."""
import collections
import json
import subprocess

import pytest

from conftest import PTBPF, PYTHON, WORKLOAD, run_traced, workload_argv
from test_report import report


def profiler_shapes(tmp_path, kind, steps):
    out, go = tmp_path / "shapes.json", tmp_path / "go-prof"
    go.write_text("")
    subprocess.run([PYTHON, WORKLOAD, kind, "--steps", str(steps), "--go", str(go),
                    "--profile-shapes", str(out)], check=True, capture_output=True, timeout=600)
    return json.loads(out.read_text())


def traced_shapes(trace):
    c = collections.Counter()
    for s in trace.slices:
        if s.category == "cpu_op" and s.name.startswith("aten::"):
            c["%s|%s" % (s.name, s.args.get("Input Dims", "-"))] += 1
    return c


@pytest.mark.parametrize("kind,steps", [("mlp", 5), ("conv", 3)])
def test_shapes_equal_profiler_record_shapes(tmp_path, kind, steps):
    prof = profiler_shapes(tmp_path, kind, steps)
    run = run_traced(tmp_path, workload_argv(kind, steps), ["--shapes"])
    assert run.rc == 0, run.err
    ours = traced_shapes(run.trace)
    prof = {k: v for k, v in prof.items() if k.startswith("aten::")}
    assert ours, "no op slices"
    assert not [k for k in ours if k.endswith("|-")], "ops without Input Dims"
    # Every (op, shapes) pair the profiler saw, we saw, as often. (The
    # profiler's records, not key_averages: see test_fidelity.)
    diff = {k: (ours.get(k, 0), v) for k, v in prof.items() if ours.get(k, 0) != v}
    extra = {k: n for k, n in ours.items() if k not in prof}
    assert not diff and not extra, (diff, extra)
    # The report groups by them.
    rep = json.loads(report(run.trace_path, "--json", "--group-by-shape"))
    addmm = {o["input_shapes"]: o["calls"] for o in rep["operators"] if o["name"] == "aten::addmm"}
    want = {k.split("|", 1)[1]: v for k, v in prof.items() if k.startswith("aten::addmm|")}
    assert addmm == want
    types = [s.args.get("Input type") for s in run.trace.slices if s.name == "aten::addmm"]
    assert types and all(json.loads(t)[1:3] == ["float", "float"] for t in types), types[:3]
    # The Kineto export carries them as Kineto writes them: JSON lists.
    out = tmp_path / "k.json"
    r = subprocess.run([PTBPF, "export", "--kineto", str(out), run.trace_path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    exported = collections.Counter(
        "%s|%s" % (e["name"], e["args"]["Input Dims"]) for e in events
        if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {}))
    assert {k: v for k, v in exported.items() if k.startswith("aten::addmm|")} == \
        {k: v for k, v in prof.items() if k.startswith("aten::addmm|")}


def test_shapes_refuse_probe_ops():
    r = subprocess.run([PTBPF, "-p", "1", "--shapes", "--ops", "probes"], capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "--shapes" in r.stderr, r.stderr
