# SPDX-License-Identifier: BSD-2-Clause
"""Every word ptbpf says of an attach is true, wherever the attach is cut
(issue 44). The job SIGKILLed 0.05-0.5 s into it gets "pid N exited during
the attach", never a diagnosis of what failed because it was going (its
libc or libtorch already unmapped). A Ctrl-C 0.05-0.5 s into it tells one
story: "tracing pid N" and the trace written, or "interrupted during
attach" and no file. A second Ctrl-C says what stays, the unfinished trace
only once tracing started, and then it is there; before, it is removed.
Each run is judged as the soak judges messages (tests/soak/classify.py)."""
import collections
import os
import signal
import subprocess
import sys
import time

from conftest import PTBPF, PYTHON, WORKLOAD, Proc, require

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak"))
import classify  # noqa: E402

TRIALS = 8
DELAYS = [0.05 + 0.45 * i / (TRIALS - 1) for i in range(TRIALS)]


def start_job():
    p = Proc([PYTHON, WORKLOAD, "mlp", "--steps", "20", "--loop"])
    p.wait_line("ready")
    return p


def attach(pid, out, at, act):
    """`ptbpf -p PID -o OUT`, act(ptbpf) at `at` s: its exit status and lines."""
    tracer = subprocess.Popen([PTBPF, "-p", str(pid), "-o", str(out)], stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True)
    time.sleep(at)
    act(tracer)
    try:
        _, err = tracer.communicate(timeout=60)
    finally:
        tracer.kill()
    return tracer.returncode, [(0.0, line) for line in err.splitlines()]


def judged(rc, lines, pid, out):
    """The run's story: 'traced' (the trace written), 'exited', 'interrupted'
    or 'left' (a second Ctrl-C); its false messages fail the test."""
    false = classify.false_messages(lines, rc, [pid])
    text = "\n".join(t for _, t in lines)
    assert false == [], (false, text)
    files = sorted(os.listdir(os.path.dirname(out)))
    if rc == 0:
        assert classify.lines_say(lines, "tracing pid %d" % pid), text
        assert files == [os.path.basename(out)], (files, text)
        return "traced"
    if classify.lines_say(lines, "second interrupt: leaving now"):
        assert rc == 130, text
        stays = classify.lines_say(lines, "the unfinished trace stays in %s.partial" % out)
        assert files == ([os.path.basename(out) + ".partial"] if stays else []), (files, text)
        return "left, the trace's .partial said to stay" if stays else "left"
    assert files == [], (files, text)
    if classify.lines_say(lines, "pid %d exited during the attach" % pid):
        assert rc == 1, text
        return "exited"
    assert rc == 130 and classify.lines_say(lines, "interrupted during attach"), text
    return "interrupted"


def test_job_killed_during_the_attach(tmp_path):
    require(PTBPF)
    seen = collections.Counter()
    for i, at in enumerate(DELAYS):
        job = start_job()
        try:
            out = tmp_path / ("k%d" % i) / "t.pftrace"
            out.parent.mkdir()
            rc, lines = attach(job.p.pid, out, at, lambda _: job.p.kill())
        finally:
            job.kill()
        seen[judged(rc, lines, job.p.pid, str(out))] += 1
    print("job SIGKILLed during the attach:", dict(seen))


def test_ctrl_c_once_and_twice_during_the_attach(tmp_path):
    """One job, attached again and again: a Ctrl-C at each delay, then the
    same again with a second one 30-200 ms after the first."""
    require(PTBPF)
    seen = collections.Counter()
    job = start_job()

    def twice(tracer, i):
        tracer.send_signal(signal.SIGINT)
        time.sleep(0.03 + 0.17 * (i % 5) / 4)
        if tracer.poll() is None:
            tracer.send_signal(signal.SIGINT)

    try:
        for n, act in (("once", lambda t, i: t.send_signal(signal.SIGINT)), ("twice", twice)):
            # and once well after the attach (0.3-0.5 s here; past 0.5 s on a
            # loaded CI VM, where no delay but this one found it traced)
            for i, at in enumerate(DELAYS + [2.0]):
                out = tmp_path / ("%s%d" % (n, i)) / "t.pftrace"
                out.parent.mkdir()
                rc, lines = attach(job.p.pid, out, at, lambda t: act(t, i))
                seen[n + ": " + judged(rc, lines, job.p.pid, str(out))] += 1
                assert job.p.poll() is None, "the job died"
    finally:
        job.kill()
    print("Ctrl-C during the attach:", dict(seen))
    assert seen["once: interrupted"] and seen["once: traced"], seen


def test_ctrl_c_again_once_the_trace_is_written(tmp_path):
    """A second Ctrl-C sent the instant ptbpf says "wrote FILE" lands in its
    detach (a few ms here): it leaves at once, with the run's status (0),
    not 130, since the trace it said it wrote is complete (CI saw the 130)."""
    require(PTBPF)
    job = start_job()
    landed = 0
    try:
        for i in range(10):
            out = tmp_path / ("w%d" % i) / "t.pftrace"
            out.parent.mkdir()
            tracer = subprocess.Popen([PTBPF, "-p", str(job.p.pid), "-o", str(out)],
                                      stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            lines = []
            try:
                for want in ("ptbpf: tracing pid", "ptbpf: wrote "):
                    while not (lines and lines[-1].startswith(want)):
                        lines.append(tracer.stderr.readline())
                        assert lines[-1], "\n".join(lines)
                    tracer.send_signal(signal.SIGINT)
                _, err = tracer.communicate(timeout=60)
            finally:
                tracer.kill()
            lines = [(0.0, t.rstrip("\n")) for t in lines + err.splitlines()]
            landed += classify.lines_say(lines, "second interrupt: leaving now")
            assert judged(tracer.returncode, lines, job.p.pid, str(out)) == "traced"
            assert job.p.poll() is None, "the job died"
    finally:
        job.kill()
    print("second Ctrl-C in the detach: %d of 10" % landed)
    assert landed, "no second Ctrl-C landed in the detach: the test tested nothing"
