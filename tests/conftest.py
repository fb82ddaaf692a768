# SPDX-License-Identifier: BSD-2-Clause
"""Shared fixtures: the built ptbpf, workloads started and traced for real.

Nothing here is mocked: every test attaches the real ptbpf (BPF programs,
uprobes) to a real python3 + torch (Debian's 1.13) or libtorch process.
A missing prerequisite fails the test; it is never skipped."""
import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pftrace  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
PTBPF = os.path.join(BUILD, "ptbpf")
# Debian's python3 with python3-torch (1.13); the GPU machine's venv (2.11)
# through PTBPF_TEST_PYTHON.
PYTHON = os.environ.get("PTBPF_TEST_PYTHON", "/usr/bin/python3")
WORKLOAD = os.path.join(ROOT, "tests", "workloads", "workload.py")
SIMFAIL = os.path.join(BUILD, "simfail")

# A shell without job control starts a background command with SIGINT
# ignored, and an ignored signal stays ignored across fork and exec: every
# ptbpf the tests start would then lose a SIGINT sent before it installs
# its handler, and trace on (seen on the CI VM, 2026-11-28).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def thread_named(pid, name):
    """The tid of pid's thread called name."""
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() == name:
                return int(tid)
    raise AssertionError("pid %d has no thread %s" % (pid, name))


def require(path):
    if not os.path.exists(path):
        pytest.fail("%s is missing: run `make` first" % path)
    return path


class Proc:
    """A started process whose stdout we read line by line."""

    def __init__(self, argv, **kw):
        self.argv = argv
        # Unbuffered pipes: select() below must see every byte not yet read
        # (a buffered reader would hide a second line it already took in).
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, bufsize=0, **kw)
        self.out = b""

    def read_until(self, match, timeout=120, stream="stdout"):
        """Reads lines until match(line) holds: (that line, all read up to
        and with it), or (None, all read) at timeout or end of stream."""
        f = getattr(self.p, stream)
        deadline = time.time() + timeout
        buf = b""
        while time.time() < deadline:
            r, _, _ = select.select([f], [], [], 0.2)
            if r:
                line = f.readline()
                if not line:
                    break
                buf += line
                if match(line.decode(errors="replace")):
                    return line.decode(errors="replace"), buf.decode(errors="replace")
        return None, buf.decode(errors="replace")

    def wait_line(self, prefix, timeout=120, stream="stdout"):
        line, buf = self.read_until(lambda text: text.startswith(prefix), timeout, stream)
        if line is None:
            raise AssertionError("%s: no line starting %r within %ss; got:\n%s\nstderr: %s" % (
                self.argv, prefix, timeout, buf, self.drain_err()))
        return line, buf

    def drain_err(self):
        if self.p.poll() is None:
            return "(still running)"
        return self.p.stderr.read().decode(errors="replace")

    def finish(self, timeout=300):
        out, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class Run:
    """The outcome of one traced run."""

    def __init__(self, target_rc, target_out, rc, err, trace_path):
        self.target_rc, self.target_out = target_rc, target_out
        self.rc, self.err, self.trace_path = rc, err, trace_path
        self._trace = None

    @property
    def trace(self):
        if self._trace is None:
            self._trace = pftrace.Trace(self.trace_path)
        return self._trace


def workload_argv(kind, steps, extra=()):
    """argv of a workload that waits for the go file ("{go}" is replaced)."""
    return [PYTHON, WORKLOAD, kind, "--steps", str(steps), "--go", "{go}"] + list(extra)


def simfail_argv(mode, iterations):
    return [require(SIMFAIL), mode, str(iterations), "{go}"]


def run_traced(tmp_path, target_argv, ptbpf_args=(), go_name="go", env=None,
               before_go=None, timeout=600):
    """Starts the target (which prints 'ready' then waits for the go file),
    attaches ptbpf, releases the target, and waits for both to finish."""
    require(PTBPF)
    go = str(tmp_path / go_name)
    trace_path = str(tmp_path / "t.pftrace")
    if os.path.exists(trace_path):  # a test's earlier run: ptbpf never replaces it
        os.unlink(trace_path)
    target = Proc([a.replace("{go}", go) for a in target_argv], env=env)
    try:
        target.wait_line("ready")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "-o", trace_path] + list(ptbpf_args))
        try:
            tracer.wait_line("ptbpf: tracing pid", stream="stderr", timeout=120)
            if before_go:
                before_go(target, tracer)
            open(go, "w").close()
            t_rc, t_out, _ = target.finish(timeout=timeout)
            rc, _, err = tracer.finish(timeout=120)
        finally:
            tracer.kill()
    finally:
        target.kill()
    return Run(t_rc, t_out, rc, err, trace_path)


def run_untraced(tmp_path, target_argv, env=None, timeout=600):
    go = tmp_path / "go-untraced"
    go.write_text("")
    argv = [a.replace("{go}", str(go)) for a in target_argv]
    p = subprocess.run(argv, capture_output=True, env=env, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def link_holders():
    """link id -> the pids holding an fd of it, from /proc/*/fdinfo: what
    bpftool reports only where it was built with its pid iterator."""
    holders = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) != "anon_inode:bpf_link":
                    continue
                with open("/proc/%s/fdinfo/%s" % (pid, fd)) as f:
                    info = f.read()
            except OSError:
                continue
            for line in info.splitlines():
                if line.startswith("link_id:"):
                    holders.setdefault(int(line.split()[1]), set()).add(int(pid))
    return holders


def keeper_owner(pid):
    """Whose a link held by pid is: a link keeper's (user/attach/keeper.h)
    are its ptbpf's, or no one's once that ptbpf is gone (the keeper then
    takes them out); any other process's are its own."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if f.read().split(b"\0")[0] != b"ptbpf-keeper":
                return pid
        with open("/proc/%d/status" % pid) as f:
            ppid = int(re.search(r"^PPid:\s*(\d+)", f.read(), re.M).group(1))
        with open("/proc/%d/comm" % ppid) as f:
            return ppid if f.read().strip() == "ptbpf" else None
    except (OSError, AttributeError):
        return None


def ptbpf_links(holders=None):
    """uprobe_multi / perf links that bpftool sees: none may outlive ptbpf.
    With holders (pids), only the links those processes hold, or that no
    process holds: other tests' tracers may run beside this one."""
    import json
    # bpftool walks link ids, then opens each: one freed in between (a
    # daemon's window ending) fails the whole listing. Listed again then.
    for _ in range(20):
        r = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True)
        if r.returncode == 0:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("bpftool link list failed 20 times: %s" % r.stderr.strip())
    out, held = [], None
    for link in json.loads(r.stdout or "[]"):
        if link.get("type") not in ("perf_event", "uprobe_multi"):
            continue
        if "pids" not in link and held is None:
            held = link_holders()
        pids = {p["pid"] for p in link.get("pids", [])} or (held or {}).get(link["id"], set())
        pids = {keeper_owner(p) for p in pids} - {None}
        if holders is None or not pids or pids & set(holders):
            out.append(link)
    return out


def links_after_exit(holders=None, timeout=60.0):
    """ptbpf_links(), given the kernel time to release the links of a
    process that just ended: each uprobe link waits for an RCU grace period
    as it goes, so a killed ptbpf's dozens of links take seconds."""
    deadline = time.time() + timeout
    while True:
        left = ptbpf_links(holders)
        if not left or time.time() > deadline:
            return left
        time.sleep(0.1)


OP_RINGS = re.compile(
    r"agent op rings: written (?P<written>\d+) = read (?P<read>\d+) \+ gone unread "
    r"(?P<unread>\d+) .*?; not written: \d+ \(ring full (?P<full>\d+), no free ring "
    r"(?P<no_slot>\d+)\); ops: read (?P<ops_read>\d+), lost (?P<ops_lost>\d+) \(ring full "
    r"(?P<ops_full>\d+), no free ring (?P<ops_no_slot>\d+), gone unread (?P<ops_unread>\d+)\); "
    r"malformed (?P<bad>\d+); processes gone without a last copy (?P<no_copy>\d+)")


def op_ring_totals(err):
    """The summary's line on the agent's op rings, as numbers by name."""
    m = OP_RINGS.search(err)
    assert m, err
    return {k: int(v) for k, v in m.groupdict().items()}


def ops_lost_marked(trace):
    """(records, ops) the trace's loss markers say: "op records lost here"
    on threads' tracks, "... (threads found no free ring)" on processes'."""
    gaps = [s for s in trace.instants if s.name in (
        "op records lost here (ptbpf fell behind)", "op records lost (threads found no free ring)")]
    return sum(s.args["lost_records"] for s in gaps), sum(s.args["lost_ops"] for s in gaps)


_torch_version = None


def torch_version():
    """(major, minor) of the torch that PYTHON imports."""
    global _torch_version
    if _torch_version is None:
        out = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, check=True).stdout
        _torch_version = tuple(int(x) for x in out.strip().split(".")[:2])
    return _torch_version


@pytest.fixture(scope="session", autouse=True)
def built():
    require(PTBPF)
    return True
