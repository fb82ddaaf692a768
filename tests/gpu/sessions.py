# SPDX-License-Identifier: BSD-2-Clause
"""The coexistence tests' jobs (test_coexist.py, test_coexist_detach.py): a job
whose own profiler sessions, started on cue, count the GPU events they
recorded (tests/workloads/profiled.py), or whose Kineto on-demand traces
do (tests/workloads/ondemand.py), and ptbpf run beside them."""
import os
import re
import signal
import subprocess

from conftest import PTBPF, PYTHON, ROOT, Proc

JOB = os.path.join(ROOT, "tests", "workloads", "profiled.py")
ONDEMAND_JOB = os.path.join(ROOT, "tests", "workloads", "ondemand.py")


class Job:
    script = JOB
    counted = "gpu_events"

    def __init__(self, tmp_path, name, *extra, env=None):
        self.cue = tmp_path / name
        self.cue.mkdir()
        self.p = Proc([PYTHON, self.script, "--cue", str(self.cue)] + list(extra),
                      env=dict(os.environ, PYTHONFAULTHANDLER="1", **(env or {})))
        self.p.wait_line("ready", timeout=300)
        self.pid = self.p.p.pid
        self.k = 0

    def session(self, timeout=300):
        """Starts the job's next profiler session and returns at its start."""
        (self.cue / ("session%d" % self.k)).touch()
        self.k += 1

    def result(self, k, timeout=300):
        try:
            line, _ = self.p.wait_line("session %d %s" % (k, self.counted), timeout=timeout)
        except AssertionError:
            raise AssertionError("job: no session %d; %s" % (k, self.how()))
        return eval(line.split(self.counted, 1)[1])

    def how(self):
        """The job's exit status and the end of its stderr (faulthandler's
        stacks), once it ended."""
        try:
            self.p.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        return "exit %s; stderr:\n%s" % (self.p.p.returncode, self.p.drain_err()[-6000:])

    def end(self):
        (self.cue / "end").touch()
        rc, out, err = self.p.finish(timeout=300)
        assert rc == 0, err
        return out


def tracer(tmp_path, job, name, *args):
    out = str(tmp_path / (name + ".pftrace"))
    t = Proc([PTBPF, "-p", str(job.pid), "-o", out] + list(args))
    _, t.head = t.wait_line("ptbpf: tracing pid", stream="stderr", timeout=120)
    return t, out


def stop(t):
    t.p.send_signal(signal.SIGINT)
    rc, _, err = t.finish(timeout=120)
    assert rc == 0, err
    return err


class OnDemandJob(Job):
    """Traced on demand by Kineto itself (tests/workloads/ondemand.py)."""
    script = ONDEMAND_JOB
    counted = "events"

    def tracing(self, k):
        self.p.wait_line("session %d tracing" % k, timeout=120)


def passed_through(err):
    m = re.search(r"(\d+) of its own passed through", err)
    return int(m.group(1)) if m else None
