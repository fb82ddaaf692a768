# SPDX-License-Identifier: BSD-2-Clause
"""ptrace injection (user/attach/inject.c) through build/inject_cli, into real
processes: a multithreaded C target (with each of its blocked threads, and
a thread live in AVX registers, as the borrowed one), python3 running
torch, and targets it must refuse (a SIGSTOPped one among them). Killing
ptbpf during an injection: test_inject_kill.py. The target's own output is the check
that nothing was corrupted: every line is predictable."""
import os
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import BUILD, PYTHON, Proc, require, thread_named

CLI = os.path.join(BUILD, "inject_cli")
TARGET = os.path.join(BUILD, "inject_target")
LIB = os.path.join(BUILD, "inject_lib.so")

TORCH_LOOP = r"""
import sys, time, torch
n = int(sys.argv[1])
print("ready", flush=True)
for i in range(n):
    x = torch.ones(64, 64) * i
    print("step", i, int((x @ x).sum().item()), flush=True)
    time.sleep(0.05)
print("done", flush=True)
"""


def cli(*args, timeout=60):
    p = subprocess.run([require(CLI)] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def tick_sum(i):
    """What inject_target prints for iteration i."""
    total = 0
    for k in range(2000):
        sz = 16 + (k * 37) % 4000
        total += ((i + k) & 0xff) + sz
    return total


def check_target_output(out, n):
    lines = out.splitlines()
    assert lines[0] == "ready", out
    assert lines[1:-1] == ["tick %d %d" % (i, tick_sum(i)) for i in range(n)], out
    assert lines[-1] == "done", out


class Target(Proc):
    """A Proc that keeps the lines wait_line consumed, to check all output."""

    def __init__(self, argv, **kw):
        super().__init__(argv, **kw)
        self.seen = ""

    def wait(self, prefix, timeout):
        self.seen += self.wait_line(prefix, timeout=timeout)[1]


def start_target(tmp_path, n):
    out = tmp_path / "lib_out"
    p = Target([require(TARGET), str(n)], env=dict(os.environ, INJECT_LIB_OUT=str(out)))
    p.wait("ready", timeout=10)
    return p, out


def thread_states(pid):
    states = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            states[int(tid)] = f.read().rsplit(")", 1)[1].split()[0]
    return states


def maps_lib(pid):
    with open("/proc/%d/maps" % pid) as f:
        return LIB in f.read()


def dlopen(pid):
    rc, out, err = cli(pid, require(LIB))
    assert rc == 0, err
    m = re.fullmatch(r"handle (0x[0-9a-f]+)\n", out)
    assert m and int(m.group(1), 16) != 0, out
    return m.group(1)


def test_inject_multithreaded_target(tmp_path):
    n = 30
    p, out = start_target(tmp_path, n)
    try:
        p.wait("tick 3 ", timeout=10)
        before = thread_states(p.p.pid)
        assert len(before) == 5
        dlopen(p.p.pid)
        assert out.read_text() == "injected %d\n" % p.p.pid
        assert maps_lib(p.p.pid)
        # The same handle again (refcounted), and calls by symbol, many times,
        # while the main thread allocates: any corruption shows in its output.
        for i in range(20):
            dlopen(p.p.pid)
            assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_ping", i) == \
                (0, "ret %d\n" % (i + 1), "")
        assert out.read_text() == "injected %d\n" % p.p.pid  # constructor ran once
        assert set(thread_states(p.p.pid)) == set(before)
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stderr
    check_target_output(p.seen + stdout, n)


def test_inject_call_and_dlclose(tmp_path):
    n = 20
    p, out = start_target(tmp_path, n)
    try:
        handle = dlopen(p.p.pid)
        assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_ping", 41) == \
            (0, "ret 42\n", "")
        assert cli("--dlclose", p.p.pid, handle) == (0, "ret 0\n", "")
        assert not maps_lib(p.p.pid)
        rc, out_rest, err = cli("--call", p.p.pid, "inject_lib.so", "inject_lib_ping", 1)
        assert rc == 1 and "inject_lib_ping not found" in err
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stderr
    check_target_output(p.seen + stdout, n)


def test_inject_python_torch(tmp_path):
    out = tmp_path / "lib_out"
    n = 60
    p = Target([PYTHON, "-c", TORCH_LOOP, str(n)], env=dict(os.environ, INJECT_LIB_OUT=str(out)))
    try:
        p.wait("step 5 ", timeout=120)
        assert len(thread_states(p.p.pid)) >= 1
        dlopen(p.p.pid)
        assert out.read_text() == "injected %d\n" % p.p.pid
        assert maps_lib(p.p.pid)
        assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_ping", 9) == (0, "ret 10\n", "")
        rc, stdout, stderr = p.finish(timeout=120)
    finally:
        p.kill()
    assert rc == 0, stderr
    lines = (p.seen + stdout).splitlines()
    assert lines[0] == "ready"
    assert lines[1:-1] == ["step %d %d" % (i, 262144 * i * i) for i in range(n)]
    assert lines[-1] == "done"


def test_inject_refuses_sigstopped_target(tmp_path):
    """A group-stopped process could not run the call to its end: it is
    refused, and left stopped and untraced."""
    n = 15
    p, out = start_target(tmp_path, n)
    try:
        p.wait("tick 2 ", timeout=10)
        os.kill(p.p.pid, signal.SIGSTOP)
        deadline = time.time() + 5
        while set(thread_states(p.p.pid).values()) != {"T"} and time.time() < deadline:
            time.sleep(0.01)
        before = thread_states(p.p.pid)
        assert set(before.values()) == {"T"}, before
        refusal = ("inject: pid %d is stopped (SIGSTOP): ptbpf loads nothing into a stopped "
                   "process; continue it (kill -CONT %d) or use --ops probes\n"
                   % (p.p.pid, p.p.pid))
        assert cli(p.p.pid, require(LIB)) == (1, "", refusal)
        assert cli("--call", p.p.pid, "libc.so.6", "getpid", 0) == (1, "", refusal)
        time.sleep(0.3)
        assert thread_states(p.p.pid) == before  # still stopped, every thread
        with open("/proc/%d/status" % p.p.pid) as f:
            assert "TracerPid:\t0\n" in f.read()
        assert not out.exists() and not maps_lib(p.p.pid)
        os.kill(p.p.pid, signal.SIGCONT)
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stderr
    check_target_output(p.seen + stdout, n)


def call_tid(pid):
    rc, out, err = cli("--call", pid, "inject_lib.so", "inject_lib_tid", 0)
    assert rc == 0, err
    return int(out.split()[1])


@pytest.mark.parametrize("mode", ["sleeper", "reader", "waiter", "poller", "vector"])
def test_inject_borrows_only_thread(tmp_path, mode):
    """Only one thread has a stack ptbpf may use (the main loop and the
    others run on 64 KiB stacks), so every call runs on it: blocked in
    nanosleep, read, futex or poll, the call interrupts its system call,
    which must restart; the vector thread keeps AVX registers and an
    upward MXCSR rounding mode live across each call. Its own output
    checks both."""
    n = 25
    out = tmp_path / "lib_out"
    p = Target([require(TARGET), str(n), mode], env=dict(os.environ, INJECT_LIB_OUT=str(out)))
    try:
        p.wait("tick 1 ", timeout=10)
        tid = thread_named(p.p.pid, mode)
        dlopen(p.p.pid)
        assert out.read_text() == "injected %d\n" % p.p.pid
        for _ in range(15):
            assert call_tid(p.p.pid) == tid
            time.sleep(0.02)
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stdout + stderr
    check_target_output(p.seen + stdout, n)


def lib_text_range(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if fields[-1] == LIB and fields[1] == "r-xp":
                lo, hi = fields[0].split("-")
                return "0x" + lo, "0x" + hi
    raise AssertionError("inject_lib.so has no text in pid %d" % pid)


def test_inject_dlclose_checked(tmp_path):
    """dlclose waits for an idle instant: refused while a thread spins in
    the library or its busy word is set, done once both are clear."""
    n = 20
    p, out = start_target(tmp_path, n)
    try:
        handle = dlopen(p.p.pid)
        lo, hi = lib_text_range(p.p.pid)
        rc, busy, err = cli("--call", p.p.pid, "inject_lib.so", "inject_lib_busy_addr", 0)
        assert rc == 0, err
        busy = busy.split()[1]
        checked = ["--dlclose-checked", p.p.pid, handle, lo, hi, busy, 4]
        busy_err = ("inject: pid %d: the library is still in use after 100 tries (a thread "
                    "runs its code or its busy flags are set); not unloaded\n" % p.p.pid)

        assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_spin", 1) == (0, "ret 0\n", "")
        assert cli(*checked) == (1, "", busy_err)
        assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_spin", 0) == (0, "ret 0\n", "")
        assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_set_busy", 1) == \
            (0, "ret 1\n", "")
        assert cli(*checked) == (1, "", busy_err)
        assert maps_lib(p.p.pid)
        assert cli("--call", p.p.pid, "inject_lib.so", "inject_lib_set_busy", 0) == \
            (0, "ret 0\n", "")
        assert cli(*checked) == (0, "ret 0\n", "")
        assert not maps_lib(p.p.pid)
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stderr
    check_target_output(p.seen + stdout, n)


def test_inject_refuses_traced_target(tmp_path):
    n = 15
    out = tmp_path / "lib_out"
    p = Target(["strace", "-f", "-o", "/dev/null", require(TARGET), str(n)],
             env=dict(os.environ, INJECT_LIB_OUT=str(out)))
    try:
        p.wait("ready", timeout=20)
        with open("/proc/%d/task/%d/children" % (p.p.pid, p.p.pid)) as f:
            pid = int(f.read().split()[0])
        rc, stdout, stderr = cli(pid, require(LIB))
        assert rc == 1 and stdout == ""
        assert stderr == "inject: pid %d is already traced by pid %d (a debugger or strace): " \
            "detach it first\n" % (pid, p.p.pid)
        assert not out.exists() and not maps_lib(pid)
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stderr
    check_target_output(p.seen + stdout, n)


def test_inject_refuses_bad_library(tmp_path):
    n = 15
    p, out = start_target(tmp_path, n)
    try:
        rc, stdout, stderr = cli(p.p.pid, "/nonexistent/lib.so")
        assert rc == 1 and stdout == ""
        assert stderr == ("inject: library /nonexistent/lib.so is not a readable file in "
                          "pid %d's mount namespace: No such file or directory\n" % p.p.pid)
        # Readable but not a library: dlopen runs and fails; dlerror's text comes back.
        rc, stdout, stderr = cli(p.p.pid, "/etc/passwd")
        assert rc == 1 and stderr == ("inject: pid %d: dlopen(/etc/passwd) failed: "
                                      "/etc/passwd: invalid ELF header\n" % p.p.pid)
        rc, stdout, stderr = cli(999999999, require(LIB))
        assert rc == 1 and stderr == "inject: no live process with pid 999999999\n"
        assert not out.exists()
        rc, stdout, stderr = p.finish(timeout=60)
    finally:
        p.kill()
    assert rc == 0, stderr
    check_target_output(p.seen + stdout, n)


def test_inject_the_agent_into_python(tmp_path):
    """The real agent, loaded by ptrace into a running python3 + torch: its
    thread starts, it stays dormant (no CUPTI loaded: nothing switched it
    on) and loaded, and the target's output is unchanged."""
    agent = require(os.path.join(BUILD, "libptbpf-agent.so"))
    n = 40
    p = Target([PYTHON, "-c", TORCH_LOOP, str(n)])
    try:
        p.wait("step 5 ", timeout=120)
        rc, out, err = cli(p.p.pid, agent)
        assert rc == 0, err
        handle = re.fullmatch(r"handle (0x[0-9a-f]+)\n", out).group(1)
        names = []
        for tid in os.listdir("/proc/%d/task" % p.p.pid):
            with open("/proc/%d/task/%s/comm" % (p.p.pid, tid)) as f:
                names.append(f.read().strip())
        assert "ptbpf-agent" in names, names
        with open("/proc/%d/maps" % p.p.pid) as f:
            maps = f.read()
        assert "libptbpf-agent.so" in maps and "libcupti" not in maps
        rc, stdout, stderr = p.finish(timeout=120)
    finally:
        p.kill()
    assert rc == 0, stderr
    lines = (p.seen + stdout).splitlines()
    assert lines[1:-1] == ["step %d %d" % (i, 262144 * i * i) for i in range(n)]
    assert handle


def tracer_of(pid, tid):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        return int(re.search(r"TracerPid:\s+(\d+)", f.read()).group(1))


def test_a_thread_that_cannot_stop_leaves_nothing_stopped():
    """The main thread waits in vfork() (uninterruptible) for 6 s: the call
    is refused with a true message, and while the injector lives on (as
    ptbpf does), no other thread stays stopped or traced by it; the main
    thread is let go as soon as it leaves the kernel. Once every thread
    that could not be detached stayed stopped until ptbpf exited (a DDP
    rank frozen for a whole trace)."""
    p = Target([require(os.path.join(BUILD, "vfork_hold")), "6000"])
    inj = None
    try:
        p.wait("holding", timeout=10)
        pid = p.p.pid
        deadline = time.monotonic() + 3
        while thread_states(pid)[pid] != "D" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert thread_states(pid)[pid] == "D"
        inj = subprocess.Popen([require(CLI), "--linger", "9000", str(pid), require(LIB)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its one line comes once the stop has timed out (2 s) and every
        # other thread is let go: from then on none is stopped or traced.
        assert select.select([inj.stderr], [], [], 20)[0], "no message within 20 s"
        err = inj.stderr.readline()
        assert re.fullmatch(r"inject: pid %d: thread %d did not stop within 2000 ms \(state D"
                            r"(, in [\w.]+)?: blocked in the kernel\); nothing in the process "
                            r"was changed\n" % (pid, pid), err), err
        for _ in range(5):
            states = thread_states(pid)
            assert all(tracer_of(pid, t) == 0 and states[t] != "t"
                       for t in states if t != pid), states
            time.sleep(0.1)
        assert states[pid] == "D"
        assert tracer_of(pid, pid) == inj.pid  # interrupted, still in the kernel
        rc, stdout, stderr = p.finish(timeout=20)  # the child exits at 6 s
        assert rc == 0, stderr
        # It went on while the injector still lived: it was let go.
        assert inj.poll() is None
        assert re.fullmatch(r"counts \d+ \d+ \d+\n", stdout), stdout
    finally:
        p.kill()
        if inj:
            inj.kill()
            inj.communicate(timeout=10)
