# SPDX-License-Identifier: BSD-2-Clause
"""report, export and merge stream (issue 12): their memory is bounded by
what they report, not by the trace. An 86 MB trace (the adversarial run's
size) is reported in under 32 MB; the step table is the same whether it
fits its budget or is made in windows over several passes; and every
reader is fuzzed with sanitizers (`make fuzz`) with no finding."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import PTBPF, PYTHON, ROOT, WORKLOAD, Proc

SIZE = 86_000_000


def record(out, size, *args):
    """The demo's training loop traced (agent ops, Python stacks) until the
    trace passes size bytes, then cut there: a cut trace of that size."""
    target = Proc([PYTHON, WORKLOAD, "dataloader", "--steps", "50", "--loop"])
    try:
        target.wait_line("ready")
        tracer = Proc([PTBPF, "-p", str(target.p.pid), "--ops", "agent", "--py-stacks=20",
                       "-o", str(out)] + list(args))
        try:
            tracer.wait_line("ptbpf: tracing pid", stream="stderr")
            partial = str(out) + ".partial"
            deadline = time.time() + 120
            while time.time() < deadline and (not os.path.exists(partial) or
                                               os.path.getsize(partial) < size + 4_000_000):
                time.sleep(0.2)
            tracer.p.send_signal(signal.SIGINT)
            rc, _, err = tracer.finish()
            assert rc == 0, err
        finally:
            tracer.kill()
    finally:
        target.kill()
    assert os.path.getsize(out) > size, "the loop gave less than %d bytes in 2 minutes" % size
    with open(out, "r+b") as f:
        f.truncate(size)
    return str(out)


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    """86 MB of the demo, with the kernel view."""
    return record(tmp_path_factory.mktemp("big") / "big.pftrace", SIZE)


# ru_maxrss counts what a child inherits before it execs (the mm it forked
# from), so ptbpf is started by a small Python of its own, whose children's
# maxrss is then ptbpf's (or that Python's ~10 MB, whichever is larger).
MEASURE = ("import resource, subprocess, sys\n"
           "rc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'w')).returncode\n"
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
           "sys.exit(rc)\n")


def peak_rss_mb(args, tmp_path, env=None):
    """Runs ptbpf args: (returncode, stdout, stderr, its peak RSS in MB)."""
    out = tmp_path / "stdout"
    r = subprocess.run([PYTHON, "-c", MEASURE, str(out), PTBPF] + [str(a) for a in args],
                       capture_output=True, text=True, env=env, timeout=600)
    lines = r.stderr.splitlines()
    return r.returncode, out.read_text(), "\n".join(lines[:-1]), int(lines[-1]) / 1024


def test_report_of_86_mb_in_under_32_mb(big_trace, tmp_path):
    rc, out, err, rss = peak_rss_mb(["report", big_trace, "--json"], tmp_path)
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["trace_status"]["bytes"] + rep["trace_status"]["dropped_bytes"] == SIZE
    assert rep["track_events"] > 1_000_000 and len(rep["steps"]) > 100
    assert rss < 32, "report took %.1f MB for an 86 MB trace" % rss


def test_step_table_is_the_same_within_any_budget(big_trace, tmp_path):
    """The report is the same within an ample budget (all kept) and within
    a small one. A trace in time order (no kernel view) takes
    one pass within a few thousand intervals: older steps are finished
    during it. The kernel view's intervals come late (a thread's run is
    written when it ends, a CPU's switches every second), and so do the
    H200 recording's GPU kernels (in batches): the steps they reach back
    into are made again, in windows over more passes."""
    ordered = record(tmp_path / "ordered.pftrace", 20_000_000, "--no-sched")
    gpu = tmp_path / "gpu.pftrace"
    r = subprocess.run([PTBPF, "replay", os.path.join(ROOT, "tests", "data", "gpu",
                                                      "agent_mlp.raw"), "-o", str(gpu)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for trace, small, passes in ((ordered, "3000", 1), (big_trace, "100000", None),
                                 (str(gpu), "200", None)):
        tables = []
        for budget in (small, "100000000"):
            env = dict(os.environ, PTBPF_REPORT_INTERVALS=budget)
            rc, out, err, _ = peak_rss_mb(["report", trace, "--json"], tmp_path, env=env)
            assert rc == 0, err
            tables.append(json.loads(out))
        n = [t.pop("passes") for t in tables]
        assert n[0] == passes if passes else n[0] > n[1], (trace, n)
        assert tables[0]["steps"] and tables[0] == tables[1]


def test_export_and_merge_stream(big_trace, tmp_path):
    rc, _, err, rss = peak_rss_mb(["export", "--kineto", tmp_path / "k.json", big_trace],
                                  tmp_path)
    assert rc == 0, err
    assert rss < 32, "export took %.1f MB" % rss
    assert os.path.getsize(tmp_path / "k.json") > SIZE
    os.unlink(tmp_path / "k.json")
    rc, _, err, rss = peak_rss_mb(["merge", big_trace, big_trace, "-o", tmp_path / "m.pftrace"],
                                  tmp_path)
    assert rc == 0, err
    assert rss < 32, "merge took %.1f MB" % rss


def test_fuzzers_find_nothing():
    """Each reader's fuzzer (libFuzzer, ASan, UBSan) from its regression
    corpus for a short budget: no crash, no sanitizer report."""
    r = subprocess.run(["make", "-C", ROOT, "fuzz", "FUZZ_SECONDS=15"], capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    lines = [l for l in r.stdout.splitlines() if l.startswith("fuzz: ")]
    assert len(lines) == 6 and all(l.endswith(": 0 findings") for l in lines), r.stdout
