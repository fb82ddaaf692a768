# SPDX-License-Identifier: BSD-2-Clause
"""GPU-machine checks (make gpu-check): torch 2.x with CUDA. CI has no GPU
and does not collect this folder."""
import json
import os

import pytest
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import PTBPF, PYTHON, WORKLOAD, run_traced, torch_version, workload_argv  # noqa: E402
from test_fidelity import SOURCES, check_counts_equal_profiler  # noqa: E402
from launches import GRAPH_LAUNCHES, KERNEL_LAUNCHES, base, launch_problems  # noqa: E402


def test_torch_is_2x_with_cuda():
    assert torch_version() >= (2, 0)


@pytest.mark.parametrize("source", SOURCES)
def test_cuda_training_counts_equal_profiler(tmp_path, source):
    check_counts_equal_profiler(tmp_path, "mlp", 20, ["--device", "cuda"], source)


@pytest.mark.parametrize("source", SOURCES)
def test_cuda_conv_counts_equal_profiler(tmp_path, source):
    check_counts_equal_profiler(tmp_path, "conv", 10, ["--device", "cuda"], source)


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


def profiled_launches(tmp_path, kind, steps):
    """torch.profiler's runtime/driver API records (CPU+CUDA activities)."""
    out, go = tmp_path / "prof.json", tmp_path / "go-prof"
    go.write_text("")
    subprocess.run([PYTHON, WORKLOAD, kind, "--steps", str(steps), "--go", str(go), "--device",
                    "cuda", "--profile", str(out), "--profile-cuda"],
                   check=True, capture_output=True, timeout=600)
    return json.loads(out.read_text())


def check_launches(tmp_path, kind, steps, source):
    prof = profiled_launches(tmp_path, kind, steps)
    run = run_traced(tmp_path, workload_argv(kind, steps, ["--device", "cuda"]),
                     ["--ops", source])
    assert run.rc == 0, run.err
    t = run.trace
    assert t.validate() == []
    theirs = {k: v for k, v in prof.items() if base(k) in KERNEL_LAUNCHES + GRAPH_LAUNCHES}
    save = os.environ.get("PTBPF_SAVE_DIR")
    if save and source == "probes":  # recordings for the CI tests (tests/data/gpu)
        shutil.copy(run.trace_path, os.path.join(save, "%s.pftrace" % kind))
        with open(os.path.join(save, "%s.profiler.json" % kind), "w") as f:
            json.dump(theirs, f, indent=1, sort_keys=True)
    assert launch_problems(t, theirs) == []
    return run


@pytest.mark.parametrize("source", SOURCES)
def test_launches_training_loop(tmp_path, source):
    check_launches(tmp_path, "mlp", 20, source)


@pytest.mark.parametrize("source", SOURCES)
def test_launches_compiled_region(tmp_path, source):
    run = check_launches(tmp_path, "compiled", 20, source)
    anc = run.trace.ancestors()
    slices = run.trace.slices
    # Triton launches through the driver directly (no runtime call around
    # it): outside any aten op; the agent also sees the "Torch-Compiled
    # Region" record they are made in, and puts them there.
    triton = [s for i, s in enumerate(slices) if s.name.startswith("cuLaunchKernel")
              and not any(slices[a].category == "cuda_runtime" for a in anc[i])]
    assert len(triton) >= 20
    if source == "probes":
        assert all(s.args.get("outside_op") for s in triton)
    else:
        assert all(any(slices[a].name.startswith("Torch-Compiled Region") for a in anc[i])
                   for i, s in enumerate(slices) if s in triton)


@pytest.mark.parametrize("source", SOURCES)
def test_launches_graph_replay(tmp_path, source):
    run = check_launches(tmp_path, "graph", 20, source)
    graphs = [s for s in run.trace.slices if s.name.startswith(("cuGraphLaunch", "cudaGraphLaunch"))]
    # uprobes see each replay at the driver; CUPTI records the runtime call.
    want = "cuda_driver" if source == "probes" else "cuda_runtime"
    assert len([s for s in graphs if s.category == want]) == 20


@pytest.mark.parametrize("source", SOURCES)
def test_launches_nccl_all_reduce(tmp_path, source):
    check_launches(tmp_path, "nccl", 20, source)


@pytest.mark.parametrize("source", SOURCES)
def test_kernels_loaded_after_attach_are_named(tmp_path, source):
    run = run_traced(tmp_path, workload_argv("fresh", 5, ["--device", "cuda", "--linger", "1"]),
                     ["--ops", source])
    assert run.rc == 0, run.err
    t = run.trace
    names = {s.args.get("kernel") for s in t.slices
             if s.category == "cuda_driver" and s.name.startswith("cuLaunchKernel")}
    if source == "agent":  # names are on the GPU's kernel slices
        names = {s.name for s in t.slices if s.category == "kernel"}
    # Kernel names are demangled C++; the ones these ops run carry the op's name.
    assert any("erfcx" in (n or "") for n in names), names
    assert any("i0e" in (n or "") for n in names), names
    assert t.validate() == []


@pytest.mark.parametrize("source", SOURCES)
def test_gpu_timeline_from_agent(tmp_path, source):
    """The training loop, attached after it started: ptbpf loads its agent by
    ptrace, and the trace gets the device's kernels, joined to their launches."""
    steps = 10
    profiled_launches(tmp_path, "mlp", steps)
    with open(str(tmp_path / "prof.json") + ".device.json") as f:
        device = json.load(f)
    # The agent delivers the GPU's records every 200 ms: a process that exits
    # sooner than that after its last kernel takes them along
    # (docs/blind-spots.md).
    raw = str(tmp_path / "agent_mlp.raw")
    run = run_traced(tmp_path, workload_argv("mlp", steps, ["--device", "cuda", "--linger", "1"]),
                     ptbpf_args=["--raw", raw, "--ops", source])
    assert run.rc == 0, run.err
    save = os.environ.get("PTBPF_SAVE_DIR")
    if save and source == "agent":  # a real recording for the CI replay test (tests/data/gpu)
        shutil.copy(raw, os.path.join(save, "agent_mlp.raw"))
        shutil.copy(str(tmp_path / "prof.json") + ".device.json",
                    os.path.join(save, "agent_mlp.device.json"))
    t = run.trace
    assert t.validate() == []
    kernels = [s for s in t.slices if s.category == "kernel"]

    def short(name):
        # Demanglers of different libstdc++ versions spell template
        # arguments and lambdas differently: compare up to the first '<'.
        return name.split("<")[0].strip()[:120]
    ours, prof_k = {}, {}
    for s in kernels:
        c = ours.setdefault(short(s.name), [0, 0])
        c[0] += 1
        c[1] += s.dur
    for k, v in device.items():
        # Not kernels: copies, sets, and record_function regions that the
        # profiler also draws on the GPU timeline (gpu_user_annotation).
        if k.startswith(("Memcpy", "Memset", "Optimizer.", "ProfilerStep", "enumerate(")):
            continue
        c = prof_k.setdefault(short(k), [0, 0])
        c[0] += v[0]
        c[1] += v[1]
    diff = {k: (ours.get(k, [0])[0], prof_k.get(k, [0])[0]) for k in set(ours) | set(prof_k)
            if ours.get(k, [0])[0] != prof_k.get(k, [0])[0]}
    assert diff == {}, "kernels (ptbpf, profiler): %s" % diff
    total_ours = sum(v[1] for v in ours.values())
    total_prof = sum(v[1] for v in prof_k.values())
    assert abs(total_ours - total_prof) / total_prof < 0.02, (total_ours, total_prof)
    # Every kernel has a flow from its launch, and starts after the launch began.
    corr = {f: s.ts for s in t.instants if s.name == "cupti correlation" for f in s.flows_out}
    for k in kernels:
        assert k.flows_in and k.flows_in[0] in corr, k
        assert k.ts >= corr[k.flows_in[0]], k


def test_agent_steps_aside_for_a_running_profiler(tmp_path):
    """A job already inside torch.profiler keeps CUPTI: the agent says so and
    steps aside; ptbpf still traces ops and launches; the profiler still
    gets its GPU kernels."""
    run = run_traced(tmp_path, workload_argv("mlp", 10, ["--device", "cuda",
                                                         "--under-profiler"]))
    assert run.rc == 0, run.err
    assert "profiler saw GPU kernels: True" in run.target_out
    t = run.trace
    assert t.validate() == []
    assert not [s for s in t.slices if s.category == "kernel"]
    assert t.op_counts()["aten::addmm"] == 30
    assert [s for s in t.slices if s.name == "cuLaunchKernel"]


KINETO_PROFILE = r"""
import sys, torch, torch.nn as nn
sys.path.insert(0, sys.argv[3])
import workload
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as p:
    workload.DEVICE = "cuda"
    workload.mlp(int(sys.argv[2]))
    torch.cuda.synchronize()
p.export_chrome_trace(sys.argv[1])
"""


def test_kineto_export_matches_a_kineto_trace(tmp_path):
    """`ptbpf export --kineto` next to torch 2.x's own Kineto export of the
    same workload: the same top-level layout, categories Kineto uses, the
    keys Kineto gives each event, and the same aten ops and kernels with
    the same counts."""
    import collections
    steps = 10
    theirs_path = str(tmp_path / "kineto.json")
    subprocess.run([PYTHON, "-c", KINETO_PROFILE, theirs_path, str(steps),
                    os.path.dirname(WORKLOAD)], check=True, capture_output=True, timeout=600)
    with open(theirs_path) as f:
        theirs = json.load(f)
    run = run_traced(tmp_path, workload_argv("mlp", steps, ["--device", "cuda", "--linger", "1"]))
    assert run.rc == 0, run.err
    ours_path = str(tmp_path / "ours.json")
    subprocess.run([PTBPF, "export", "--kineto", ours_path, run.trace_path], check=True,
                   capture_output=True)
    with open(ours_path) as f:
        ours = json.load(f)
    assert isinstance(theirs, dict) and "traceEvents" in theirs and "traceEvents" in ours
    t_x = [e for e in theirs["traceEvents"] if e.get("ph") == "X"]
    o_x = [e for e in ours["traceEvents"] if e.get("ph") == "X"]
    t_cats = {e.get("cat") for e in t_x}
    assert {e["cat"] for e in o_x} <= t_cats | {"cuda_driver"}, ({e["cat"] for e in o_x}, t_cats)
    for cat in ("cpu_op", "kernel", "cuda_runtime"):
        keys = set.intersection(*(set(e) for e in t_x if e.get("cat") == cat))
        assert all(keys <= set(e) for e in o_x if e["cat"] == cat), (cat, keys)
    count = lambda evs, cat, pred: collections.Counter(
        e["name"] for e in evs if e.get("cat") == cat and pred(e["name"]))
    aten = lambda n: n.startswith("aten::")
    assert count(o_x, "cpu_op", aten) == count(t_x, "cpu_op", aten)
    def short(c):
        out = collections.Counter()
        for k, v in c.items():
            out[k.split("<")[0][:120]] += v
        return out
    assert short(count(o_x, "kernel", bool)) == short(count(t_x, "kernel", bool))
    t_flows = [e for e in theirs["traceEvents"] if e.get("cat") == "ac2g"]
    o_flows = [e for e in ours["traceEvents"] if e.get("cat") == "ac2g"]
    assert t_flows and o_flows
    assert {e["ph"] for e in o_flows} == {e["ph"] for e in t_flows}


@pytest.mark.parametrize("source", SOURCES)
def test_memory_timeline_equals_torch_cuda_memory_allocated(tmp_path, source):
    """The caching allocator's counters against what the workload itself
    read from torch.cuda.memory_allocated()/memory_reserved() after each
    step: the counter value in force at each sample's time is the same,
    byte for byte."""
    import bisect
    steps = 12
    run = run_traced(tmp_path, workload_argv("memory", steps, ["--device", "cuda"]),
                     ["--memory", "--ops", source])
    assert run.rc == 0, run.err
    samples = json.loads(run.target_out.strip().splitlines()[-1].split(" ", 1)[1])
    t = run.trace
    assert not t.errors, t.errors[:5]
    for name, col in (("cuda:0 memory allocated", 1), ("cuda:0 memory reserved", 2)):
        series = t.counter_by_name(name)
        assert series, name
        times = [ts for ts, _ in series]
        for s in samples:
            i = bisect.bisect_right(times, s[0]) - 1
            assert i >= 0 and series[i][1] == s[col], (name, s, series[max(i, 0)])
    print("memory samples matched:", len(samples), "peak allocated",
          max(v for _, v in t.counter_by_name("cuda:0 memory allocated")))


def test_gpu_idle_gaps_named_by_the_launching_thread(tmp_path):
    """The training loop of tests/workloads/offcpu.py on CUDA: after each
    step the thread reads a pipe, sleeps and waits on an Event (20 ms each)
    while the GPU has nothing queued. The report's GPU idle gaps name each
    wait for at least 90% of its time in the steps (issue 20)."""
    from test_sched import STEPS, Traced, report_json
    run = Traced(tmp_path, ["--steps", str(STEPS), "--ms", "20", "--device", "cuda"])
    idle = report_json(run.path)["gpu_idle"]
    got = {c["cause"]: c["ns"] for c in idle["launching_thread"]}
    share = (STEPS - 1) / STEPS
    for cause, key in [("read on a pipe", "pipe"), ("sleep (clock_nanosleep)", "sleep"),
                       ("futex (a lock or condition wait)", "futex")]:
        assert got.get(cause, 0) >= 0.9 * run.spent[key] * share, (cause, idle, run.spent)
    assert idle["unexplained_ns"] <= 0.05 * idle["idle_ns"], idle
    # The chain: what woke the launching thread last in a gap.
    assert any(g["woken_by"] for g in idle["largest"]), idle["largest"]


SYNC_JOB = r"""
import os, sys, torch
x = torch.ones(1024, device="cuda")
cycles = int(sys.argv[2])
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
ms = []
for _ in range(6):  # the clocks ramp up: the shortest after warming up
    a.record(); torch.cuda._sleep(cycles); b.record(); torch.cuda.synchronize()
    ms.append(a.elapsed_time(b))
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    pass
for i in range(40):
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    torch.cuda._sleep(cycles)
    v = x.sum().item()
print("sleep_ms", min(ms[2:]), flush=True)
"""


@pytest.mark.parametrize("source", SOURCES)
def test_synchronizing_calls_show_the_wait(tmp_path, source):
    """An explicit torch.cuda.synchronize() and a .item() after a kernel of
    known length (issue 20): each shows as a CUDA call that lasts as long
    as the GPU kept the thread waiting, on the thread that made it."""
    job = tmp_path / "sync_job.py"
    job.write_text(SYNC_JOB)
    run = run_traced(tmp_path, [sys.executable, str(job), "{go}", "20000000"],
                     ["--ops", source])
    assert run.rc == 0 and run.target_rc == 0, run.err
    sleep_ns = float(run.target_out.split("sleep_ms")[1].split()[0]) * 1e6
    assert sleep_ns > 2e6, run.target_out
    t = run.trace
    assert not t.errors, t.errors[:5]
    waits = [s for s in t.slices if s.category in ("cuda_runtime", "cuda_driver") and
             s.dur >= 0.7 * sleep_ns]
    # synchronize(): cudaDeviceSynchronize (cuCtxSynchronize); .item(): its
    # copy to pageable memory waits (cudaMemcpyAsync, cuMemcpyDtoHAsync) or
    # the stream synchronize after it does. Runtime and driver slices nest:
    # each wait is counted once by its start (ms).
    device = {round(s.ts / 1e6) for s in waits if "DeviceSynchronize" in s.name or
              "CtxSynchronize" in s.name}
    item = {round(s.ts / 1e6) for s in waits if "StreamSynchronize" in s.name or
            "Memcpy" in s.name}
    assert len(device) >= 38 and len(item) >= 38, (
        sorted({(s.name, s.category) for s in waits}), len(device), len(item))
