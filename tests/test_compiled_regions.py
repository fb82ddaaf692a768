# SPDX-License-Identifier: BSD-2-Clause
"""--compiled-regions: torch.compile's regions (torch 2.2 and later) from a
stand-in for torch._C._profiler._RecordFunctionFast that the agent puts in
through the job's main thread, and takes out again at detach. On torch 2.x
(make gpu-check's CPU part) the regions of tests/workloads/fast_regions.py
are recorded, with the ops inside them; on 1.13 (CI) ptbpf says in one line
that this torch makes none. Either way the job's flag and torch's own
objects are as they were once ptbpf is gone. The compiled loops themselves
are in tests/gpu."""
import os
import re
import subprocess
import time

from conftest import PTBPF, PYTHON, Proc, torch_version
import pftrace

WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads",
                        "fast_regions.py")
NAME = "## Call CompiledFxGraph fast_regions ##"


def test_compiled_regions_refuse_probe_ops():
    for extra in (["--ops", "probes"], ["--no-agent"], ["--entries-only"]):
        r = subprocess.run([PTBPF, "-p", "1", "--compiled-regions"] + extra,
                           capture_output=True, text=True)
        assert r.returncode != 0
        assert r.stderr.count("\n") == 1 and "--compiled-regions" in r.stderr, r.stderr


def traced(pid, out, between):
    """ptbpf --compiled-regions on pid into out until between() returns
    (after its first "compiled regions:" line), then Ctrl-C: (that line,
    all ptbpf said, between's result)."""
    t = Proc([PTBPF, "-p", str(pid), "--compiled-regions", "--no-samples", "-o", str(out)])
    try:
        line, head = t.read_until(lambda x: "compiled regions:" in x, timeout=120,
                                  stream="stderr")
        assert line, head
        got = between()
        t.p.send_signal(2)
        rc, _, err = t.finish(timeout=120)
    finally:
        t.kill()
    assert rc == 0, head + err
    return line, head + err, got


def test_compiled_regions_recorded_and_put_back(tmp_path):
    steps = 200
    go, after, out = tmp_path / "go", tmp_path / "after", tmp_path / "r.pftrace"
    job = Proc([PYTHON, WORKLOAD, "--go", str(go), "--steps", str(steps), "--after", str(after)])
    try:
        pid = int(job.wait_line("ready")[0].split()[1])
        line, err, ran = traced(pid, out, lambda: go.touch() or job.wait_line("steps")[0])
        after.touch()
        done, _ = job.wait_line("done", timeout=60)
        assert job.p.wait(timeout=60) == 0
    finally:
        job.kill()
    trace = pftrace.Trace(str(out))
    assert trace.validate() == []
    regions = [s for s in trace.slices if s.name == NAME]
    if torch_version() < (2, 2):
        assert "makes no compiled regions (2.2 and later do)" in line, line
        assert ran.split() == ["steps", str(steps), "regions", "0"], ran
        assert done.split() == ["done", "flag=None", "stand-in=False", "torch-rf=None"], done
        assert not regions
        return
    assert "compiled regions: on" in line, line
    assert ran.split() == ["steps", str(steps), "regions", str(steps)], ran
    assert done.split() == ["done", "flag=False", "stand-in=False", "torch-rf=True"], done
    assert len(regions) == steps, len(regions)
    mm = [s for s in trace.slices if s.name == "aten::mm"]
    inside = [m for m in mm if any(r.ts <= m.ts and m.ts + m.dur <= r.ts + r.dur and
                                   r.track == m.track for r in regions)]
    assert len(inside) == steps, (len(inside), len(mm))
    assert {r.category for r in regions} == {"cpu_op"}, {r.category for r in regions}
    assert "not recorded" not in err, err


def done_line(torch_2):
    return ("done flag=False stand-in=False torch-rf=True" if torch_2 else
            "done flag=None stand-in=False torch-rf=None")


def test_main_thread_asleep_at_detach(tmp_path):
    """ptbpf detaches while the job's main thread sleeps in one long call
    (no Python runs there, so Python's pending calls wait) and another
    thread keeps opening regions: ptbpf says that torch's objects are put
    back when the main thread next runs Python, the agent is unloaded
    with its stand-in still in place (the other thread's regions then end
    in the stubs' inert ends), and the job puts them back itself once
    its main thread wakes. A second ptbpf comes and goes meanwhile (its
    install, and the first one's calls, wait in the same queue). The job
    ends whole, its flag torch's again."""
    go, out = tmp_path / "go", tmp_path / "s.pftrace"
    job = Proc([PYTHON, WORKLOAD, "--go", str(go), "--steps", "100", "--pause", "10",
                "--thread"])
    torch_2 = torch_version() >= (2, 2)
    try:
        pid = int(job.wait_line("ready")[0].split()[1])
        _, err, _ = traced(pid, out, lambda: go.touch() or time.sleep(2))
        said = "put back when the job's main thread next runs Python" in err
        assert said == torch_2, err  # 1.13: nothing was put in
        again = subprocess.run([PTBPF, "-p", str(pid), "--compiled-regions", "--no-samples",
                                "-d", "2", "-o", str(tmp_path / "again.pftrace")],
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        assert "compiled regions: on" not in again.stderr, again.stderr
        ran, _ = job.wait_line("steps", timeout=60)
        other, _ = job.wait_line("thread steps", timeout=60)
        done, _ = job.wait_line("done", timeout=60)
        assert job.p.wait(timeout=60) == 0
    finally:
        job.kill()
    assert ran.split()[-1] == "0", ran  # the flag was torch's False again by then
    assert done.strip() == done_line(torch_2), done
    thread = int(other.split()[-1])
    assert thread > 100 if torch_2 else thread == 0, other
    assert pftrace.Trace(str(out)).validate() == []


def test_attach_detach_cycles(tmp_path):
    """ptbpf --compiled-regions attaches and detaches 30 times over a job
    that opens regions all the while on two threads: every trace has them
    (torch 2.x), none is lost, and the job ends whole with torch's own
    flag and _RecordFunctionFast."""
    go, until = tmp_path / "go", tmp_path / "until"
    go.touch()
    job = Proc([PYTHON, WORKLOAD, "--go", str(go), "--until", str(until), "--thread"])
    torch_2 = torch_version() >= (2, 2)
    counts = []
    try:
        pid = int(job.wait_line("ready")[0].split()[1])
        for i in range(30):
            out = tmp_path / ("c%d.pftrace" % i)
            r = subprocess.run([PTBPF, "-p", str(pid), "--compiled-regions", "--no-samples",
                                "--no-sched", "-d", "1", "-o", str(out)],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            assert ("compiled regions: on" in r.stderr) == torch_2, r.stderr
            assert not re.search(r"lost [1-9]", r.stderr) and "not recorded" not in r.stderr, \
                r.stderr
            counts.append(sum(1 for s in pftrace.Trace(str(out)).slices if s.name == NAME))
        until.touch()
        job.wait_line("thread steps", timeout=60)
        done, _ = job.wait_line("done", timeout=60)
        assert job.p.wait(timeout=60) == 0
    finally:
        job.kill()
    assert done.strip() == done_line(torch_2), done
    print("regions per trace", counts)
    assert min(counts) > 100 if torch_2 else max(counts) == 0, counts
