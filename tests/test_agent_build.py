# SPDX-License-Identifier: BSD-2-Clause
"""libptbpf-agent.so (user/agent/agent.c), checked where there is no GPU: its
uprobe entry points are exported, distinct and start with an instruction
x86 uprobes emulate; loaded into a real python3 it stays dormant, and when
asked to activate it fails cleanly (no driver), reports why through
ptbpf_agent_status, and the target carries on unharmed."""
import os
import re
import subprocess

from conftest import BUILD, require

AGENT = os.path.join(BUILD, "libptbpf-agent.so")
PYTHON = "/usr/bin/python3"
PROBES = ["ptbpf_agent_correlate", "ptbpf_agent_kernel", "ptbpf_agent_memcpy",
          "ptbpf_agent_memset", "ptbpf_agent_dropped", "ptbpf_agent_status",
          "ptbpf_agent_pystack"]
CONTROLS = ["ptbpf_agent_activate", "ptbpf_agent_deactivate", "InitializeInjection"]
STATUS = re.compile(r"^ptbpf-agent\[(\d+)\]: (.*) \((-?\d+)\)$", re.M)


def exported():
    out = subprocess.run(["nm", "-D", "--defined-only", require(AGENT)],
                         capture_output=True, text=True, check=True).stdout
    return {f[2]: int(f[0], 16) for f in (l.split() for l in out.splitlines())
            if len(f) == 3 and f[1] == "T"}


def test_exports():
    syms = exported()
    missing = [s for s in PROBES + CONTROLS if s not in syms]
    assert not missing, missing
    # uprobe.multi cookies tell the records apart by address.
    addrs = [syms[s] for s in PROBES]
    assert len(set(addrs)) == len(addrs), syms
    assert not [s for s in syms if s.startswith("cupti")], "libcupti must not be linked"
    out = subprocess.run(["nm", "-D", "--defined-only", require(AGENT)],
                         capture_output=True, text=True, check=True).stdout
    objects = {f[2] for f in (l.split() for l in out.splitlines()) if len(f) == 3 and f[1] in "BD"}
    assert {"ptbpf_agent_ctl", "ptbpf_agent_busy"} <= objects, objects


def test_first_instructions():
    """Probe points start with a five-byte nop (a uprobe there is a call on
    kernel 6.18, no trap); the controls with an instruction uprobes
    emulate."""
    out = subprocess.run(["objdump", "-d", require(AGENT)],
                         capture_output=True, text=True, check=True).stdout
    for name in PROBES + CONTROLS[:2]:
        m = re.search(r"<%s>:\n\s*[0-9a-f]+:\s*((?:[0-9a-f]{2} )+)\s*(\S+)" % name, out)
        assert m, name
        if name in PROBES:
            assert m.group(1).strip() == "0f 1f 44 00 00", (name, m.group(1), m.group(2))
        else:
            assert m.group(2) in ("push", "nop"), (name, m.group(2))


def preload(script, log=True):
    env = dict(os.environ, LD_PRELOAD=require(AGENT))
    env.pop("CUDA_INJECTION64_PATH", None)
    if log:
        env["PTBPF_AGENT_LOG"] = "1"
    return subprocess.run([PYTHON, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)


DORMANT = r"""
import os, time
time.sleep(0.5)
pid = os.getpid()
comms = [open("/proc/%d/task/%s/comm" % (pid, t)).read().strip()
         for t in os.listdir("/proc/%d/task" % pid)]
maps = open("/proc/%d/maps" % pid).read()
print("agent thread", "ptbpf-agent" in comms)
print("cupti loaded", "libcupti" in maps)
print(sum(range(10)))
"""


def test_dormant():
    r = preload(DORMANT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["agent thread True", "cupti loaded False", "45"]
    assert not STATUS.search(r.stderr), r.stderr


CONTROL = r"""
import ctypes, os, sys, time

class Ctl(ctypes.Structure):  # include/ptbpf_agent.h: struct ptbpf_agent_ctl
    _fields_ = [("magic", ctypes.c_uint64), ("version", ctypes.c_uint32),
                ("agent_tid", ctypes.c_uint32), ("seq", ctypes.c_uint64),
                ("cmd", ctypes.c_uint32), ("owner", ctypes.c_uint32),
                ("job_req", ctypes.c_uint64), ("job_done", ctypes.c_uint64),
                ("injected", ctypes.c_uint32), ("pad0", ctypes.c_uint32),
                ("words", ctypes.c_char * 128), ("ack", ctypes.c_uint64),
                ("handle", ctypes.c_uint64), ("state", ctypes.c_uint32),
                ("pad1", ctypes.c_uint32)]

lib = ctypes.CDLL(sys.argv[1])  # the preloaded copy: same object
ctl = Ctl.in_dll(lib, "ptbpf_agent_ctl")
assert ctl.magic == 0x6c74636670627470 and ctl.version == 2, hex(ctl.magic)

def command(cmd, words=b""):
    ctl.cmd, ctl.words = cmd, words
    ctl.seq += 1
    for _ in range(500):
        if ctl.ack == ctl.seq:
            return
        time.sleep(0.01)
    raise SystemExit("no ack")

tid = ctl.agent_tid
import torch  # the op recorder finds libtorch in the process
command(1, b" ops")  # ON, as ptbpf sends it
time.sleep(0.3)  # no ptbpf probe on ptbpf_agent_status: it switches itself off
print("state after 0.3 s", ctl.state)
command(2)  # EXIT
time.sleep(0.2)
print("state after exit", ctl.state, "thread gone", not os.path.exists("/proc/%d/task/%d" % (os.getpid(), tid)))
print(sum(range(10)))
"""


def test_control_block_without_ptbpf():
    """Commanded through its control block as ptbpf does, but with no ptbpf
    probe on ptbpf_agent_status (no ptbpf alive): the agent switches on,
    notices at once that no ptbpf is there and switches itself off; asked
    to exit, its thread ends and it is ready to be unloaded."""
    env = dict(os.environ, LD_PRELOAD=require(AGENT), PTBPF_AGENT_LOG="1")
    env.pop("CUDA_INJECTION64_PATH", None)
    r = subprocess.run([PYTHON, "-c", CONTROL, require(AGENT)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["state after 0.3 s 0",
                                     "state after exit 2 thread gone True", "45"], r.stdout
    msgs = [m for _, m, _ in STATUS.findall(r.stderr)]
    on = [i for i, m in enumerate(msgs) if m.startswith("ops: RecordFunction callbacks on")]
    assert on and msgs[on[0] + 1:] == ["dormant: ptbpf is gone (its probe was removed)"], msgs


DIRECT = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print(lib.InitializeInjection())
lib.ptbpf_agent_activate()
lib.ptbpf_agent_deactivate()
print("alive")
"""


def test_direct_calls():
    env = dict(os.environ, PTBPF_AGENT_LOG="1")
    r = subprocess.run([PYTHON, "-c", DIRECT, require(AGENT)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1\nalive\n"
    assert STATUS.search(r.stderr), r.stderr
