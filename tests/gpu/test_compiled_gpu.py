# SPDX-License-Identifier: BSD-2-Clause
"""GPU-machine checks of issue 45 (make gpu-check, PTBPF_GPU_PART=6): CUDA
graphs replayed under the ops that captured them, the daemon's kept
capture map, torch.compile's regions and each Triton kernel's ATen ops.
CI has no GPU and does not collect this folder; tests/test_compiled_regions.py
and tests/data/gpu test the same joins from recorded data."""
import json
import os

import pytest
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import PTBPF, PYTHON, Proc  # noqa: E402
import pftrace  # noqa: E402

COMPILED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads",
                        "compiled.py")


def test_graph_replays_under_their_capture(tmp_path):
    """Issue 45: torch.compile(mode="reduce-overhead") started by `ptbpf
    run` (its CUDA graphs captured while traced): every replayed kernel is
    joined to its capture, and at least 95% of the replayed kernels' time
    is under the op that captured them (aten::mm, CompiledFunction...; never
    the CUDA call itself): 100% on the H200, 2026-12-02. The same job
    traced with -p after its warm-up: every replayed kernel counted as of a
    graph captured before ptbpf attached."""
    out = tmp_path / "ro.pftrace"
    r = subprocess.run([PTBPF, "run", "--no-samples", "-o", str(out), "--", PYTHON, COMPILED,
                        "reduce-overhead", "20"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ops from the agent's RecordFunction callbacks" in r.stderr, r.stderr[-3000:]
    t = pftrace.Trace(str(out))
    replayed = [s for s in t.slices if s.category == "kernel" and "graph_id" in s.args]
    assert len(replayed) >= 1000, len(replayed)
    joined = [s for s in replayed if "capture_correlation" in s.args]
    assert len(joined) == len(replayed)
    by = {}
    for s in replayed:
        by[s.args.get("captured_by")] = by.get(s.args.get("captured_by"), 0) + s.dur
    print("replayed %d; time by capturing op %s" % (len(replayed), by))
    named = sum(d for n, d in by.items() if n)
    assert named >= 0.95 * sum(by.values()), by
    assert not [n for n in by if n and (n.startswith("cu") or n.startswith("cuda"))], by
    cue = tmp_path / "go"
    job = subprocess.Popen([PYTHON, COMPILED, "reduce-overhead", "40", "--cue", str(cue)],
                           stdout=subprocess.PIPE, text=True)
    pid = int(job.stdout.readline().split()[1])
    p = subprocess.Popen([PTBPF, "-p", str(pid), "--no-samples", "-o", str(tmp_path / "a.pftrace")],
                         stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    cue.touch()
    _, err = p.communicate(timeout=120)
    assert job.wait(timeout=60) == 0
    line = [x for x in err.splitlines() if "CUDA graphs:" in x]
    assert line and " 0 of them joined" in line[0] and "captured before ptbpf attached" in line[0], err


def capture_ops(trace):
    """Replayed kernels: {kernel name: {captured_by}}, and their time by
    captured_by."""
    ops, by = {}, {}
    for s in trace.slices:
        if s.category == "kernel" and "graph_id" in s.args:
            ops.setdefault(s.name, set()).add(s.args.get("captured_by"))
            by[s.args.get("captured_by")] = by.get(s.args.get("captured_by"), 0) + s.dur
    return ops, by


def test_daemon_keeps_the_capture_map(tmp_path):
    """Issue 45: `ptbpf daemon --keep-graphs`, up before a reduce-overhead
    job captures its CUDA graphs: a window opened after the warm-up, over
    30 steps run inside it, puts the replayed kernels under the ops that
    captured them, from the map the always-on layer kept (capture_kept),
    the same ops as `ptbpf run` (which saw the captures itself) gives for
    every kernel an ATen op captured there (CUPTI 13 tells an instantiated
    node as made under CompiledFunction, then as cloned: the clone's op
    wins). The job's results and exit are its own. With PTBPF_SAVE_DIR the
    window's raw capture is kept (graph_kept.raw: a few MB, for the CPU's
    tests)."""
    ref = tmp_path / "run.pftrace"
    r = subprocess.run([PTBPF, "run", "--no-samples", "-o", str(ref), "--", PYTHON, COMPILED,
                        "reduce-overhead", "20"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    ref = pftrace.Trace(str(ref))
    assert all("capture_correlation" in s.args for s in ref.slices
               if s.category == "kernel" and "graph_id" in s.args)
    want, _ = capture_ops(ref)
    tag = "kept-%d" % os.getpid()
    out = tmp_path / "d"
    out.mkdir()
    start, go = tmp_path / "start", tmp_path / "go"
    save = os.environ.get("PTBPF_SAVE_DIR")
    raw = ["--raw", str(tmp_path / "kept.raw"), "--force"] if save else []
    d = Proc([PTBPF, "daemon", "--keep-graphs", "--out-dir", str(out), "--every", "1h",
              "--window", "2s", "--budget", "0", "--no-samples", "--match-env",
              "PTBPF_KEPT_TEST=" + tag]
             + raw)
    job = Proc([PYTHON, COMPILED, "reduce-overhead", "30", "--start-cue", str(start), "--cue",
                str(go), "--linger", "4"], env=dict(os.environ, PTBPF_KEPT_TEST=tag))
    try:
        pid = int(job.wait_line("cuda ", timeout=120)[0].split()[1])
        d.wait_line("ptbpf: daemon: pid %d" % pid, stream="stderr", timeout=60)
        start.touch()
        job.wait_line("ready ", timeout=300)
        d.p.send_signal(signal.SIGUSR1)
        line, err = d.read_until(lambda x: "tracing pid %d" % pid in x, timeout=60,
                                 stream="stderr")
        assert line, err
        time.sleep(0.3)
        go.touch()
        line, more = d.read_until(lambda x: "CUDA graphs:" in x, timeout=60, stream="stderr")
        err += more
        assert line, err
        assert job.wait_line("done ", timeout=300)
        job.p.wait(timeout=60)
    finally:
        d.p.send_signal(signal.SIGINT)
        rc, _, derr = d.finish(timeout=120)
        job.kill()
    print(line, [x for x in (err + derr).splitlines() if "graphs:" in x])
    assert job.p.returncode == 0 and rc == 0, derr[-3000:]
    # The last window is SIGUSR1's (one at the daemon's start may have caught the job's start).
    last = max((out / f for f in os.listdir(out) if f.endswith(".pftrace")),
               key=os.path.getmtime)
    t = pftrace.Trace(str(last))
    assert t.validate() == []
    got, by = capture_ops(t)
    kept = [s for s in t.slices if s.category == "kernel" and s.args.get("capture_kept")]
    print("kept map: time by capturing op", by)
    assert sum(len(v) for v in got.values()) and len(kept) >= 30 * 20, (line, by)
    assert sum(d for n, d in by.items() if n) >= 0.75 * sum(by.values()), by
    for name, ops in want.items():
        aten = {o for o in ops if o and o.startswith("aten::")}
        if aten and name in got:
            assert aten == {o for o in got[name] if o and o.startswith("aten::")}, (
                name, ops, got[name])
    if save:
        shutil.copy(str(tmp_path / "kept.raw"), os.path.join(save, "graph_kept.raw"))


def test_triton_kernels_carry_their_aten_ops(tmp_path):
    """Issue 45: torch.compile (Inductor's default mode) compiled while
    traced, into a cache of its own: every Triton kernel carries the ATen
    ops and model nodes it fuses, read from the output code Inductor wrote
    (999 of 999 kernels, 12 names, on the H200, 2026-12-02); the job's
    kernels are those its own profiler counts in a twin run."""
    out = tmp_path / "c.pftrace"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    r = subprocess.run([PTBPF, "run", "--no-samples", "-o", str(out), "--", PYTHON, COMPILED,
                        "default", "20"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    line = [x for x in r.stderr.splitlines() if "Triton kernels:" in x]
    assert line, r.stderr[-3000:]
    t = pftrace.Trace(str(out))
    assert t.validate() == []
    triton = [s for s in t.slices if s.category == "kernel" and s.name.startswith("triton_")]
    assert len(triton) >= 20 * 12, len(triton)
    bare = sorted({s.name for s in triton if "aten_ops" not in s.args})
    assert not bare, (bare, line)
    for k in triton:
        assert all(o[6:] in k.name for o in k.args["aten_ops"].split(", ")), k


def compiled_region_counts(counts):
    """The compiled regions among counts (name -> n, or names)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "workloads"))
    from profiled import is_compiled_region
    out = {}
    for n in counts:
        if is_compiled_region(n):
            out[n] = out.get(n, 0) + (counts[n] if isinstance(counts, dict) else 1)
    return out


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_regions_equal_profiler(tmp_path, mode):
    """Issue 45: with --compiled-regions, torch.compile's regions (## Call
    CompiledFxGraph <key> ##, Pregraph bytecode, AOTDispatcher Runtime
    Wrapper Prologue, one per Triton launch) have the names and counts
    torch.profiler records over the same steps of a twin job; the job
    compiles no graph more for it, and once ptbpf is gone torch's flag and
    _RecordFunctionFast are torch's again (a second ptbpf without the
    option records none)."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    prof = tmp_path / "prof.json"
    r = subprocess.run([PYTHON, COMPILED, mode, "20", "--profile", str(prof)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    want = compiled_region_counts(json.load(open(prof))["cpu"])
    assert sum(want.values()) >= 20 * 3, want
    cue = tmp_path / "go"
    job = subprocess.Popen([PYTHON, COMPILED, mode, "20", "--cue", str(cue)], env=env,
                           stdout=subprocess.PIPE, text=True)
    pid = int(job.stdout.readline().split()[1])
    out = tmp_path / "r.pftrace"
    p = subprocess.Popen([PTBPF, "-p", str(pid), "--compiled-regions", "--no-samples",
                          "-o", str(out)], stderr=subprocess.PIPE, text=True)
    err = ""
    deadline = time.time() + 120
    while "compiled regions: on" not in err and time.time() < deadline:
        line = p.stderr.readline()
        assert line, err
        err += line
    assert "compiled regions: on" in err, err
    cue.touch()
    rest = p.communicate(timeout=300)[1]
    err += rest
    done = job.stdout.read()
    assert job.wait(timeout=60) == 0 and p.returncode == 0, err[-3000:]
    graphs = int(done.split("graphs=")[1].split()[0])
    plain = subprocess.run([PYTHON, COMPILED, mode, "1"], env=env, capture_output=True,
                           text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert graphs == int(plain.stdout.split("graphs=")[1].split()[0]), (done, plain.stdout)
    t = pftrace.Trace(str(out))
    assert t.validate() == []
    got = compiled_region_counts([s.name for s in t.slices if s.category != "kernel"])
    print(mode, "regions", sum(got.values()), sorted(got.items())[:6])
    assert got == want, (sorted(set(got.items()) ^ set(want.items())), err[-2000:])
    assert "not recorded" not in err, err
