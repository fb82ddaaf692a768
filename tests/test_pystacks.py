# SPDX-License-Identifier: BSD-2-Clause
"""--py-stacks: the Python stack of each op, read by eBPF from the target's
CPython (Debian's 3.11 here, 3.12 on the GPU machine), checked against the
workload's own source lines."""
import collections
import json
import os

import pytest

from conftest import WORKLOAD, run_traced, workload_argv
from test_fidelity import SOURCES
from test_report import report


def source_line(text, start_at="def mlp("):
    """The line number of `text` in workload.py, searching from start_at."""
    lines = open(WORKLOAD).read().splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith(start_at))
    return next(i for i in range(first, len(lines)) if text in lines[i]) + 1


@pytest.mark.parametrize("source", SOURCES)
def test_every_op_has_its_python_stack(tmp_path, source):
    steps = 5
    run = run_traced(tmp_path, workload_argv("mlp", steps), ["--ops", source, "--py-stacks"])
    assert run.rc == 0, run.err
    t = run.trace
    assert not t.errors, t.errors[:5]
    ops = [s for s in t.slices if s.category == "cpu_op" and s.name.startswith("aten::")]
    assert ops
    missing = [s.name for s in ops if "py_stack" not in s.args]
    assert not missing, (len(missing), len(ops), missing[:5])
    wl = os.path.basename(WORKLOAD)
    fwd = source_line("loss = nn.functional.cross_entropy(model(x), y)")
    bwd = source_line("loss.backward()")
    step = source_line("opt.step()")
    sites = collections.Counter()
    for s in ops:
        frames = s.args["py_stack"].split("\n")
        mine = [f for f in frames if ("/%s(" % wl) in f]
        assert mine and mine[-1].endswith(": <module>"), frames
        sites[mine[0]] += 1
        if s.name == "aten::addmm":
            # Linear.forward (torch's frame) inside our forward line.
            assert "Linear.forward" in frames[0], frames
            assert mine[0].endswith("(%d): mlp" % fwd), frames
    for line in (fwd, bwd, step):
        key = next((k for k in sites if k.endswith("/%s(%d): mlp" % (wl, line))), None)
        assert key, (line, sites)
    # The report sums the outermost ops by the innermost frame outside torch.
    rep = json.loads(report(run.trace_path, "--json"))
    by_site = {p["site"].rsplit("/", 1)[-1]: p for p in rep["python_sites"]}
    assert by_site["%s(%d): mlp" % (wl, bwd)]["ops"] >= steps
    assert "python stacks: %d on slices" % len(ops) in run.err or "python stacks:" in run.err


@pytest.mark.parametrize("source", SOURCES)
def test_sampled_stacks(tmp_path, source):
    """--py-stacks=10: about one op in ten carries a stack."""
    run = run_traced(tmp_path, workload_argv("mlp", 10), ["--ops", source, "--py-stacks=10"])
    assert run.rc == 0, run.err
    ops = [s for s in run.trace.slices if s.category == "cpu_op"]
    with_stack = [s for s in ops if "py_stack" in s.args]
    assert len(ops) / 20 < len(with_stack) < len(ops) / 5, (len(with_stack), len(ops))


def test_py_stacks_bad_value():
    import subprocess
    from conftest import PTBPF
    r = subprocess.run([PTBPF, "-p", "1", "--py-stacks=0"], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "--py-stacks" in r.stderr
