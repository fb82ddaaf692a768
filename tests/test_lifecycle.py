# SPDX-License-Identifier: BSD-2-Clause
"""Start, stop and failure paths: the trace is always complete and valid,
the target is never harmed, nothing stays attached."""
import os
import re
import signal
import subprocess
import sys
import time

from conftest import (PTBPF, PYTHON, Proc, links_after_exit, op_ring_totals, ops_lost_marked,
                      run_traced, run_untraced, workload_argv)
import pftrace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak"))
from probes import int3_bytes  # noqa: E402  (the probes' breakpoints in a job's text)


def start_target(argv, tmp_path):
    go = str(tmp_path / "go")
    p = Proc([a.replace("{go}", go) for a in argv])
    p.wait_line("ready")
    return p, go


def test_trace_decodes_with_protoc(tmp_path):
    run = run_traced(tmp_path, workload_argv("mlp", 5))
    assert run.rc == 0, run.err
    rc, text = pftrace.protoc_decode(run.trace_path)
    assert rc == 0, text[-2000:]
    assert "track_event" in text and "clock_snapshot" in text
    t = run.trace
    assert t.validate() == []
    # Thread tracks carry names from /proc; the main thread is there.
    names = [d.thread.thread_name for d in t.thread_tracks().values()]
    assert any(n for n in names), names
    assert "ptbpf: wrote" in run.err and "top ops by host time" in run.err
    assert "events by kind" in run.err


def test_target_exits_mid_trace(tmp_path):
    """The target is killed while traced: ptbpf notices, stops, and the trace
    is valid up to the exit."""
    target, go = start_target(workload_argv("burst", 10**9), tmp_path)
    try:
        out = str(tmp_path / "t.pftrace")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", out])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        time.sleep(2)
        target.p.kill()
        target.p.wait()
        rc, _, err = tracer.finish(timeout=60)
        assert rc == 0, err
        assert "every traced process has exited" in err
        t = pftrace.Trace(out)
        assert t.validate() == []
        assert t.op_counts()["aten::add"] > 100
    finally:
        target.kill()


def test_sigint_mid_trace_and_duration(tmp_path):
    target, go = start_target(workload_argv("burst", 10**9), tmp_path)
    try:
        open(go, "w").close()
        out = str(tmp_path / "t.pftrace")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", out])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        time.sleep(1)
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=60)
        assert rc == 0, err
        assert pftrace.Trace(out).validate() == []
        assert links_after_exit(holders=[]) == []
        out2 = str(tmp_path / "d.pftrace")
        t0 = time.time()
        r = subprocess.run([PTBPF, "-p", str(target.p.pid), "-o", out2, "-d", "2"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert 2 <= time.time() - t0 < 30
        assert pftrace.Trace(out2).op_counts()["aten::add"] > 100
        assert target.p.poll() is None
    finally:
        target.kill()


def test_agent_stop_loses_nothing_while_the_target_runs_on(tmp_path):
    """A loop of one-element adds (about 2 M agent records/s, a 4 MiB ring
    full in ~50 ms), stopped with -d while it goes on: the rings are read
    more often while they bring much, and on through the switch-off (the
    agent records until it sees it), so nothing is lost at the stop. (On
    a host busy with other work the reader may fall behind the loop during
    the run: those losses are ring-full ones, counted; the benchmark, not
    this test, says how fast the reader is.)"""
    target, go = start_target(workload_argv("burst", 10**9), tmp_path)
    try:
        open(go, "w").close()
        out = str(tmp_path / "a.pftrace")
        r = subprocess.run([PTBPF, "-p", str(target.p.pid), "-o", out, "-d", "1", "--ops",
                            "agent"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        o = op_ring_totals(r.stderr)
        assert o["read"] > 100000 and o["written"] == o["read"], r.stderr
        assert o["unread"] == 0 and o["no_copy"] == 0 and o["bad"] == 0, r.stderr
        assert o["ops_lost"] == o["ops_full"] <= o["full"], r.stderr
        t = pftrace.Trace(out)
        assert t.validate() == []
        assert t.attrs["dev.ptbpf.op_begins_lost_ring_full"] == o["ops_full"]
        assert t.attrs["dev.ptbpf.op_begins_lost_gone_unread"] == 0
        assert target.p.poll() is None
    finally:
        target.kill()


def test_agent_ring_counts_balance_over_repeated_attaches(tmp_path):
    """Eight sessions in a row on one busy process: the first injects the
    agent, the others switch the same agent on again, each while the
    job's thread writes 2 M records/s. Each session counts exactly what
    was written in it: every record read or counted lost, none taken
    from an earlier session (the agent marks where each one starts while
    nothing writes; a ring's head and count read while its thread writes
    could not say it, and once read one record more than was written)."""
    target, go = start_target(workload_argv("burst", 10**9), tmp_path)
    try:
        open(go, "w").close()
        for i in range(8):
            out = str(tmp_path / ("r%d.pftrace" % i))
            r = subprocess.run([PTBPF, "-p", str(target.p.pid), "-o", out, "-d", "1", "--ops",
                                "agent", "--no-sched", "--no-samples"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            o = op_ring_totals(r.stderr)
            assert o["read"] > 10000 and o["written"] == o["read"] + o["unread"], (i, r.stderr)
            assert o["unread"] == 0 and o["bad"] == 0, (i, r.stderr)
            assert "MISMATCH" not in r.stderr, (i, r.stderr)
            assert target.p.poll() is None
        # (Read back once: 30 MB of trace take Python 15 s.)
        assert pftrace.Trace(out).attrs["dev.ptbpf.op_begins_lost_ring_full"] == o["ops_full"]
    finally:
        target.kill()


def test_sigkill_leaves_target_unharmed(tmp_path):
    argv = workload_argv("mlp", 400)
    _, expected = run_untraced(tmp_path, argv)
    target, go = start_target(argv, tmp_path)
    try:
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", str(tmp_path / "k.pftrace")])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        time.sleep(1)
        tracer.p.kill()
        tracer.p.wait()
        time.sleep(0.5)
        assert links_after_exit(holders=[]) == []
        rc, out, _ = target.finish(timeout=600)
        assert rc == 0
        strip = lambda o: [l for l in o.splitlines() if not l.startswith("ready")]
        assert strip(out) == strip(expected)
    finally:
        target.kill()


def test_a_kill_mid_attach_or_detach_leaves_no_breakpoint(tmp_path):
    """SIGKILL while ptbpf attaches or detaches its probes, or a second
    Ctrl-C while it detaches them. The kernel writes and restores a
    probe's breakpoint in the process that makes or closes its link; one
    being killed fails the write and the breakpoint stays in the job
    (before the link keeper: 140-2,954 left, still there 10 s later). The
    keeper makes and closes every uprobe link: none stays. `pkill -9
    ptbpf` (kept to ptbpf's session here) kills ptbpf, not its keeper
    (named link-keeper), which then takes the probes out."""
    target, go = start_target(workload_argv("mlp", 100, ["--loop"]), tmp_path)
    argv = [PTBPF, "-p", str(target.p.pid), "-o", str(tmp_path / "k.pftrace"), "--force",
            "--ops", "probes"]
    landed = {"attach": 0, "detach": 0, "second interrupt": 0, "pkill": 0}

    def trial(kind, delay):
        """Starts ptbpf, sends the signal delay s into kind; no breakpoint stays."""
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
        pkill = ["pkill", "-KILL", "-s", str(p.pid), "ptbpf"]  # its session: no other's
        if kind != "attach":
            for line in p.stderr:
                if line.startswith("ptbpf: tracing pid"):
                    break
            time.sleep(0.3)
            if kind == "pkill":  # what pkill would kill: ptbpf, not its keeper
                listed = subprocess.run(["pgrep", "-s", str(p.pid), "ptbpf"],
                                        capture_output=True, text=True).stdout.split()
                assert listed == [str(p.pid)], listed
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
        time.sleep(max(0.0, delay - (time.monotonic() - t0)))
        if kind == "pkill":
            subprocess.run(pkill)  # (1: ptbpf had already left)
        else:
            p.send_signal(signal.SIGINT if kind == "second interrupt" else signal.SIGKILL)
        err = p.communicate(timeout=120)[1]  # end of file: the keeper is done too
        if ("second interrupt: leaving now" in err if kind == "second interrupt" else
                p.returncode == -9 and (kind != "attach" or "ptbpf: tracing pid" not in err)):
            landed[kind] += 1  # the signal came before the attach or detach was over
        left = int3_bytes(target.p.pid)
        assert left == 0, (kind, delay, left, err)

    try:
        open(go, "w").close()
        assert int3_bytes(target.p.pid) == 0
        # How long an attach (to "tracing pid") and a detach (SIGINT to exit) take here.
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if line.startswith("ptbpf: tracing pid"):
                break
        attach = time.monotonic() - t0
        time.sleep(0.3)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        assert p.communicate(timeout=120) and p.returncode == 0
        detach = time.monotonic() - t0
        for k in range(10):
            trial("attach", attach * (0.5 + 0.05 * k))
            trial("detach", detach * 0.1 * k)
        for k in range(6):
            trial("second interrupt", 0.025 + detach * 0.1 * k)
            trial("pkill", detach * 0.1 * k)
        print("signals that came mid-attach or mid-detach:", landed)
        # Most came before the end: the test covered the windows.
        assert landed["attach"] >= 5 and landed["detach"] >= 5, landed
        assert landed["second interrupt"] >= 3 and landed["pkill"] >= 3, landed
        assert links_after_exit(holders=[]) == []
        assert target.p.poll() is None
    finally:
        target.kill()


def test_sigint_during_attach(tmp_path):
    target, go = start_target(workload_argv("mlp", 1), tmp_path)
    try:
        out = str(tmp_path / "i.pftrace")
        p = subprocess.Popen([PTBPF, "-p", str(target.p.pid), "-o", out],
                             stderr=subprocess.PIPE, text=True)
        time.sleep(0.05)  # planning and attaching take longer than this
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode in (0, 130), err
        if p.returncode == 130:  # tracing never started: no file
            assert "interrupted during attach; detaching, nothing written" in err
            assert not os.path.exists(out) and not os.path.exists(out + ".partial")
        else:
            assert pftrace.Trace(out).validate() == []
        assert links_after_exit(holders=[]) == []
        open(go, "w").close()
        rc, out, _ = target.finish(timeout=120)
        assert rc == 0 and "mlp loss" in out
    finally:
        target.kill()


def test_run_says_when_its_command_runs_on(tmp_path):
    """ptbpf run stopped before its command (-d) exits with its own status,
    and says so: the command runs on, untraced."""
    go = str(tmp_path / "go")
    argv = [a.replace("{go}", go) for a in workload_argv("mlp", 5)]
    try:
        with open(str(tmp_path / "err"), "w") as err:  # the command keeps a pipe open
            p = subprocess.Popen([PTBPF, "run", "-o", str(tmp_path / "r.pftrace"), "-d", "1",
                                  "--"] + argv, stdout=subprocess.DEVNULL, stderr=err)
            rc = p.wait(timeout=120)
        text = (tmp_path / "err").read_text()
        m = re.search(r"tracing pid (\d+)", text)
        assert rc == 0 and m, text
        assert text.endswith("ptbpf: run: %s (pid %s) runs on, no longer traced; ptbpf's exit "
                             "status is its own\n" % (PYTHON, m.group(1))), text
        assert pftrace.Trace(str(tmp_path / "r.pftrace")).validate() == []
    finally:
        open(go, "w").close()  # the command's 5 steps, then it exits


def test_two_processes_one_trace(tmp_path):
    a, go = start_target(workload_argv("mlp", 10), tmp_path)
    b = Proc([x.replace("{go}", go) for x in workload_argv("conv", 5)])
    b.wait_line("ready")
    try:
        out = str(tmp_path / "two.pftrace")
        tracer = Proc([PTBPF, "-p", str(a.p.pid), "-p", str(b.p.pid), "-o", out])
        tracer.wait_line("ptbpf: tracing pid %d" % a.p.pid, stream="stderr")
        tracer.wait_line("ptbpf: tracing pid %d" % b.p.pid, stream="stderr")
        open(go, "w").close()
        assert a.finish()[0] == 0 and b.finish()[0] == 0
        rc, _, err = tracer.finish(timeout=60)
        assert rc == 0, err
        t = pftrace.Trace(out)
        assert t.validate() == []
        pids = {d.process.pid for d in t.process_tracks().values()}
        assert {a.p.pid, b.p.pid} <= pids
        conv_pid_threads = [u for u, d in t.thread_tracks().items() if d.thread.pid == b.p.pid]
        assert any(s.name == "aten::convolution" and s.track in conv_pid_threads
                   for s in t.slices)
    finally:
        a.kill()
        b.kill()


def test_lost_events_are_counted_exactly(tmp_path):
    """A 4 KiB ring overflows under a burst: sent - received == lost, and sent
    equals what the workload is known to do."""
    n = 200000
    threads = []

    def count_threads(target, tracer):
        threads.append(len(os.listdir("/proc/%d/task" % target.p.pid)))
    run = run_traced(tmp_path, workload_argv("burst", n),
                     ptbpf_args=["--ring-size", "4K", "--ops", "probes", "--no-samples"],
                         before_go=count_threads)
    assert run.rc == 0, run.err
    m = re.search(r"ptbpf: BPF ring: sent (\d+) = received (\d+) \+ lost (\d+) ", run.err)
    sent, received, lost = map(int, m.groups())
    assert lost > 0
    assert sent - received == lost
    assert "MISMATCH" not in run.err
    t = run.trace
    assert t.attrs["dev.ptbpf.events_lost"] == lost
    assert t.counter_by_name("ptbpf lost events")[-1][1] == lost
    # burst: torch.ones(1) (ones, empty, fill_) + n adds, begin and end each,
    # plus one exit record per thread; nothing else runs.
    assert sent == 2 * (n + 3) + threads[0], (sent, threads)
    assert t.validate() == []


CHURN = r"""
import os, sys, threading, time, torch
nthreads, k, par = map(int, sys.argv[1:4])
torch.set_num_threads(1)
a = torch.ones(1)
add = torch.add

def ops():
    for _ in range(k):
        add(a, a)

def churn(work, count):
    for _ in range(0, count, par):
        threads = [threading.Thread(target=work) for _ in range(par)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

print("ready", os.getpid(), flush=True)
while not os.path.exists(sys.argv[4]):
    time.sleep(0.01)
churn(ops, nthreads // 2)
print("half", flush=True)
churn(ops, nthreads - nthreads // 2)
print("ops", nthreads * k, flush=True)
while not os.path.exists(sys.argv[5]):  # threads start and end while ptbpf stops
    churn(lambda: None, par)
"""


def test_thread_churn_totals_add_up(tmp_path):
    """Many short threads, each doing K ops (half of them while ptbpf is
    stopped: the rings of threads that ended are freed only once read, so
    later threads find none), and threads that go on starting and ending
    while ptbpf stops: every record BPF sent is read or counted lost, every
    op is read or counted lost, and the trace agrees."""
    nthreads, k, par = 400, 500, 8
    go, end = str(tmp_path / "go"), str(tmp_path / "end")
    out = str(tmp_path / "c.pftrace")
    target = Proc([PYTHON, "-c", CHURN, str(nthreads), str(k), str(par), go, end])
    try:
        target.wait_line("ready")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", out, "--ops", "agent"])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        target.wait_line("half", timeout=300)
        os.kill(tracer.p.pid, signal.SIGSTOP)
        target.wait_line("ops", timeout=300)
        os.kill(tracer.p.pid, signal.SIGCONT)
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
        open(end, "w").close()
        assert target.finish(timeout=60)[0] == 0
    finally:
        target.kill()
    m = re.search(r"ptbpf: BPF ring: sent (\d+) = received (\d+) \+ lost (\d+) ", err)
    sent, received, lost = map(int, m.groups())
    assert sent == received + lost and "MISMATCH" not in err, err
    o = op_ring_totals(err)
    assert o["written"] == o["read"] and o["unread"] == 0 and o["bad"] == 0, err
    assert o["ops_read"] + o["ops_lost"] == nthreads * k and o["ops_no_slot"] > 0, err
    assert o["ops_lost"] == o["ops_full"] + o["ops_no_slot"], err
    # Each thread's records stay its own, up to its last (its ring is
    # freed only once read to the end).
    assert re.search(r"cut by exit 0, .*end not seen 0, end without its begin 0,", err), err
    t = pftrace.Trace(out)
    assert t.validate() == []
    assert t.attrs["dev.ptbpf.events_sent"] == t.attrs["dev.ptbpf.events_received"] + \
        t.attrs["dev.ptbpf.events_lost"]
    adds = t.op_counts().get("aten::add", 0)
    assert adds == o["ops_read"]
    assert adds + t.attrs["dev.ptbpf.op_begins_lost_ring_full"] + \
        t.attrs["dev.ptbpf.op_begins_lost_no_free_ring"] == nthreads * k
    assert ops_lost_marked(t) == (o["full"] + o["no_slot"], o["ops_lost"])


def test_follow_children_traces_dataloader_workers(tmp_path):
    """DataLoader workers are forked after attach: --follow-children traces
    them too, each as its own process in the same trace."""
    env = dict(os.environ, WORKLOAD_NUM_WORKERS="2")
    run = run_traced(tmp_path, workload_argv("dataloader", 400), env=env,
                     ptbpf_args=["--follow-children"])
    assert run.rc == 0, run.err
    assert run.target_rc == 0
    t = run.trace
    assert t.validate() == []
    pids = {d.process.pid for d in t.process_tracks().values()}
    assert len(pids) >= 3, pids  # the trainer and its two workers
    tracks_by_pid = {}
    for u, d in t.thread_tracks().items():
        tracks_by_pid.setdefault(d.thread.pid, set()).add(u)
    worker_ops = [s for s in t.slices if s.category == "cpu_op" and
                  any(s.track in tracks_by_pid.get(p, ()) for p in pids - {t_pid(run)})]
    # Workers index the dataset and collate batches: aten::stack per batch.
    assert sum(1 for s in worker_ops if s.name == "aten::stack") >= 100


def t_pid(run):
    line = [l for l in run.err.splitlines() if l.startswith("ptbpf: tracing pid")][0]
    return int(line.split()[3])


def test_target_in_its_own_pid_namespace(tmp_path):
    """A target in a child pid namespace (a container) is traced by its host
    pid; the trace names its namespace pid too."""
    argv = ["unshare", "--pid", "--fork", "--mount-proc"] + workload_argv("mlp", 5)
    go = str(tmp_path / "go")
    launcher = Proc([a.replace("{go}", go) for a in argv])
    host_pid = None
    try:
        line, _ = launcher.wait_line("ready")
        assert line.split()[1] == "1"  # pid 1 inside its namespace
        host_pid = int(subprocess.run(["pgrep", "-f", "-P", str(launcher.p.pid), "workload.py"],
                                      capture_output=True, text=True).stdout.split()[0])
        out = str(tmp_path / "ns.pftrace")
        tracer = Proc([PTBPF, "-p", str(host_pid), "-o", out])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        assert launcher.finish()[0] == 0
        rc, _, err = tracer.finish(timeout=60)
        assert rc == 0, err
        t = pftrace.Trace(out)
        assert t.validate() == []
        procs = [d.process for d in t.process_tracks().values() if d.process.pid == host_pid]
        assert procs and "pid 1 in its namespace" in procs[0].process_name
        assert t.op_counts()["aten::addmm"] > 0
    finally:
        if host_pid:  # unshare's child outlives a killed unshare
            try:
                os.kill(host_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        launcher.kill()


def test_agent_ring_overflow_cuts_frames_at_the_gap(tmp_path):
    """ptbpf stopped (SIGSTOP) while the agent records: the thread's ring
    fills and records are lost, counted, and marked where they went
    missing, so frames whose ends may be lost are cut there (not left open
    to the end of the trace) and the loss is in the summary and the trace."""
    import signal
    import threading

    def stop_tracer(target, tracer):
        os.kill(tracer.p.pid, signal.SIGSTOP)
        threading.Timer(3.0, os.kill, (tracer.p.pid, signal.SIGCONT)).start()
    run = run_traced(tmp_path, workload_argv("mlp", 20000), ["--ops", "agent"],
                     before_go=stop_tracer)
    assert run.rc == 0, run.err
    m = re.search(r"agent op rings: written \d+ = read \d+ .*?; not written: (\d+) \(ring full "
                  r"(\d+)", run.err)
    assert m and int(m.group(1)) > 0, run.err
    assert "agent ring gap" in run.err
    t = run.trace
    assert t.attrs["dev.ptbpf.ops_lost_ring_full"] == int(m.group(2))
    ops = [s for s in t.slices if s.category == "cpu_op"]
    assert ops and not [s for s in ops if "cut_at_trace_end" in s.args]
    # ms-long steps: no op or step spans the loss.
    longest = max(s.dur for s in t.slices if s.category not in ("syscall", "fault"))
    assert longest < 100e6, longest  # (the kernel view's blocked calls may be long)
    assert "cut where records were lost" in run.err
    assert t.validate() == []


RSS_PARENT = r"""
import subprocess, sys
big = bytearray(1024 << 20)  # 1 GiB touched: the parent's RSS at fork
for i in range(0, len(big), 4096):
    big[i] = 1
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(r.stderr)
sys.exit(r.returncode)
"""


def test_loader_peak_rss_is_its_own(tmp_path):
    """ptbpf started by a process with 1 GiB resident reports its own peak
    RSS (getrusage's ru_maxrss keeps the parent's across the exec)."""
    target, go = start_target(workload_argv("mlp", 10**6), tmp_path)
    try:
        open(go, "w").close()
        r = subprocess.run([PYTHON, "-c", RSS_PARENT, PTBPF, "-p", str(target.p.pid), "-d", "1",
                            "-o", str(tmp_path / "r.pftrace")], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout
        mb = float(re.search(r"loader peak RSS ([\d.]+) MB", r.stdout).group(1))
        assert 5 < mb < 512, r.stdout
    finally:
        target.kill()
