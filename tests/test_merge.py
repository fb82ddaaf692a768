# SPDX-License-Identifier: BSD-2-Clause
"""`ptbpf merge`: traces of several ranks/hosts on one REALTIME timeline.
The second input is the first with its clock mapping moved by a known
amount (as a host whose REALTIME is 5 s ahead would write it): after the
merge each of its events must sit exactly that much later, in a process
group of its own."""
import os
import re
import subprocess

from conftest import PTBPF, pftrace, require, run_traced, workload_argv

SHIFT_NS = 5_000_000_000
REALTIME = 1


def shifted_copy(src, dst, shift):
    pb = pftrace.proto_module()
    trace = pb.Trace()
    with open(src, "rb") as f:
        trace.ParseFromString(f.read())
    for p in trace.packet:
        if p.HasField("clock_snapshot"):
            for c in p.clock_snapshot.clocks:
                if c.clock_id == REALTIME:
                    c.timestamp += shift
    with open(dst, "wb") as f:
        f.write(trace.SerializeToString())


def test_merge_aligns_by_realtime(tmp_path):
    require(PTBPF)
    run = run_traced(tmp_path, workload_argv("mlp", 5))
    assert run.rc == 0, run.err
    a = str(tmp_path / "rank0.pftrace")
    b = str(tmp_path / "rank1.pftrace")
    subprocess.run(["cp", run.trace_path, a], check=True)
    shifted_copy(run.trace_path, b, SHIFT_NS)
    out = str(tmp_path / "job.pftrace")
    r = subprocess.run([PTBPF, "merge", a, b, "-o", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "alignment uncertainty" in r.stderr
    t = pftrace.Trace(out)
    assert t.validate() == []
    src = pftrace.Trace(run.trace_path)
    # Two process groups, named after their files, with distinct pids.
    procs = {d.process.pid: d.process.process_name for d in t.tracks.values()
             if d.HasField("process")}
    names = sorted(procs.values())
    assert len(procs) == 2 and names[0].startswith("rank0: ") and names[1].startswith("rank1: ")
    # Every slice twice; the copy's exactly SHIFT_NS later.
    thread_pid = {u: d.thread.pid for u, d in t.tracks.items() if d.HasField("thread")}
    by_pid = {}
    for s in t.slices:
        if s.track in thread_pid:
            by_pid.setdefault(thread_pid[s.track], []).append((s.ts, s.name, s.dur))
    assert len(by_pid) == 2
    first, second = (sorted(v) for _, v in sorted(by_pid.items()))
    assert len(first) == len(second) == len([s for s in src.slices if s.track in {
        u for u, d in src.tracks.items() if d.HasField("thread")}])
    assert all(y[0] - x[0] == SHIFT_NS and x[1:] == y[1:] for x, y in zip(first, second))
    # Flow ids are kept apart per input: twice as many, all still paired.
    def flows(tr):
        out = {f for s in tr.slices + tr.instants for f in s.flows_out}
        into = {f for s in tr.slices + tr.instants for f in s.flows_in}
        return out, into
    src_out, src_in = flows(src)
    out_, in_ = flows(t)
    assert src_out and len(out_) == 2 * len(src_out) and len(in_) == 2 * len(src_in)


def test_merge_refuses_bad_input(tmp_path):
    require(PTBPF)
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(b"\xff\xff\xff not a trace")
    r = subprocess.run([PTBPF, "merge", str(bad), str(bad), "-o", str(tmp_path / "o.pftrace")],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "not a Perfetto trace" in r.stderr, r.stderr
    assert not (tmp_path / "o.pftrace").exists()


def test_merge_aligns_ranks_by_their_collectives(tmp_path):
    """Real per-rank traces of a 2-GPU NCCL DDP job (recorded on 2 H200s,
    tests/data/ddp/ddp_rank*.pftrace). Rank 1's file is given a REALTIME
    3.7 ms off, as a host with a wrong clock would write it: the merge by
    REALTIME then misaligns the ranks' NCCL kernels by that much, and
    --align-collectives finds the error from the kernels' end times."""
    require(PTBPF)
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ddp")
    r0, r1 = os.path.join(data, "ddp_rank0.pftrace"), str(tmp_path / "ddp_rank1.pftrace")
    error_ns = 3_700_000
    shifted_copy(os.path.join(data, "ddp_rank1.pftrace"), r1, error_ns)
    out = str(tmp_path / "job.pftrace")
    r = subprocess.run([PTBPF, "merge", "--align-collectives", r0, r1, "-o", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = re.search(r"ddp_rank1: moved ([-+][\d.]+) us to line up its NCCL kernels with "
                  r"ddp_rank0's \((\d+) and (\d+)\); they then end ([\d.]+) us apart", r.stderr)
    assert m, r.stderr
    moved, residual = float(m.group(1)), float(m.group(4))
    assert abs(moved + error_ns / 1e3) < 5, r.stderr
    assert residual < 5 and int(m.group(2)) >= 30, r.stderr
    t = pftrace.Trace(out)
    assert t.validate() == []
    # The k-th NCCL kernels of the two ranks now end together.
    ends = {}
    for s in t.slices:
        if s.category == "kernel" and s.name.lower().startswith("nccl"):
            ends.setdefault(t.pid_of(s.track), []).append(s.ts + s.dur)
    a, b = (sorted(v) for _, v in sorted(ends.items()))
    skew = sorted(abs(x - y) for x, y in zip(a, b))
    assert skew[len(skew) // 2] < 5000, skew[:5]
