# SPDX-License-Identifier: BSD-2-Clause
"""The job's own torch.profiler keeps all its GPU data whatever ptbpf does
(issue 11): ptbpf attached before, during or after the job's profiler
session, with or without its agent, and in fleet mode. Each case runs a
fresh job (tests/workloads/profiled.py) whose sessions count the GPU
events their profiler recorded; every count must equal the same job's
counts with no ptbpf at all."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import PTBPF, Proc
import pftrace
from sessions import JOB, Job, stop, tracer


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    """Two sessions and a scheduled one, no ptbpf: what every case must get."""
    tmp = tmp_path_factory.mktemp("control")
    job = Job(tmp, "plain")
    job.session()
    a = job.result(0)
    job.session()
    b = job.result(1)
    job.end()
    sjob = Job(tmp, "sched", "--schedule")
    sjob.session()
    s = sjob.result(0)
    sjob.end()
    assert a == b and a[0] > 1000, (a, b)
    print("control: sessions", a, b, "scheduled", s)
    return a, s


def test_no_agent_during_the_session(tmp_path, control):
    job = Job(tmp_path, "j")
    t, _ = tracer(tmp_path, job, "t", "--no-agent")
    job.session()
    assert job.result(0) == control[0]
    stop(t)
    job.session()
    assert job.result(1) == control[0]
    job.end()


def test_agent_on_then_the_job_profiles_then_again_after_detach(tmp_path, control):
    """ptbpf's agent has CUPTI when the job starts its profiler: it gives
    the job CUPTI's subscriber and activity API first, marks the pause, and
    takes the GPU timeline back once the session is over; a session after
    ptbpf left works too."""
    job = Job(tmp_path, "j")
    t, out = tracer(tmp_path, job, "t")
    time.sleep(1.5)
    job.session()
    assert job.result(0) == control[0]
    time.sleep(3)  # the agent takes the GPU timeline back after a quiet second
    err = stop(t)
    job.session()
    assert job.result(1) == control[0]
    job.end()
    assert "GPU timeline paused" in err and "GPU timeline back" in err, err
    tr = pftrace.Trace(out)
    assert tr.validate() == []
    marks = [s for s in tr.instants if s.name.startswith(("GPU timeline paused",
                                                          "GPU timeline back"))]
    assert len(marks) >= 2, [s.name for s in tr.instants][:20]
    paused, back = marks[0].ts, marks[-1].ts
    kernels = [s for s in tr.slices if s.category == "kernel"]
    assert [k for k in kernels if k.ts < paused] and [k for k in kernels if k.ts > back]


def test_attach_inside_a_running_session(tmp_path, control):
    job = Job(tmp_path, "j")
    job.session()
    time.sleep(0.5)
    r = subprocess.run([PTBPF, "-p", str(job.pid), "-o", str(tmp_path / "t.pftrace"), "-d", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert job.result(0) == control[0]
    job.session()
    assert job.result(1) == control[0]
    job.end()
    assert pftrace.Trace(str(tmp_path / "t.pftrace")).validate() == []


def test_scheduled_profiler_with_ptbpf_attached_midway(tmp_path, control):
    job = Job(tmp_path, "j", "--schedule")
    job.session()
    time.sleep(0.5)
    r = subprocess.run([PTBPF, "-p", str(job.pid), "-o", str(tmp_path / "t.pftrace"), "-d", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert job.result(0) == control[1]
    job.end()


@pytest.mark.parametrize("keep", [False, True])
def test_daemon_windows_over_the_sessions(tmp_path, control, keep):
    """The daemon's windows come and go over the job's own sessions; keeping
    CUDA graphs' capture map (its default), its always-on layer holds
    CUPTI's graph callbacks between them and gives them up as the job's
    profiler subscribes."""
    tag = "coexist-%d-%s" % (os.getpid(), keep)
    job = Job(tmp_path, "j", env={"PTBPF_COEXIST_TEST": tag})
    out = tmp_path / "d"
    out.mkdir()
    d = Proc([PTBPF, "daemon", "--out-dir", str(out), "--every", "2s", "--window", "1s",
              "--match-env", "PTBPF_COEXIST_TEST=" + tag] + ([] if keep else ["--no-keep-graphs"]))
    try:
        time.sleep(1)
        job.session()
        assert job.result(0) == control[0]
        job.session()
        assert job.result(1) == control[0]
    finally:
        d.p.send_signal(signal.SIGINT)
        d.finish(timeout=120)
    job.end()
    assert [f for f in os.listdir(out) if f.endswith(".pftrace")]


@pytest.mark.parametrize("mode,regions", [("default", True), ("reduce-overhead", True),
                                          ("default", False)])
def test_compiled_job_profiles_with_ptbpf_before_and_during(tmp_path, mode, regions):
    """Issue 45: a torch.compile'd job (Inductor's Triton kernels; with
    reduce-overhead, CUDA graphs replayed) keeps its own profiler's GPU
    events and compiled regions in both orders: ptbpf's agent attached
    before the job's session (and a session after it left), and ptbpf
    attaching inside a running session. Its first two sessions, with no
    ptbpf, are the control. With --compiled-regions ptbpf's stand-in for
    torch's _RecordFunctionFast is there through all but the first two,
    and ptbpf's own trace has the regions; once it left, torch's flag is
    False and the stand-in gone."""
    opt = ["--compiled-regions"] if regions else []
    job = Job(tmp_path, "j", "--compile", mode, "--steps", "100")
    job.session()
    a = job.result(0)
    job.session()
    assert job.result(1) == a and a[0] > 500 and a[1] >= 100 * 3, a
    t, out = tracer(tmp_path, job, "t", *opt)
    time.sleep(1.5)
    job.session()
    assert job.result(2) == a
    time.sleep(3)
    err = t.head + stop(t)
    assert ("compiled regions: on" in err) == regions, err
    job.session()
    assert job.result(3) == a
    job.session()
    time.sleep(0.3)
    r = subprocess.run([PTBPF, "-p", str(job.pid), "-o", str(tmp_path / "in.pftrace"), "-d", "2"]
                       + opt, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert job.result(4) == a
    done = job.end()
    assert "done flag=False stand-in=False" in done, done
    assert pftrace.Trace(str(tmp_path / "in.pftrace")).validate() == []
    tr = pftrace.Trace(out)
    assert tr.validate() == []
    assert [s for s in tr.slices if s.category == "kernel" and s.name.startswith("triton_")]
    sys.path.insert(0, os.path.dirname(JOB))
    from profiled import is_compiled_region
    # Without the option ptbpf has the regions of the job's own session
    # (its callbacks see them), exactly; with it, those of every step.
    cpu = [s for s in tr.slices if s.category != "kernel" and is_compiled_region(s.name)]
    assert len(cpu) > a[1] if regions else len(cpu) == a[1], (len(cpu), a)
    print(mode, "sessions", a, "regions in ptbpf's trace", len(cpu))
