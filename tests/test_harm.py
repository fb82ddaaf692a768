# SPDX-License-Identifier: BSD-2-Clause
"""Attaching ptbpf takes nothing from the job (issue 11), on the CPU path
with the in-process agent (--ops agent: it is injected by ptrace): no
instant of ptbpf's death harms the job, a second ptbpf is refused (from
another network namespace too), an exec in the job is never written to, a
stalled ptbpf loses nothing silently, and after detach nothing of the
agent is left active. The jobs check their
own numeric results; BCC counts torch's RecordFunction calls from outside
(an independent oracle: with no callback registered, torch never builds
one)."""
import ctypes
import os
import random
import re
import signal
import subprocess
import time

import pytest

from conftest import (BUILD, PTBPF, PYTHON, ROOT, Proc, links_after_exit, op_ring_totals,
                      ops_lost_marked, require, run_untraced, workload_argv)
import pftrace


def start(argv, tmp_path, name="go"):
    go = str(tmp_path / name)
    p = Proc([a.replace("{go}", go) for a in argv])
    p.wait_line("ready")
    return p, go


def agent_mapped(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libptbpf-agent.so" in f.read()


def thread_names(pid):
    names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass
    return names


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def record_function_calls(pid, seconds):
    """How many times torch builds a RecordFunction in pid within `seconds`
    (BCC uprobes on at::RecordFunction::before): 0 when no callback is
    registered, since the dispatcher then takes its fast path."""
    from bcc import BPF
    with open("/proc/%d/maps" % pid) as f:
        lib = next(l.split()[-1] for l in f if "libtorch_cpu.so" in l)
    b = BPF(text="""
BPF_ARRAY(hits, u64, 1);
int hit(void *ctx) { int k = 0; u64 *v = hits.lookup(&k); if (v) __sync_fetch_and_add(v, 1); return 0; }
""")
    b.attach_uprobe(name=lib, sym_re=r"_ZN2at14RecordFunction6beforeE.*", fn_name="hit", pid=pid)
    time.sleep(seconds)
    n = b["hits"][0].value
    b.cleanup()
    return n


def capture_with_agent(pid, out, seconds):
    """`ptbpf -p PID -d SECONDS --ops agent` into out, which must end well
    with ops from the agent: its stderr."""
    r = subprocess.run([PTBPF, "-p", str(pid), "-o", str(out), "-d", str(seconds), "--ops",
                        "agent"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ops from the agent's RecordFunction callbacks" in r.stderr, r.stderr
    return r.stderr


def expected_lines(tmp_path, argv):
    """What the job prints after "ready" (its warm-up prints before)."""
    _, out = run_untraced(tmp_path, argv)
    lines = out.splitlines()
    return lines[[l.startswith("ready") for l in lines].index(True) + 1:]


def finish_checked(target, expected):
    rc, out, err = target.finish(timeout=600)
    assert rc == 0, err
    lines = [l for l in out.splitlines() if not l.startswith("ready")]
    assert lines == expected, (lines[-5:], expected[-5:])


def test_detach_leaves_nothing_and_reattach_works(tmp_path):
    """ptbpf loads the agent, traces, and at the end unloads it: no mapping,
    no thread, no RecordFunction callback, the rings' memory given back;
    a second attach loads it afresh and records the same ops again."""
    # Two captures of 2 s and their attaches fit, with room on a loaded VM
    # (at 6000 steps, one capture on a loaded CI VM held only 26 addmm; at
    # 9000, a second capture came after the training loop's end, when the
    # first trace was read in between). The traces are read at the end.
    argv = workload_argv("checked", 15000)
    expected = expected_lines(tmp_path, argv)
    target, go = start(argv, tmp_path)
    try:
        pid = target.p.pid
        open(go, "w").close()
        time.sleep(0.5)
        rss0, threads0 = rss_kb(pid), thread_names(pid)
        for n in range(2):
            err = capture_with_agent(pid, tmp_path / ("t%d.pftrace" % n), 2)
            assert "stays mapped" not in err, err
            assert not agent_mapped(pid)
            names = thread_names(pid)
            assert "ptbpf-agent" not in names and len(names) <= len(threads0), names
            assert links_after_exit(holders=[]) == []
            # The rings (up to 4 MiB a thread that recorded) are gone.
            assert rss_kb(pid) < rss0 + 4096, (rss0, rss_kb(pid))
        assert record_function_calls(pid, 1.0) == 0
        assert not [f for f in os.listdir("/dev/shm") if str(pid) in f]
        for n in range(2):
            t = pftrace.Trace(str(tmp_path / ("t%d.pftrace" % n)))
            assert t.validate() == []
            assert t.op_counts()["aten::addmm"] > 20, n
        finish_checked(target, expected)
    finally:
        target.kill()


def cpu_ticks(pid):
    """The process's user and system time, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


# The injected load outlived ptbpf's 10 s wait, and ptbpf said so, traced
# with uprobes and switched the agent on once it loaded.
LOAD_OUTLIVED = ("did not finish within 10000 ms", "agent switched on")


def attach_again_and_again(tmp_path, n, walker=False):
    """n captures of 1 s by `ptbpf -p` over a job in a dlopen/dlclose loop
    (tests/workloads/dlopen_loop.py), beside a thread in slow loader walks
    if walker: after each, the job still runs, the agent was on and is gone.
    With the walker the injected dlopen waits for the loader's lock (in slow
    attaches the main thread sat in a futex on a lock in _rtld_global while
    the walker ran): once in 20 attaches of a full run on the CI VM it
    outlived ptbpf's 10 s wait (0 in 140 attaches of the loop alone: 80 on
    an idle VM, 60 beside two busy loops, where 13 loads took over 3 s).
    ptbpf then says so, traces with uprobes, and switches the
    agent on once loaded: allowed in a quarter of the attaches at most."""
    lib = require(os.path.join(BUILD, "inject_lib.so"))
    argv = [PYTHON, os.path.join(ROOT, "tests", "workloads", "dlopen_loop.py"), lib]
    if walker:
        argv.append(require(os.path.join(BUILD, "loader_walk.so")))
    job = Proc(argv, env=dict(os.environ, INJECT_LIB_OUT="/dev/null"))
    outlived = 0
    try:
        pid = int(job.wait_line("ready ")[0].split()[1])
        for i in range(n):
            r = subprocess.run([PTBPF, "-p", str(pid), "-d", "1", "-o",
                                str(tmp_path / "t.pftrace"), "--force"],
                               capture_output=True, text=True, timeout=120)
            assert job.p.poll() is None, "attach %d: the job died (%s): %s" % (
                i, job.p.returncode, job.drain_err()[-2000:])
            assert r.returncode == 0, r.stderr
            late = walker and all(w in r.stderr for w in LOAD_OUTLIVED)
            outlived += late
            assert late or "ops from the agent" in r.stderr, r.stderr
            assert outlived <= n // 4, r.stderr
            t0 = cpu_ticks(pid)
            time.sleep(0.5)
            assert cpu_ticks(pid) > t0, "attach %d: the job stopped running (deadlocked)" % i
            assert not agent_mapped(pid), "attach %d: the agent stays mapped" % i
    finally:
        job.kill()


def test_a_job_loading_libraries_while_the_agent_starts_never_deadlocks(tmp_path):
    """The agent looked torch up with a dlopen inside dl_iterate_phdr: the
    loader's two locks taken in the order opposite to a concurrent
    dlopen's, which deadlocked a job importing modules while the daemon
    switched its step signal on (1 of 15 rank starts; this loop: 5 of 5
    runs within two attaches)."""
    attach_again_and_again(tmp_path, 10)


def test_the_injected_call_never_nests_in_the_dynamic_linker(tmp_path):
    """ptbpf borrowed a thread blocked in libc (a futex) that was inside
    dlopen, waiting for the loader's write lock that another thread's
    dl_iterate_phdr held: the nested dlopen made ld.so abort the job
    ("Assertion `r->r_state == RT_ADD' failed"); or it borrowed the walking
    thread itself, and the job deadlocked. Before: 4 of 4 loops broke the
    job, in 26 attaches in all; after: 0 in 120."""
    attach_again_and_again(tmp_path, 20, walker=True)


def minor_faults(pid):
    """Minor page faults taken by the process's threads so far."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                n += int(f.read().rsplit(")", 1)[1].split()[7])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return n


def test_the_jobs_threads_do_not_fault_in_the_op_rings(tmp_path):
    """The agent's thread faults in the ring pages the job's threads are
    about to write (MADV_POPULATE_WRITE), so that recording costs them no
    page fault: left to them, a fresh page every ~46 ops cost about 15 ns
    an op over the first 4 MiB each thread records after every attach
    (1,042 faults of the job's thread in a 4 s capture of a CPU loop, 0
    with it; CI VM, 2026-11-29). Judged against the job's own faults over
    an untraced window of the same length."""
    argv = workload_argv("checked", 15000)
    target, go = start(argv, tmp_path)
    try:
        pid = target.p.pid
        open(go, "w").close()
        time.sleep(0.5)
        f0 = minor_faults(pid)
        time.sleep(3)
        f1 = minor_faults(pid)
        own = f1 - f0
        err = capture_with_agent(pid, tmp_path / "t.pftrace", 2)
        traced = minor_faults(pid) - f1
        written = int(re.search(r"agent op rings: written (\d+)", err).group(1))
        # Records average over 32 bytes: pages the rings took.
        pages = written * 32 // 4096
        assert pages > 200, (written, err)
        # (Before: 1,347 faults over the job's own for 1,690 pages.)
        assert traced - own < pages // 4 + 64, (traced, own, pages, written)
    finally:
        target.kill()


# A job that loads the agent itself (as tests/bench/step_signal_cost.py
# does, to switch its step signal on in-process), then uses it after ptbpf
# left: its control block's `on` word, through its own handle.
OWN_AGENT = """
import ctypes, os, sys, time, torch
agent = ctypes.CDLL(sys.argv[1])
steps = ctypes.c_uint8.in_dll(agent, "ptbpf_agent_steps")
a = torch.ones(4)
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    torch.add(a, a)
print("on", ctypes.c_uint32.from_address(ctypes.addressof(steps) + 12).value, flush=True)
"""


def test_an_agent_the_process_loaded_itself_stays(tmp_path):
    """ptbpf unloads at detach the agent it loaded by ptrace, not one the
    process loaded itself (dlopen, LD_PRELOAD): that one it uses, switches
    off and leaves mapped, and the process goes on using it (before, ptbpf
    took any agent the environment did not name for one it had injected,
    and its dlclose unmapped the process's own: SIGSEGV at its next use)."""
    done = str(tmp_path / "done")
    target = Proc([PYTHON, "-c", OWN_AGENT, os.path.join(BUILD, "libptbpf-agent.so"), done])
    try:
        target.wait_line("ready")
        pid = target.p.pid
        for n in range(2):
            out = tmp_path / ("t%d.pftrace" % n)
            err = capture_with_agent(pid, out, 1)
            assert pftrace.Trace(str(out)).op_counts()["aten::add"] > 100
            assert agent_mapped(pid), err
        assert record_function_calls(pid, 1.0) == 0
        open(done, "w").close()
        rc, out, err = target.finish(timeout=60)
        assert rc == 0 and "on 0" in out, (rc, out, err)
    finally:
        target.kill()


def test_two_ptbpf_on_one_pid_the_second_is_refused(tmp_path):
    argv = workload_argv("burst", 300000)
    target, go = start(argv, tmp_path)
    try:
        pid = target.p.pid
        a = Proc([PTBPF, "-p", str(pid), "-o", str(tmp_path / "a.pftrace"), "--ops", "agent"])
        a.wait_line("ptbpf: tracing pid", stream="stderr")
        r = subprocess.run([PTBPF, "-p", str(pid), "-o", str(tmp_path / "b.pftrace")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        assert r.stderr == ("ptbpf: pid %d is already traced by another ptbpf (pid %d): stop "
                            "that one first (two would both switch its agent and lose each "
                            "other's records)\n" % (pid, a.p.pid)), r.stderr
        assert not os.path.exists(tmp_path / "b.pftrace")
        open(go, "w").close()
        rc, _, err = target.finish(timeout=120)
        assert rc == 0
        rc, _, err = a.finish(timeout=120)
        assert rc == 0, err
        # Every add is in the trace or counted lost (a busy host can fill a ring).
        assert ops_unaccounted(err, str(tmp_path / "a.pftrace"), 300000) == 0, err
    finally:
        target.kill()


REFUSED = ("ptbpf: pid %d is already traced by another ptbpf (pid %d): stop that one first (two "
           "would both switch its agent and lose each other's records)\n")


def ops_unaccounted(err, trace_path, n):
    """aten::add calls of the job's n the trace lacks, beyond the records
    ptbpf counted as lost (each lost op costs at least one record)."""
    m = re.search(r"agent op rings: written (\d+) = read (\d+) .*?; not written: (\d+)", err)
    assert m, err
    written, read, lost = map(int, m.groups())
    assert written == read, err
    adds = pftrace.Trace(trace_path).op_counts().get("aten::add", 0)
    assert adds <= n, adds
    return max(0, n - adds - lost)


def test_two_ptbpf_in_two_network_namespaces_the_second_is_refused(tmp_path):
    """The claim lives in the initial network namespace: a ptbpf in a
    container with the host's pids but a network of its own (unshare -n)
    is refused beside one outside, each time with one line naming it,
    instead of switching the same agent and taking its records."""
    n = 300000
    target, go = start(workload_argv("burst", n), tmp_path)
    a = None
    try:
        pid = target.p.pid
        a = Proc([PTBPF, "-p", str(pid), "-o", str(tmp_path / "a.pftrace"), "--ops", "agent"])
        a.wait_line("ptbpf: tracing pid", stream="stderr")
        # Each asker leaves a connection queued on the claim: the third
        # once waited forever on a queue of one.
        for netns in (["unshare", "-n"], [], ["unshare", "-n"]):
            r = subprocess.run(netns + [PTBPF, "-p", str(pid), "-o", str(tmp_path / "b.pftrace")],
                               capture_output=True, text=True, timeout=60)
            assert (r.returncode, r.stderr) == (1, REFUSED % (pid, a.p.pid)), r.stderr
        assert not os.path.exists(tmp_path / "b.pftrace")
        open(go, "w").close()
        rc, _, _ = target.finish(timeout=120)
        assert rc == 0
        rc, _, err = a.finish(timeout=120)
        assert rc == 0, err
        assert ops_unaccounted(err, str(tmp_path / "a.pftrace"), n) == 0
    finally:
        target.kill()
        if a:
            a.kill()


def test_a_killed_ptbpf_leaves_no_claim_in_any_network_namespace(tmp_path):
    """A ptbpf in a network namespace of its own holds the claim against
    one on the host; SIGKILLed, it leaves nothing: a ptbpf in yet another
    network namespace claims the pid and records its ops."""
    n = 20000
    target, go = start(workload_argv("burst", n), tmp_path)
    a = None
    try:
        pid = target.p.pid
        a = Proc(["unshare", "-n", PTBPF, "-p", str(pid), "-o", str(tmp_path / "a.pftrace"),
                  "--ops", "agent"])
        a.wait_line("ptbpf: tracing pid", stream="stderr")
        r = subprocess.run([PTBPF, "-p", str(pid), "-o", str(tmp_path / "b.pftrace")],
                           capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stderr) == (1, REFUSED % (pid, a.p.pid)), r.stderr
        a.p.kill()
        a.p.wait()
        c = Proc(["unshare", "-n", PTBPF, "-p", str(pid), "-o", str(tmp_path / "c.pftrace"),
                  "--ops", "agent"])
        c.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        rc, _, _ = target.finish(timeout=120)
        assert rc == 0
        rc, _, err = c.finish(timeout=120)
        assert rc == 0, err
        assert ops_unaccounted(err, str(tmp_path / "c.pftrace"), n) == 0
    finally:
        target.kill()
        if a:
            a.kill()


STALL = r"""
import os, sys, time, torch
n = int(sys.argv[1])
torch.set_num_threads(1)
a = torch.ones(1)
add = torch.add
print("ready", os.getpid(), flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
for i in range(n):
    add(a, a)
print("adds", n, flush=True)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
os._exit(0)
"""


def test_stalled_ptbpf_loses_nothing_silently(tmp_path):
    """ptbpf stopped for 7 s while the job runs exactly N ops: the agent
    records on (ptbpf's probe is still there), its ring fills, and every op
    it could not record is counted: recorded + counted lost = N, with the
    gap marked in the trace."""
    n = 3000000
    go, end = str(tmp_path / "go"), str(tmp_path / "end")
    target = Proc([PYTHON, "-c", STALL, str(n), go, end])
    try:
        target.wait_line("ready")
        out = str(tmp_path / "s.pftrace")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", out, "--ops", "agent"])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        os.kill(tracer.p.pid, signal.SIGSTOP)
        open(go, "w").close()
        time.sleep(7)
        os.kill(tracer.p.pid, signal.SIGCONT)
        target.wait_line("adds", timeout=300)
        time.sleep(0.5)
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
        open(end, "w").close()
        target.finish(timeout=60)
        m = re.search(r"agent op rings: written (\d+) = read (\d+) .*?; not written: (\d+) \(ring "
                      r"full (\d+), no free ring (\d+)\)", err)
        assert m, err
        written, read, lost, full, noslot = map(int, m.groups())
        assert written == read and lost == full + noslot and full > 0, err
        begins = int(re.search(r"op begin \(agent\) (\d+)", err).group(1))
        ends = int(re.search(r"op end \(agent\) (\d+)", err).group(1))
        # Each add is a begin and an end record, and the loop is all the
        # thread records: nothing unaccounted.
        assert begins + ends + lost == 2 * n, (begins, ends, lost)
        t = pftrace.Trace(out)
        assert t.validate() == []
        assert 0 < t.op_counts().get("aten::add", 0) <= n
        gaps = [s for s in t.instants if s.name == "op records lost here (ptbpf fell behind)"]
        assert gaps and sum(s.args["lost_records"] for s in gaps) == lost
    finally:
        target.kill()


STALL_EXIT = r"""
import os, sys, time, torch
n = int(sys.argv[1])
torch.set_num_threads(1)
a = torch.ones(1)
add = torch.add
print("ready", os.getpid(), flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
for i in range(n):
    add(a, a)
print("adds", n, flush=True)
if sys.argv[3] == "killed":
    time.sleep(600)
"""


@pytest.mark.parametrize("ring_size,end", [("16M", "exits"), ("1M", "exits"), ("16M", "killed")])
def test_stalled_ptbpf_target_exits_loses_nothing_silently(tmp_path, ring_size, end):
    """ptbpf stopped while the job does exactly N ops and exits (or is
    killed): its ring filled, and what it held went with the process. The
    exit probe's (or the signal probe's) copy of the rings' counters says
    how many ops the agent wrote and dropped, so recorded + counted lost =
    N, on stderr and in the trace. The ring's last bytes are copied at
    _exit, unless the BPF ring (1 MiB) cannot take them, or the process was
    killed: those records are counted as gone unread."""
    n = 500000
    go, out = str(tmp_path / "go"), str(tmp_path / "s.pftrace")
    target = Proc([PYTHON, "-c", STALL_EXIT, str(n), go, end])
    try:
        target.wait_line("ready")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", out, "--ops", "agent",
                       "--ring-size", ring_size])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        os.kill(tracer.p.pid, signal.SIGSTOP)
        open(go, "w").close()
        target.wait_line("adds %d" % n, timeout=300)
        if end == "killed":
            target.p.kill()
        assert target.finish(timeout=300)[0] == (-signal.SIGKILL if end == "killed" else 0)
        os.kill(tracer.p.pid, signal.SIGCONT)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
    finally:
        target.kill()
    o = op_ring_totals(err)
    assert o["written"] == o["read"] + o["unread"] and o["bad"] == 0 and o["no_copy"] == 0, err
    assert o["full"] > 0 and (o["unread"] > 0) == (ring_size == "1M" or end == "killed"), err
    # The loop is all the thread does after "go": each add is one BEGIN.
    assert o["ops_read"] + o["ops_lost"] == n, err
    assert o["ops_lost"] == o["ops_full"] + o["ops_unread"], err
    t = pftrace.Trace(out)
    assert t.validate() == []
    assert t.op_counts()["aten::add"] == o["ops_read"]
    assert t.op_counts()["aten::add"] + t.attrs["dev.ptbpf.op_begins_lost_ring_full"] + \
        t.attrs["dev.ptbpf.op_begins_lost_gone_unread"] == n
    assert ops_lost_marked(t) == (o["full"] + o["unread"], o["ops_lost"])
    # The report starts with those losses: what, how many, why.
    r = subprocess.run([PTBPF, "report", out], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    said = r.stdout.splitlines()[1]
    assert said.startswith("LOST: %d ops (" % o["ops_full"]), said
    assert "their thread's op ring was full" in said, said
    assert ("%d ops (" % o["ops_unread"] in said) == (o["ops_unread"] > 0), said


EXEC = r"""
import ctypes, mmap, os, re, sys, time
if sys.argv[1] == "before":
    import torch
    print("ready", os.getpid(), flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    a = torch.ones(4)
    for i in range(20000):
        a = a + 1
    lo = int(open(sys.argv[2]).read(), 16)  # where ptbpf says the rings are
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[3], "after", hex(lo)])
else:
    # The new image maps memory where the old one's op rings were, and checks
    # that nothing writes into it (ptbpf advances ring tails there).
    lo = int(sys.argv[2], 16)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    size = 64 << 22
    p = libc.mmap(lo, size, 3, 0x22 | 0x100000, -1, 0)  # MAP_PRIVATE|ANON|FIXED_NOREPLACE
    assert p == lo, (p, lo, ctypes.get_errno())
    buf = (ctypes.c_uint8 * size).from_address(lo)
    pattern = bytes(range(256)) * 16
    for off in range(0, size, 1 << 22):  # every ring's header page
        ctypes.memmove(lo + off, pattern, len(pattern))
    time.sleep(2)
    bad = sum(1 for off in range(0, size, 1 << 22) if ctypes.string_at(lo + off, len(pattern)) != pattern)
    print("after exec: headers changed", bad, flush=True)
"""


def test_exec_is_never_written_to(tmp_path):
    """The job exec()s while traced by the agent, and the new image maps
    memory exactly where the old one's op rings were: ptbpf notices the
    exec, never reads or writes the new image through the old addresses,
    cuts the old image's frames, and says so."""
    go = str(tmp_path / "go")
    target = Proc([PYTHON, "-c", EXEC, "before", go, EXEC])
    try:
        target.wait_line("ready")
        out = str(tmp_path / "e.pftrace")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", out, "--ops", "agent"])
        _, said = tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        rings = re.search(r"rings of 4096 KiB at (0x[0-9a-f]+)", said).group(1)
        with open(go + ".tmp", "w") as f:
            f.write(rings)
        os.rename(go + ".tmp", go)
        rc, stdout, err = target.finish(timeout=120)
        assert rc == 0, err
        assert "after exec: headers changed 0" in stdout, stdout
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
        assert "exec'd (now python3" in err and "malformed 0" in err, err
        assert "exec'd into a program that has exited" in err, err
        t = pftrace.Trace(out)
        assert t.validate() == []
        # Every add before the exec is in the trace or counted lost (a busy
        # machine's reader can fall behind the loop and fill a ring).
        lost = t.attrs["dev.ptbpf.op_begins_lost_ring_full"] + \
            t.attrs["dev.ptbpf.op_begins_lost_gone_unread"] + \
            t.attrs["dev.ptbpf.op_begins_lost_no_free_ring"]
        assert t.op_counts()["aten::add"] + lost >= 20000, err
        assert "cut by exec" in err
    finally:
        target.kill()


def test_sigkill_of_ptbpf_in_every_phase(tmp_path):
    """ptbpf killed at random moments: loading BPF, attaching, injecting
    the agent, switching it on, tracing, switching it off and unloading it
    (SIGINT then SIGKILL). The job's every printed value stays right, it
    exits 0, nothing of ptbpf's stays attached, and an agent whose ptbpf
    died switches itself off: torch builds no RecordFunction afterwards."""
    trials = int(os.environ.get("PTBPF_KILL_TRIALS", "40"))
    argv = workload_argv("checked", 10000)
    expected = expected_lines(tmp_path, argv)
    target, go = start(argv, tmp_path)
    rng = random.Random(11)
    phases = {"run": 0, "stop": 0}
    tracers = []
    try:
        pid = target.p.pid
        open(go, "w").close()
        for i in range(trials):
            assert target.p.poll() is None, "the job died at trial %d" % i
            tracer = subprocess.Popen([PTBPF, "-p", str(pid), "-o",
                                       str(tmp_path / ("k%d.pftrace" % i)), "--ops", "agent"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tracers.append(tracer.pid)
            if rng.random() < 0.6:
                time.sleep(rng.uniform(0, 1.5))
                phases["run"] += 1
            else:  # in the switch-off and unload
                time.sleep(rng.uniform(0.8, 1.5))
                tracer.send_signal(signal.SIGINT)
                time.sleep(rng.uniform(0, 0.3))
                phases["stop"] += 1
            tracer.kill()
            tracer.wait()
        time.sleep(0.3)
        assert links_after_exit(tracers) == []
        assert record_function_calls(pid, 1.0) == 0
        finish_checked(target, expected)
    finally:
        target.kill()
    print("kill trials:", phases)


def attach_agent(pid, out, tracers):
    """`ptbpf -p PID --ops agent -o OUT`, added to tracers (killed at the
    end), once it says it writes: (the tracer, its stderr so far)."""
    tracer = Proc([PTBPF, "-p", str(pid), "-o", str(out), "--ops", "agent"])
    tracers.append(tracer)
    _, head = tracer.wait_line("ptbpf: writing", stream="stderr")
    return tracer, head


def sigint_pending(pid):
    """Whether a SIGINT sent to process pid waits there, not yet taken."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("ShdPnd:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    except OSError:  # gone
        pass
    return False


def check_second_interrupt(err, pid, mapped_before, mapped_after, second):
    """The one line a second Ctrl-C prints: what stays, and it is true.
    second: how the second SIGINT was sent ("none": ptbpf had exited,
    "pending": the first was still waiting in ptbpf, "sent")."""
    lines = re.findall(r"ptbpf: second interrupt: leaving now; ([^\n]*)\n", err)
    if not lines:
        # ptbpf took one interrupt: its whole detach ran, nothing stays.
        # Either it had exited, or the kernel merged the two (a signal
        # keeps one pending instance: the first waited while ptbpf sat
        # in a page fault of a file read, 67-368 ms measured), or the
        # first was taken so late that the second came within 20 ms of
        # it, which is how `timeout`'s pair looks (test below).
        assert "second interrupt" not in err, err
        assert "ptbpf: interrupted during attach; detaching, nothing written\n" in err, err
        assert mapped_after <= mapped_before, err
        return {"none": "detached before the second", "pending": "merged with the first"}.get(
            second, "taken as the first again")
    assert len(lines) == 1 and err.count("second interrupt") == 1, err
    said = lines[0]
    if said.startswith("nothing this ptbpf attached stays"):
        assert mapped_after <= mapped_before, said
    elif "stays mapped in pid %d" % pid in said:
        assert mapped_after, said
        assert "(run ptbpf -p %d again and stop it normally to unload it)" % pid in said
    else:
        assert re.match(r"ptbpf was (loading its agent into|unloading its agent from) pid %d: "
                        % pid, said), said
    return said.split(" (")[0].split(":")[0]


def test_double_sigint_during_attach_leaves_the_job_unharmed(tmp_path):
    """A second Ctrl-C leaves at once, at any point of the attach, and says
    in one line what stays, truly: the injected call restores its thread by
    itself, an agent left behind is switched off (ptbpf's probe is gone),
    and the next ptbpf, stopped normally, unloads it."""
    argv = workload_argv("checked", 6000)
    expected = expected_lines(tmp_path, argv)
    target, go = start(argv, tmp_path)
    rng = random.Random(5)
    tracers, said = [], {}
    try:
        pid = target.p.pid
        open(go, "w").close()
        for i in range(12):
            mapped_before = agent_mapped(pid)
            # The attach (injection, switch-on) starts right after head.
            tracer, head = attach_agent(pid, tmp_path / ("i%d.pftrace" % i), tracers)
            time.sleep(rng.uniform(0, 0.4))
            tracer.p.send_signal(signal.SIGINT)
            # Within 20 ms the same sender's SIGINT is the first one again
            # (test_timeout_stops_ptbpf_normally).
            time.sleep(rng.uniform(0.025, 0.075))
            second = "none"
            if tracer.p.poll() is None:  # else the first one's detach is over already
                second = "pending" if sigint_pending(tracer.p.pid) else "sent"
                tracer.p.send_signal(signal.SIGINT)
            rc, _, err = tracer.finish(timeout=60)
            err = head + err
            assert rc == 130, err
            kind = check_second_interrupt(err, pid, mapped_before, agent_mapped(pid), second)
            said[kind] = said.get(kind, 0) + 1
        # Most second interrupts reach ptbpf as such: 552 of 600 in 50 runs
        # on the CI VM, at least 9 of 12 in each; 44 came after ptbpf had
        # exited, 3 merged with the first, 1 was taken as the first again.
        assert sum(n for k, n in said.items() if k not in (
            "detached before the second", "merged with the first",
            "taken as the first again")) >= 6, said
        time.sleep(0.3)
        assert links_after_exit([t.p.pid for t in tracers]) == []
        assert record_function_calls(pid, 1.0) == 0
        r = subprocess.run([PTBPF, "-p", str(pid), "-o", str(tmp_path / "last.pftrace"), "-d",
                            "1", "--ops", "agent"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        assert not agent_mapped(pid)
        finish_checked(target, expected)
    finally:
        for t in tracers:
            t.kill()
        target.kill()
    print("second interrupts:", said)


def test_timeout_stops_ptbpf_normally(tmp_path):
    """GNU timeout sends its signal to ptbpf and then to ptbpf's process
    group, microseconds apart: `timeout -s INT N ptbpf ...` is one
    interrupt, so ptbpf stops as after one Ctrl-C (the trace written, the
    agent unloaded), never "second interrupt" (the agent would stay mapped,
    dormant: 2 of 16 such runs at 0.05-0.12 s before). The same pair sent
    from here, 2 ms apart (a pair further apart than 15 ms is not judged),
    at any point of the attach and the capture."""
    argv = workload_argv("checked", 6000)
    expected = expected_lines(tmp_path, argv)
    target, go = start(argv, tmp_path)
    rng = random.Random(7)
    tracers, judged = [], 0
    try:
        pid = target.p.pid
        open(go, "w").close()
        r = subprocess.run(["timeout", "-s", "INT", "3", PTBPF, "-p", str(pid), "-o",
                            str(tmp_path / "t.pftrace"), "--ops", "agent"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 124 and "second interrupt" not in r.stderr, r.stderr
        assert "ptbpf: wrote " in r.stderr and not agent_mapped(pid), r.stderr
        for i in range(10):
            tracer, head = attach_agent(pid, tmp_path / ("p%d.pftrace" % i), tracers)
            time.sleep(rng.uniform(0, 0.8))
            tracer.p.send_signal(signal.SIGINT)
            t = time.perf_counter()
            time.sleep(0.002)
            tracer.p.send_signal(signal.SIGINT)
            gap = time.perf_counter() - t
            rc, _, err = tracer.finish(timeout=60)
            err = head + err
            if gap > 0.015:
                continue
            judged += 1
            assert "second interrupt" not in err, (gap, err)
            # Stopped while tracing: the trace, exit 0; during the attach:
            # nothing written, 130.
            assert (rc, "ptbpf: wrote " in err) in ((0, True), (130, False)), (rc, err)
            assert not agent_mapped(pid), err
        assert judged >= 5, judged
        time.sleep(0.3)
        assert links_after_exit([t.p.pid for t in tracers]) == []
        assert record_function_calls(pid, 1.0) == 0
        finish_checked(target, expected)
    finally:
        for t in tracers:
            t.kill()
        target.kill()


def hold(pid, how):
    """Stops pid as a job-control stop or as a debugger does (every thread
    ptrace-stopped by this process); what release() needs."""
    if how == "SIGSTOP":
        os.kill(pid, signal.SIGSTOP)
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    for tid in tids:
        assert libc.ptrace(0x4206, tid, None, None) == 0, ctypes.get_errno()  # PTRACE_SEIZE
        assert libc.ptrace(0x4207, tid, None, None) == 0, ctypes.get_errno()  # PTRACE_INTERRUPT
        os.waitpid(tid, 0x40000000)  # __WALL: its stop
    return [libc, tids]


def release(pid, held):
    if not held:
        os.kill(pid, signal.SIGCONT)
        return
    libc, tids = held
    for tid in tids:
        libc.ptrace(17, tid, None, None)  # PTRACE_DETACH


@pytest.mark.parametrize("how", ["SIGSTOP", "debugger"])
def test_target_stopped_mid_trace_ends_on_time_and_says_so(tmp_path, how):
    """The job is stopped while traced with -d 2 (by SIGSTOP, or by a
    debugger): ptbpf ends on time, says in one line that the agent cannot
    be unloaded now and what becomes of it; once the job runs again its
    agent is off (no RecordFunction, no thread), the next ptbpf unloads it,
    and the job's every value is right."""
    argv = workload_argv("checked", 6000)
    expected = expected_lines(tmp_path, argv)
    target, go = start(argv, tmp_path)
    held = []
    try:
        pid = target.p.pid
        open(go, "w").close()
        tracer = Proc([PTBPF, "-p", str(pid), "-o", str(tmp_path / "s.pftrace"), "-d", "2",
                       "--ops", "agent"])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        t0 = time.time()
        time.sleep(0.3)
        held = hold(pid, how)
        rc, _, err = tracer.finish(timeout=60)
        took = time.time() - t0
        assert rc == 0, err
        assert took < 2 + 2.0, (took, err)  # the switch-off is not waited for
        with open("/proc/self/comm") as f:
            why = "(SIGSTOP or another stop signal)" if how == "SIGSTOP" else \
                "under a debugger (pid %d, %s)" % (os.getpid(), f.read().strip())
        said = [l for l in err.splitlines() if "%d is stopped" % pid in l]
        assert said == ["ptbpf: warning: pid %d is stopped %s: its agent cannot be unloaded "
                        "now; it stays mapped and switches itself off once the process runs "
                        "again (run ptbpf -p %d again and stop it normally to unload it)"
                        % (pid, why, pid)], err
        assert pftrace.Trace(str(tmp_path / "s.pftrace")).validate() == []
        assert agent_mapped(pid)
        release(pid, held)
        held = []
        time.sleep(0.5)
        assert record_function_calls(pid, 1.0) == 0
        assert "ptbpf-agent" not in thread_names(pid)
        r = subprocess.run([PTBPF, "-p", str(pid), "-o", str(tmp_path / "n.pftrace"), "-d", "1",
                            "--ops", "agent"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        assert "pid %d: unloaded the agent an earlier ptbpf had switched off but left mapped" \
            % pid in r.stderr
        assert not agent_mapped(pid)
        assert links_after_exit(holders=[]) == []
        finish_checked(target, expected)
    finally:
        if held:
            release(target.p.pid, held)
        target.kill()
