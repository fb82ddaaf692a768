# SPDX-License-Identifier: BSD-2-Clause
"""`ptbpf report --html`: the page, rendered by Debian's chromium (headless),
from CI traces and the H200 recording: no console errors, no request
leaves the page, a screenshot of each view, and the numbers in its tables
are those `ptbpf report --json` prints."""
import json
import os
import shutil
import subprocess
import time

import pytest

import test_ranks as ranks
from browser import Browser
from conftest import PTBPF, require, run_traced, workload_argv

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")
SHOTS = os.environ.get("PTBPF_SCREENSHOT_DIR")
VIEWS = ("hang", "overview", "operators", "kernels", "memory", "python", "waiting", "trace")


def ptbpf(*args):
    r = subprocess.run([PTBPF] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def report_json(trace, *extra):
    return json.loads(ptbpf("report", trace, "--json", *extra).stdout)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A training loop with a DataLoader (ops, shapes, Python stacks), the
    allocator's counters of a memory workload, the H200 recording."""
    require(PTBPF)
    d = tmp_path_factory.mktemp("traces")
    out = {}
    run = run_traced(d, workload_argv("dataloader", 30),
                     ["--ops", "agent", "--shapes", "--py-stacks=4"])
    assert run.rc == 0, run.err
    out["train"] = run.trace_path
    m = d / "m"
    m.mkdir()
    run = run_traced(m, workload_argv("memory", 10), ["--memory", "--ops", "agent"])
    assert run.rc == 0, run.err
    out["memory"] = run.trace_path
    out["gpu"] = str(d / "gpu.pftrace")
    ptbpf("replay", os.path.join(DATA, "agent_mlp.raw"), "-o", out["gpu"])
    return out


# Each table's rows as {column key: data-v, else its text}.
ROWS = """(id => Array.from(document.querySelectorAll('#' + id + ' tbody tr'))
  .filter(tr => !tr.classList.contains('mean'))
  .map(tr => Object.fromEntries(Array.from(tr.children).map(td =>
    [td.dataset.key, td.dataset.v !== undefined ? td.dataset.v : td.textContent]))))"""


def rows(b, table):
    return b.eval("%s(%s)" % (ROWS, json.dumps(table)))


def same(page_rows, json_rows, keys):
    """Page rows (strings) against JSON rows, column by column."""
    assert len(page_rows) == len(json_rows), (len(page_rows), len(json_rows))
    for p, j in zip(page_rows, json_rows):
        for k in keys:
            want = j.get(k, "")
            got = p[k]
            if isinstance(want, (int, float)) and not isinstance(want, bool):
                assert float(got) == pytest.approx(want, rel=1e-9, abs=1e-9), (k, p, j)
            else:
                assert got == str(want), (k, p, j)


def open_page(b, html, shots_prefix):
    url = b.open(html)
    assert b.problems(url) == []
    click_views(b, url, shots_prefix)
    return url


def click_views(b, url, shots_prefix):
    """Each view of the open page shown in turn (a screenshot of each with
    PTBPF_SCREENSHOT_DIR): nothing goes wrong."""
    for v in VIEWS:
        if b.eval("!!document.getElementById('tab-%s')" % v):
            b.eval("document.getElementById('tab-%s').click()" % v)
            if SHOTS:
                b.screenshot(os.path.join(SHOTS, "%s-%s.png" % (shots_prefix, v)))
    assert b.problems(url) == []


def check_tables(b, rep, by_shape=None):
    steps = rep["steps"][:100]
    keys = ["name", "dur_ns", "kernel_ns", "gpu_busy_ns", "memcpy_ns", "memset_ns",
            "cuda_api_ns", "dataloader_ns", "host_ops_ns"]
    if steps:
        page = rows(b, "steps-table")
        same(page, steps, keys)
        for p, s in zip(page, steps):
            for k, v in s["breakdown_ns"].items():
                assert int(p["brk:" + k]) == v
        bars = b.eval("""Array.from(document.querySelectorAll('#step-bars rect'))
                         .map(r => [r.dataset.step, r.dataset.kind, +r.dataset.v])""")
        by_step = {(s["name"], k): v for s in rep["steps"] for k, v in s["breakdown_ns"].items()}
        if len(rep["steps"]) <= 200:  # one bar per step
            assert bars and all(by_step[(n, k)] == v for n, k, v in bars)
        pie = b.eval("""Object.fromEntries(Array.from(document.querySelectorAll(
                        '#breakdown-pie [data-name]')).map(p => [p.dataset.name, +p.dataset.v]))""")
        for k, v in pie.items():
            assert v == pytest.approx(sum(s["breakdown_ns"][k] for s in rep["steps"]) /
                                      len(rep["steps"]))
        assert b.eval("Array.from(document.querySelectorAll('#recommendations li'))"
                      ".map(li => li.textContent)") == rep["recommendations"]
        oc = rep["other_causes"]
        if oc["kernel_view"] and oc["other_ns"]:
            same(rows(b, "other-causes-table"), oc["causes"] + [
                {"cause": "unexplained", "ns": oc["unexplained_ns"]}], ["cause", "ns"])
        gi = rep["gpu_idle"]
        if gi["gaps"]:
            want = [{"cause": k, "ns": v} for k, v in gi["covered_ns"].items() if v] + \
                [{"cause": "launching thread: " + c["cause"], "ns": c["ns"]}
                 for c in gi["launching_thread"]] + \
                [{"cause": "unexplained", "ns": gi["unexplained_ns"]}]
            same(rows(b, "gpu-idle-table"), want, ["cause", "ns"])
    op_keys = ["name", "calls", "host_total_ns", "host_self_ns", "device_total_ns",
               "device_self_ns", "alloc_bytes"]
    same(rows(b, "operators-table"), rep["operators"], op_keys)
    if by_shape:
        b.eval("const s = document.getElementById('op-group'); s.value = 'shape';"
               "s.dispatchEvent(new Event('change'))")
        same(rows(b, "operators-by-shape-table"), by_shape["operators"],
             op_keys + ["input_shapes"])
        b.eval("const t = document.getElementById('op-group'); t.value = 'op';"
               "t.dispatchEvent(new Event('change'))")
    if rep["kernels"]:
        page = rows(b, "kernels-table")
        same(page, rep["kernels"], ["name", "calls", "total_ns", "min_ns", "max_ns"])
        shown = b.eval("Array.from(document.querySelectorAll('#kernels-table td[data-key=name]'))"
                       ".map(td => [td.textContent, td.title])")
        assert [s for s, _ in shown] == [k["display_name"] for k in rep["kernels"]]
        assert [t for _, t in shown] == [k["name"] for k in rep["kernels"]]
        assert len(set(s for s, _ in shown)) == len(shown)
    for key, table, named in (("cuda_graphs", "cuda-graphs-table", "captured_ns"),
                              ("compiled_graphs", "compiled-graphs-table", "with_aten_ops_ns")):
        if rep[key]:
            page = rows(b, table)
            pids = ["pid"] if len({g["pid"] for g in rep[key]}) > 1 else []
            same(page, rep[key], pids + ["graph", "kernels", "device_ns", named])
            assert [p["part"] for p in page] == [
                max(g["parts"], key=lambda x: x["device_ns"])["name"] for g in rep[key]]
    if rep["memory"]:
        same(rows(b, "memory-table"), rep["memory"], ["pid", "counter", "peak_bytes",
                                                      "peak_ts_ns"])
        lines = b.eval("document.querySelectorAll('#memory-curve polyline').length")
        assert lines == len(rep["memory"])
    if rep["python_sites"]:
        same(rows(b, "python-table"), rep["python_sites"], ["site", "ops", "host_total_ns"])


def test_page_of_a_cpu_training_loop(traces, tmp_path):
    """Steps, operators (by op and by input shapes), Python call sites."""
    html = tmp_path / "train.html"
    ptbpf("report", traces["train"], "--html", html)
    rep, by_shape = report_json(traces["train"]), report_json(traces["train"], "--group-by-shape")
    assert rep["steps"] and rep["python_sites"] and any("input_shapes" in o
                                                         for o in by_shape["operators"])
    text = html.read_text()
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    with Browser() as b:
        open_page(b, html, "train")
        check_tables(b, rep, by_shape)
        # no hang capture, no ranks: neither view
        assert "hang" not in rep and "waiting_for" not in rep
        assert b.eval("!!document.getElementById('tab-hang') || "
                      "!!document.getElementById('tab-waiting')") is False
        # sorting by a column orders the rows by its values
        b.eval("document.querySelector('#operators-table th[data-key=calls]').click()")
        calls = [int(r["calls"]) for r in rows(b, "operators-table")]
        assert calls == sorted(calls, reverse=True)


def test_page_of_memory_counters(traces, tmp_path):
    html = tmp_path / "memory.html"
    ptbpf("report", traces["memory"], "--html", html)
    rep = report_json(traces["memory"])
    assert rep["memory"] and all(m["curve"] for m in rep["memory"])
    for m in rep["memory"]:  # the curve keeps the peak
        assert max(v for _, v in m["curve"]) == m["peak_bytes"]
    with Browser() as b:
        open_page(b, html, "memory")
        check_tables(b, rep)


def test_page_of_the_recorded_gpu_run(traces, tmp_path):
    """The H200 recording: kernels with their short names (the full one on
    hover), device time on ops, the step breakdown with its Kernel share."""
    html = tmp_path / "gpu.html"
    ptbpf("report", traces["gpu"], "--html", html)
    rep = report_json(traces["gpu"])
    assert rep["kernels"] and rep["steps"]
    with Browser() as b:
        open_page(b, html, "gpu")
        check_tables(b, rep)
    r = subprocess.run([PTBPF, "report", traces["gpu"], "--html", html], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "exists; not replaced (--force replaces it)" in r.stderr


def test_page_of_compiled_and_graph_replayed_runs(tmp_path):
    """The H200's torch.compile recordings (issue 45): the CUDA graphs'
    replayed kernels by the op that captured them, and the compiled graphs'
    Triton kernels by the ATen ops they fuse, in the page as in the JSON,
    and in the text report."""
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")
    for raw, key in (("graph_ops.raw", "cuda_graphs"), ("triton_ops.raw", "compiled_graphs")):
        trace = tmp_path / (raw + ".pftrace")
        ptbpf("replay", os.path.join(data, raw), "-o", trace)
        rep = report_json(str(trace))
        assert rep[key], key
        html = tmp_path / (raw + ".html")
        ptbpf("report", trace, "--html", html)
        with Browser() as b:
            open_page(b, html, raw)
            check_tables(b, rep)
        text = subprocess.run([PTBPF, "report", str(trace)], capture_output=True, text=True,
                              timeout=120).stdout
        assert ("CUDA graphs: replayed kernels" if key == "cuda_graphs" else
                "Compiled graphs (torch.compile)") in text, text[-2000:]
    graphs = report_json(str(tmp_path / "graph_ops.raw.pftrace"))["cuda_graphs"]
    assert sum(g["kernels"] for g in graphs) == 413
    assert all(g["captured_ns"] == g["device_ns"] for g in graphs)
    # Two ranks' traces merged: their graph ids repeat, each keeps its rows.
    shutil.copy(tmp_path / "graph_ops.raw.pftrace", tmp_path / "rank1.pftrace")
    merged = tmp_path / "ranks.pftrace"
    ptbpf("merge", tmp_path / "graph_ops.raw.pftrace", tmp_path / "rank1.pftrace", "-o", merged)
    rep = report_json(str(merged))
    by_pid = {}
    for g in rep["cuda_graphs"]:
        by_pid.setdefault(g["pid"], []).append((g["graph"], g["kernels"]))
    assert len(by_pid) == 2 and all(sorted(v) == sorted((g["graph"], g["kernels"]) for g in graphs)
                                    for v in by_pid.values()), by_pid
    html = tmp_path / "ranks.html"
    ptbpf("report", merged, "--html", html)
    with Browser() as b:
        open_page(b, html, "ranks")
        check_tables(b, rep)
    text = subprocess.run([PTBPF, "report", str(merged)], capture_output=True, text=True,
                          timeout=120).stdout
    assert "  pid " in text.split("CUDA graphs: replayed kernels", 1)[1].splitlines()[1], text[-2000:]


def test_diff_page(traces, tmp_path):
    """report --diff A B: per-op and per-kernel differences, as JSON and as
    a page whose tables hold the same numbers."""
    a, b_ = traces["gpu"], traces["train"]
    diff = json.loads(ptbpf("report", "--diff", a, b_, "--json").stdout)["diff"]
    names = {o["name"] for o in diff["operators"]}
    assert {"aten::addmm", "aten::linear"} <= names
    for o in diff["operators"]:
        if o["name"] == "aten::addmm":
            assert o["calls_a"] == 30 and o["calls_b"] > 0
    assert all(k["calls_b"] == 0 for k in diff["kernels"])  # B ran on the CPU
    text = ptbpf("report", "--diff", a, b_).stdout
    assert "Operators by change" in text and "Kernels by change" in text
    html = tmp_path / "diff.html"
    ptbpf("report", "--diff", a, b_, "--html", html)
    with Browser() as b:
        url = b.open(html)
        assert b.problems(url) == []
        if SHOTS:
            b.screenshot(os.path.join(SHOTS, "diff.png"))
        same(rows(b, "diff-operators-table"), diff["operators"],
             ["name", "calls_a", "calls_b", "host_total_a_ns", "host_total_b_ns",
              "device_total_a_ns", "device_total_b_ns"])
        same(rows(b, "diff-kernels-table"), diff["kernels"],
             ["name", "calls_a", "calls_b", "total_a_ns", "total_b_ns"])


def test_text_report_tells_kernels_apart(traces):
    """Kernel rows of the text report: none cut into another's name."""
    text = ptbpf("report", traces["gpu"], "--top", "100").stdout
    table = text.split("Kernels by total device time")[1].splitlines()[2:]
    names = [line[2:62].rstrip() for line in table if line.strip()]
    rep = report_json(traces["gpu"])
    assert len(names) == len(rep["kernels"]) == len(set(names))
    assert all(len(n) <= 60 for n in names)
    assert "multi_tensor_apply_kernel" in text or "gemm" in text


def test_report_starts_with_what_the_trace_lost(tmp_path):
    """A trace whose capture counted losses: the text report's first line
    after its title, the JSON and the page (above every view) say what was
    lost, how many, and why; a trace without losses has no such line."""
    from synth_trace import Synth
    s = Synth()
    thread = s.thread(7, 7, "python3")
    for i in range(3):
        s.slice(thread, 10_000 + i * 1_000, 500, "aten::add", "cpu_op")
    s.attribute("dev.ptbpf.op_begins_read", 146678)
    s.attribute("dev.ptbpf.op_begins_lost_ring_full", 353322)
    s.attribute("dev.ptbpf.lost_cpu_samples", 12)
    s.attribute("dev.ptbpf.sched_lost_switch_ringbuf_full", 0)
    lossy = s.write(tmp_path / "lossy.pftrace")
    line = ("LOST: 353322 ops (70.7% of 500000): their thread's op ring was full: ptbpf read it "
            "too late (stalled, or slower than the job); 12 CPU samples: the BPF ring was full. "
            "Every count below is of what was recorded.")
    assert ptbpf("report", lossy).stdout.splitlines()[1] == line
    rep = report_json(lossy)
    assert rep["loss_line"] == line
    assert [(l["what"], l["count"]) for l in rep["losses"]] == [("ops", 353322),
                                                                ("CPU samples", 12)]
    html = tmp_path / "lossy.html"
    ptbpf("report", lossy, "--html", html)
    with Browser() as b:
        url = b.open(html)
        assert b.problems(url) == []
        assert b.eval("document.getElementById('loss-line').textContent") == line
        # above the views: in the header, before the tabs
        assert b.eval("!!document.querySelector('header #loss-line')")
    s = Synth()
    s.slice(s.thread(7, 7, "python3"), 10_000, 500, "aten::add", "cpu_op")
    whole = s.write(tmp_path / "whole.pftrace")
    assert not ptbpf("report", whole).stdout.splitlines()[1].startswith("LOST")
    assert report_json(whole)["loss_line"] == ""


def test_page_of_a_hang_capture(tmp_path):
    """The daemon's hang capture of 4 gloo ranks whose rank 2 sleeps
    (tests/test_ranks.py): the page opens on its Hang view, which names
    rank 2, its pid, its frame and thread, and the others' common wait."""
    require(PTBPF)
    tag = "%d-html-hang-%d" % (os.getpid(), int(time.time()))
    job, path, _, _ = ranks.stall(tmp_path, tag, "sleep", "5s")
    hang = report_json(path)["hang"]
    pid = job.pids[2]
    assert [x["pid"] for x in hang["never_entered"]] == [pid], hang
    html = tmp_path / "hang.html"
    ptbpf("report", path, "--html", html)
    with Browser() as b:
        url = b.open(html)
        assert b.problems(url) == []
        # first, and the view the page opens on
        assert b.eval("document.querySelector('#tabs button').id") == "tab-hang"
        assert b.eval("document.getElementById('view-hang').classList.contains('on')")
        said = b.eval("Array.from(document.querySelectorAll('#hang-summary li'))"
                      ".map(li => li.textContent)")
        assert said == [
            "rank 2 (pid %d) never entered gloo:all_reduce #%d (it entered %d collectives)." % (
                pid, hang["seq"], hang["never_entered"][0]["entered"]),
            "The others' common wait: 3 of the job's 4 processes on this host wait in "
            "gloo:all_reduce #%d, the oldest for %.1f s." % (hang["seq"], hang["waiting_s"])]
        same(rows(b, "hang-table"), hang["never_entered"],
             ["rank", "pid", "entered", "frame", "thread"])
        shown = b.eval("Array.from(document.querySelectorAll('#hang-table td'))"
                       ".map(td => td.textContent)")
        assert shown[:3] == ["2", str(pid), "no"], shown
        assert "ranks.py(" in shown[4] and "stuck_sleeping" in shown[4], shown
        assert shown[5].startswith("sleep (clock_nanosleep)"), shown
        click_views(b, url, "hang")


def test_page_of_a_straggling_job(tmp_path):
    """A daemon window over 4 gloo ranks whose rank 2 sleeps before each
    all_reduce (tests/test_ranks.py): the Waiting-for view names rank 2 and
    the sleep in most steps, and its rows are the JSON's."""
    require(PTBPF)
    tag = "%d-html-wait-%d" % (os.getpid(), int(time.time()))
    job, _, path = ranks.straggle(tmp_path, tag, ["--straggle", "sleep"])
    steps = report_json(path)["waiting_for"]["steps"]
    html = tmp_path / "waiting.html"
    ptbpf("report", path, "--html", html)
    with Browser() as b:
        open_page(b, html, "waiting")
        b.eval("document.getElementById('tab-waiting').click()")
        summary = rows(b, "waiting-summary-table")
        top = summary[0]
        assert top["last"] == "rank 2" and top["cause"] == "sleep (clock_nanosleep)", summary
        assert float(top["share"]) > 0.5, summary
        want = {}
        for r in steps:
            want[(r["last"], r["cause"])] = want.get((r["last"], r["cause"]), 0) + 1
        assert {(r["last"], r["cause"]): int(r["steps"]) for r in summary} == want
        assert want[("rank 2", "sleep (clock_nanosleep)")] == sum(
            1 for r in steps if r["last_pid"] == job.pids[2] and r["cause"] == top["cause"])
        share = b.eval("document.querySelector('#waiting-summary-table td[data-key=share]')"
                       ".textContent")
        assert share == "%.1f%%" % (100 * int(top["steps"]) / len(steps))
        same(rows(b, "waiting-table"), steps[:100],
             ["step", "collective", "last", "waited_ms", "longest_ms", "cause"])
