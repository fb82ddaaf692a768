# SPDX-License-Identifier: BSD-2-Clause
"""CPU samples of the traced threads (issue 20, part 3). A workload
(tests/workloads/hot.py) runs a pure-Python hot function, then torch.mm,
on one thread for a known CPU time each; the trace's perf samples (read
with tests/pftrace.py, as trace_processor builds callsites) must number
about hz x that CPU time, carry the hot function's Python frame in the
Python phase and a native frame of libtorch or BLAS in the matmul phase.
They are on by default (at 99 Hz); `--no-samples` leaves them out;
`ptbpf merge` keeps them."""
import json
import os
import re
import subprocess

from conftest import PTBPF, PYTHON, ROOT, Proc, pftrace, require
from test_sched import attach

HOT = os.path.join(ROOT, "tests", "workloads", "hot.py")
HZ = 999
BPF_RING = re.compile(r"BPF ring: sent (\d+) = received (\d+) \+ lost (\d+)")
SAMPLES = re.compile(r"CPU samples \((\d+) Hz\): (\d+) in the trace, lost (\d+)")


class Traced:
    """hot.py traced; its phases and the trace."""

    def __init__(self, tmp_path, ptbpf_args=(), py_ms=1500, mm_ms=1500):
        go = str(tmp_path / "go")
        self.path = str(tmp_path / "t.pftrace")
        target = Proc([PYTHON, HOT, "--go", go, "--py-ms", str(py_ms), "--mm-ms", str(mm_ms)])
        try:
            line, _ = target.wait_line("ready")
            self.tid = int(line.split()[2])
            self.pid = target.p.pid
            tracer = attach([require(PTBPF), "-p", str(self.pid), "-o", self.path] +
                            list(ptbpf_args))
            try:
                open(go, "w").close()
                rc, out, err = target.finish(timeout=600)
                assert rc == 0, err
                self.phases = json.loads(out.strip().splitlines()[-1])
                self.rc, _, self.err = tracer.finish(timeout=120)
            finally:
                tracer.kill()
        finally:
            target.kill()
        assert self.rc == 0, self.err
        self.trace = pftrace.Trace(self.path)

    def samples_in(self, phase):
        p = self.phases[phase]
        return [s for s in self.trace.samples
                if s.tid == self.tid and p["start"] <= s.ts < p["end"]]


def python_frames(sample):
    return [f.name for f in sample.frames if f.mapping == "[python]"]


def test_samples_explain_python_and_native_time(tmp_path):
    run = Traced(tmp_path, ["--sample-hz", str(HZ)])
    t = run.trace
    assert t.validate() == []
    m = BPF_RING.search(run.err)
    assert m and int(m.group(1)) == int(m.group(2)) + int(m.group(3)), run.err
    m = SAMPLES.search(run.err)
    assert m and int(m.group(1)) == HZ and int(m.group(3)) == 0, run.err
    assert int(m.group(2)) == len(t.samples)
    assert t.attrs.get("dev.ptbpf.cpu_samples") == len(t.samples)
    assert t.attrs.get("dev.ptbpf.lost_cpu_samples") == 0
    for phase in ("python", "matmul"):
        n = len(run.samples_in(phase))
        want = HZ * run.phases[phase]["cpu_ns"] / 1e9
        assert 0.7 * want <= n <= 1.3 * want, (phase, n, want)
    # The Python phase: the hot function is on (nearly) every sample's stack,
    # named as pystack.c names frames, innermost Python frame last.
    hot = re.compile(r"hot\.py\(\d+\): hot_python_loop$")
    py = run.samples_in("python")
    with_hot = [s for s in py if any(hot.search(n) for n in python_frames(s))]
    assert len(with_hot) >= 0.7 * len(py), (len(with_hot), len(py))
    assert all(hot.search(python_frames(s)[-1]) for s in with_hot)
    assert all(python_frames(s)[0].endswith(": <module>") for s in with_hot)
    # The matmul phase: the leaf (the exact pc) is in libtorch or BLAS for most
    # samples, under Python's matmul_phase frame.
    mm = run.samples_in("matmul")
    native = [s for s in mm if s.frames and re.search(r"lib(torch|blas|openblas|mkl)",
                                                      s.frames[-1].mapping)]
    assert len(native) >= 0.5 * len(mm), (len(native), len(mm),
                                          [s.frames[-1] for s in mm[:5]])
    assert sum(any(n.endswith(": matmul_phase") for n in python_frames(s)) for s in mm) >= \
        0.7 * len(mm)
    named = [s.frames[-1].name for s in native if s.frames[-1].name]
    assert named, "no native leaf was named"
    report_shows_samples(run)


def report_shows_samples(run):
    """`ptbpf report`'s CPU samples section: the process's samples, its
    top innermost Python frames (the hot function first among them, or
    matmul_phase) and native functions (BLAS or libtorch among them)."""
    r = subprocess.run([PTBPF, "report", "--json", run.path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["cpu_sample_hz"] == HZ
    procs = {p["pid"]: p for p in rep["cpu_samples"]}
    p = procs[run.pid]
    assert p["samples"] == sum(1 for s in run.trace.samples if s.pid == run.pid)
    hot = sum(f["samples"] for f in p["python"] if f["frame"].endswith(": hot_python_loop"))
    assert hot >= 0.7 * len(run.samples_in("python")), p["python"]
    assert any(re.search(r"lib(torch|blas|openblas|mkl)", f["file"]) for f in p["native"][:3])
    assert abs(sum(f["share"] for f in p["python"]) -
               sum(f["samples"] for f in p["python"]) / p["samples"]) < 0.01
    text = subprocess.run([PTBPF, "report", run.path], capture_output=True, text=True).stdout
    assert "CPU samples of the traced threads (999 per second" in text
    assert "hot_python_loop" in text.split("CPU samples of the traced threads")[1]


def test_samples_on_by_default(tmp_path):
    run = Traced(tmp_path, py_ms=1000, mm_ms=200)
    m = SAMPLES.search(run.err)
    assert m and int(m.group(1)) == 99 and int(m.group(2)) == len(run.trace.samples), run.err
    n = len(run.samples_in("python"))
    want = 99 * run.phases["python"]["cpu_ns"] / 1e9
    assert 0.7 * want <= n <= 1.3 * want, (n, want)
    assert run.trace.attrs.get("dev.ptbpf.cpu_sample_hz") == 99


def test_samples_without_the_kernel_view(tmp_path):
    """--no-sched: the sampler keeps its own bitmap of traced processes."""
    run = Traced(tmp_path, ["--no-sched", "--sample-hz", "499"], py_ms=1000, mm_ms=200)
    assert run.trace.switches == [] and run.trace.validate() == []
    n = len(run.samples_in("python"))
    want = 499 * run.phases["python"]["cpu_ns"] / 1e9
    assert 0.7 * want <= n <= 1.3 * want, (n, want)


def test_no_samples(tmp_path):
    run = Traced(tmp_path, ["--no-samples"], py_ms=300, mm_ms=300)
    assert run.trace.samples == []
    assert run.trace.validate() == []
    assert "CPU samples" not in run.err
    assert "dev.ptbpf.cpu_samples" not in run.trace.attrs


def test_sample_hz_is_checked():
    for bad in ("0", "10001", "12x", ""):
        r = subprocess.run([require(PTBPF), "-p", "1", "--sample-hz", bad],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "sample-hz" in r.stderr, (bad, r.stderr)


def test_merge_keeps_samples(tmp_path):
    run = Traced(tmp_path, ["--sample-hz", "199"], py_ms=500, mm_ms=300)
    n = len(run.trace.samples)
    assert n > 0
    out = str(tmp_path / "job.pftrace")
    r = subprocess.run([PTBPF, "merge", run.path, run.path, "-o", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = pftrace.Trace(out)
    assert m.validate() == []
    assert len(m.samples) == 2 * n
    pids = sorted({s.pid for s in m.samples})
    assert len(pids) == 2 and run.pid in [p % (1 << 22) for p in pids], pids
    # Each input's stacks resolve through its own interned data.
    before = sorted(tuple(f.name or "" for f in s.frames) for s in run.trace.samples)
    for pid in pids:
        after = sorted(tuple(f.name or "" for f in s.frames) for s in m.samples if s.pid == pid)
        assert after == before
