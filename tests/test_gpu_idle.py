# SPDX-License-Identifier: BSD-2-Clause
"""The report's GPU idle gaps (issue 20): each gap of a stream between
two of its activities, split by what the host did then (another stream's
work, a CUDA call, DataLoader, ops) and, for the rest, by what the thread
that launched the next activity was doing (its "blocked in" and
"waiting for a CPU" slices, its runs on a CPU). The CI VM has no GPU, so
the trace here is made by hand (tests/synth_trace.py) in the shape the
loader writes; tests/gpu checks the same table on real CUDA work."""
import json
import os
import subprocess

import pftrace
from conftest import PTBPF
from synth_trace import Synth

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")

MS = 1_000_000
T0 = 10 * MS


def gap_trace(path, step=True):
    """One step (10 ms) of thread 101; stream 7 runs kernels at 1-2 ms and
    at 6-7 ms, the second launched at 5 ms. In the gap (2-6 ms) the
    thread blocks 2.2 ms in read on a pipe, is preempted 0.3 ms, runs an
    op 0.5 ms, then the launch call (5-5.01 ms); nothing is known of the
    rest. A kernel on stream 8 covers 1.5-2.2 ms."""
    s = Synth()
    proc = s.process(100, "python3")
    thread = s.thread(100, 101, "python3")
    s.thread(100, 102, "loader")
    steps = s.child(proc, "steps")
    blocked = s.child(thread, "blocked in")
    runnable = s.child(thread, "waiting for a CPU")
    s7, s8 = s.child(proc, "GPU 0 / stream 7"), s.child(proc, "GPU 0 / stream 8")
    s.slice(s7, T0 + 1 * MS, MS, "k1", "kernel")
    s.slice(s8, T0 + 1 * MS + MS // 2, 7 * MS // 10, "k0", "kernel")
    s.slice(blocked, T0 + 2 * MS, 22 * MS // 10, "read", "syscall",
            {"fd": 3, "file": "pipe:[7]", "woken_by": "loader", "woken_by_tid": 102})
    s.slice(thread, T0 + 9 * MS // 2, MS // 2, "aten::add", "cpu_op")
    s.slice(runnable, T0 + 42 * MS // 10, 3 * MS // 10, "preempted", "sched",
            {"by": "stress", "by_tid": 999, "cpu": 0, "state": "R+"})
    s.begin(thread, T0 + 5 * MS, "cudaLaunchKernel", "cuda_runtime", {"correlation": 5})
    s.instant(thread, T0 + 5 * MS + 1000, "cupti correlation", "launch_flow",
              {"correlation": 5}, flows=[77])
    s.end(thread, T0 + 5 * MS + 10_000)
    s.slice(s7, T0 + 6 * MS, MS, "k2", "kernel", {"correlation": 5}, term=[77])
    if step:
        s.slice(steps, T0, 10 * MS, "ProfilerStep#1", "step", {"tid": 101})
    s.write(path)


def test_gap_split_by_host_and_launching_thread(tmp_path):
    path = str(tmp_path / "g.pftrace")
    gap_trace(path)
    r = subprocess.run([PTBPF, "report", "--json", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    idle = json.loads(r.stdout)["gpu_idle"]
    assert idle["gaps"] == 1 and idle["idle_ns"] == 4 * MS, idle
    cov = idle["covered_ns"]
    assert cov["a kernel on another stream"] == MS // 5  # 2.0-2.2 ms
    assert cov["host ops (any thread)"] == MS // 2
    assert cov["a CUDA API call (any thread)"] == 10_000
    thread = {c["cause"]: c["ns"] for c in idle["launching_thread"]}
    assert thread == {"read on a pipe": 2 * MS, "preempted by stress": 3 * MS // 10}, thread
    rest = 4 * MS - sum(cov.values()) - sum(thread.values())
    assert idle["unexplained_ns"] == rest
    assert idle["largest"][0]["stream"] == "GPU 0 / stream 7"
    assert idle["largest"][0]["launching_tid"] == 101
    assert idle["largest"][0]["mostly"] == "read on a pipe"
    # The chain: the gap, the launching thread blocked on the pipe, woken
    # by the thread that wrote it.
    assert idle["largest"][0]["woken_by"] == "loader (tid 102)"
    text = subprocess.run([PTBPF, "report", path], capture_output=True, text=True).stdout
    assert "GPU idle gaps" in text and "launching thread: read on a pipe" in text, text
    assert "mostly read on a pipe; woken by loader (tid 102)" in text, text


def test_gaps_without_a_step(tmp_path):
    """GPU idle gaps and no whole step (a daemon window cut before its first
    step ended): no gap is in a step, and both reports say so. (The JSON
    report once walked the gaps' count over a list it never made, and
    crashed: SIGSEGV on a cut window of the H100 soak.)"""
    path = str(tmp_path / "g.pftrace")
    gap_trace(path, step=False)
    r = subprocess.run([PTBPF, "report", "--json", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    idle = json.loads(r.stdout)["gpu_idle"]
    assert idle["gaps"] == 0 and idle["idle_ns"] == 0 and idle["largest"] == [], idle
    r = subprocess.run([PTBPF, "report", path], capture_output=True, text=True)
    assert r.returncode == 0 and "GPU idle gaps" not in r.stdout, r.stderr


def test_idle_track_in_a_replayed_capture(tmp_path):
    """A capture with a GPU timeline gets, once written, a "GPU idle" track
    under each stream: a slice per gap the report finds, named by what it
    mostly was (the H200 recording, replayed as a capture is written);
    the trace stays complete and valid, the report and the Kineto export
    read it as before (the export leaves the track out)."""
    raw = os.path.join(DATA, "agent_mlp.raw")
    path = str(tmp_path / "r.pftrace")
    r = subprocess.run([PTBPF, "replay", raw, "-o", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    t = pftrace.Trace(path)
    assert t.validate() == []
    idle = {u: d for u, d in t.tracks.items() if d.name == "GPU idle"}
    assert idle and all(t.tracks[d.parent_uuid].name.startswith("GPU ") for d in idle.values())
    gaps = [s for s in t.slices if s.track in idle]
    assert gaps and all(s.category == "gpu_idle" and s.dur >= 10_000 for s in gaps)
    assert t.attrs["dev.ptbpf.gpu_idle_gaps"] == len(gaps)
    assert t.attrs["dev.ptbpf.gpu_idle_gaps_not_drawn"] == 0
    rep = subprocess.run([PTBPF, "report", "--json", path], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    report = json.loads(rep.stdout)
    assert report["trace_status"]["complete"], report["trace_status"]
    largest = report["gpu_idle"]["largest"][0]
    match = [s for s in gaps if s.ts == largest["start_ns"] and s.dur == largest["dur_ns"]]
    assert len(match) == 1 and match[0].name == largest["mostly"], (largest, match)
    assert match[0].args["launching_tid"] == largest["launching_tid"]
    ex = str(tmp_path / "k.json")
    r = subprocess.run([PTBPF, "export", "-k", ex, path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(ex) as f:
        assert not [e for e in json.load(f)["traceEvents"] if e.get("cat") == "gpu_idle"]
