# SPDX-License-Identifier: BSD-2-Clause
"""Traces recorded on the GPU machine (torch 2.11, H200; tests/gpu with
PTBPF_SAVE_DIR), kept as test data: each still decodes, and its launches
still match the torch.profiler counts recorded beside it."""
import glob
import json
import os

import pytest

import pftrace
from launches import launch_problems

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")
TRACES = sorted(glob.glob(os.path.join(DATA, "*.pftrace")))


def test_recordings_present():
    assert {os.path.basename(p) for p in TRACES} >= {
        "mlp.pftrace", "compiled.pftrace", "graph.pftrace", "nccl.pftrace"}


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_recorded_launches_match_profiler(path):
    t = pftrace.Trace(path)
    assert t.validate() == []
    rc, text = pftrace.protoc_decode(path)
    assert rc == 0, text[-1000:]
    with open(path.replace(".pftrace", ".profiler.json")) as f:
        profiler = json.load(f)
    assert launch_problems(t, profiler) == []
    launches = [s for s in t.slices if s.category == "cuda_driver" and
                s.name.startswith("cuLaunchKernel")]
    assert launches or "graph" in path or "nccl" in path
    for s in launches:
        assert {"kernel", "grid", "block", "shared_mem", "stream", "rc"} <= set(s.args), s
        assert s.args["rc"] == 0
