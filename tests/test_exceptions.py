# SPDX-License-Identifier: BSD-2-Clause
"""Exceptions, forced unwinds and deep recursion through traced frames never
harm the target: its output is identical with and without ptbpf, and the
trace's slices stay well nested with unwound frames marked. Every case runs
with both op sources: uprobes (frames closed at __cxa_begin_catch) and the
agent's RecordFunction callbacks (closed by ~RecordFunction during the
unwind, marked when an exception is in flight)."""
import pytest

from conftest import run_traced, run_untraced, simfail_argv, workload_argv


SOURCES = ["probes", "agent"]
source = pytest.mark.parametrize("source", SOURCES)


def assert_same_output(tmp_path, argv, source):
    rc0, out0 = run_untraced(tmp_path, argv)
    run = run_traced(tmp_path, argv, ["--ops", source])
    assert run.target_rc == rc0 == 0, run.err
    strip = lambda o: [l for l in o.splitlines() if not l.startswith("ready")]
    assert strip(run.target_out) == strip(out0)
    assert run.rc == 0, run.err
    assert run.trace.validate() == []
    if source == "agent":
        assert "ptbpf: agent op rings:" in run.err, run.err
    return run


def unwound(trace, name):
    return [s for s in trace.slices if s.name == name and s.args.get("unwound_by_exception")]


@source
def test_python_try_except_loop(tmp_path, source):
    run = assert_same_output(tmp_path, workload_argv("exceptions", 300), source)
    t = run.trace
    # torch.mm throws in every iteration; linear throws from a nested op.
    assert len(unwound(t, "aten::mm")) >= 300
    assert len(unwound(t, "aten::linear")) >= 300
    # The add after each catch is a normal, complete op.
    adds = [s for s in t.slices if s.name == "aten::add"]
    assert len(adds) == 300 and not any(s.args.get("unwound_by_exception") for s in adds)


@source
def test_outer_op_survives_nested_exception(tmp_path, source):
    """A custom kernel for aten::dot catches an exception from a nested
    aten::mm: dot's own exit is recorded normally (it is not unwound)."""
    run = assert_same_output(tmp_path, simfail_argv("catch", 50), source)
    t = run.trace
    dots = [s for s in t.slices if s.name == "aten::dot"]
    assert len(dots) == 50
    assert not any(s.args for s in dots if set(s.args) - {"overload", "seq", "sequence_nr"}), dots[:3]
    mms = unwound(t, "aten::mm")
    assert len(mms) == 50
    # Each unwound mm is nested inside a dot.
    for mm in mms:
        assert any(d.track == mm.track and d.ts <= mm.ts and mm.ts + mm.dur <= d.ts + d.dur
                   for d in dots)


@source
def test_rethrow(tmp_path, source):
    run = assert_same_output(tmp_path, simfail_argv("rethrow", 50), source)
    assert len(unwound(run.trace, "aten::vdot")) == 50
    assert len(unwound(run.trace, "aten::mm")) == 50


@source
def test_exception_through_nested_ops(tmp_path, source):
    run = assert_same_output(tmp_path, simfail_argv("nested", 50), source)
    assert len(unwound(run.trace, "aten::linear")) == 50


@source
def test_recursion_deeper_than_64(tmp_path, source):
    run = assert_same_output(tmp_path, simfail_argv("recurse", 5), source)
    traces = [s for s in run.trace.slices if s.name == "aten::trace"]
    assert len(traces) == 5 * 101
    assert max(s.depth for s in traces) >= 100


@source
def test_pthread_exit_through_traced_frames(tmp_path, source):
    run = assert_same_output(tmp_path, simfail_argv("pthread_exit", 20), source)
    histc = [s for s in run.trace.slices if s.name == "aten::histc"]
    assert len(histc) == 20
    # Forced unwinding (pthread_exit) ends the frame without a ret; it is no
    # C++ exception, so ~RecordFunction's end looks like a plain end.
    if source == "probes":
        assert all(s.args.get("unwound_by_exception") or s.args.get("cut_by_exit")
                   for s in histc)
