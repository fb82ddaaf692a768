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
    anc = t.ancestors()
    idx = [i for i, s in enumerate(t.slices)
           if s.category == "cpu_op" and s.name.startswith("aten::")]
    assert idx
    # Every op has its stack, or (the agent asks only for the outermost:
    # the ops inside share its Python stack) an enclosing slice has it.
    missing = [t.slices[i].name for i in idx
               if "py_stack" not in t.slices[i].args and
               not any("py_stack" in t.slices[a].args for a in anc[i])]
    assert not missing, (len(missing), len(idx), missing[:5])
    ops = [t.slices[i] for i in idx if "py_stack" in t.slices[i].args]
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
    if source == "agent":  # only the outermost slices ask
        outer = [i for i in idx if not any(t.slices[a].category == "cpu_op" for a in anc[i])]
        assert len(ops) <= len(outer) + 5, (len(ops), len(outer))


@pytest.mark.parametrize("source", SOURCES)
def test_sampled_stacks(tmp_path, source):
    """--py-stacks=10: about one in ten of the ops that would carry a stack
    does (every op with the probes, the outermost with the agent)."""
    def stacks(extra):
        run = run_traced(tmp_path, workload_argv("mlp", 10), ["--ops", source] + extra,
                         go_name="go" + "".join(extra))
        assert run.rc == 0, run.err
        return sum(1 for s in run.trace.slices if "py_stack" in s.args)
    every, tenth = stacks(["--py-stacks"]), stacks(["--py-stacks=10"])
    assert every / 20 < tenth < every / 5, (tenth, every)


def test_py_stacks_bad_value():
    import subprocess
    from conftest import PTBPF
    r = subprocess.run([PTBPF, "-p", "1", "--py-stacks=0"], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "--py-stacks" in r.stderr
