# SPDX-License-Identifier: BSD-2-Clause
"""SIGKILL of the injecting process (build/inject_cli) at each of its
ptrace calls, through strace's fault injection, and at random instants.
After every kill the target (inject_target, whose output checks itself)
must be running, untraced and not stopped, and must end with exactly the
expected output. One PTRACE_SETREGS commits the call: killed after it,
the call completes on its own and the library is loaded; killed before
it (or at it), nothing is loaded."""
import os
import random
import subprocess
import time

import pytest

from conftest import require
from test_inject import CLI, LIB, TARGET, Target, check_target_output, maps_lib, thread_states

RANDOM_TRIALS = 150  # per mode


class LongTarget:
    """inject_target in a mode, running until finish() (its stop file)."""

    def __init__(self, tmp_path, mode, name):
        self.stop = tmp_path / (name + ".stop")
        self.lib_out = tmp_path / (name + ".lib_out")
        env = dict(os.environ, INJECT_LIB_OUT=str(self.lib_out), INJECT_TARGET_STOP=str(self.stop))
        self.p = Target([require(TARGET), "100000", mode], env=env)
        self.pid = self.p.p.pid
        self.p.wait("tick 0 ", timeout=10)

    def assert_healthy(self):
        assert self.p.p.poll() is None, "target died"
        states = thread_states(self.pid)
        assert not set(states.values()) & {"T", "t"}, states
        with open("/proc/%d/status" % self.pid) as f:
            assert "TracerPid:\t0\n" in f.read()

    def finish(self):
        try:
            self.stop.touch()
            rc, stdout, stderr = self.p.finish(timeout=60)
        finally:
            self.p.kill()
        out = self.p.seen + stdout
        assert rc == 0, out + stderr
        check_target_output(out, len(out.splitlines()) - 2)


def strace_cli(pid, log, when=None, args=None):
    """inject_cli PID LIB (or inject_cli ARGS) under strace, killed at its
    when-th ptrace call. Returns its stdout and the ptrace calls it entered."""
    argv = ["strace", "-f", "-qq", "-o", str(log), "-e", "trace=ptrace", "-e", "signal=none"]
    if when:
        argv += ["-e", "inject=ptrace:signal=SIGKILL:when=%d" % when]
    argv += [require(CLI)] + (args or [str(pid), require(LIB)])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    with open(log) as f:
        calls = [line.split(" ", 1)[1].strip() for line in f if "ptrace(" in line]
    return p.stdout, calls


def committed(calls):
    return any(c.startswith("ptrace(PTRACE_SETREGS,") and not c.endswith("= ?") for c in calls)


def wait_loaded(pid, expect, timeout=3.0):
    deadline = time.time() + timeout
    while maps_lib(pid) != expect and time.time() < deadline:
        time.sleep(0.01)
    return maps_lib(pid)


@pytest.mark.parametrize("mode", ["any", "reader"])
def test_kill_at_every_ptrace_call(tmp_path, mode):
    """mode any: the main thread is usually borrowed; reader: the thread
    blocked in read(2) always is."""
    t = LongTarget(tmp_path, mode, "count")
    out, calls = strace_cli(t.pid, tmp_path / "count.log")
    assert out.startswith("handle "), out
    t.finish()
    loaded_at = []
    for n in range(1, 200):
        t = LongTarget(tmp_path, mode, "kill%d" % n)
        try:
            out, killed_calls = strace_cli(t.pid, tmp_path / ("kill%d.log" % n), when=n)
            if out.startswith("handle "):  # fewer than n calls: nothing killed it
                break
            assert out == "" and killed_calls[-1].endswith("= ?"), (n, out, killed_calls)
            t.assert_healthy()
            loaded = wait_loaded(t.pid, committed(killed_calls))
            assert loaded == committed(killed_calls), (n, killed_calls)
            # dlopen maps the library before its constructor writes lib_out.
            deadline = time.time() + 3
            while loaded and not t.lib_out.exists() and time.time() < deadline:
                time.sleep(0.01)
            assert t.lib_out.exists() == loaded
            if loaded:
                loaded_at.append(n)
            t.assert_healthy()
        finally:
            t.finish()
    print("\n%s: %d ptrace calls in one injection; killed at calls 1-%d; the library was "
          "loaded by the kills at %s" % (mode, len(calls), n - 1, loaded_at))
    assert n > 1 and loaded_at and loaded_at == list(range(loaded_at[0], n))


@pytest.mark.parametrize("mode", ["any", "reader"])
def test_kill_at_random_times(tmp_path, mode):
    """One target, many injections each killed 0-15 ms after it started;
    calls left running by a killed injection overlap the next ones."""
    rng = random.Random(11)
    t = LongTarget(tmp_path, mode, "target")
    finished = 0
    try:
        for _ in range(RANDOM_TRIALS):
            c = subprocess.Popen([require(CLI), str(t.pid), require(LIB)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0, 0.015))
            c.kill()
            out, err = c.communicate(timeout=30)
            if c.returncode == 0:
                finished += 1
                assert out.startswith("handle "), out
            else:
                assert c.returncode == -9, (c.returncode, err)
            t.assert_healthy()
        # Whatever the kills left behind, an injection still works, and the
        # constructor ran once.
        r = subprocess.run([require(CLI), str(t.pid), require(LIB)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert t.lib_out.read_text() == "injected %d\n" % t.pid
        t.assert_healthy()
    finally:
        t.finish()
    print("\n%s: %d trials, %d finished before the kill" % (mode, RANDOM_TRIALS, finished))


def libc_code_end(pid):
    """The last page of libc's code mapping: its address and bytes."""
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if fields[-1].endswith("/libc.so.6") and fields[1] == "r-xp":
                end = int(fields[0].split("-")[1], 16)
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(end - 4096)
        return f.read(4096)


def changed(before, after):
    return [i for i in range(len(before)) if before[i] != after[i]]


def lib_call(pid, sym, arg=0):
    r = subprocess.run([require(CLI), "--call", str(pid), "inject_lib.so", sym, str(arg)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[1])


def test_call_outliving_a_killed_injector(tmp_path):
    """Killed right after its commit, an injector leaves a call running (a
    1.5 s sleep) and its trampoline in libc's padding. The next injections
    neither borrow that thread nor touch that slot; once the call has
    returned, the slot is reused and zeroed."""
    t = LongTarget(tmp_path, "any", "target")
    try:
        clean = libc_code_end(t.pid)
        assert subprocess.run([require(CLI), str(t.pid), require(LIB)],
                              capture_output=True).returncode == 0
        sleep = ["--call", str(t.pid), "inject_lib.so", "inject_lib_sleep"]
        out, calls = strace_cli(t.pid, tmp_path / "count.log", args=sleep + ["1"])
        assert out == "ret 1\n"
        first_detach = [c.startswith("ptrace(PTRACE_DETACH,") for c in calls].index(True) + 1
        out, calls = strace_cli(t.pid, tmp_path / "kill.log", when=first_detach,
                                args=sleep + ["1500"])
        assert out == "" and committed(calls), calls
        t.assert_healthy()
        orphan_slot = changed(clean, libc_code_end(t.pid))
        assert orphan_slot and orphan_slot[-1] - orphan_slot[0] < 512, orphan_slot
        orphan = lib_call(t.pid, "inject_lib_sleeper_tid")
        for i in range(5):
            assert lib_call(t.pid, "inject_lib_tid") != orphan
            assert changed(clean, libc_code_end(t.pid)) == orphan_slot
        time.sleep(1.6)
        assert lib_call(t.pid, "inject_lib_tid")
        assert changed(clean, libc_code_end(t.pid)) == []
        t.assert_healthy()
    finally:
        t.finish()
