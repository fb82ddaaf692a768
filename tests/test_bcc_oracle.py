# SPDX-License-Identifier: BSD-2-Clause
"""BCC as an independent oracle: BCC attaches its own uprobes to a sample of
at::_ops::<op>::call entry points in the same process that ptbpf traces, and
counts hits in its own map. Per op, both counts must be equal (ptbpf's
op uprobes, --ops probes)."""
import random
import re
import subprocess
import time

from bcc import BPF

from conftest import PTBPF, Proc, workload_argv
import pftrace

ALWAYS = ["addmm", "mm", "t", "relu", "transpose_int", "add__Tensor", "sum",
          "threshold_backward", "linear", "_log_softmax", "nll_loss_nd", "zero_"]


def op_symbols(lib):
    """struct name -> mangled at::_ops::<S>::call symbol, from nm."""
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    syms = {}
    for line in out.splitlines():
        sym = line.split()[-1]
        if not sym.startswith("_ZN2at4_ops") or "4callE" not in sym:
            continue
        rest = sym[len("_ZN2at4_ops"):]
        digits = len(rest) - len(rest.lstrip("0123456789"))
        n = int(rest[:digits])
        syms[rest[digits:digits + n]] = sym
    return syms


def second_insn_offset(lib, sym):
    """BCC 0.26 registers its uprobes with a bogus ref_ctr_offset, and the
    kernel refuses two probes with different ones on one instruction
    ("ref_ctr_offset mismatch"). So BCC probes the op's second instruction,
    which runs exactly once per call too (the first is its prologue push)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "--disassemble=" + sym, lib],
                         capture_output=True, text=True, check=True).stdout
    insns = re.findall(r"^\s*([0-9a-f]+):\t(\S+)", out, re.M)
    assert insns[0][1] == "push", insns[:2]
    return int(insns[1][0], 16) - int(insns[0][0], 16)


def libtorch_of(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if "libtorch_cpu.so" in line:
                return line.split()[-1]
    raise AssertionError("no libtorch_cpu.so in pid %d" % pid)


def test_bcc_counts_equal_ptbpf(tmp_path):
    go = str(tmp_path / "go")
    target = Proc([a.replace("{go}", go) for a in workload_argv("mlp", 30)])
    try:
        target.wait_line("ready")
        pid = target.p.pid
        lib = libtorch_of(pid)
        syms = op_symbols(lib)
        sample = [s for s in ALWAYS if s in syms]
        rng = random.Random(1)
        sample += rng.sample(sorted(set(syms) - set(sample)), 20)
        src = "BPF_ARRAY(hits, u64, %d);\n" % len(sample)
        src += "".join("int hit%d(struct pt_regs *ctx) { hits.increment(%d); return 0; }\n"
                       % (i, i) for i in range(len(sample)))
        bcc = BPF(text=src)
        for i, s in enumerate(sample):
            bcc.attach_uprobe(name=lib, sym=syms[s], sym_off=second_insn_offset(lib, syms[s]),
                              fn_name="hit%d" % i, pid=pid)
        out = str(tmp_path / "t.pftrace")
        tracer = Proc([PTBPF, "-p", str(pid), "-o", out, "--ops", "probes"])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        assert target.finish()[0] == 0
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
        hits = bcc["hits"]
        bcc_counts = {s: hits[i].value for i, s in enumerate(sample)}
        bcc.cleanup()
    finally:
        target.kill()
    ours = {}
    for sl in pftrace.Trace(out).slices:
        if sl.category != "cpu_op":
            continue
        base = sl.name[len("aten::"):]
        ov = sl.args.get("overload")
        key = base + ("_" + ov if ov else "")
        ours[key] = ours.get(key, 0) + 1
    assert sum(bcc_counts.values()) > 1000
    assert {s: (bcc_counts[s], ours.get(s, 0)) for s in sample
            if bcc_counts[s] != ours.get(s, 0)} == {}
