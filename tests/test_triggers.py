# SPDX-License-Identifier: BSD-2-Clause
"""Triggered windows with the real Prometheus and Alertmanager (Debian's
`prometheus` and `prometheus-alertmanager`): two daemons on this machine
stand for two hosts (two ports, two out-dirs, each selecting its "host's"
processes with --match-env); a job's rank 0 turns slow at a known step.
The daemons serve TLS with basic auth (the shipped tests/fleet/web-config.yml,
with this test's certificate and bcrypt hashes); Prometheus scrapes them
as the shipped tests/fleet/prometheus.yml says and evaluates the shipped
rule (ptbpf-alerts.yml), Alertmanager posts its webhook payload to both
daemons (the shipped receiver, alertmanager.yml), each with this test's
addresses and files, and both capture a window of that job, with the
alert in the trace. Then a trigger storm is refused and counted, bad
requests get one line, a request without a user gets 401. Without a web
config (auth off), Alertmanager's post reaches a daemon on loopback; off
loopback, a daemon without users takes no trigger (403) unless
--insecure-capture.

Every daemon here runs with --match-env on a value unique to the test, so
it never claims another test's processes on a shared host."""
import base64
import calendar
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import warnings

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


class Tls:
    """This test's certificate (self-signed, for 127.0.0.1), users and
    passwords, and the shipped web config with them."""

    def __init__(self, tmp_path):
        d = tmp_path / "tls"
        d.mkdir()
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(d / "ptbpf.key"),
                        "-out", str(d / "ptbpf.crt"), "-days", "2", "-subj", "/CN=ptbpf-test",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                       capture_output=True)
        self.ca = str(d / "ptbpf.crt")
        self.passwords = {}
        web = open(os.path.join(FLEET, "web-config.yml")).read()
        for user in ("prometheus", "alertmanager"):
            self.passwords[user] = "pw-%s-%d" % (user, os.getpid())
            (d / (user + "-password")).write_text(self.passwords[user])
            web = web.replace("BCRYPT_HASH_OF_%s_PASSWORD" % user.upper(),
                              "'%s'" % bcrypt(self.passwords[user]))
        assert "BCRYPT_HASH" not in web
        self.web_config = str(d / "web-config.yml")
        open(self.web_config, "w").write(web)
        self.dir = d

    def context(self):
        return ssl.create_default_context(cafile=self.ca)

    def auth(self, user="alertmanager", password=None):
        cred = "%s:%s" % (user, password or self.passwords[user])
        return {"Authorization": "Basic " + base64.b64encode(cred.encode()).decode()}


def bcrypt(password):
    """A bcrypt hash (crypt(3), as htpasswd -B makes one), cost 10."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))


def post(port, body=b"", query_string="", tls=None, headers=None):
    req = urllib.request.Request("%s://127.0.0.1:%d/capture%s" % ("https" if tls else "http",
                                                                   port, query_string),
                                 data=body, method="POST",
                                 headers=headers if headers is not None else
                                 tls.auth() if tls else {})
    try:
        with urllib.request.urlopen(req, timeout=10, context=tls and tls.context()) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port, line_prefix, tls=None):
    req = urllib.request.Request("%s://127.0.0.1:%d/metrics" % ("https" if tls else "http", port),
                                 headers=tls.auth("prometheus") if tls else {})
    with urllib.request.urlopen(req, timeout=10, context=tls and tls.context()) as r:
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


def without_blocks(yml, *keys):
    """yml without the blocks that start with one of keys (their more
    indented lines with them)."""
    out, cut = [], None
    for line in yml.splitlines(True):
        indent = len(line) - len(line.lstrip())
        if cut is not None and indent > cut:
            continue
        cut = indent if line.lstrip().startswith(keys) else None
        if cut is None:
            out.append(line)
    return "".join(out)


def config_files(tmp_path, am_port, prom_port, ports, tls=None):
    """The shipped Alertmanager and Prometheus configurations with this
    test's addresses, intervals and files (tls None: plain HTTP, no users)."""
    am = open(os.path.join(FLEET, "alertmanager.yml")).read()
    am = am.replace("https://host-a:9464", "https://127.0.0.1:%d" % ports[0])
    am = am.replace("https://host-b:9464", "https://127.0.0.1:%d" % ports[1])
    am = am.replace("group_wait: 5s", "group_wait: 1s")
    assert am.count("127.0.0.1") == 2 and "group_wait: 1s" in am
    prom = open(os.path.join(FLEET, "prometheus.yml")).read()
    prom = prom.replace("host-a:9464", "127.0.0.1:%d" % ports[0])
    prom = prom.replace("host-b:9464", "127.0.0.1:%d" % ports[1])
    prom = prom.replace("alertmanager:9093", "127.0.0.1:%d" % am_port)
    prom = prom.replace("15s", "1s").replace("[ptbpf-alerts.yml]", "['%s']" % os.path.join(
        FLEET, "ptbpf-alerts.yml"))
    assert prom.count("127.0.0.1") == 3
    if tls:
        for user, conf in (("alertmanager", "am"), ("prometheus", "prom")):
            text = am if conf == "am" else prom
            text = text.replace("/etc/%s/ptbpf-ca.crt" % user, tls.ca)
            text = text.replace("/etc/%s/ptbpf-password" % user,
                                str(tls.dir / (user + "-password")))
            am, prom = (text, prom) if conf == "am" else (am, text)
        assert "/etc/" not in am + prom
    else:  # auth off: plain HTTP, no users
        am = without_blocks(am.replace("https://", "http://"), "http_config:")
        prom = without_blocks(prom.replace("scheme: https", "scheme: http"), "tls_config:",
                              "basic_auth:")
        assert "password" not in am + prom
    (tmp_path / "am.yml").write_text(am)
    (tmp_path / "prom.yml").write_text(prom)


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


def start_daemon(out_dir, port, host, extra, tls=None):
    d = Proc([PTBPF, "daemon", "--out-dir", str(out_dir), "--window", "2s", "--budget", "0",
              "--ops", "agent", "--match-env", "PTBPF_TEST_HOST=" + host,
              "--metrics-listen", "127.0.0.1:%d" % port] + extra +
             (["--web-config", tls.web_config] if tls else []))
    d.wait_line("ptbpf: daemon: a 2s window", stream="stderr", timeout=60)
    return d


def stop_all(procs, servers):
    for p in procs:
        p.kill()
    for srv in servers:
        srv.kill()
        srv.wait()


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
    tls = Tls(tmp_path)
    config_files(tmp_path, am_port, prom_port, ports, tls)
    procs, servers = [], []
    try:
        rank0 = start_rank(tmp_path, 0, host_a, run_id, slow)
        rank1 = start_rank(tmp_path, 1, host_b, run_id)
        other = start_rank(tmp_path, 0, host_a, "other-" + tag)  # another job on host a
        procs += [rank0, rank1, other]
        # Both publish the step time from their always-on step signal; host
        # a also samples every 8 s, host b opens windows on triggers only
        # (--align: the next at the hour).
        da = start_daemon(out_a, ports[0], host_a, ["--every", "8s", "--min-gap", "60s"], tls)
        procs.append(da)
        db = start_daemon(out_b, ports[1], host_b, ["--every", "1h", "--align",
                                                    "--min-gap", "60s"], tls)
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
            code, text = post(ports[1], b'{"reason": "storm", "job": "%s"}' % run_id.encode(),
                              tls=tls)
            assert code == 429 and "--min-gap is 60s" in text, (code, text)
        assert metric(ports[1], 'ptbpf_triggers_total{source="http",outcome="rate_limited"}',
                      tls) == 20
        for body, qs, msg in ((b"{", "", "the body is not JSON"), (b'{"alerts": {}}', "",
                              '"alerts" is not an array'), (b"", "?when=now",
                              "unknown parameter 'when'")):
            code, text = post(ports[1], body, qs, tls)
            assert code == 400 and msg in text and text.count("\n") == 1, (code, text)
        # No user, or a wrong password: 401, one line, counted.
        for headers in ({}, tls.auth("alertmanager", "wrong")):
            code, text = post(ports[1], b"", "", tls, headers)
            assert code == 401 and text.count("\n") == 1, (code, text)
        assert metric(ports[1], 'ptbpf_http_requests_total{path="/capture",code="401"}',
                      tls) == 2
        # The triggered windows end (2 s once attached; the attach takes
        # longer on a busy machine): each renames its .partial file.
        deadline = time.time() + 60
        while time.time() < deadline and not (triggered_starts(out_a) and
                                              triggered_starts(out_b)):
            time.sleep(0.5)
        # A window counts once it has traced (as it ends, just after its rename).
        key = 'ptbpf_triggered_windows_total{source="alertmanager"}'
        deadline = time.time() + 10
        while time.time() < deadline and metric(ports[1], key, tls) != 1:
            time.sleep(0.2)
        assert metric(ports[1], key, tls) == 1
        for d in (da, db):
            d.p.send_signal(signal.SIGINT)
            rc, _, err = d.finish(timeout=60)
            assert rc == 0, err
        err_b = seen_b + err
        assert err_b.count("refused: the last triggered window started") == 1, err_b
    finally:
        stop_all(procs, servers)
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


def test_auth_off_alertmanager_reaches_a_daemon_on_loopback(tmp_path):
    """Without a web config (auth off): the shipped configurations made
    plain; Prometheus scrapes the daemon, and an alert pushed to
    Alertmanager's API (as Prometheus sends one) reaches the daemon on
    loopback and opens a window of the job it names."""
    require(PTBPF)
    require_server(AM)
    require_server(PROM)
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    run_id, host = "off-" + tag, "h-" + tag
    ports, am_port, prom_port = [free_port(), free_port()], free_port(), free_port()
    config_files(tmp_path, am_port, prom_port, ports)
    procs, servers = [], []
    try:
        procs.append(start_rank(tmp_path, 0, host, run_id))
        d = start_daemon(tmp_path / "out", ports[0], host, ["--every", "1h", "--align"])
        procs.append(d)
        servers += start_servers(tmp_path, am_port, prom_port)
        deadline, up = time.time() + 60, []
        while time.time() < deadline and not up:
            try:
                up = query(prom_port, 'up{instance="127.0.0.1:%d"} == 1' % ports[0])
            except OSError:
                pass
            time.sleep(1)
        assert up, "Prometheus does not scrape the plain port"
        alert = json.dumps([{"labels": {"alertname": "PtbpfSlowStep", "run_id": run_id},
                             "annotations": {"summary": "auth off"}}]).encode()
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(urllib.request.Request(
                    "http://127.0.0.1:%d/api/v2/alerts" % am_port, data=alert, method="POST",
                    headers={"Content-Type": "application/json"}), timeout=10)
                break
            except OSError:
                time.sleep(0.5)
        seen = wait_stderr(d, "(alertmanager: PtbpfSlowStep: auth off)", timeout=60)
        assert "refused" not in seen, seen
    finally:
        stop_all(procs, servers)


def in_netns(cmd):
    """argv that runs cmd in a network namespace of its own whose loopback
    also has 10.44.0.1, an address that is not a loopback one."""
    return ["unshare", "-n", "sh", "-c", "ip link set lo up && ip addr add 10.44.0.1/32 dev lo "
            "&& exec \"$0\" \"$@\""] + cmd


def test_off_loopback_no_trigger_without_users(tmp_path):
    """A daemon listening off loopback without users (no --web-config) says
    so, serves /metrics to anyone, and refuses POST /capture with 403
    (counted), unless --insecure-capture."""
    require(PTBPF)
    client = ("import urllib.request, urllib.error\n"
              "for m, p in (('POST', '/capture'), ('GET', '/metrics')):\n"
              "    r = urllib.request.Request('http://10.44.0.1:9464' + p, data=b'' if m == "
              "'POST' else None, method=m)\n"
              "    try:\n"
              "        print(urllib.request.urlopen(r, timeout=10).status)\n"
              "    except urllib.error.HTTPError as e:\n"
              "        print(e.code, e.read().decode().strip())\n")
    for extra, want in (([], "403"), (["--insecure-capture"], "404")):
        d = Proc(in_netns([PTBPF, "daemon", "--out-dir", str(tmp_path / "out"), "--every", "1h",
                           "--align", "--match-env", "PTBPF_NETNS_TEST=%d" % os.getpid(),
                           "--metrics-listen", "10.44.0.1:9464"] + extra))
        try:
            _, said = d.wait_line("ptbpf: daemon: a 5s window", stream="stderr", timeout=60)
            assert ("POST /capture answers loopback clients only" in said) == (not extra), said
            r = subprocess.run(["nsenter", "-t", str(d.p.pid), "-n", PYTHON, "-c", client],
                               capture_output=True, text=True, timeout=60)
            got = r.stdout.splitlines()
            assert len(got) == 2 and got[0].startswith(want) and got[1] == "200", r
            if not extra:
                assert "takes triggers from loopback clients only" in got[0], got
        finally:
            d.kill()
