# SPDX-License-Identifier: BSD-2-Clause
"""The injection knows its outcome, always (issue 19). The agent is loaded
by a dlopen that a borrowed thread of the job makes; its result sits on
that thread's stack, which the thread reuses as soon as the call returns.
A ptbpf that is slow to read it (a loaded host; here: stopped and continued
every few milliseconds) finds the result written over. Then it must ask
the target itself (the agent's control block) and say only what happened:
never "cannot load the agent" for an agent that loaded, never ops from
uprobes and the agent at once, and the agent leaves with ptbpf."""
import json
import os
import re
import signal
import subprocess
import threading
import time

from conftest import PTBPF, PYTHON, Proc
import pftrace

# The main thread goes deep into C stack at once after every op (json's
# encoder recurses in C), so that a result left on its stack is gone within
# microseconds of the call's return.
JOB = r"""
import json, os, sys, torch
deep = []
for _ in range(400):
    deep = [deep]
a = torch.ones(8)
print("ready", os.getpid(), flush=True)
while not os.path.exists(sys.argv[1]):
    a = a + 1
    json.dumps(deep)
print("sum", float(a.sum()), flush=True)
"""


def stutter(pid, stop, stopped=0.004, running=0.002):
    """SIGSTOP/SIGCONT pid every few ms until stop is set."""
    while not stop.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stopped)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep(running)


def stuttered_run(args, stopped=0.004, running=0.002):
    """ptbpf ARGS, stopped and continued (stutter) until it exits: its
    exit status and stderr."""
    tracer = subprocess.Popen([PTBPF] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stop = threading.Event()
    th = threading.Thread(target=stutter, args=(tracer.pid, stop, stopped, running))
    th.start()
    try:
        _, err = tracer.communicate(timeout=120)
    finally:
        stop.set()
        th.join()
        if tracer.poll() is None:
            os.kill(tracer.pid, signal.SIGCONT)
    return tracer.returncode, err.decode(errors="replace")


def agent_mapped(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libptbpf-agent.so" in f.read()


def test_lost_readback_is_answered_by_the_agent(tmp_path):
    trials, readback_lost = 12, 0
    for i in range(trials):
        end = str(tmp_path / ("end%d" % i))
        target = Proc([PYTHON, "-c", JOB, end])
        try:
            target.wait_line("ready")
            out = str(tmp_path / ("t%d.pftrace" % i))
            rc, err = stuttered_run(["-v", "-p", str(target.p.pid), "-d", "1", "-o", out])
            assert rc == 0, err
            readback_lost += "its control block says so" in err
            # Only what happened: the agent was loaded and gave the ops.
            assert "cannot load the agent" not in err, err
            assert "not loaded yet" not in err, err
            assert "agent switched on (ops" in err, err
            assert re.search(r"tracing pid \d+ .*ops from the agent", err), err
            assert "entries on emulated" not in err, err  # no op uprobes besides
            # It leaves with ptbpf: unloaded, nothing of it mapped.
            time.sleep(0.2)
            assert not agent_mapped(target.p.pid), err
            t = pftrace.Trace(out)
            assert t.validate() == []
            assert t.op_counts().get("aten::add", 0) > 0
            open(end, "w").close()
            rc, sout, _ = target.finish(timeout=60)
            assert rc == 0 and "sum" in sout
        finally:
            target.kill()
    print("trials %d, result read back from the agent in %d" % (trials, readback_lost))


def test_job_control_during_load_is_not_a_failure(tmp_path):
    """The verifier gives up with EAGAIN whenever a signal is pending, and
    libbpf tries only five times: a ptbpf stopped and continued while it
    loads (job control, a debugger) failed to start 5 times in 8 before
    ptbpf loaded again from a fresh object. Stopped every 3 ms here."""
    end = str(tmp_path / "end")
    target = Proc([PYTHON, "-c", JOB, end])
    failures = []
    try:
        target.wait_line("ready")
        for i in range(6):
            out = str(tmp_path / ("t%d.pftrace" % i))
            rc, err = stuttered_run(["-p", str(target.p.pid), "-d", "1", "--no-agent", "-o", out],
                                    0.002, 0.001)
            if rc != 0:
                failures.append(err[-400:])
            else:
                t = pftrace.Trace(out)
                assert t.validate() == []
                assert t.op_counts().get("aten::add", 0) > 0
        open(end, "w").close()
        rc, sout, _ = target.finish(timeout=60)
        assert rc == 0 and "sum" in sout
    finally:
        target.kill()
    assert not failures, failures
