# SPDX-License-Identifier: BSD-2-Clause
"""`ptbpf export --kineto`: Kineto's JSON as torch 2.x writes it, field by
field, from the H200 recording (tests/data/gpu) and from a hand-made trace
that carries what the recording does not have yet (memset correlations,
memory kinds, device properties, CUDA versions, ranks)."""
import collections
import json
import os
import subprocess

import pytest

from conftest import PTBPF, require
from synth_trace import Synth

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")
OP_KEYS = {"External id", "Record function id", "Ev Idx"}
GPU_KEYS = {"device", "stream", "correlation"}
KERNEL_KEYS = GPU_KEYS | {"queued", "registers per thread", "shared memory", "grid", "block"}
COPY_KEYS = GPU_KEYS | {"bytes", "memory bandwidth (GB/s)"}


def export(trace, out):
    r = subprocess.run([PTBPF, "export", "--kineto", str(out), str(trace)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The H200 recording (mlp on CUDA, 10 steps, ops and CUDA calls from the agent)."""
    require(PTBPF)
    d = tmp_path_factory.mktemp("recorded")
    trace = d / "agent.pftrace"
    subprocess.run([PTBPF, "replay", os.path.join(DATA, "agent_mlp.raw"), "-o", str(trace)],
                   check=True, capture_output=True)
    return trace, export(trace, d / "k.json")


def by_cat(ev, cat):
    return [e for e in ev if e.get("cat") == cat and e["ph"] == "X"]


def test_recorded_run_links_ops_calls_and_kernels(recorded):
    """Every op and region has an External id (its own, unique), every
    CUDA call made in an op carries that op's, and every GPU activity its
    launch's; correlations pair each launch with its activity, through an
    ac2g flow whose ends are the call and the activity."""
    trace, k = recorded
    ev = k["traceEvents"]
    ops = by_cat(ev, "cpu_op") + by_cat(ev, "user_annotation")
    assert ops and all(OP_KEYS <= set(e["args"]) for e in ops)
    ids = [e["args"]["External id"] for e in ops]
    assert len(ids) == len(set(ids))
    op_of = {e["args"]["External id"]: e for e in ops}
    rt = by_cat(ev, "cuda_runtime")
    assert rt and all({"cbid", "correlation"} <= set(e["args"]) for e in rt)
    cbids = {e["name"]: e["args"]["cbid"] for e in rt}
    assert cbids["cudaLaunchKernel"] == 211 and cbids["cudaMemcpyAsync"] == 41
    for e in rt:  # the op around a CUDA call is the one its External id names
        if "External id" in e["args"]:
            op = op_of[e["args"]["External id"]]
            assert (op["tid"], op["pid"]) == (e["tid"], e["pid"])
            assert op["ts"] <= e["ts"] and e["ts"] + e["dur"] <= op["ts"] + op["dur"] + 0.002
    rt_by_corr = {e["args"]["correlation"]: e for e in rt}
    gpu = by_cat(ev, "kernel") + by_cat(ev, "gpu_memcpy")
    assert all(KERNEL_KEYS <= set(e["args"]) for e in by_cat(ev, "kernel"))
    assert all(COPY_KEYS <= set(e["args"]) for e in by_cat(ev, "gpu_memcpy"))
    for e in gpu:
        call = rt_by_corr[e["args"]["correlation"]]
        assert e["args"].get("External id") == call["args"].get("External id"), (e, call)
        assert e["ts"] >= call["ts"]
    starts = {f["id"]: f for f in ev if f["ph"] == "s" and f["cat"] == "ac2g"}
    ends = [f for f in ev if f["ph"] == "f" and f["cat"] == "ac2g"]
    gpu_corr = {e["args"]["correlation"] for e in gpu}
    assert gpu_corr <= set(starts) and gpu_corr <= {f["id"] for f in ends}
    for f in ends:
        assert f["bp"] == "e"
        if f["id"] in starts:  # a launch's (copy's, set's) flow, ended by its activity
            assert f["id"] in gpu_corr and starts[f["id"]]["ts"] == rt_by_corr[f["id"]]["ts"]
        else:  # any other CUDA call ends one nothing starts, as Kineto writes it
            call = rt_by_corr[f["id"]]
            assert (f["ts"], f["tid"]) == (call["ts"], call["tid"]), (f, call)
    copies = by_cat(ev, "gpu_memcpy")
    for e in copies:
        a = e["args"]
        assert a["bytes"] > 0 and a["memory bandwidth (GB/s)"] == \
            pytest.approx(a["bytes"] / (e["dur"] * 1e3), rel=1e-3)


def test_recorded_run_steps_and_annotations(recorded):
    """ProfilerStep#0..#9 on the thread that steps the optimizer, one after
    the other; every GPU activity lies in a gpu_user_annotation of its
    stream (its record_function region, else its step); the optimizer's
    kernels in the optimizer's."""
    trace, k = recorded
    ev = k["traceEvents"]
    opt = [e for e in ev if e["name"].startswith("Optimizer.step#")]
    steps = [e for e in by_cat(ev, "user_annotation") if e["name"].startswith("ProfilerStep#")]
    assert [s["name"] for s in steps] == ["ProfilerStep#%d" % i for i in range(10)]
    assert {s["tid"] for s in steps} == {opt[0]["tid"]} and steps[0]["tid"] != 0
    for a, b in zip(steps, steps[1:]):
        assert a["ts"] + a["dur"] == pytest.approx(b["ts"], abs=0.002)
    for s, o in zip(steps, opt):  # each ends with its optimizer step
        assert s["ts"] + s["dur"] == pytest.approx(o["ts"] + o["dur"], abs=0.002)
    anns = by_cat(ev, "gpu_user_annotation")
    assert {a["name"] for a in anns} >= {"Optimizer.step#SGD.step", "ProfilerStep#1"}
    for e in by_cat(ev, "kernel") + by_cat(ev, "gpu_memcpy"):
        if e["ts"] > steps[-1]["ts"] + steps[-1]["dur"]:
            continue  # launched after the last step
        assert any(a["tid"] == e["tid"] and a["ts"] <= e["ts"] and
                   e["ts"] + e["dur"] <= a["ts"] + a["dur"] for a in anns), e


def test_recorded_run_forward_backward_flows(recorded):
    """fwdbwd flows: from the forward op that made an autograd node (on the
    training thread) to the node's backward slice (on autograd's thread),
    which carries the node's Sequence number and the forward thread's id."""
    trace, k = recorded
    ev = k["traceEvents"]
    s = {f["id"]: f for f in ev if f["ph"] == "s" and f["cat"] == "fwdbwd"}
    f = {f["id"]: f for f in ev if f["ph"] == "f" and f["cat"] == "fwdbwd"}
    assert len(s) >= 50 and set(s) == set(f)
    ops = {(e["tid"], e["ts"]): e for e in by_cat(ev, "cpu_op")}
    for i in s:
        fwd, bwd = ops[(s[i]["tid"], s[i]["ts"])], ops[(f[i]["tid"], f[i]["ts"])]
        assert fwd["tid"] != bwd["tid"] and fwd["ts"] < bwd["ts"]
        assert fwd["args"]["Sequence number"] == bwd["args"]["Sequence number"]
        assert fwd["args"]["Fwd thread id"] == 0 and bwd["args"]["Fwd thread id"] == fwd["tid"]


def test_recorded_run_metadata(recorded):
    """Kineto's top level: baseTimeNanoseconds + ts is unix time (the
    trace's ClockSnapshot), a trace_id, the schema; threads and GPU
    streams named as Kineto names them."""
    import pftrace
    trace, k = recorded
    for key in ("schemaVersion", "deviceProperties", "displayTimeUnit", "baseTimeNanoseconds",
                "trace_id", "traceName", "traceEvents"):
        assert key in k, key
    t = pftrace.proto_module().Trace.FromString(open(trace, "rb").read())
    snap = next(p.clock_snapshot for p in t.packet if p.HasField("clock_snapshot"))
    clocks = {c.clock_id: c.timestamp for c in snap.clocks}
    assert k["baseTimeNanoseconds"] == clocks[1] - clocks[3]
    assert len(k["trace_id"]) == 32 and int(k["trace_id"], 16)
    meta = collections.Counter((e["name"], e["pid"]) for e in k["traceEvents"] if e["ph"] == "M")
    assert meta[("process_name", 0)] == 1 and meta[("thread_name", 0)] >= 1
    gpu = [e for e in k["traceEvents"] if e["ph"] == "M" and e["pid"] == 0 and
           e["name"] == "thread_name"]
    assert gpu[0]["args"]["name"] == "stream 7"
    assert k["traceEvents"][-1]["name"] == "Record Window End"


def synthetic_trace(path):
    """Two training iterations on one GPU as ptbpf's agent would record
    them, with the arguments the recording lacks."""
    s = Synth(realtime_offset=1_800_000_000_123_456_789)
    pid, main, bwd = 100, 100, 101
    p = s.process(pid, "python3", ["RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1"])
    t, tb = s.thread(pid, main, "python3"), s.thread(pid, bwd, "pt_autograd_0")
    steps = s.child(p, "Steps (Optimizer.step)")
    gpu = s.child(s.child(p, "GPU 0"), "GPU 0 / stream 7")
    s.instant(p, 1_500, "device properties", "ptbpf", {
        "device": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000,
        "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
        "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
        "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472})
    s.instant(p, 1_500, "cuda versions", "ptbpf", {
        "cupti_version": 130001, "cuda_runtime_version": 13000, "cuda_driver_version": 13000})
    corr = iter(range(1, 100))
    flow = iter(range(1000, 2000))

    def launch(ts, name, cat, gpu_name, gpu_args, dur=50):
        c, f = next(corr), next(flow)
        s.begin(t, ts, name, "cuda_runtime", {"correlation": c})
        s.instant(t, ts, "cupti correlation", "launch_flow", {"correlation": c}, flows=[f])
        s.end(t, ts + 5)
        args = dict(gpu_args)
        if cat != "gpu_memset":
            args["correlation"] = c
        s.slice(gpu, ts + 20, dur, gpu_name, cat, args, term=[f])
        return c

    kernel = {"grid": "1000,1,1", "block": "256,1,1", "registers": 32, "shared_mem": 0,
              "context": 1}
    for it in range(2):
        base = 10_000 + it * 100_000
        s.begin(t, base, "aten::zero_", "cpu_op")
        launch(base + 10, "cudaMemsetAsync", "gpu_memset", "Memset",
               {"bytes": 4096, "value": 0, "memory_kind": 3,
                "context": 1})
        s.end(t, base + 100)
        s.begin(t, base + 200, "aten::linear", "cpu_op", {"sequence_nr": 7 + it})
        s.begin(t, base + 210, "aten::addmm", "cpu_op")
        launch(base + 220, "cudaLaunchKernel", "kernel", "gemm_kernel<float>", kernel, 300)
        s.end(t, base + 400, args={"seq": 7 + it}, flows=[5000 + it])
        s.end(t, base + 450)
        s.begin(t, base + 500, "aten::_to_copy", "cpu_op")
        launch(base + 510, "cudaMemcpyAsync", "gpu_memcpy", "Memcpy HtoD",
               {"bytes": 8192, "src_kind": 2, "dst_kind": 3, "copy_kind": 1, "context": 1})
        s.end(t, base + 600)
        s.begin(tb, base + 1000, "autograd::engine::evaluate_function: AddmmBackward0",
                "backward")
        s.begin(tb, base + 1010, "AddmmBackward0", "backward_function")
        s.instant(tb, base + 1010, "backward node", "backward", {"seq": 7 + it},
                  term=[5000 + it])
        s.end(tb, base + 1500)
        s.end(tb, base + 1600)
        s.begin(t, base + 2000, "Optimizer.step#AdamW.step", "user_annotation")
        launch(base + 2010, "cudaLaunchKernel", "kernel", "adam_kernel", kernel, 100)
        s.end(t, base + 3000)
        if it:
            s.slice(steps, 10_000 + 3000, 100_000, "ProfilerStep#1", "step")
    s.attribute("dev.ptbpf.events_lost", 0)
    s.attribute("dev.ptbpf.version", "0.1.0")
    return s.write(path)


def test_synthetic_run_uses_what_the_trace_carries(tmp_path):
    require(PTBPF)
    k = export(synthetic_trace(tmp_path / "s.pftrace"), tmp_path / "s.json")
    ev = k["traceEvents"]
    assert k["baseTimeNanoseconds"] == 1_800_000_000_123_456_789
    assert k["distributedInfo"] == {"rank": 1, "world_size": 2, "local_rank": 1}
    assert (k["cupti_version"], k["cuda_runtime_version"], k["cuda_driver_version"]) == \
        (130001, 13000, 13000)
    dev = k["deviceProperties"]
    assert len(dev) == 1 and dev[0]["id"] == 0 and dev[0]["numSms"] == 132
    assert dev[0]["name"] == "NVIDIA H100 80GB HBM3"
    ops = {(e["name"], e["ts"]): e for e in by_cat(ev, "cpu_op")}
    sets = by_cat(ev, "gpu_memset")
    assert [e["name"] for e in sets] == ["Memset (Device)"] * 2
    for e in sets:  # the correlation from the launch's flow
        a = e["args"]
        assert a["correlation"] in (1, 5) and a["context"] == 1 and a["bytes"] == 4096
        assert a["memory bandwidth (GB/s)"] == pytest.approx(4096 / 50)
        assert ops[("aten::zero_", 10.0 if a["correlation"] == 1 else 110.0)]["args"][
            "External id"] == a["External id"]
    assert {e["name"] for e in by_cat(ev, "gpu_memcpy")} == {"Memcpy HtoD (Pinned -> Device)"}
    kernels = by_cat(ev, "kernel")
    gemm = [e for e in kernels if e["name"] == "gemm_kernel<float>"]
    assert len(gemm) == 2
    a = gemm[0]["args"]
    assert a["grid"] == [1000, 1, 1] and a["block"] == [256, 1, 1]
    assert a["registers per thread"] == 32 and a["shared memory"] == 0 and a["context"] == 1
    assert a["blocks per SM"] == pytest.approx(1000 / 132, rel=1e-5)
    assert a["warps per SM"] == pytest.approx(1000 / 132 * 8, rel=1e-5)
    # CUDA's occupancy calculator: 8 blocks of 256 threads fit an SM (warps
    # and registers limit), 7.58 come: 7.58 * 256 / 2048 = 95%.
    assert a["est. achieved occupancy %"] == 95
    assert a["External id"] == ops[("aten::addmm", 10.21)]["args"]["External id"]
    # Sequence numbers: the forward op's own (sequence_nr) and the one that
    # made the node (seq); the backward slice gets the forward thread.
    assert ops[("aten::linear", 10.2)]["args"]["Sequence number"] == 7
    assert ops[("aten::linear", 10.2)]["args"]["Fwd thread id"] == 0
    node = ops[("AddmmBackward0", 11.01)]["args"]
    assert node["Sequence number"] == 7 and node["Fwd thread id"] == 100
    fb = [f for f in ev if f.get("cat") == "fwdbwd"]
    assert sorted((f["ph"], f["tid"], f["ts"]) for f in fb) == sorted(
        [("s", 100, 10.21), ("f", 101, 11.01), ("s", 100, 110.21), ("f", 101, 111.01)])
    steps = [e for e in by_cat(ev, "user_annotation") if e["name"].startswith("ProfilerStep")]
    assert [(e["name"], e["tid"], e["ts"], e["dur"]) for e in steps] == [
        ("ProfilerStep#0", 100, 10.0, 3.0), ("ProfilerStep#1", 100, 13.0, 100.0)]
    anns = {(e["name"], e["ts"]) for e in by_cat(ev, "gpu_user_annotation")}
    # the optimizer's kernels in its region; the rest in its step (1 ns
    # earlier, 2 ns longer, as Kineto draws them)
    assert ("Optimizer.step#AdamW.step", 12.029) in anns
    assert ("ProfilerStep#0", 10.029) in anns and ("ProfilerStep#1", 110.029) in anns
    rt = {e["name"]: e["args"] for e in by_cat(ev, "cuda_runtime")}
    assert rt["cudaMemsetAsync"]["cbid"] == 51 and rt["cudaMemcpyAsync"]["cbid"] == 41


def test_kineto_export_refuses_bad_input(tmp_path):
    require(PTBPF)
    r = subprocess.run([PTBPF, "export", str(tmp_path / "missing.pftrace")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
