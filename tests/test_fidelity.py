# SPDX-License-Identifier: BSD-2-Clause
"""ptbpf records what torch.profiler records, on the same deterministic
workload: per-op counts, backward nodes, and record_function regions, the
optimizer's and the DataLoader's included. Each case runs with both op
sources: uprobes (--ops probes) and the agent's RecordFunction callbacks
(--ops agent, the agent injected by ptrace). Runs on Debian's torch 1.13
(CI) and, with PTBPF_TEST_PYTHON, on the GPU machine's 2.11."""
import collections
import json
import subprocess

import pytest

from conftest import PYTHON, WORKLOAD, run_traced, torch_version, workload_argv

BWD_PREFIX = "autograd::engine::evaluate_function: "
# What the profiler shows that ptbpf's uprobes cannot, and why
# (docs/blind-spots.md); the agent's callbacks see all of it:
# - on torch 1.13, record_function regions, the optimizer's included, have
#   no probe-able entry point that carries their name;
# - "detach" is a RECORD_FUNCTION that autograd's C++ code opens by hand
#   (VariableTypeManual.cpp), not an operator call;
# - CUDA runtime calls (cudaLaunchKernel, cudaDeviceSynchronize, ...) are not
#   ops: the GPU-launch probes record them (issue: GPU launches).
# Any other difference fails the test.
PROFILER_ONLY = {"detach"}
PROFILER_ONLY_PREFIXES = ("cuda", "cu")
ANNOTATION_PREFIXES = ("Optimizer.", "enumerate(DataLoader)", "outer_region", "inner_region")


def profiler_counts(tmp_path, kind, steps, extra):
    out = tmp_path / "prof.json"
    go = tmp_path / "go-prof"
    go.write_text("")
    subprocess.run([PYTHON, WORKLOAD, kind, "--steps", str(steps), "--go", str(go),
                    "--profile", str(out)] + extra, check=True, capture_output=True, timeout=600)
    return json.loads(out.read_text())


def differences(prof, ours):
    return {name: (prof.get(name, 0), ours.get(name, 0))
            for name in set(prof) | set(ours) if prof.get(name, 0) != ours.get(name, 0)}


CASES = [("mlp", 20, []), ("conv", 10, []), ("mlp", 10, ["--threads", "2"]),
         ("burst", 2000, []), ("regions", 50, []), ("dataloader", 10, [])]


SOURCES = ["probes", "agent"]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("kind,steps,extra", CASES)
def test_counts_equal_profiler(tmp_path, kind, steps, extra, source):
    check_counts_equal_profiler(tmp_path, kind, steps, extra, source)


def check_counts_equal_profiler(tmp_path, kind, steps, extra, source="probes"):
    prof = profiler_counts(tmp_path, kind, steps, extra)
    run = run_traced(tmp_path, workload_argv(kind, steps, extra), ["--ops", source])
    assert run.rc == 0, run.err
    assert run.target_rc == 0
    if source == "agent":
        assert "ptbpf: agent op rings:" in run.err, run.err
    t = run.trace
    prof_ops = {k: v for k, v in prof.items() if k.startswith("aten::")}
    ours_ops = {k: v for k, v in t.op_counts().items() if k.startswith("aten::")}
    assert differences(prof_ops, ours_ops) == {}
    # Backward nodes: ptbpf's slices carry the profiler's names and counts.
    prof_bwd = {k: v for k, v in prof.items() if k.startswith(BWD_PREFIX)}
    assert differences(prof_bwd, t.op_counts("backward")) == {}
    ours_user = t.op_counts("user_annotation") + t.op_counts("dataloader")
    prof_user = {k: v for k, v in prof.items() if k.startswith(ANNOTATION_PREFIXES)}
    if torch_version() >= (2, 0) or source == "agent":
        assert differences(prof_user, ours_user) == {}
    else:
        assert not ours_user  # 1.13: a blind spot, see PROFILER_ONLY
    # Everything else the profiler shows is the BACKWARD_FUNCTION twin of an
    # evaluate_function record, or a listed blind spot; the agent's
    # callbacks record those too, under the same names.
    rest = set(prof) - set(prof_ops) - set(prof_bwd) - set(prof_user)
    if source == "agent":
        ours_rest = t.op_counts("backward_function") + collections.Counter(
            {k: v for k, v in t.op_counts().items() if not k.startswith("aten::")})
        assert differences({k: prof[k] for k in rest if not k.startswith(PROFILER_ONLY_PREFIXES)},
                           ours_rest) == {}
    unexplained = {k for k in rest if not (BWD_PREFIX + k in prof_bwd or k in PROFILER_ONLY or
                                           k.startswith(PROFILER_ONLY_PREFIXES))}
    assert unexplained == set()
    assert t.validate() == []


def test_ops_from_several_python_threads(tmp_path):
    """torch 1.13's profiler does not see ops of threads it did not start
    on, so the oracle here is the workload itself: 3 threads x N mm."""
    steps = 30
    run = run_traced(tmp_path, workload_argv("threads", steps, ["--threads", "2"]))
    assert run.rc == 0, run.err
    t = run.trace
    mm = [s for s in t.slices if s.name == "aten::mm"]
    assert len(mm) == 3 * steps
    assert len({s.track for s in mm}) == 3
    assert t.validate() == []


@pytest.mark.parametrize("source", SOURCES)
def test_backward_flows_and_steps(tmp_path, source):
    """Every backward node with a sequence number gets a flow from the
    forward op that created it; optimizer steps become ProfilerStep#N."""
    steps = 10
    run = run_traced(tmp_path, workload_argv("mlp", steps), ["--ops", source])
    assert run.rc == 0, run.err
    t = run.trace
    bwd = [s for s in t.slices if s.category == "backward"]
    flows_in = {f for s in t.instants for f in s.flows_in}
    flows_out = {f for s in t.slices for f in s.flows_out}
    # AccumulateGrad nodes have no sequence number; the others all link.
    linked = [s for s in bwd if "AccumulateGrad" not in s.name]
    assert linked and len(flows_in & flows_out) == len(linked)
    step_slices = [s for s in t.slices if s.category == "step"]
    if torch_version() >= (2, 0) or source == "agent":
        assert [s.name for s in step_slices] == ["ProfilerStep#%d" % i for i in range(1, steps)]
    else:
        assert step_slices == []
