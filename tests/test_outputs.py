# SPDX-License-Identifier: BSD-2-Clause
"""Outputs never clobber inputs, one policy for existing outputs, and one
clear line for every bad input (issue 12): every output (the trace, --raw,
replay -o, merge -o, export --kineto) is written as FILE.partial and renamed
when complete; an existing FILE is replaced only with --force; an output
that is an input is refused; non-regular inputs are refused at once. A live
capture writes a trace only once tracing has started (issue 19): a run whose
target is gone, refused or exits during the attach leaves no file at all."""
import json
import os
import signal
import subprocess
import tempfile

import pytest

from conftest import (BUILD, PTBPF, PYTHON, WORKLOAD, Proc, links_after_exit, ptbpf_links,
                      require, workload_argv)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")
RAW = os.path.join(DATA, "agent_mlp.raw")
# Preloaded into a target, makes it exit inside ptbpf's attach (when the
# agent starts in it): tests/progs/exit_at_agent.c.
EXIT_AT_AGENT = os.path.join(BUILD, "exit_at_agent.so")
OLDER = b"an older trace\0\xff"


def ptbpf(*args, timeout=120, **kw):
    return subprocess.run([PTBPF] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, **kw)


def one_line(r):
    lines = [l for l in r.stderr.splitlines() if l]
    assert len(lines) == 1 and lines[0].startswith("ptbpf: "), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("out") / "a.pftrace")
    assert ptbpf("replay", RAW, "-o", path).returncode == 0
    return path


@pytest.fixture
def idle_torch():
    p = Proc([PYTHON, WORKLOAD, "mlp", "--steps", "100", "--loop"])
    p.wait_line("ready")
    yield p
    p.kill()


def test_help_states_the_output_policy():
    out = ptbpf("--help").stdout
    assert "OUTPUT FILES" in out and "FILE.partial" in out and "--force" in out


def test_an_output_that_is_an_input_is_refused(trace, tmp_path):
    raw = tmp_path / "c.raw"
    raw.write_bytes(open(RAW, "rb").read())
    size = raw.stat().st_size
    r = ptbpf("replay", raw, "-o", raw, "--force")
    assert r.returncode == 1 and "it is the input" in one_line(r)
    assert raw.stat().st_size == size
    before = open(trace, "rb").read()
    for args in (["merge", trace, trace, "-o", trace, "--force"],
                 ["export", "--kineto", trace, trace, "--force"]):
        r = ptbpf(*args)
        assert r.returncode == 1 and "it is the input" in one_line(r), args
    # Another name for the same file (a hard link) is the same file.
    link = tmp_path / "link.pftrace"
    os.link(trace, link)
    r = ptbpf("merge", trace, "-o", link, "--force")
    assert r.returncode == 1 and "it is the input" in one_line(r)
    assert open(trace, "rb").read() == before


def test_trace_and_raw_capture_may_not_be_one_file(tmp_path, idle_torch):
    out = tmp_path / "x"
    for raw in (out, tmp_path / "." / "x"):
        r = ptbpf("-p", idle_torch.p.pid, "-o", out, "--raw", raw)
        assert r.returncode == 2 and "are the same file" in one_line(r)
    assert not out.exists() and ptbpf_links() == []


def test_existing_outputs_are_kept_unless_forced(trace, tmp_path, idle_torch):
    old = tmp_path / "old"
    old.write_text("an older file")
    cases = [
        ["replay", RAW, "-o", old],
        ["merge", trace, "-o", old],
        ["export", "--kineto", old, trace],
        ["-p", idle_torch.p.pid, "-d", "1", "-o", old],
        ["-p", idle_torch.p.pid, "-d", "1", "-o", tmp_path / "t.pftrace", "--raw", old],
    ]
    for args in cases:
        r = ptbpf(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert one_line(r).endswith("%s exists; not replaced (--force replaces it)" % old), args
        assert old.read_text() == "an older file"
    for args in cases:
        r = ptbpf(*(args + ["--force"]))
        assert r.returncode == 0, (args, r.stderr)
        assert old.read_bytes() != b"an older file" and not os.path.exists(str(old) + ".partial")
        old.write_text("an older file")
    # A killed run's partial output is not replaced either.
    partial = tmp_path / "p.pftrace.partial"
    partial.write_text("a partial trace")
    r = ptbpf("replay", RAW, "-o", tmp_path / "p.pftrace")
    assert r.returncode == 1 and "%s exists" % partial in one_line(r)
    assert partial.read_text() == "a partial trace"


def test_a_failed_run_destroys_no_older_file(tmp_path):
    """--force, then the disk fills while writing: the older file is kept;
    what was written stays as FILE.partial."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        old = mnt / "old.pftrace"
        old.write_text("an older trace")
        r = ptbpf("replay", RAW, "-o", old, "--force")
        assert r.returncode == 1
        assert sum("No space left on device" in l for l in r.stderr.splitlines()) == 1, r.stderr
        assert old.read_text() == "an older trace"
        assert os.path.getsize(str(old) + ".partial") > 0
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_symlink_and_non_regular_outputs_are_refused(trace, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "l.json"
    link.symlink_to(victim)
    r = ptbpf("export", "--kineto", link, trace, "--force")
    assert r.returncode == 1 and "symbolic link" in one_line(r)
    r = ptbpf("replay", RAW, "-o", "/dev/null", "--force")
    assert r.returncode == 1 and "not a regular file" in one_line(r)
    assert victim.read_text() == "keep"


def test_non_regular_inputs_are_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [(["report", "/tmp"], "/tmp is a directory, not a regular file"),
             (["report", fifo], "is a FIFO, not a regular file"),
             (["export", "--kineto", tmp_path / "k.json", fifo], "is a FIFO"),
             (["merge", fifo, fifo, "-o", tmp_path / "m"], "is a FIFO"),
             (["replay", fifo, "-o", tmp_path / "r"], "is a FIFO"),
             (["replay", "/dev/zero", "-o", tmp_path / "r"], "is a device"),
             (["report", tmp_path / "missing"], "No such file or directory")]
    for args, needle in cases:
        r = ptbpf(*args, timeout=10)
        assert r.returncode == 1 and needle in one_line(r), (args, r.stderr)
    empty = tmp_path / "empty.raw"
    empty.write_bytes(b"")
    r = ptbpf("replay", empty, "-o", tmp_path / "r")
    assert r.returncode == 1 and "is empty: not a ptbpf raw capture" in one_line(r)
    assert sorted(os.listdir(tmp_path)) == ["empty.raw", "fifo"]


def test_a_cut_raw_capture_is_replayed_up_to_the_cut(tmp_path):
    data = open(RAW, "rb").read()
    cut = tmp_path / "cut.raw"
    cut.write_bytes(data[:len(data) // 2])
    r = ptbpf("replay", cut, "-o", tmp_path / "t.pftrace")
    assert r.returncode == 0
    assert "ends in a cut record" in r.stderr and "replayed the" in r.stderr, r.stderr
    cut.write_bytes(data[:10] + b"Z" * 100)  # the header, then no record
    r = ptbpf("replay", cut, "-o", tmp_path / "u.pftrace")
    assert r.returncode == 0, r.stderr
    assert "is damaged (not a record) at byte 10; replayed the 0 records" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (("--ring-size", "-4K"), "invalid ring size '-4K'"),
    (("--ring-size", "16Q"), "invalid ring size '16Q'"),
    (("-d", "-5"), "invalid duration '-5'"),
])
def test_bad_numbers_are_echoed_as_given(args, needle):
    r = ptbpf("-p", "1", *args)
    assert r.returncode == 2 and needle in one_line(r)


def test_daemon_durations_echoed_as_given(tmp_path):
    r = ptbpf("daemon", "--out-dir", tmp_path, "--every", "-5m")
    assert r.returncode == 2 and "invalid --every '-5m'" in one_line(r)


def test_a_pid_given_twice_is_traced_once(tmp_path):
    """-p X -p X: one target, a note, and every op once."""
    steps = 20
    target = Proc([a.replace("{go}", str(tmp_path / "go")) for a in workload_argv("mlp", steps)])
    try:
        target.wait_line("ready")
        pid = str(target.p.pid)
        out = tmp_path / "t.pftrace"
        tracer = Proc([PTBPF, "-p", pid, "-p", pid, "--ops", "agent", "-o", str(out)])
        try:
            _, err = tracer.wait_line("ptbpf: tracing pid", stream="stderr")
            open(tmp_path / "go", "w").close()
            assert target.finish()[0] == 0
            rc, _, rest = tracer.finish()
            err += rest
        finally:
            tracer.kill()
    finally:
        target.kill()
    assert rc == 0, err
    assert "ptbpf: note: pid %s is given twice; it is traced once" % pid in err.splitlines()
    assert sum(l.startswith("ptbpf: tracing pid") for l in err.splitlines()) == 1
    rep = json.loads(ptbpf("report", out, "--json").stdout)
    ops = {o["name"]: o["calls"] for o in rep["operators"]}
    assert ops["aten::addmm"] == 3 * steps


def test_another_users_process_names_the_capability():
    """With exactly CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN and CAP_SYS_PTRACE,
    a process of another user cannot be opened through its map_files: the
    line names CAP_DAC_READ_SEARCH; pid 1's memory map needs root."""
    caps = "+bpf,+perfmon,+sys_admin,+sys_ptrace"
    as_user = ["setpriv", "--reuid=12345", "--regid=12345", "--clear-groups",
               "--inh-caps=" + caps, "--ambient-caps=" + caps]
    out_dir = tempfile.mkdtemp(prefix="ptbpf-user-", dir="/tmp")
    os.chmod(out_dir, 0o777)
    target = Proc(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PYTHON,
                   WORKLOAD, "mlp", "--steps", "100", "--loop"])
    try:
        target.wait_line("ready")
        r = subprocess.run(as_user + [PTBPF, "-p", str(target.p.pid), "-o",
                                      os.path.join(out_dir, "t.pftrace")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        line = one_line(r)
        assert "cannot open its libtorch_cpu.so through /proc/%d/map_files: Permission " \
               "denied" % target.p.pid in line and "CAP_DAC_READ_SEARCH" in line, line
        r = subprocess.run(as_user + [PTBPF, "-p", "1", "-o", os.path.join(out_dir, "u.pftrace")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "cannot read /proc/1/maps" in one_line(r) and \
            "run ptbpf as root" in one_line(r), r.stderr
        assert target.p.poll() is None
    finally:
        target.kill()
    assert os.listdir(out_dir) == []
    os.rmdir(out_dir)


def lines(r):
    return [l for l in r.stderr.splitlines() if l]


def agent_mapped(pid):
    return "libptbpf-agent.so" in open("/proc/%d/maps" % pid).read()


@pytest.mark.parametrize("others", [0, 1])
def test_a_target_that_exits_during_the_attach_leaves_no_file(tmp_path, idle_torch, others):
    """The target exits inside the attach (as ptbpf's agent starts in it),
    alone or after another target attached: tracing never started, so the
    run fails (exit 1, one line why, no "wrote") and leaves no file: an older
    FILE and --raw FILE stay byte for byte although --force was given, no
    FILE.partial. The target attached first is left without the agent."""
    out, raw = tmp_path / "t.pftrace", tmp_path / "t.raw"
    out.write_bytes(OLDER)
    raw.write_bytes(OLDER)
    env = dict(os.environ, LD_PRELOAD=require(EXIT_AT_AGENT))
    target = Proc([PYTHON, WORKLOAD, "mlp", "--steps", "100", "--loop"], env=env)
    try:
        target.wait_line("ready")
        pids = [idle_torch.p.pid] * others + [target.p.pid]
        r = ptbpf(*sum([["-p", p] for p in pids], []), "-o", out, "--raw", raw, "--force",
                  "--no-sched")
        assert target.p.wait(timeout=60) == 3
    finally:
        target.kill()
    why = "ptbpf: pid %d exited during the attach: nothing of it was traced" % target.p.pid
    assert r.returncode == 1, r.stderr
    assert lines(r)[0].startswith("ptbpf: writing %s.partial" % out), r.stderr
    assert lines(r)[1:] == [why] if not others else lines(r).count(why) == 1, r.stderr
    assert not any("wrote" in l or "warning" in l for l in lines(r)), r.stderr
    assert out.read_bytes() == OLDER and raw.read_bytes() == OLDER
    assert sorted(os.listdir(tmp_path)) == ["t.pftrace", "t.raw"]
    assert idle_torch.p.poll() is None and not agent_mapped(idle_torch.p.pid)
    assert links_after_exit(holders=[]) == []


def test_a_refused_second_tracer_leaves_no_file(tmp_path, idle_torch):
    """A second ptbpf on a traced pid is refused before it makes a file:
    one line, exit 1, no file; the first ptbpf's trace is whole."""
    pid = idle_torch.p.pid
    first = Proc([PTBPF, "-p", str(pid), "-o", str(tmp_path / "first.pftrace")])
    try:
        first.wait_line("ptbpf: tracing pid", stream="stderr")
        second = tmp_path / "second.pftrace"
        r = ptbpf("-p", pid, "-o", second)
        assert r.returncode == 1 and "already traced by another ptbpf" in one_line(r)
        first.p.send_signal(signal.SIGINT)
        rc, _, err = first.finish(timeout=120)
    finally:
        first.kill()
    assert rc == 0 and "ptbpf: wrote %s" % (tmp_path / "first.pftrace") in err, err
    assert os.listdir(tmp_path) == ["first.pftrace"]


def test_a_pid_that_does_not_exist_leaves_no_file(tmp_path):
    """No process can have pid_max as its pid."""
    pid = int(open("/proc/sys/kernel/pid_max").read())
    out = tmp_path / "t.pftrace"
    r = ptbpf("-p", pid, "-o", out)
    assert r.returncode == 1 and one_line(r) == "ptbpf: no process with pid %d" % pid
    assert os.listdir(tmp_path) == []
    out.write_bytes(OLDER)
    r = ptbpf("-p", pid, "-o", out, "--force")
    assert r.returncode == 1 and one_line(r) == "ptbpf: no process with pid %d" % pid
    assert out.read_bytes() == OLDER and os.listdir(tmp_path) == ["t.pftrace"]
