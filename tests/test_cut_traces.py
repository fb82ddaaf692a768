# SPDX-License-Identifier: BSD-2-Clause
"""Traces stay readable whatever stops the writer (issue 12): the file holds
whole packets at every moment, a killed tracer leaves its trace as
FILE.partial, a full disk cuts it back to its last whole packet, and
report, export and merge read a cut trace up to the cut (exit 0, one
warning line) while telling it from a complete one (the writer's end
marker). What is no trace at all is an error."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import PTBPF, PYTHON, WORKLOAD, Proc, pftrace

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")


def ptbpf(*args, timeout=120):
    return subprocess.run([PTBPF] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


def status(path):
    """report --json's trace_status, and the warning lines."""
    r = ptbpf("report", path, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["trace_status"], [l for l in r.stderr.splitlines() if l]


def whole_packets(path):
    """The file parses as a Trace to its last byte: whole packets only."""
    pb = pftrace.proto_module()
    with open(path, "rb") as f:
        return len(pb.Trace.FromString(f.read()).packet)


@pytest.fixture
def looping_torch():
    """A training loop (mlp, agent ops: steps) that runs until killed."""
    p = Proc([PYTHON, WORKLOAD, "mlp", "--steps", "100", "--loop"])
    p.wait_line("ready")
    yield p
    p.kill()


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    """A complete trace with GPU kernels, ops and steps (the H200 recording)."""
    path = str(tmp_path_factory.mktemp("cut") / "full.pftrace")
    r = ptbpf("replay", os.path.join(DATA, "agent_mlp.raw"), "-o", path)
    assert r.returncode == 0, r.stderr
    return path


def test_complete_trace_says_so(small_trace):
    st, warnings = status(small_trace)
    assert st["complete"] and not st["cut"] and not st["damaged"], st
    assert st["bytes"] == os.path.getsize(small_trace) and warnings == []
    text = ptbpf("report", small_trace).stdout.splitlines()[0]
    assert ": complete, %d packets" % st["packets"] in text, text


def test_every_cut_of_a_trace_is_read(small_trace, tmp_path):
    """Cut anywhere (a killed writer, a full disk), a trace is read up to
    its last whole packet: report, export and merge exit 0 and say so in
    one line; the more is kept, the more is read."""
    data = open(small_trace, "rb").read()
    cut = tmp_path / "cut.pftrace"
    last = -1
    sizes = sorted({len(data) - 1, len(data) - 40} | set(range(200, len(data), len(data) // 37)))
    for size in sizes:
        cut.write_bytes(data[:size])
        st, warnings = status(str(cut))
        assert not st["complete"] and st["bytes"] + st["dropped_bytes"] == size, (size, st)
        assert st["packets"] >= last, (size, st)
        last = st["packets"]
        assert len(warnings) == 1 and "cut" in warnings[0] and str(cut) in warnings[0], warnings
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "k.json"
    r = ptbpf("export", "--kineto", out, cut)
    assert r.returncode == 0 and "warning" in r.stderr.splitlines()[0], r.stderr
    json.load(open(out))
    r = ptbpf("merge", cut, small_trace, "-o", tmp_path / "m.pftrace")
    assert r.returncode == 0, r.stderr
    assert sum("warning" in l for l in r.stderr.splitlines()) == 1, r.stderr
    assert status(str(tmp_path / "m.pftrace"))[0]["complete"]


def test_damage_after_packets_is_read_up_to(small_trace, tmp_path):
    damaged = tmp_path / "d.pftrace"
    good = open(small_trace, "rb").read()
    damaged.write_bytes(good + b"\x00" * 5000)
    st, warnings = status(str(damaged))
    assert st["damaged"] and st["bytes"] == len(good) and st["dropped_bytes"] == 5000, st
    assert len(warnings) == 1 and "damaged at byte %d" % len(good) in warnings[0], warnings


NO_TRACE = {
    "empty": (lambda: b"", "is empty: not a trace"),
    "50 MB of zeros": (lambda: b"\x00" * (50 << 20), "is not a Perfetto trace"),
    "random": (lambda: os.urandom(100_000), "is not a Perfetto trace"),
    "a cut first packet": (lambda: b"\x0a\x80\x80\x80\x80\x10", "is not a Perfetto trace"),
}


@pytest.mark.parametrize("what", sorted(NO_TRACE))
def test_what_is_no_trace_is_an_error(tmp_path, what):
    content, needle = NO_TRACE[what]
    bad = tmp_path / "bad.pftrace"
    bad.write_bytes(content())
    for args in (["report", bad], ["export", "--kineto", tmp_path / "x.json", bad],
                 ["merge", bad, bad, "-o", tmp_path / "m.pftrace"]):
        r = ptbpf(*args)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, (args, r.stderr)
        assert needle in r.stderr, (args, r.stderr)
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "m.pftrace").exists()
    assert not (tmp_path / "x.json.partial").exists()


def test_killed_tracer_leaves_a_readable_partial_trace(tmp_path, looping_torch):
    """SIGKILL mid-trace: no FILE, but FILE.partial (named when tracing
    starts) holds whole packets, which report, export and merge read."""
    out = tmp_path / "t.pftrace"
    tracer = Proc([PTBPF, "-p", str(looping_torch.p.pid), "--ops", "agent", "-o", str(out)])
    try:
        line, _ = tracer.wait_line("ptbpf: writing", stream="stderr")
        assert "%s.partial" % out in line
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        time.sleep(1.5)
        tracer.p.send_signal(signal.SIGKILL)
        tracer.p.wait()
    finally:
        tracer.kill()
    partial = str(out) + ".partial"
    assert not out.exists() and os.path.exists(partial)
    assert whole_packets(partial) > 100
    st, warnings = status(partial)
    assert not st["complete"] and not st["cut"] and st["dropped_bytes"] == 0, st
    assert len(warnings) == 1, warnings
    rep = json.loads(ptbpf("report", partial, "--json").stdout)
    assert {o["name"] for o in rep["operators"]} >= {"aten::addmm", "aten::linear"}
    assert ptbpf("export", "--kineto", tmp_path / "k.json", partial).returncode == 0
    assert looping_torch.p.poll() is None


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_disk_full_mid_trace_keeps_whole_packets(small_fs, looping_torch):
    """The disk fills while tracing: the trace is cut back to its last
    whole packet, ptbpf says why once and where the partial trace is, and
    exits 1; the partial trace opens."""
    out = small_fs / "t.pftrace"
    r = ptbpf("-p", looping_torch.p.pid, "--ops", "agent", "-d", "20", "-o", out)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert sum("No space left on device" in l for l in lines) == 1, r.stderr
    assert any(l.startswith("ptbpf: the trace up to the failure") and
               "%s.partial" % out in l for l in lines), r.stderr
    partial = str(out) + ".partial"
    assert not out.exists() and whole_packets(partial) > 1000
    st, warnings = status(partial)
    assert not st["complete"] and st["dropped_bytes"] == 0 and len(warnings) == 1, st


def test_disk_full_at_start(small_fs, looping_torch):
    with open(small_fs / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass
    out = small_fs / "t.pftrace"
    r = ptbpf("-p", looping_torch.p.pid, "-d", "5", "-o", out)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "ptbpf: cannot write %s.partial: No space left on device: free space there or write "
        "elsewhere" % out], r.stderr
    assert sorted(os.listdir(small_fs)) == ["filler"]
    assert looping_torch.p.poll() is None
