# SPDX-License-Identifier: BSD-2-Clause
"""The agent's op timestamps are CLOCK_MONOTONIC, whether read from the TSC
(the default, --op-clock tsc: converted in the process along a line the
agent's thread checks every 20 ms) or from clock_gettime (--op-clock
kernel): every record_function region lies inside the job's own
time.monotonic_ns() reads around it, and ptbpf says which clock it used
and how far the TSC line ever was from the kernel's clock."""
import json
import os
import re

import pytest

from conftest import PTBPF, PYTHON, Proc, pftrace, require

HERE = os.path.dirname(os.path.abspath(__file__))
MARKS = os.path.join(HERE, "workloads", "clockmarks.py")


def has_invariant_tsc():
    with open("/proc/cpuinfo") as f:
        flags = next((l for l in f if l.startswith("flags")), "")
    return " constant_tsc" in flags and " nonstop_tsc" in flags


def run(tmp_path, clock):
    go = str(tmp_path / "go")
    path = str(tmp_path / "t.pftrace")
    job = Proc([PYTHON, MARKS, "--go", go, "--seconds", "3"])
    tracer = None
    try:
        job.wait_line("ready")
        tracer = Proc([require(PTBPF), "-p", str(job.p.pid), "-o", path, "--ops", "agent",
                       "--no-sched", "--no-samples", "--op-clock", clock])
        tracer.wait_line("ptbpf: tracing pid", stream="stderr")
        open(go, "w").close()
        line, _ = job.wait_line("[", timeout=120)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
    finally:
        for p in (tracer, job):
            if p:
                p.kill()
    marks = {"mark#%d" % i: (t0, t1) for i, t0, t1 in json.loads(line)}
    return marks, pftrace.Trace(path), err


@pytest.mark.parametrize("clock", ["tsc", "kernel"])
def test_region_timestamps_are_the_kernel_clock(tmp_path, clock):
    marks, t, err = run(tmp_path, clock)
    assert t.validate() == []
    regions = [s for s in t.slices if s.name in marks]
    assert len(regions) >= 0.9 * len(marks) > 1000, (len(regions), len(marks))
    # Off by: how far a region's begin or end lies outside the job's own
    # reads around it (0 when inside). The kernel's clock is the same
    # clock: 0. The TSC line: within what ptbpf says it checked.
    off = [max(marks[s.name][0] - s.ts, s.ts + s.dur - marks[s.name][1], 0) for s in regions]
    m = re.search(r"op timestamps: from the TSC in 1 process \(its line checked against "
                  r"CLOCK_MONOTONIC (\d+) times: largest difference (\d+) ns, set anew (\d+) "
                  r"times\)", err)
    if clock == "kernel" or not has_invariant_tsc():
        assert m is None, err
        assert max(off) == 0, sorted(off)[-10:]
        assert t.attrs.get("dev.ptbpf.op_clock_tsc_processes") == 0
        return
    assert m, err
    checks, largest, steps = map(int, m.groups())
    assert checks >= 50 and steps == 0, err  # 3 s at one check every 20 ms (or later)
    assert largest < 5000, err
    assert max(off) <= max(largest, 100), sorted(off)[-10:]
    assert t.attrs.get("dev.ptbpf.op_clock_tsc_processes") == 1
    assert t.attrs.get("dev.ptbpf.op_clock_max_difference_ns") == largest
