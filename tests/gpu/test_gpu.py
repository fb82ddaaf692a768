# SPDX-License-Identifier: BSD-2-Clause
"""GPU-machine checks (make gpu-check): torch 2.x with CUDA. CI has no GPU
and does not collect this folder."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import run_traced, torch_version, workload_argv  # noqa: E402
from test_fidelity import check_counts_equal_profiler  # noqa: E402


def test_torch_is_2x_with_cuda():
    assert torch_version() >= (2, 0)


def test_cuda_training_counts_equal_profiler(tmp_path):
    check_counts_equal_profiler(tmp_path, "mlp", 20, ["--device", "cuda"])


def test_cuda_conv_counts_equal_profiler(tmp_path):
    check_counts_equal_profiler(tmp_path, "conv", 10, ["--device", "cuda"])


def test_regions_nest(tmp_path):
    run = run_traced(tmp_path, workload_argv("regions", 20))
    assert run.rc == 0, run.err
    t = run.trace
    outer = [s for s in t.slices if s.name == "outer_region"]
    inner = [s for s in t.slices if s.name == "inner_region"]
    assert len(outer) == len(inner) == 20
    assert all(i.depth == o.depth + 1 for i, o in zip(inner, outer))
    adds = [s for s in t.slices if s.name == "aten::add"]
    assert all(any(i.ts <= a.ts and a.ts + a.dur <= i.ts + i.dur for i in inner) for a in adds)
    assert t.validate() == []
