# SPDX-License-Identifier: BSD-2-Clause
"""--memory: the allocator's blocks from c10::reportMemoryUsageToProfiler,
as counter tracks and per-op bytes, checked against allocations the
workload is known to make. CI has no GPU: torch's CPU allocator reports
through the same function while the memory profiler is on, so the CPU run
goes through the real libc10 path end to end; tests/gpu checks the CUDA
caching allocator against torch.cuda.memory_allocated()."""
import collections
import json
import subprocess

from conftest import PTBPF, run_traced, workload_argv
from pftrace import Trace
from test_report import report

MiB = 1 << 20


def test_memory_timeline_of_known_allocations(tmp_path):
    steps = 8
    run = run_traced(tmp_path, workload_argv("memory", steps), ["--memory", "--ops", "agent"])
    assert run.rc == 0, run.err
    assert run.target_rc == 0
    t = Trace(run.trace_path)
    assert not t.errors, t.errors[:5]
    alloc = t.counter_by_name("cpu memory allocated")
    assert alloc, "no cpu memory counter track"
    values = [v for _, v in alloc]
    # The running total peaks when the last step's new y is made while the
    # old y still lives: steps kept MiB + old y + new x + new y (plus the
    # few bytes of wrapped scalars).
    peak = max(values)
    assert (steps + 3) * MiB <= peak < (steps + 3) * MiB + 64 * 1024, peak
    assert values[-1] < peak  # the last records are the frees at the end
    # A block belongs to the innermost op: aten::ones allocates through
    # aten::empty, aten::mul (structured) in itself. So aten::empty holds
    # two 1 MiB blocks a step, aten::mul one, aten::ones none of its own.
    by_op = collections.defaultdict(list)
    for s in t.slices:
        if s.category == "cpu_op" and "alloc_bytes" in s.args:
            by_op[s.name].append(s.args["alloc_bytes"])
    want = {"aten::empty": 2 * steps, "aten::mul": steps, "aten::ones": 0}
    for op, n in want.items():
        assert [b for b in by_op[op] if b >= MiB] == [MiB] * n, (op, by_op[op])
    rep = json.loads(report(run.trace_path, "--json"))
    mem = {m["counter"]: m for m in rep["memory"]}
    assert mem["cpu memory allocated"]["peak_bytes"] == peak
    ops = {o["name"]: o for o in rep["operators"]}
    for op, n in want.items():
        assert n * MiB <= ops[op]["alloc_bytes"] < n * MiB + 64 * 1024, ops[op]
    # The Kineto export: each change of the allocated counter after the
    # first is a "[memory]" instant, with the change as its Bytes.
    out = tmp_path / "k.json"
    r = subprocess.run([PTBPF, "export", "--kineto", str(out), run.trace_path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mem_events = [e for e in json.loads(out.read_text())["traceEvents"]
                  if e.get("name") == "[memory]"]
    assert [e["args"]["Total Allocated"] for e in mem_events] == values[1:]
    assert [e["args"]["Bytes"] for e in mem_events] == \
        [b - a for a, b in zip(values, values[1:])]
    assert all(e["args"]["Device Type"] == 0 and e["cat"] == "cpu_instant_event"
               for e in mem_events)
    text = report(run.trace_path)
    assert "Ops by bytes allocated in them" in text and "cpu memory allocated" in text
    assert "allocator records" in run.err

