# SPDX-License-Identifier: BSD-2-Clause
"""`ptbpf report`: operator, kernel and step tables from a trace, checked
against what the workloads are known to do."""
import json
import os
import subprocess

from conftest import BUILD, PTBPF, require, run_traced, workload_argv

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")


def report(path, *args):
    r = subprocess.run([PTBPF, "report", path] + list(args), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_report_of_a_cpu_training_loop(tmp_path):
    """mlp: 3 Linear layers (aten::addmm) a step, 20 steps; the agent's ops
    give the optimizer steps, so 19 ProfilerStep#N between 20 ends."""
    require(PTBPF)
    steps = 20
    run = run_traced(tmp_path, workload_argv("mlp", steps), ["--ops", "agent"])
    assert run.rc == 0, run.err
    rep = json.loads(report(run.trace_path, "--json"))
    ops = {o["name"]: o for o in rep["operators"]}
    assert ops["aten::addmm"]["calls"] == 3 * steps
    assert ops["aten::linear"]["calls"] == 3 * steps
    for o in rep["operators"]:
        assert 0 <= o["host_self_ns"] <= o["host_total_ns"], o
        assert o["device_total_ns"] == o["device_self_ns"] == 0, o  # no GPU
    # linear's time includes addmm's (it calls it).
    assert ops["aten::linear"]["host_total_ns"] >= ops["aten::addmm"]["host_total_ns"] * 0.5
    names = [s["name"] for s in rep["steps"]]
    assert names == ["ProfilerStep#%d" % i for i in range(1, steps)]
    for s in rep["steps"]:
        assert s["dur_ns"] > 0 and 0 < s["host_ops_ns"] <= s["dur_ns"], s
        assert s["kernel_ns"] == s["gpu_busy_ns"] == 0
    text = report(run.trace_path, "--top", "5")
    assert "Operators by host total time" in text and "aten::" in text


def test_report_of_a_recorded_gpu_trace(tmp_path):
    """The H200 recording (mlp on CUDA, 10 steps): kernels per name equal
    what torch.profiler saw in the same workload, and every kernel's device
    time goes to exactly one op (device self) since every launch was made
    inside an op."""
    require(PTBPF)
    trace = str(tmp_path / "agent.pftrace")
    r = subprocess.run([PTBPF, "replay", os.path.join(DATA, "agent_mlp.raw"), "-o", trace],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(report(trace, "--json"))
    with open(os.path.join(DATA, "agent_mlp.device.json")) as f:
        device = json.load(f)
    short = lambda n: n.split("<")[0].strip()[:120]
    prof = {}
    for name, (count, _) in device.items():
        if not name.startswith(("Memcpy", "Memset", "Optimizer.", "ProfilerStep", "enumerate(")):
            prof[short(name)] = prof.get(short(name), 0) + count
    ours = {}
    for k in rep["kernels"]:
        ours[short(k["name"])] = ours.get(short(k["name"]), 0) + k["calls"]
        assert k["min_ns"] <= k["total_ns"] / k["calls"] <= k["max_ns"], k
    assert ours == prof
    kernel_total = sum(k["total_ns"] for k in rep["kernels"])
    assert sum(o["device_self_ns"] for o in rep["operators"]) == kernel_total
    ops = {o["name"]: o for o in rep["operators"]}
    assert ops["aten::addmm"]["calls"] == 30 and ops["aten::addmm"]["device_self_ns"] > 0
    assert ops["aten::linear"]["device_total_ns"] >= ops["aten::addmm"]["device_self_ns"]
    assert len(rep["steps"]) == 9
    for s in rep["steps"]:
        assert 0 < s["gpu_busy_ns"] <= s["kernel_ns"] <= s["dur_ns"] * 4, s


def test_report_refuses_bad_input(tmp_path):
    require(PTBPF)
    bad = tmp_path / "x.pftrace"
    bad.write_bytes(b"\xff\xff\xff garbage")
    for args in ([str(bad)], [str(tmp_path / "missing.pftrace")], [], [str(bad), "--top", "0"]):
        r = subprocess.run([PTBPF, "report"] + args, capture_output=True, text=True)
        assert r.returncode != 0 and r.stderr.count("\n") == 1, (args, r.stderr)
