# SPDX-License-Identifier: BSD-2-Clause
"""Bad input and missing privileges: one clear error line, a non-zero exit,
and nothing attached to (or written for) anything."""
import os
import subprocess

import pytest

from conftest import PTBPF, PYTHON, WORKLOAD as WORKLOAD_PATH, Proc, links_after_exit, workload_argv


def ptbpf(*args, **kw):
    return subprocess.run([PTBPF] + list(args), capture_output=True, text=True, timeout=60, **kw)


def one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) >= 1, r.stderr
    assert lines[0].startswith("ptbpf: "), r.stderr
    return lines[0]


def test_help_has_examples():
    r = ptbpf("--help")
    assert r.returncode == 0
    assert "EXAMPLES:" in r.stdout and "-p" in r.stdout and "--duration" in r.stdout


@pytest.mark.parametrize("args,needle", [
    ((), "no process given"),
    (("-p", "abc"), "invalid pid"),
    (("-p", "0"), "invalid pid"),
    (("-p", "1", "-d", "0"), "invalid duration"),
    (("-p", "1", "-d", "5x"), "invalid duration"),
    (("-p", "1", "--ring-size", "1K"), "invalid ring size"),
    (("-p", "1", "stray"), "unexpected argument"),
    (("--all", "--match-env", "RANK"), "invalid --match-env 'RANK': give KEY=VALUE"),
    (("--all", "--match-env", "=1"), "invalid --match-env"),
    (("-p", "1", "--match-env", "RANK=0"), "--match-env selects among the processes of --all"),
    (("daemon", "--out-dir", "/tmp", "--min-gap", "5x"), "invalid --min-gap '5x'"),
    (("-p", "1", "--min-gap", "5s"), "--no-step-signal and --(no-)keep-graphs belong to"),
    (("-p", "1", "--keep-graphs"), "--no-step-signal and --(no-)keep-graphs belong to"),
    (("-p", "1", "--no-keep-graphs"), "--no-step-signal and --(no-)keep-graphs belong to"),
    (("daemon", "--out-dir", "/tmp", "--keep-graphs", "--no-keep-graphs"),
     "--keep-graphs and --no-keep-graphs: give one"),
    (("daemon", "--out-dir", "/tmp", "--slow-step", "1"), "invalid --slow-step '1'"),
    (("daemon", "--out-dir", "/tmp", "--slow-step", "3x"), "invalid --slow-step '3x'"),
    (("daemon", "--out-dir", "/tmp", "--slow-step", "3,2"), "--slow-step's W"),
    (("daemon", "--out-dir", "/tmp", "--slow-step", "3", "--no-step-signal"),
     "--slow-step needs the step signal"),
    (("daemon", "--out-dir", "/tmp", "--steps", "5"), "--steps counts the steps of a slow"),
    (("daemon", "--out-dir", "/tmp", "--keep-graphs", "--no-step-signal"),
     "--keep-graphs is kept by the always-on layer"),
    (("daemon", "--out-dir", "/tmp", "--keep-graphs", "--no-agent"),
     "--keep-graphs is kept by the always-on layer"),
])
def test_bad_arguments(args, needle):
    r = ptbpf(*args)
    assert r.returncode == 2
    assert needle in one_error_line(r)


def test_no_such_pid():
    pid = 4194000
    while os.path.exists("/proc/%d" % pid):
        pid += 1
    r = ptbpf("-p", str(pid))
    assert r.returncode == 1
    assert one_error_line(r) == "ptbpf: no process with pid %d" % pid


def test_pid_without_libtorch(tmp_path):
    p = subprocess.Popen(["sleep", "60"])
    try:
        r = ptbpf("-p", str(p.pid), "-o", str(tmp_path / "x.pftrace"))
        assert r.returncode == 1
        assert "maps neither libtorch_cpu.so nor a CUDA, HIP or NCCL library" in one_error_line(r)
        assert not (tmp_path / "x.pftrace").exists()
        assert p.poll() is None
    finally:
        p.kill()


@pytest.fixture
def idle_torch(tmp_path):
    p = Proc(workload_argv("mlp", 1))
    p.wait_line("ready")
    yield p
    p.kill()


def test_missing_privileges(tmp_path, idle_torch):
    r = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-sys_admin,-bpf",
                        PTBPF, "-p", str(idle_torch.p.pid), "-o", str(tmp_path / "x.pftrace")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    line = one_error_line(r)
    assert "missing privileges" in line and "CAP_BPF" in line and "CAP_SYS_ADMIN" in line
    assert idle_torch.p.poll() is None


def test_tracer_in_another_pid_namespace(tmp_path, idle_torch):
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", PTBPF, "-p", "1",
                        "-o", str(tmp_path / "x.pftrace")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "initial) pid namespace" in one_error_line(r)


def test_output_is_a_symlink(tmp_path, idle_torch):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "out.pftrace"
    link.symlink_to(victim)
    r = ptbpf("-p", str(idle_torch.p.pid), "-o", str(link))
    assert r.returncode == 1
    assert "symbolic link" in one_error_line(r)
    assert victim.read_text() == "keep"
    assert links_after_exit(holders=[]) == []


def test_output_unwritable(tmp_path, idle_torch):
    r = ptbpf("-p", str(idle_torch.p.pid), "-o", "/proc/version")
    assert r.returncode == 1
    assert "/proc/version exists; not replaced (--force replaces it)" in one_error_line(r)
    r = ptbpf("-p", str(idle_torch.p.pid), "-o", "/proc/version", "--force")
    assert r.returncode == 1
    assert "cannot write /proc/version" in one_error_line(r)
    full = ptbpf("-p", str(idle_torch.p.pid), "-o", "/dev/full")
    assert full.returncode == 1
    assert "refusing to write /dev/full: not a regular file" in one_error_line(full)
    r = ptbpf("-p", str(idle_torch.p.pid), "-o", str(tmp_path / "no" / "such" / "dir.pftrace"))
    assert r.returncode == 1
    assert "cannot write" in one_error_line(r)


def test_output_is_a_fifo(tmp_path, idle_torch):
    fifo = tmp_path / "fifo.pftrace"
    os.mkfifo(fifo)
    r = ptbpf("-p", str(idle_torch.p.pid), "-o", str(fifo))
    assert r.returncode == 1
    assert "not a regular file" in one_error_line(r)


@pytest.mark.parametrize("args,needle", [
    (("run",), "run: no command given"),
    (("run", "-p", "1", "--", "true"), "-p cannot be combined with a command"),
    (("replay", "x.raw"), "usage: ptbpf replay RAW -o OUT.pftrace"),
])
def test_bad_subcommands(args, needle):
    r = ptbpf(*args)
    assert r.returncode == 2
    assert needle in one_error_line(r)


def test_run_command_that_never_loads_torch(tmp_path):
    r = ptbpf("run", "-o", str(tmp_path / "x.pftrace"), "--", "/nonexistent/cmd")
    assert r.returncode == 1
    assert "exited before it loaded torch or CUDA (status 127)" in r.stderr
    assert not (tmp_path / "x.pftrace").exists()


def test_run_traces_a_command(tmp_path):
    """`ptbpf run` starts the command itself (with the agent in
    CUDA_INJECTION64_PATH), traces it from when torch is loaded, and exits
    with the command's status."""
    out = tmp_path / "run.pftrace"
    r = subprocess.run([PTBPF, "run", "-o", str(out), "--", PYTHON, WORKLOAD_PATH, "mlp",
                        "--steps", "30"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "mlp loss" in r.stdout
    import pftrace
    t = pftrace.Trace(str(out))
    assert t.validate() == []
    assert t.op_counts()["aten::addmm"] >= 3 * 30
    assert "ops from the agent's RecordFunction callbacks" in r.stderr, r.stderr


def test_run_gets_the_agent_while_torch_imports(tmp_path):
    """`ptbpf run` attaches during `import torch`, whose main thread spends
    a second and more in the dynamic loader: the agent's injection tries
    again until a thread is at a safe point, so ops come from the agent on
    every run (1 in 5 runs fell back to uprobes when it tried once)."""
    code = "import torch\nx = torch.randn(64, 64)\nfor _ in range(200): (x @ x).relu().sum()\n"
    for i in range(10):
        out = tmp_path / ("run%d.pftrace" % i)
        r = subprocess.run([PTBPF, "run", "-o", str(out), "--", PYTHON, "-c", code],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "ops from the agent's RecordFunction callbacks" in r.stderr, (i, r.stderr)
        assert "cannot load the agent" not in r.stderr, (i, r.stderr)
        out.unlink()
