# SPDX-License-Identifier: BSD-2-Clause
"""The job's own traces keep all their GPU data as ptbpf leaves (issue 11's
promise where timing is tight): sessions that start just as the agent
switches off, Kineto's on-demand traces (which the job never starts
itself: dynolog asks Kineto, through tests/soak/fakedyno.py here) with
ptbpf attaching, detaching and recording torch.compile's regions inside
them, and the profiler just after daemon windows over busy jobs. Apart
from test_coexist.py so that each file fits one device call."""
import os
import re
import signal
import subprocess
import time

from conftest import PTBPF, PYTHON, ROOT, Proc
import pftrace
from sessions import Job, OnDemandJob, passed_through, stop, tracer


def test_attach_inside_a_kineto_on_demand_trace(tmp_path):
    """Kineto's on-demand trace makes no call into CUPTI while it runs, so
    an agent attaching inside one sees no session and takes the activity
    API. It must find the session, pass the job's buffers through, turn off
    none of its kinds and give every buffer back, so that Kineto still holds
    one when it reads them: on 2026-11-28 a detach inside such a trace left
    it with no GPU trace at all ("GPU trace is empty!", and its records in
    the next trace), 2 times in about 60 traces of the soak."""
    job = OnDemandJob(tmp_path, "od", "--steps", "300")
    job.session()
    control = job.result(0)
    assert control.get("kernel", 0) > 100 and control.get("cuda_runtime", 0) > 100, control
    got = {}
    job.session()
    job.tracing(1)
    r = subprocess.run([PTBPF, "-p", str(job.pid), "-o", str(tmp_path / "a.pftrace"), "-d", "1",
                        "-v"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stderr, "job: " + job.how())
    # The agent never holds CUPTI's callbacks while a session of the job's
    # may trace: not subscribed at all (the job had set CUPTI's clock), or
    # given up before the job's session began. Subscribing inside one
    # killed 10 of 127 such jobs (tests/soak/first_attach.py).
    assert ("no CUDA call callbacks: the job's own CUPTI user" in r.stderr or
            "the job starts a CUPTI session" in r.stderr), r.stderr
    got["ptbpf gone before the trace ended"] = job.result(1), r.stderr
    job.session()
    job.tracing(2)
    t, _ = tracer(tmp_path, job, "b")
    c = job.result(2)
    got["ptbpf there when it ended"] = c, stop(t)
    job.session()
    got["after ptbpf left"] = job.result(3), None
    job.end()
    for what, (c, err) in got.items():
        for cat, n in control.items():
            assert c.get(cat, 0) >= n // 2, (what, cat, c, control, err)
        if err is not None:
            # The agent knew of the session: it saw the job start it
            # (paused), waited for it, or passed its buffers through.
            assert (passed_through(err) or "GPU timeline paused" in err or
                    "GPU timeline waits" in err), (what, err[-3000:])


def test_compiled_regions_stay_out_of_kineto_on_demand_traces(tmp_path):
    """--compiled-regions sets torch's profiler flag for Inductor and
    Dynamo; a Kineto on-demand trace (a C++ session, which never sets it)
    must still get no compiled region, as without ptbpf, while ptbpf's own
    trace has them."""
    job = OnDemandJob(tmp_path, "odc", "--steps", "50", "--compile", "default")
    job.session()
    control = job.result(0)
    assert control["compiled_region"] == 0 and control.get("kernel", 0) > 100, control
    t, out = tracer(tmp_path, job, "t", "--compiled-regions")
    if "compiled regions: on" not in t.head:
        line, _ = t.read_until(lambda x: "compiled regions:" in x, timeout=60, stream="stderr")
        assert line and "compiled regions: on" in line, (line, t.head)
    job.session()
    job.tracing(1)
    got = job.result(1)
    err = stop(t)
    job.end()
    assert got["compiled_region"] == 0, (got, control, err[-3000:])
    assert got.get("kernel", 0) >= control["kernel"] // 2, (got, control)
    tr = pftrace.Trace(out)
    regions = [s for s in tr.slices if s.category != "kernel" and s.name.startswith("triton_")]
    assert len(regions) >= 50, len(regions)


def test_sessions_that_start_as_ptbpf_detaches(tmp_path):
    """The job starts its profiler just as ptbpf's agent switches off, over
    and over: the agent hands CUPTI back with its hooks still in place, so
    a session starting meanwhile waits for it and keeps its GPU side. With
    the hooks removed first, a session could begin before the agent turned
    its kinds off, which then turned off the session's too: its trace kept
    its CPU events and no GPU event (3 of about 1,200 sessions in the H200
    soaks of 2026-11-28). The window is a few ms wide: 16 tries on the
    H200 passed on the build before the fix too, so this is a check of the
    path, and the soak (tests/soak) the measure of its rate."""
    job = Job(tmp_path, "j", "--steps", "30")
    job.session()
    control = job.result(0)
    assert control[0] > 100, control
    got = []
    for k in range(1, 33):
        t, _ = tracer(tmp_path, job, "t%d" % k)
        time.sleep(0.8)  # past the agent's 0.3 s look at the job: it has the activity API
        t.p.send_signal(signal.SIGINT)
        time.sleep(0.0015 * k)  # the session starts at varied moments of the switch-off
        job.session()
        rc, _, err = t.finish(timeout=120)
        assert rc == 0, err
        got.append((job.result(k), err))
    job.end()
    bad = [(c, err[-2000:]) for c, err in got if c != control]
    assert not bad, (control, bad)


def test_daemon_windows_over_kineto_on_demand_traces(tmp_path):
    """A daemon up before the job's on-demand traces, its always-on layer
    keeping CUDA graphs' capture map (its default) and its windows (1 s
    every 2 s) coming and going over them: every trace keeps its GPU side.
    Kineto's daemon client may have used CUPTI before the map could
    subscribe (then the map is refused, and said so), or the map gives
    CUPTI's callbacks up as Kineto takes the activity API."""
    tag = "odd-%d" % os.getpid()
    job = OnDemandJob(tmp_path, "odd", "--steps", "200", env={"PTBPF_COEXIST_TEST": tag})
    job.session()
    control = job.result(0)
    assert control.get("kernel", 0) > 100 and control.get("cuda_runtime", 0) > 100, control
    out = tmp_path / "d"
    out.mkdir()
    d = Proc([PTBPF, "daemon", "--out-dir", str(out), "--every", "2s", "--window", "1s",
              "--no-samples", "--match-env", "PTBPF_COEXIST_TEST=" + tag])
    got = []
    try:
        line, err = d.wait_line("ptbpf: daemon: step signal on", stream="stderr", timeout=60)
        assert "CUDA graphs' capture map kept" in line, line
        d.wait_line("ptbpf: daemon: pid %d" % job.pid, stream="stderr", timeout=60)
        time.sleep(3)
        for k in range(1, 4):
            job.session()
            got.append(job.result(k))
    finally:
        d.p.send_signal(signal.SIGINT)
        rc, _, derr = d.finish(timeout=120)
    job.session()
    got.append(job.result(4))
    job.end()
    print([x for x in (err + derr).splitlines() if "graphs:" in x][-3:])
    assert rc == 0, derr[-3000:]
    for k, c in enumerate(got, 1):
        for cat, n in control.items():
            assert c.get(cat, 0) >= n // 2, (k, cat, c, control, derr[-3000:])
    assert [f for f in os.listdir(out) if f.endswith(".pftrace")]


def anchors(err):
    """(left with the job, handed back empty) from the agent's "GPU
    timeline off" lines of one ptbpf run: an anchor goes back empty when
    the job's session was seen to end, or when one is left already ("not
    left but handed back")."""
    left = sum(int(x) for x in re.findall(r"(\d+) left with it;", err))
    empty = sum(int(x) for x in re.findall(r"(\d+) empty ones handed back", err))
    return left, empty


def test_detaches_inside_on_demand_traces_leave_one_buffer_at_most(tmp_path):
    """A detach inside a Kineto on-demand trace that is quiet then leaves
    the agent's anchor (one of Kineto's own buffers, kept from CUPTI so that
    Kineto still has one out when its trace ends) with the job. Kineto frees
    a buffer only when CUPTI completes it, so a left one stays for good and
    counts against Kineto's limit of about 33 buffers, past which its traces
    get no GPU records: 3 were left in one on-demand job over ~50 runs of the
    H200 soak of 2026-11-29 (12 MB). One is enough, since with it the job
    always has a buffer out: every later detach hands its anchor back
    empty, and every trace of the job's stays whole. Each detach here comes
    while the job's session is quiet (the job idles), after the agent took
    CUPTI inside the session (attached while it was quiet) and then found
    it (its "paused ... has a session running" line); an attach that saw
    the session, or its start, instead is stopped and made again.
    The sessions are long (1,500 steps, 10-15 s) so that each detach falls
    inside one: with 300 steps (2-3 s) the first run of this test counted
    no anchor at all (its output too short to say why)."""
    job = OnDemandJob(tmp_path, "od", "--steps", "1500")
    job.session()
    control = job.result(0)
    assert control.get("kernel", 0) > 100, control
    runs, per_run = [], []
    # Five runs: the claim needs two (one anchor left, one handed back);
    # eight ran past a device call's 10 minutes with the file's other tests
    # (H200, 2026-11-29).
    for k in range(1, 6):
        job.session()
        job.tracing(k)
        # The anchor path needs an agent that takes the activity API inside
        # the job's session without seeing it: it attaches while the job is
        # quiet (Kineto's session then makes no CUPTI call in the agent's
        # 0.3 s look), and the session shows once the job runs again (its
        # correlation pushes, or its records in the agent's buffers). An
        # attach that saw the session (it waits) or its start is stopped
        # and made again.
        err = ""
        for attempt in range(4):
            (job.cue / "idle").touch()
            time.sleep(0.2)
            t, _ = tracer(tmp_path, job, "t%d.%d" % (k, attempt), "-v")
            line, head = t.read_until(
                lambda text: "GPU timeline on" in text or "GPU timeline waits" in text
                or "starts a session" in text, 15, "stderr")
            (job.cue / "idle").unlink()
            if line and "GPU timeline on" in line:
                more_line, more = t.read_until(
                    lambda text: "has a session running" in text or "starts a session" in text,
                    15, "stderr")
                head += more
                if more_line and "has a session running" in more_line:
                    break
            err += head + stop(t)
        else:
            assert False, ("the agent never took CUPTI inside the job's session", err[-3000:])
        (job.cue / "idle").touch()
        time.sleep(0.3)
        err += head + stop(t)  # inside the session, while it is quiet
        (job.cue / "idle").unlink()
        print("run %d, the agent's lines:\n%s" % (k, "\n".join(
            line for line in err.splitlines() if "agent" in line)))
        a, b = anchors(err)
        per_run.append((a, b))
        runs.append((job.result(k), err))
    job.session()
    runs.append((job.result(6), None))
    job.end()
    for c, err in runs:
        for cat, n in control.items():
            assert c.get(cat, 0) >= n // 2, (cat, c, control, (err or "")[-3000:])
    # One left in all, and every later run that held an anchor gave it
    # back empty: the path ran, not only passed. (On the H200, 2026-11-29:
    # the first run left one; the four after it found the session at its
    # end, Kineto's flush, and handed theirs back empty.)
    off = [line for _, err in runs[:-1] for line in err.splitlines() if "GPU timeline off" in line]
    first = next((i for i, (a, _) in enumerate(per_run) if a), None)
    assert first is not None and sum(a for a, _ in per_run) == 1, (per_run, off)
    later = per_run[first + 1:]
    assert any(b for _, b in later), ("no later run held an anchor to hand back", per_run, off)


BUSY_JOB = os.path.join(ROOT, "tests", "workloads", "busy_profiled.py")


def test_profiler_after_daemon_windows_over_busy_jobs(tmp_path):
    """Issue 43's recipe: a daemon's windows (2 s every 4 s, the last cut by
    SIGINT at 9 s) over a job whose thread is in CUDA calls most of the
    time, then, 1 s later, the job's own profiler. The agent once switched
    the runtime callbacks of cudaGetDevice and others off right after
    switching the whole runtime domain on: a thread inside one of them then
    kept one correlation id for every later API record, and 1 job in 10 died
    in its profiler's stop ("inserted.second", collection.cpp:1152; 4 of 4
    such sessions had one id throughout, H200, 2026-12-02). Six jobs at a
    time, each with its own daemon (--match-env; every other one keeping
    CUDA graphs' capture map, its default), three rounds: 18 runs,
    each with three subscriptions (PTBPF_RECIPE_ROUNDS rounds: more for a
    rate)."""
    failed = []
    rounds = int(os.environ.get("PTBPF_RECIPE_ROUNDS", "3"))
    for r in range(rounds):
        runs = []
        for k in range(6):
            tag = "busy%d-%d-%d" % (os.getpid(), r, k)
            cue = tmp_path / (tag + ".go")
            job = Proc([PYTHON, BUSY_JOB, str(cue)],
                       env=dict(os.environ, PTBPF_TEST_BUSY=tag, PYTHONFAULTHANDLER="1"))
            runs.append([tag, cue, job, None])
        for k, run in enumerate(runs):
            run[2].wait_line("ready", timeout=300)
            out = tmp_path / run[0]
            out.mkdir()
            # Half of them keep CUDA graphs' capture map between windows.
            keep = [] if k % 2 else ["--no-keep-graphs"]
            run[3] = Proc([PTBPF, "daemon", "--out-dir", str(out), "--every", "4s",
                           "--window", "2s", "--match-env", "PTBPF_TEST_BUSY=" + run[0]] + keep)
        time.sleep(9)
        for run in runs:
            run[3].p.send_signal(signal.SIGINT)
        time.sleep(1)
        for run in runs:
            run[1].touch()
        for tag, cue, job, daemon in runs:
            rc, out, err = job.finish(timeout=300)
            drc, _, derr = daemon.finish(timeout=120)
            line = (out.strip().splitlines() or ["(nothing)"])[-1]
            if rc != 0 or not line.startswith("ok gpu_events") or drc != 0:
                failed.append((tag, rc, line, drc, err[-2000:], derr[-2000:]))
        print("round %d: %d runs, %d failed so far" % (r + 1, 6 * (r + 1), len(failed)),
              flush=True)
    assert failed == [], failed
