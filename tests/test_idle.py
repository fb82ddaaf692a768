# SPDX-License-Identifier: BSD-2-Clause
"""A job that idles pays (almost) nothing for being traced, and loses
nothing when it wakes (issue 43): while nothing is recorded the agent's
thread ticks every PTBPF_AGENT_IDLE_MS (250 ms) instead of every 20 ms, and
ptbpf's reader every second; the first record written after that wakes
both (ptbpf_agent_wake). Counted in wake-ups (/proc/TID/schedstat's
timeslices), which do not depend on the machine's speed; the CPU time
itself is a benchmark figure (tests/bench/idle_cost.py, BENCHMARKS.md)."""
import contextlib
import os
import shutil
import signal
import tempfile
import time
import types

from conftest import PTBPF, PYTHON, Proc, op_ring_totals, thread_named
import pftrace

JOB = r"""
import os, sys, threading, time, torch
cue = sys.argv[1]
torch.set_num_threads(1)
ts = [torch.ones(1) for _ in range(64)]

def adds(count):
    for _ in range(count):
        torch._foreach_add(ts, ts)

print("ready", os.getpid(), flush=True)
k = 0
while not os.path.exists(os.path.join(cue, "end")):
    if os.path.exists(os.path.join(cue, "go%d" % k)):
        threads = [threading.Thread(target=adds, args=(int(sys.argv[2]),))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("done", k, flush=True)
        k += 1
    time.sleep(0.05)
"""


def slices(pid, tid):
    """A thread's timeslices so far (schedstat's third field)."""
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        return int(f.read().split()[2])


@contextlib.contextmanager
def traced_job(tmp_path, n, *args):
    """The job (n _foreach_adds a burst) and ptbpf tracing it into
    t.pftrace: run.job, run.ptbpf, run.cue; run.err, ptbpf's stderr, once
    it stopped."""
    run = types.SimpleNamespace(cue=tmp_path / "cue", err=None)
    run.cue.mkdir()
    run.job = Proc([PYTHON, "-c", JOB, str(run.cue), str(n)])
    run.job.wait_line("ready")
    run.ptbpf = Proc([PTBPF, "-p", str(run.job.p.pid), "-o", str(tmp_path / "t.pftrace")] +
                     list(args))
    try:
        run.ptbpf.wait_line("ptbpf: tracing pid", stream="stderr")
        yield run
    finally:
        run.ptbpf.p.send_signal(signal.SIGINT)
        rc, _, run.err = run.ptbpf.finish(timeout=120)
        (run.cue / "end").touch()
        run.job.finish(timeout=60)
    assert rc == 0, run.err


def test_idle_job_wakes_neither_the_agent_nor_the_reader_often(tmp_path):
    with traced_job(tmp_path, 1000) as run:
        job, reader = run.job.p.pid, run.ptbpf.p.pid
        agent = thread_named(job, "ptbpf-agent")
        # The agent ticks quickly for 1 s after a command, then idles.
        time.sleep(2)
        a0, r0 = slices(job, agent), slices(reader, reader)
        time.sleep(10)
        a1, r1 = slices(job, agent), slices(reader, reader)
        # Idle: 4 ticks a second (40), the reader 1 (10); before, 50 each
        # a second (500 in 10 s).
        assert a1 - a0 <= 60, "agent thread: %d wake-ups in 10 s" % (a1 - a0)
        assert r1 - r0 <= 25, "ptbpf: %d wake-ups in 10 s" % (r1 - r0)
        with open("/proc/%d/task/%d/stat" % (job, agent)) as f:
            policy = int(f.read().rsplit(")", 1)[1].split()[38])
        assert policy == 5, "the agent's thread is not SCHED_IDLE (policy %d)" % policy


def test_records_after_an_idle_spell_are_all_read(tmp_path):
    """Bursts of 8,000 _foreach_adds over 64 tensors (about 1 M records a
    second) after 2 s of idling: the first record wakes the reader, which
    reads the ring before it fills (4 MiB: about 60 ms at that rate).
    Without the wake-up 748,692 records were lost of two such threads (CI
    VM, 2026-12-02); one thread, not two, so that the VM's 2 CPUs are not
    both the job's."""
    n = 8000
    with traced_job(tmp_path, n, "--no-samples") as run:
        for k in range(3):
            time.sleep(2)
            (run.cue / ("go%d" % k)).touch()
            run.job.wait_line("done %d" % k, timeout=120)
    rings = op_ring_totals(run.err)
    assert rings["full"] == 0 and rings["ops_lost"] == 0, run.err
    assert rings["written"] == rings["read"], run.err
    tr = pftrace.Trace(str(tmp_path / "t.pftrace"))
    assert sum(1 for s in tr.slices if s.name == "aten::_foreach_add") == 3 * n


def test_an_ordinary_users_job_keeps_its_policy_for_the_agent(tmp_path):
    """A job without CAP_SYS_NICE (RLIMIT_NICE 0) could not put the agent's
    thread back from SCHED_IDLE to its own policy, and CUPTI's threads,
    started from it, would stay SCHED_IDLE for the job's own profiler: there
    the agent's thread keeps the job's policy (on every CPU all the same)."""
    cue = tempfile.mkdtemp(prefix="ptbpf-idle-")  # where nobody reaches it
    os.chmod(cue, 0o777)
    job = Proc(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", PYTHON, "-c",
                JOB, cue, "10"])
    try:
        job.wait_line("ready")
        t = Proc([PTBPF, "-p", str(job.p.pid), "-o", str(tmp_path / "t.pftrace")])
        t.wait_line("ptbpf: tracing pid", stream="stderr")
        agent = thread_named(job.p.pid, "ptbpf-agent")
        with open("/proc/%d/task/%d/stat" % (job.p.pid, agent)) as f:
            policy = int(f.read().rsplit(")", 1)[1].split()[38])
        t.p.send_signal(signal.SIGINT)
        rc, _, err = t.finish(timeout=120)
        assert rc == 0, err
        assert policy == 0, "the agent's thread has policy %d in a job of nobody's" % policy
    finally:
        open(os.path.join(cue, "end"), "w").close()
        job.finish(timeout=60)
        shutil.rmtree(cue)
