# SPDX-License-Identifier: BSD-2-Clause
"""Triggered windows with the real Prometheus and Alertmanager (Debian's
`prometheus` and `prometheus-alertmanager`): two daemons on this machine
stand for two hosts (two ports, two out-dirs, each selecting its "host's"
processes with --match-env); a job's rank 0 turns slow at a known step.
Prometheus evaluates the shipped rule (tests/fleet/ptbpf-alerts.yml),
Alertmanager posts its webhook payload to both daemons (the shipped
receiver, tests/fleet/alertmanager.yml, with this test's addresses), and
both capture a window of that job, with the alert in the trace. Then a
trigger storm is refused and counted, and bad requests get one line.

Every daemon here runs with --match-env on a value unique to the test, so
it never claims another test's processes on a shared host."""
import calendar
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import PTBPF, PYTHON, ROOT, Proc, pftrace, require
from test_daemon import free_port, query

FLEET = os.path.join(ROOT, "tests", "fleet")
SLOWSTEP = os.path.join(ROOT, "tests", "workloads", "slowstep.py")
AM = "/usr/bin/prometheus-alertmanager"
PROM = "/usr/bin/prometheus"


def require_server(path):
    """Prometheus and Alertmanager are part of what CI installs: a missing
    one fails the test, it does not skip it."""
    if not os.path.exists(path):
        pytest.fail("%s is missing: tests/install-deps.sh installs it" % path)


def post(port, body=b"", query_string=""):
    req = urllib.request.Request("http://127.0.0.1:%d/capture%s" % (port, query_string),
                                 data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port, line_prefix):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(line_prefix):
                return float(line.rsplit(" ", 1)[1])
    return None


def wait_stderr(proc, needle, timeout):
    """Reads proc's stderr lines until one contains needle; all read so far."""
    deadline, seen = time.time() + timeout, ""
    while time.time() < deadline:
        try:
            line, _ = proc.wait_line("", stream="stderr", timeout=deadline - time.time())
        except AssertionError:
            break
        seen += line
        if needle in line:
            return seen
    raise AssertionError("no stderr line with %r within %ss; got:\n%s" % (needle, timeout, seen))


def start_rank(tmp_path, rank, host, run_id, slow_file=None):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", TORCHELASTIC_RUN_ID=run_id,
               PTBPF_TEST_HOST=host)
    argv = [PYTHON, SLOWSTEP] + (["--slow-file", str(slow_file)] if slow_file else [])
    p = Proc(argv, env=env)
    p.wait_line("ready")
    return p


def config_files(tmp_path, am_port, prom_port, ports):
    am = open(os.path.join(FLEET, "alertmanager.yml")).read()
    am = am.replace("http://host-a:9464", "http://127.0.0.1:%d" % ports[0])
    am = am.replace("http://host-b:9464", "http://127.0.0.1:%d" % ports[1])
    am = am.replace("group_wait: 5s", "group_wait: 1s")
    assert am.count("127.0.0.1") == 2 and "group_wait: 1s" in am
    (tmp_path / "am.yml").write_text(am)
    (tmp_path / "prom.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: ['%s']\n"
        "alerting:\n  alertmanagers:\n    - static_configs: [{targets: ['127.0.0.1:%d']}]\n"
        "scrape_configs:\n  - job_name: ptbpf\n"
        "    static_configs: [{targets: ['127.0.0.1:%d', '127.0.0.1:%d']}]\n"
        % (os.path.join(FLEET, "ptbpf-alerts.yml"), am_port, ports[0], ports[1]))


def start_servers(tmp_path, am_port, prom_port):
    am = subprocess.Popen([AM, "--config.file=%s" % (tmp_path / "am.yml"),
                           "--storage.path=%s" % (tmp_path / "am-data"),
                           "--web.listen-address=127.0.0.1:%d" % am_port,
                           "--cluster.listen-address="],
                          stdout=subprocess.DEVNULL, stderr=open(tmp_path / "am.log", "w"))
    prom = subprocess.Popen([PROM, "--config.file=%s" % (tmp_path / "prom.yml"),
                             "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % prom_port],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prom.log", "w"))
    return am, prom


def start_daemon(out_dir, port, host, extra):
    d = Proc([PTBPF, "daemon", "--out-dir", str(out_dir), "--window", "2s", "--budget", "0",
              "--ops", "agent", "--match-env", "PTBPF_TEST_HOST=" + host,
              "--metrics-listen", "127.0.0.1:%d" % port] + extra)
    d.wait_line("ptbpf: daemon: a 2s window", stream="stderr", timeout=60)
    return d


def triggered_traces(out_dir):
    found = []
    for f in sorted(os.listdir(out_dir)):
        if f.endswith("-triggered.pftrace"):
            t = pftrace.Trace(str(out_dir / f))
            assert t.validate() == [], f
            found.append(t)
    return found


def triggered_starts(out_dir):
    """The UTC second each triggered window started (from its file name)."""
    return [calendar.timegm(time.strptime(f.split("-")[2][:16], "%Y%m%dT%H%M%SZ"))
            for f in sorted(os.listdir(out_dir)) if f.endswith("-triggered.pftrace")]


def pids_of(t):
    return {d.process.pid for d in t.process_tracks().values()}


def step_gaps(t, pid):
    starts = sorted(s.ts for s in t.slices if s.name.startswith("Optimizer.step")
                    and t.pid_of(s.track) == pid)
    return [(b - a) / 1e9 for a, b in zip(starts, starts[1:])]


def test_alertmanager_triggers_windows_on_both_hosts(tmp_path):
    require(PTBPF)
    require_server(AM)
    require_server(PROM)
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    run_id, host_a, host_b = "trig-" + tag, "a-" + tag, "b-" + tag
    ports = [free_port(), free_port()]
    am_port, prom_port = free_port(), free_port()
    out_a, out_b = tmp_path / "host-a", tmp_path / "host-b"
    slow = tmp_path / "slow"
    config_files(tmp_path, am_port, prom_port, ports)
    procs, servers = [], []
    try:
        rank0 = start_rank(tmp_path, 0, host_a, run_id, slow)
        rank1 = start_rank(tmp_path, 1, host_b, run_id)
        other = start_rank(tmp_path, 0, host_a, "other-" + tag)  # another job on host a
        procs += [rank0, rank1, other]
        # Both publish the step time from their always-on step signal; host
        # a also samples every 8 s, host b opens windows on triggers only
        # (--align: the next at the hour).
        da = start_daemon(out_a, ports[0], host_a, ["--every", "8s", "--min-gap", "60s"])
        procs.append(da)
        db = start_daemon(out_b, ports[1], host_b, ["--every", "1h", "--align",
                                                    "--min-gap", "60s"])
        procs.append(db)
        servers += start_servers(tmp_path, am_port, prom_port)
        # The rule compares with the median of the rank's history: ten
        # scrapes of normal steps (the step signal has them at once).
        expr = 'count_over_time(ptbpf_last_step_seconds{run_id="%s",rank="0"}[5m]) >= 10' \
            % run_id
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if query(prom_port, expr):
                    break
            except OSError:
                pass
            time.sleep(1)
        else:
            raise AssertionError("Prometheus has no step time of rank 0")
        slow.write_text("")
        line, _ = rank0.wait_line("slow from step", timeout=30)
        seen_a = wait_stderr(da, "(alertmanager: PtbpfSlowStep", timeout=90)
        seen_b = wait_stderr(db, "(alertmanager: PtbpfSlowStep", timeout=30)
        assert "refused" not in seen_b, seen_b
        # A storm: refused by --min-gap, counted, said once on stderr.
        for _ in range(20):
            code, text = post(ports[1], b'{"reason": "storm", "job": "%s"}' % run_id.encode())
            assert code == 429 and "--min-gap is 60s" in text, (code, text)
        assert metric(ports[1], 'ptbpf_triggers_total{source="http",outcome="rate_limited"}') \
            == 20
        assert metric(ports[1], 'ptbpf_triggered_windows_total{source="alertmanager"}') == 1
        for body, qs, msg in ((b"{", "", "not one JSON value"), (b'{"alerts": {}}', "",
                              '"alerts" is not an array'), (b"", "?when=now",
                              "unknown parameter 'when'")):
            code, text = post(ports[1], body, qs)
            assert code == 400 and msg in text and text.count("\n") == 1, (code, text)
        # The triggered windows end (2 s once attached; the attach takes
        # longer on a busy machine): each renames its .partial file.
        deadline = time.time() + 60
        while time.time() < deadline and not (triggered_starts(out_a) and
                                              triggered_starts(out_b)):
            time.sleep(0.5)
        for d in (da, db):
            d.p.send_signal(signal.SIGINT)
            rc, _, err = d.finish(timeout=60)
            assert rc == 0, err
        err_b = seen_b + err
        assert err_b.count("refused: the last triggered window started") == 1, err_b
    finally:
        for p in procs:
            p.kill()
        for s in servers:
            s.kill()
            s.wait()
    ta, tb = triggered_traces(out_a), triggered_traces(out_b)
    assert ta and len(tb) == 1, (os.listdir(out_a), os.listdir(out_b))
    # One alert, both hosts at once (host a's may wait for its open
    # scheduled window to end: 2 s plus its attach, longer on a busy VM).
    sa, sb = triggered_starts(out_a), triggered_starts(out_b)
    assert abs(sa[0] - sb[0]) <= 10, (os.listdir(out_a), os.listdir(out_b))
    for t in ta + tb:
        assert t.attrs.get("dev.ptbpf.trigger") == "alertmanager", t.attrs
        reason = t.attrs.get("dev.ptbpf.trigger_reason", "")
        assert reason.startswith("PtbpfSlowStep: a step of job %s took" % run_id), reason
        marks = [i for i in t.instants if i.name == "trigger"]
        assert len(marks) == 1 and marks[0].args.get("reason") == reason, marks
        assert marks[0].args.get("source") == "alertmanager", marks
    # The alert's run_id selects the job: rank 0 (not the other job's
    # process) on host a, rank 1 on host b; both see their steps.
    assert pids_of(ta[0]) == {rank0.p.pid}, pids_of(ta[0])
    assert pids_of(tb[0]) == {rank1.p.pid}, pids_of(tb[0])
    gaps_a, gaps_b = step_gaps(ta[0], rank0.p.pid), step_gaps(tb[0], rank1.p.pid)
    assert gaps_a and min(gaps_a) >= 0.3, (line, gaps_a)
    assert gaps_b and max(gaps_b) < 0.3, gaps_b
    # --match-env: no window on host a traced host b's process.
    for f in os.listdir(out_a):
        if f.endswith(".pftrace"):
            assert rank1.p.pid not in pids_of(pftrace.Trace(str(out_a / f))), f
