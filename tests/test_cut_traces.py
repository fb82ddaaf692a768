# SPDX-License-Identifier: BSD-2-Clause
"""Traces stay readable whatever stops the writer (issue 12): the file holds
whole packets at every moment, a killed tracer leaves its trace as
FILE.partial, a full disk cuts it back to its last whole packet, and
report, export and merge read a cut trace up to the cut (exit 0, one
warning line) while telling it from a complete one (the writer's end
marker). What is no trace at all is an error."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import PTBPF, PYTHON, WORKLOAD, Proc, pftrace
from synth_trace import Synth

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")


def ptbpf(*args, timeout=120):
    return subprocess.run([PTBPF] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


def status(path):
    """report --json's trace_status, and the warning lines."""
    r = ptbpf("report", path, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["trace_status"], [l for l in r.stderr.splitlines() if l]


def whole_packets(path):
    """The file parses as a Trace to its last byte: whole packets only."""
    pb = pftrace.proto_module()
    with open(path, "rb") as f:
        return len(pb.Trace.FromString(f.read()).packet)


@pytest.fixture
def looping_torch():
    """A training loop (mlp, agent ops: steps) that runs until killed."""
    p = Proc([PYTHON, WORKLOAD, "mlp", "--steps", "100", "--loop"])
    p.wait_line("ready")
    yield p
    p.kill()


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    """A complete trace with GPU kernels, ops and steps (the H200 recording)."""
    path = str(tmp_path_factory.mktemp("cut") / "full.pftrace")
    r = ptbpf("replay", os.path.join(DATA, "agent_mlp.raw"), "-o", path)
    assert r.returncode == 0, r.stderr
    return path


def test_complete_trace_says_so(small_trace):
    st, warnings = status(small_trace)
    assert st["complete"] and not st["cut"] and not st["damaged"], st
    assert st["bytes"] == os.path.getsize(small_trace) and warnings == []
    text = ptbpf("report", small_trace).stdout.splitlines()[0]
    assert ": complete, %d packets" % st["packets"] in text, text


def test_every_cut_of_a_trace_is_read(small_trace, tmp_path):
    """Cut anywhere (a killed writer, a full disk), a trace is read up to
    its last whole packet: report, export and merge exit 0 and say so in
    one line; the more is kept, the more is read."""
    data = open(small_trace, "rb").read()
    cut = tmp_path / "cut.pftrace"
    last = -1
    sizes = sorted({len(data) - 1, len(data) - 40} | set(range(200, len(data), len(data) // 37)))
    for size in sizes:
        cut.write_bytes(data[:size])
        st, warnings = status(str(cut))
        assert not st["complete"] and st["bytes"] + st["dropped_bytes"] == size, (size, st)
        assert st["packets"] >= last, (size, st)
        last = st["packets"]
        assert len(warnings) == 1 and "cut" in warnings[0] and str(cut) in warnings[0], warnings
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "k.json"
    r = ptbpf("export", "--kineto", out, cut)
    assert r.returncode == 0 and "warning" in r.stderr.splitlines()[0], r.stderr
    json.load(open(out))
    r = ptbpf("merge", cut, small_trace, "-o", tmp_path / "m.pftrace")
    assert r.returncode == 0, r.stderr
    assert sum("warning" in l for l in r.stderr.splitlines()) == 1, r.stderr
    assert status(str(tmp_path / "m.pftrace"))[0]["complete"]


def test_damage_after_packets_is_read_up_to(small_trace, tmp_path):
    damaged = tmp_path / "d.pftrace"
    good = open(small_trace, "rb").read()
    damaged.write_bytes(good + b"\x00" * 5000)
    st, warnings = status(str(damaged))
    assert st["damaged"] and st["bytes"] == len(good) and st["dropped_bytes"] == 5000, st
    assert len(warnings) == 1 and "damaged at byte %d" % len(good) in warnings[0], warnings


NO_TRACE = {
    "empty": (lambda: b"", "is empty: not a trace"),
    "50 MB of zeros": (lambda: b"\x00" * (50 << 20), "is not a Perfetto trace"),
    "random": (lambda: os.urandom(100_000), "is not a Perfetto trace"),
    "a cut first packet": (lambda: b"\x0a\x80\x80\x80\x80\x10", "is not a Perfetto trace"),
}


@pytest.mark.parametrize("what", sorted(NO_TRACE))
def test_what_is_no_trace_is_an_error(tmp_path, what):
    content, needle = NO_TRACE[what]
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(content())
    for args in (["report", bad], ["export", "--kineto", tmp_path / "x.json", bad],
                 ["merge", bad, bad, "-o", tmp_path / "m.pftrace"]):
        r = ptbpf(*args)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, (args, r.stderr)
        assert needle in r.stderr, (args, r.stderr)
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "m.pftrace").exists()
    assert not (tmp_path / "x.json.partial").exists()


def test_killed_tracer_leaves_a_readable_partial_trace(tmp_path, looping_torch):
    """SIGKILL mid-trace: no FILE, but FILE.partial (named when tracing
    starts) holds whole packets, which report, export and merge read."""
    out = tmp_path / "t.pftrace"
    tracer = Proc([PTBPF, "-p", str(looping_torch.p.pid), "--ops", "agent", "-o", str(out)])
    try:
        line, _ = tracer.wait_line("ptbpf: writing", stream="stderr")
        assert "%s.partial" % out in line
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        time.sleep(1.5)
        tracer.p.send_signal(signal.SIGKILL)
        tracer.p.wait()
    finally:
        tracer.kill()
    partial = str(out) + ".partial"
    assert not out.exists() and os.path.exists(partial)
    assert whole_packets(partial) > 100
    st, warnings = status(partial)
    assert not st["complete"] and not st["cut"] and st["dropped_bytes"] == 0, st
    assert len(warnings) == 1, warnings
    rep = json.loads(ptbpf("report", partial, "--json").stdout)
    assert {o["name"] for o in rep["operators"]} >= {"aten::addmm", "aten::linear"}
    assert ptbpf("export", "--kineto", tmp_path / "k.json", partial).returncode == 0
    assert looping_torch.p.poll() is None


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_disk_full_mid_trace_keeps_whole_packets(small_fs, looping_torch):
    """The disk fills while tracing: the trace is cut back to its last
    whole packet, ptbpf says why once and where the partial trace is, and
    exits 1; the partial trace opens."""
    out = small_fs / "t.pftrace"
    r = ptbpf("-p", looping_torch.p.pid, "--ops", "agent", "-d", "20", "-o", out)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert sum("No space left on device" in l for l in lines) == 1, r.stderr
    assert any(l.startswith("ptbpf: the trace up to the failure") and
               "%s.partial" % out in l for l in lines), r.stderr
    partial = str(out) + ".partial"
    assert not out.exists() and whole_packets(partial) > 1000
    st, warnings = status(partial)
    assert not st["complete"] and st["dropped_bytes"] == 0 and len(warnings) == 1, st


def test_disk_full_at_start(small_fs, looping_torch):
    with open(small_fs / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass
    out = small_fs / "t.pftrace"
    r = ptbpf("-p", looping_torch.p.pid, "-d", "5", "-o", out)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "ptbpf: cannot write %s.partial: No space left on device: free space there or write "
        "elsewhere" % out], r.stderr
    assert sorted(os.listdir(small_fs)) == ["filler"]
    assert looping_torch.p.poll() is None


US, MS = 1_000, 1_000_000


def graph_window():
    """A daemon window of a CUDA-graph training job in the shape of the H100
    soak's (its trace is lost): ops, each step one cuGraphLaunch (a uprobe's
    driver call, its op -> launch flow) whose graph runs 4 kernels on stream
    7, a copy on stream 8, the thread blocked in the GPU driver; no
    launch -> kernel correlation (the job's Kineto held CUPTI's callbacks),
    so no kernel is joined to its launch. Written as the loader writes:
    each slice when it ends, a step after its work. (trace, the GPU
    activities as (stream, start, end) and the steps as (start, end), each
    with the index of the packet that ends it.)"""
    s = Synth()
    proc = s.process(100, "python3")
    thread = s.thread(100, 101, "python3")
    blocked = s.child(thread, "blocked in")
    steps = s.child(proc, "steps")
    streams = {7: s.child(proc, "GPU 0 / stream 7"), 8: s.child(proc, "GPU 0 / stream 8")}
    activities, step_ends = [], []
    for i in range(3):
        t = 10 * MS + i * 10 * MS
        s.begin(thread, t + 100 * US, "graph.replay", "cpu_op")
        s.instant(thread, t + 200 * US, "launch", "launch_flow", flows=[1000 + i])
        s.slice(thread, t + 200 * US, 30 * US, "cuGraphLaunch", "cuda_driver",
                {"cbid": 514}, term=[1000 + i])
        s.end(thread, t + 400 * US)
        for k in range(4):  # the graph's kernels, 20 us apart (gaps)
            start = t + 300 * US + k * 420 * US
            s.slice(streams[7], start, 400 * US, "void cutlass::Kernel2<Gemm%d>()" % k,
                    "kernel", {"grid": "1,1,1", "block": "128,1,1"})
            activities.append((7, start, start + 400 * US, len(s.trace.packet) - 1))
        s.slice(streams[8], t + 2500 * US, 100 * US, "Memcpy DtoH", "gpu_memcpy",
                {"bytes": 4096})
        activities.append((8, t + 2500 * US, t + 2600 * US, len(s.trace.packet) - 1))
        s.slice(blocked, t + 2600 * US, 5 * MS, "ioctl", "syscall",
                {"file": "/dev/nvidia0", "woken_by": "a GPU interrupt"})
        s.slice(steps, t, 10 * MS, "ProfilerStep#%d" % i, "step", {"tid": 101})
        step_ends.append((t, t + 10 * MS, len(s.trace.packet) - 1))
    return s.trace, activities, step_ends


def gpu_gaps(activities, steps):
    """The report's GPU idle gaps (10 us or more between two activities of
    a stream): those that overlap a whole step, and the others."""
    last, inside, outside = {}, 0, 0
    for stream, start, end, _ in activities:
        if last.get(stream) and start >= last[stream] + 10 * US:
            if any(s < start and e > last[stream] for s, e in steps):
                inside += 1
            else:
                outside += 1
        last[stream] = max(last.get(stream, 0), end)
    return inside, outside


def test_every_cut_of_a_gpu_window_without_correlations(tmp_path):
    """A daemon window of a CUDA-graph job, cut after each of its packets,
    is read up to the cut by both reports, which count what it holds: its
    kernels, its whole steps, its GPU idle gaps in them and those outside
    (all of them before the first step ends). (The JSON report once
    crashed, SIGSEGV, on such a window cut before its first step ended: it
    walked the count of all gaps over a list of the gaps in steps it never
    made.)"""
    trace, activities, steps = graph_window()
    pb = pftrace.proto_module()
    cut = tmp_path / "w.pftrace.partial"
    for n in range(1, len(trace.packet) + 1):
        cut.write_bytes(pb.Trace(packet=trace.packet[:n]).SerializeToString())
        r = ptbpf("report", cut, "--json")
        assert r.returncode == 0, (n, r.returncode, r.stderr)
        warnings = [l for l in r.stderr.splitlines() if l]
        assert len(warnings) == 1 and "no end marker" in warnings[0], (n, r.stderr)
        rep = json.loads(r.stdout)
        assert rep["trace_status"]["packets"] == n, (n, rep["trace_status"])
        whole = [(s, e) for s, e, at in steps if at < n]
        ended = [a for a in activities if a[3] < n]
        assert [(s["start_ns"], s["start_ns"] + s["dur_ns"]) for s in rep["steps"]] == whole
        assert sum(k["calls"] for k in rep["kernels"]) == sum(a[0] == 7 for a in ended), n
        idle = rep["gpu_idle"]
        assert (idle["gaps"], idle["not_in_steps"]) == gpu_gaps(ended, whole), (n, idle)
        assert len(idle["largest"]) == idle["gaps"] and (idle["idle_ns"] > 0) == (idle["gaps"] > 0)
        r = ptbpf("report", cut)
        assert r.returncode == 0 and r.stdout.startswith("ptbpf report"), (n, r.stderr)
        assert ("GPU idle gaps" in r.stdout) == (idle["gaps"] > 0), (n, r.stdout)
    assert idle["gaps"] > 0 and not idle["launching_thread"], idle
