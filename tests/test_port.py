# SPDX-License-Identifier: BSD-2-Clause
"""The daemon's port holds against any client (issue 44). A daemon on
127.0.0.1 over a job that counts its own rounds; hostile clients come from
other loopback addresses (127.0.0.2, .3), as a client on another host
would, with bounded loops: 3,000 idle connections, slow headers, 10 MB
headers, 1 MiB bodies, 600 malformed or refused requests, triggers that
match nothing, the daemon out of descriptors. In each case the daemon
stays up, /metrics (scraped from 127.0.0.1 all along) answers within 1 s,
the daemon takes under 5% of a CPU (so the job's rate drops by no more
than 5% on its account), the daemon's stderr grows by at
most 100 lines a minute, and every refusal is counted; its RSS is back
within 10% of its baseline once the clients have left.

Every daemon here runs with --match-env on a value unique to the test."""
import base64
import os
import re
import resource
import signal
import socket
import threading
import time
import urllib.request

import pytest

from conftest import PTBPF, PYTHON, Proc, require
from test_daemon import free_port
from test_triggers import bcrypt

JOB = r"""
import sys, time, torch
torch.set_num_threads(1)
a = torch.ones(32, 32)
print("ready", flush=True)
n, t = 0, time.time()
while True:
    for _ in range(20):
        a = torch.mm(a, a).clamp_(-1, 1)
    n += 1
    if time.time() - t >= 0.2:
        t = time.time()
        print("%.3f %d" % (t, n), flush=True)
"""


class Job:
    """The job: its rounds counted, read by a thread."""

    def __init__(self, tag):
        env = dict(os.environ, PTBPF_PORT_TEST=tag, TORCHELASTIC_RUN_ID="port-" + tag,
                   RANK="0")
        self.p = Proc([PYTHON, "-c", JOB], env=env)
        self.p.wait_line("ready")
        self.samples = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.p.p.stdout.readline, b""):
            t, n = line.split()
            self.samples.append((float(t), int(n)))

    def rate(self, t0, t1):
        """Rounds a second from t0 to t1."""
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        assert len(s) >= 4, (t0, t1, self.samples[-3:])
        return (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0])


class Daemon:
    def __init__(self, tmp_path, tag, extra=(), preexec=None):
        self.port = free_port()
        self.p = Proc([PTBPF, "daemon", "--out-dir", str(tmp_path / "out"), "--every", "1h",
                       "--align", "--match-env", "PTBPF_PORT_TEST=" + tag,
                       "--metrics-listen", "127.0.0.1:%d" % self.port] + list(extra),
                      preexec_fn=preexec)
        self.lines = []
        line, _ = self.p.wait_line("ptbpf: daemon: step signal on", stream="stderr", timeout=60)
        self.lines.append(line)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.p.p.stderr.readline, b""):
            self.lines.append(line.decode(errors="replace"))

    def metrics(self, timeout=5):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                    timeout=timeout) as r:
            out = {}
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    k, v = line.rsplit(" ", 1)
                    out[k] = float(v)
            return out

    def rss_kb(self):
        with open("/proc/%d/status" % self.p.p.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def cpu_s(self):
        with open("/proc/%d/stat" % self.p.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Scraper:
    """GET /metrics from 127.0.0.1 every 0.2 s while an attack runs."""

    def __init__(self, d):
        self.d, self.worst, self.failed, self.stop = d, 0.0, [], False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            t = time.time()
            try:
                self.d.metrics(timeout=5)
            except OSError as e:
                self.failed.append(repr(e))
            self.worst = max(self.worst, time.time() - t)
            time.sleep(0.2)

    def end(self):
        self.stop = True
        self.t.join()
        assert not self.failed and self.worst < 1.0, (self.worst, self.failed[:3])


def delta(after, before, prefix):
    return {k: after[k] - before.get(k, 0) for k in after if k.startswith(prefix) and
            after[k] != before.get(k, 0)}


def connect(src, port):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def exchange(src, port, data, body=b""):
    """Sends data (a request) and reads the answer (to its Content-Length,
    or to the end: a client that sends on after it is read for 2 s more)."""
    s = connect(src, port)
    try:
        s.sendall(data + body)
    except OSError:  # refused before the body: the answer is there
        pass
    got = b""
    try:
        while True:
            head, sep, rest = got.partition(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", head)
            if sep and m and (len(rest) >= int(m.group(1)) or data.startswith(b"HEAD")):
                break
            b = s.recv(65536)
            if not b:
                break
            got += b
    except ConnectionResetError:
        pass
    s.close()
    return got


def paced(x):
    """Between two hostile requests, a pause: the attack is bounded, so
    that what the job loses is the daemon's doing, not the attacker's."""
    time.sleep(0.05)
    return x


def status(answer):
    return int(answer.split(None, 2)[1])


def one_line(answer):
    """(status, body) of an answer whose body is one line, no HTML."""
    head, _, body = answer.partition(b"\r\n\r\n")
    code = int(head.split()[1])
    assert body.count(b"\n") <= 1 and b"<" not in body, answer[:300]
    return code, body.decode()


def attack_idle_and_slow(d):
    """3,000 connections from 127.0.0.2 opened at a bounded pace and held
    (past the 10 s deadline), beside 16 that send their head a byte every
    0.5 s from 127.0.0.3: each refused or closed, and counted."""
    idle, slow, dead = [], [], 0
    for _ in range(16):
        s = connect("127.0.0.3", d.port)
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: ")
        slow.append(s)
    for i in range(3000):
        try:
            idle.append(connect("127.0.0.2", d.port))
        except OSError:
            dead += 1
        if i % 100 == 99:
            time.sleep(0.05)
    end = time.time() + 11
    while time.time() < end:
        for s in slow:
            try:
                s.send(b"a")
            except OSError:
                pass
        time.sleep(0.5)
    for s in idle + slow:
        s.close()
    return dead


def test_hostile_clients(tmp_path):
    require(PTBPF)
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(
        resource.RLIMIT_NOFILE)[1]))
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    job = Job(tag)
    d = Daemon(tmp_path, tag)
    try:
        d.metrics()
        time.sleep(3)
        rss0 = d.rss_kb()
        phases = {}

        def phase(name, attack):
            t0 = time.time()
            time.sleep(2)
            lines, cpu, t = len(d.lines), d.cpu_s(), time.time()
            base = job.rate(t0, t)
            before = d.metrics()
            sc = Scraper(d)
            out = attack()
            time.sleep(1)  # and its aftermath
            sc.end()
            took = time.time() - t
            phases[name] = dict(rate=job.rate(t, time.time()) / base, worst_scrape=sc.worst,
                                lines=len(d.lines) - lines, cpu=d.cpu_s() - cpu, s=took)
            assert d.p.p.poll() is None, "the daemon died in %s" % name
            # The daemon takes under 5% of a CPU: the job's rate drops by 5%
            # at most on its account. The job's own rate is no test of that
            # here: on this VM it moves by 25% with no daemon at all (other
            # processes, the host); it only must not collapse.
            assert phases[name]["cpu"] < 0.05 * took, phases
            assert phases[name]["rate"] >= 0.7, phases
            assert phases[name]["lines"] <= max(2, 100 * took / 60), d.lines[-10:]
            return out, delta(d.metrics(), before, "ptbpf_http_")

        dead, got = phase("idle and slow connections", lambda: attack_idle_and_slow(d))
        conns = {k[len('ptbpf_http_connections_total{outcome="'):-2]: v for k, v in got.items()
                 if k.startswith("ptbpf_http_connections_total")}
        assert conns.get("refused_too_many_from_address", 0) == 3000 - dead - 16, conns
        assert conns.get("timed_out", 0) == 32, conns
        _, got = phase("10 MB headers", lambda: [paced(one_line(exchange(
            "127.0.0.2", d.port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (10 << 20))))
            for _ in range(60)])
        assert got.get('ptbpf_http_requests_total{path="other",code="431"}') == 60, got
        answers, got = phase("1 MiB bodies", lambda: [paced(one_line(exchange(
            "127.0.0.2", d.port, b"POST /capture HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
            % (1 << 20), b"x" * (1 << 20)))) for _ in range(15)])
        assert {a[0] for a in answers} == {400} and "the body is not JSON" in answers[0][1]
        assert got.get('ptbpf_http_requests_total{path="/capture",code="400"}') == 15, got
        bad_requests(d, phase)
        # Once the clients have left, the daemon is as it was.
        time.sleep(1)
        assert d.metrics()["ptbpf_http_connections_open"] == 1
        rss = d.rss_kb()
        print("port phases:", phases, "RSS %d -> %d kB" % (rss0, rss))
        assert rss <= rss0 * 1.1, (rss0, rss)
        real_trigger(d, tag)
        d.p.p.send_signal(signal.SIGINT)
        assert d.p.p.wait(timeout=60) == 0
    finally:
        d.p.kill()
        job.p.kill()


def real_trigger(d, tag):
    """After 100 refused triggers, one for the job is accepted (they did not
    touch --min-gap), one after its window started meets --min-gap; the
    window counts once it has traced the job."""
    r = urllib.request.Request("http://127.0.0.1:%d/capture?job=port-%s&rank=0" % (d.port, tag),
                               data=b"", method="POST")
    with urllib.request.urlopen(r, timeout=10) as a:
        assert a.status == 202, a.read()
    deadline = time.time() + 30
    while time.time() < deadline and not any("daemon: window " in l for l in d.lines):
        time.sleep(0.1)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(r, timeout=10)
    assert e.value.code == 429
    deadline = time.time() + 60
    while time.time() < deadline and d.metrics()["ptbpf_windows_total"] < 1:
        time.sleep(0.5)
    m = d.metrics()
    assert m["ptbpf_windows_total"] == 1 and \
        m['ptbpf_triggered_windows_total{source="http"}'] == 1, m


BAD = [  # (request, status, a word of its one line), 600 in all
    (b"GARBAGE\r\n\r\n", 400, "METHOD TARGET"),
    (b"BREW /metrics HTTP/1.1\r\n\r\n", 501, "BREW"),
    (b"GET /metrics HTTP/2.0\r\n\r\n", 505, "HTTP/1.1"),
    (b"GET /nope HTTP/1.1\r\n\r\n", 404, "GET /metrics and POST /capture"),
    (b"POST /metrics HTTP/1.1\r\n\r\n", 405, "only GET /metrics"),
    (b"GET /capture HTTP/1.1\r\n\r\n", 405, "only POST /capture"),
    (b"POST /capture HTTP/1.1\r\nContent-Length: 4\r\n\r\nnull", 400, "JSON null"),
    (b"POST /capture HTTP/1.1\r\nContent-Length: 3\r\n\r\n123", 400, "a JSON number"),
    (b"POST /capture?rank=abc HTTP/1.1\r\n\r\n", 400, "rank 'abc' is not a rank"),
    (b"POST /capture?rank=-1 HTTP/1.1\r\n\r\n", 400, "rank '-1' is not a rank"),
    (b"POST /capture?job=jbo1 HTTP/1.1\r\n\r\n", 404, "has job=jbo1"),
    (b"POST /capture HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "Content-Length"),
]


def bad_requests(d, phase):
    """600 requests the port refuses, each with its own one line, counted
    by status; HEAD without a body; refusals said at most once a minute."""
    def attack():
        seen = []
        for i in range(600):
            req, code, word = BAD[i % len(BAD)]
            got = one_line(exchange("127.0.0.2", d.port, req))
            assert got[0] == code and word in got[1], (req, got)
            seen.append(code)
        head = exchange("127.0.0.2", d.port, b"HEAD /capture HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405") and head.endswith(b"\r\n\r\n"), head
        return seen

    m0 = d.metrics()
    seen, got = phase("600 refused requests", attack)
    for code in set(seen):
        counted = sum(v for k, v in got.items() if 'code="%d"' % code in k)
        assert counted == seen.count(code) + (code == 405), (code, got)
    got = delta(d.metrics(), m0, "ptbpf_triggers_total")
    assert got == {'ptbpf_triggers_total{source="http",outcome="no_match"}': 50,
                   'ptbpf_triggers_total{source="http",outcome="bad_request"}': 200}, got
    said = [l for l in d.lines if "refused" in l]
    assert 1 <= len(said) <= 3, said


def test_out_of_descriptors(tmp_path):
    """The daemon out of descriptors (its limit lowered to what it holds):
    accept(2) fails on a flood of 300 connections, said once, the listener
    resting between tries instead of spinning; a window asked for then
    cannot open its BPF object, says so, and is not counted. With its
    limit back, /metrics counts the accept errors."""
    require(PTBPF)
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    job = Job(tag)
    d = Daemon(tmp_path, tag)
    socks = []
    try:
        d.metrics()
        pid = d.p.p.pid
        limit = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        held = len(os.listdir("/proc/%d/fd" % pid))
        lines, cpu = len(d.lines), d.cpu_s()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (held, limit[1]))
        for _ in range(300):
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", d.port))
            socks.append(s)
            time.sleep(0.01)
        os.kill(pid, signal.SIGUSR1)
        deadline = time.time() + 30
        while time.time() < deadline and not any("could not start" in l for l in d.lines):
            time.sleep(0.2)
        took = d.cpu_s() - cpu
        said = d.lines[lines:]
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limit)
        for s in socks:
            s.close()
        assert d.p.p.poll() is None
        print("out of descriptors, said:", said, "daemon CPU %.2f s" % took)
        assert any("could not start" in l and "not counted" in l for l in said), said
        assert sum("cannot accept a connection" in l for l in said) == 1, said
        assert len(said) <= 10 and took < 1.0, (took, said)
        time.sleep(1)
        m = d.metrics()
        assert m["ptbpf_http_accept_errors_total"] > 0, m
        assert m["ptbpf_windows_total"] == 0, m
        assert m['ptbpf_triggered_windows_total{source="signal"}'] == 0, m
        d.p.p.send_signal(signal.SIGINT)
        assert d.p.p.wait(timeout=60) == 0
    finally:
        for s in socks:
            s.close()
        d.p.kill()
        job.p.kill()


def test_password_guessing(tmp_path):
    """With users (a web config, plain HTTP here), 400 wrong passwords in
    4 s from 127.0.0.2: each 401 (or 429 once the bcrypt budget of 50 ms a
    second is spent), counted; the daemon's CPU stays within that budget,
    and Prometheus' user, checked once, is answered all along."""
    require(PTBPF)
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    hashed = bcrypt("right")
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  prometheus: '%s'\n" % hashed)
    d = Daemon(tmp_path, tag, ["--web-config", str(web)])
    auth = lambda pw: b"Authorization: Basic " + base64.b64encode(b"prometheus:" + pw) + b"\r\n"
    try:
        good = b"GET /metrics HTTP/1.1\r\n" + auth(b"right") + b"\r\n"
        assert status(exchange("127.0.0.1", d.port, good)) == 200
        cpu, t, worst, codes = d.cpu_s(), time.time(), 0.0, []
        for i in range(400):
            req = b"GET /metrics HTTP/1.1\r\n" + auth(b"wrong%d" % i) + b"\r\n"
            codes.append(one_line(exchange("127.0.0.2", d.port, req))[0])
            if i % 20 == 0:
                t1 = time.time()
                assert status(exchange("127.0.0.1", d.port, good)) == 200
                worst = max(worst, time.time() - t1)
            time.sleep(0.01)
        took, used = time.time() - t, d.cpu_s() - cpu
        print("password guessing: %s in %.1f s, daemon CPU %.2f s, worst scrape %.3f s" % (
            {c: codes.count(c) for c in set(codes)}, took, used, worst))
        assert set(codes) == {401, 429} and worst < 1.0, codes
        # the budget: 200 ms at once, 50 ms a second, past it by one check
        assert used < 0.2 + 0.05 * took + 0.2, (used, took)
        m = delta(good_metrics(d, auth(b"right")), {}, "ptbpf_http_requests_total")
        assert m['ptbpf_http_requests_total{path="/metrics",code="401"}'] == codes.count(401), m
        assert m['ptbpf_http_requests_total{path="/metrics",code="429"}'] == codes.count(429), m
    finally:
        d.p.kill()


def good_metrics(d, auth):
    """/metrics with Prometheus' user, as {series: value}."""
    answer = exchange("127.0.0.1", d.port, b"GET /metrics HTTP/1.1\r\n" + auth + b"\r\n")
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in answer.decode().partition(
        "\r\n\r\n")[2].splitlines() if line and not line.startswith("#"))}
