# SPDX-License-Identifier: BSD-2-Clause
"""The daemon's always-on layer (issue 22): between windows each selected
process's agent keeps one USER_SCOPE RecordFunction callback whose counters
the daemon publishes (a step-time histogram, steps, DataLoader and optimizer
time); a slow step opens a window (--slow-step) held to --min-gap; SIGTERM
leaves no probe and unloads the agents; a process that exits is dropped;
the job's own torch.profiler keeps working. Workloads: steploop.py."""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

from conftest import PTBPF, PYTHON, ROOT, Proc, links_after_exit, pftrace, require

STEPLOOP = os.path.join(ROOT, "tests", "workloads", "steploop.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def page(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        return r.read().decode()


def values(text, name, pid):
    """{le or "": value} of one process's samples of metric name."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'%s\{pid="%d",[^}]*?(?:,le="([^"]+)")?\} (\S+)$' % (name, pid), line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


def start_workload(tmp_path, tag, name, args):
    env = dict(os.environ, PTBPF_STEP_TEST=tag)
    p = Proc([PYTHON, STEPLOOP, "--go", str(tmp_path / "go"), "--linger", "120"] + args,
             env=env)
    p.wait_line("ready")
    return p


def start_daemon(tmp_path, tag, port, extra):
    d = Proc([PTBPF, "daemon", "--out-dir", str(tmp_path / "out"), "--every", "1h", "--align",
              "--budget", "0", "--match-env", "PTBPF_STEP_TEST=" + tag,
              "--metrics-listen", "127.0.0.1:%d" % port] + extra)
    d.wait_line("ptbpf: daemon: a ", stream="stderr", timeout=60)
    return d


def wait_signal_on(daemon, pids, timeout=60):
    seen, deadline = "", time.time() + timeout
    while time.time() < deadline and not all(
            "pid %d (python3): step signal on" % p in seen for p in pids):
        line, _ = daemon.wait_line("ptbpf: daemon: ", stream="stderr", timeout=timeout)
        seen += line
    return seen


def done(work):
    line, _ = work.wait_line("done ", timeout=120)
    return json.loads(line[5:])


def test_step_signal_counts_what_the_job_measures(tmp_path):
    require(PTBPF)
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    port = free_port()
    prof = start_workload(tmp_path, tag, "prof", ["--mode", "profiler", "--steps", "150"])
    optim = start_workload(tmp_path, tag, "optim", ["--mode", "optimizer", "--steps", "150"])
    daemon = None
    try:
        daemon = start_daemon(tmp_path, tag, port, [])
        wait_signal_on(daemon, [prof.p.pid, optim.p.pid])
        (tmp_path / "go").write_text("")
        want = {prof.p.pid: done(prof), optim.p.pid: done(optim)}
        deadline = time.time() + 10
        while time.time() < deadline:
            text = page(port)
            if all(values(text, "ptbpf_steps_total", p).get("") == w["steps"]
                   for p, w in want.items()):
                break
            time.sleep(0.3)
        for pid, w in want.items():
            hist = values(text, "ptbpf_step_seconds_bucket", pid)
            count = values(text, "ptbpf_step_seconds_count", pid)[""]
            total = values(text, "ptbpf_step_seconds_sum", pid)[""]
            assert count == w["steps"] == values(text, "ptbpf_steps_total", pid)[""], (w, text)
            les = sorted(hist, key=float)
            assert hist["+Inf"] == count and les[-1] == "+Inf" and len(les) == 16, hist
            assert all(hist[a] <= hist[b] for a, b in zip(les, les[1:])), hist
            # 20 ms steps: most in the bucket up to 25 ms.
            assert hist["0.025"] - hist["0.01"] >= 0.8 * count, hist
            assert abs(total - w["sum_s"]) <= 0.05 * w["sum_s"], (total, w)
            # The region (ptbpf's) lies inside next() (the job's loader_s)
            # and holds _next_data (loader_inner_s); one per step.
            loader = values(text, "ptbpf_dataloader_wait_seconds_total", pid)[""]
            assert 0.98 * w["loader_inner_s"] <= loader <= 1.02 * w["loader_s"], (loader, w)
            assert values(text, "ptbpf_dataloader_waits_total", pid)[""] == 150, text
            optim_s = values(text, "ptbpf_optimizer_seconds_total", pid)[""]
            assert 0 < optim_s <= w["optim_s"] * 1.05, (optim_s, w)
            assert values(text, "ptbpf_optimizer_steps_total", pid)[""] == 150, text
        # ProfilerStep#0..#150 (the last from the last step() to the stop);
        # the job's own profiler recorded its active steps.
        assert want[prof.p.pid]["steps"] == 151 and want[prof.p.pid]["profiler_events"][0] > 100
        assert want[optim.p.pid]["steps"] == 149  # between 150 optimizer steps
        check = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        # A process that exits is dropped, its series with it.
        optim.kill()
        daemon.wait_line("ptbpf: daemon: pid %d (python3): gone" % optim.p.pid,
                         stream="stderr", timeout=10)
        assert not values(page(port), "ptbpf_step_seconds_count", optim.p.pid)
        daemon.p.send_signal(signal.SIGTERM)
        rc, _, err = daemon.finish(timeout=60)
        assert rc == 0, err
        assert "pid %d: step signal off, agent unloaded" % prof.p.pid in err, err
        assert links_after_exit([daemon.p.pid]) == []
        with open("/proc/%d/maps" % prof.p.pid) as f:
            assert "libptbpf-agent.so" not in f.read()
        assert prof.p.poll() is None
    finally:
        for p in (daemon, prof, optim):
            if p:
                p.kill()


def test_slow_step_opens_one_window_each_held_to_min_gap(tmp_path):
    """Slow steps 100 and 700 (0-based: the step signal's 101st and 701st)
    each open a window while they run, whose trace holds their work and the
    5 whole steps after (--steps 5); 702, slow too but within --min-gap of
    700's window, is refused and counted.
    Steps take 20 ms; a slow one 4 s, over 10x the median; 100 and 700 are
    16 s apart, 700 and 702 4 s."""
    require(PTBPF)
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    port = free_port()
    work = start_workload(tmp_path, tag, "slow", [
        "--mode", "manual", "--steps", "720", "--slow", "100", "--slow", "700",
        "--slow", "702", "--slow-s", "4"])
    daemon = None
    try:
        daemon = start_daemon(tmp_path, tag, port, ["--window", "9s", "--min-gap", "12s",
                                                    "--slow-step", "10,20", "--steps", "5"])
        wait_signal_on(daemon, [work.p.pid])
        (tmp_path / "go").write_text("")
        w = done(work)
        assert w["steps"] == 720 and w["max_s"] >= 4
        # 700's window ends 5 steps after it (within a second or so: the
        # reader's bookkeeping runs once a second, and an agent that idles
        # answers within 250 ms), and 702 is judged at the next tick after.
        deadline = time.time() + 20
        while True:
            text = page(port)
            if "ptbpf_window_open 0" in text and 'outcome="rate_limited"} 1' in text or \
               time.time() > deadline:
                break
            time.sleep(0.2)
        daemon.p.send_signal(signal.SIGTERM)
        rc, _, err = daemon.finish(timeout=60)
        assert rc == 0, err
    finally:
        for p in (daemon, work):
            if p:
                p.kill()
    assert 'ptbpf_triggers_total{source="slow_step",outcome="accepted"} 2' in text, text
    assert 'ptbpf_triggers_total{source="slow_step",outcome="rate_limited"} 1' in text, text
    assert 'ptbpf_triggered_windows_total{source="slow_step"} 2' in text, text
    assert "trigger 'slow step 703: " in err and "--min-gap is 12s" in err, err
    out = tmp_path / "out"
    traces = sorted(f for f in os.listdir(out) if f.endswith("-triggered.pftrace"))
    # Nothing else but the hourly window --every 1h --align opens where
    # the test runs across the top of an hour (ptbpf-vm-...T220002Z once).
    others = [f for f in os.listdir(out) if f not in traces]
    assert len(traces) == 2 and all(re.search(r"T\d\d00\d\dZ\.pftrace$", f) for f in others), \
        os.listdir(out)
    for f, step in zip(traces, (100, 700)):
        t = pftrace.Trace(str(out / f))
        assert t.validate() == [], f
        assert t.attrs.get("dev.ptbpf.trigger") == "slow_step", t.attrs
        reason = t.attrs.get("dev.ptbpf.trigger_reason", "")
        assert re.match(r"slow step %d: \d+\.\d ms so far vs median \d+\.\d ms \(pid %d\)$"
                        % (step + 1, work.p.pid), reason), reason
        assert [i for i in t.instants if i.name == "trigger"], f
        names = {s.name for s in t.slices}
        assert "slow_work#%d" % step in names, (f, sorted(names)[:20])
        # --steps 5: the window ends once the 5 steps after the slow one
        # (under way when tracing started) are in, before --window.
        assert t.attrs.get("dev.ptbpf.window_end") == \
            "5 whole steps of pid %d captured (--steps)" % work.p.pid, t.attrs
        for k in range(step + 1, step + 6):
            assert "ProfilerStep#%d" % k in names, (f, k)
