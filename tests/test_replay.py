# SPDX-License-Identifier: BSD-2-Clause
"""Raw captures (--raw) re-make the same trace (`ptbpf replay`), and a raw
capture recorded on the GPU machine with the CUPTI agent (tests/data/gpu)
drives the join of device records to their launches here, in CI."""
import json
import os
import struct
import subprocess

from conftest import PTBPF, run_traced, workload_argv
from launches import profiler_kernel_counts, short_kernel_name
import pftrace
import rawfile

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")


def replay(raw, out):
    r = subprocess.run([PTBPF, "replay", raw, "-o", out], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return pftrace.Trace(out)


def test_replay_remakes_the_trace(tmp_path):
    raw = str(tmp_path / "c.raw")
    run = run_traced(tmp_path, workload_argv("mlp", 5), ptbpf_args=["--raw", raw, "--no-sched"])
    assert run.rc == 0, run.err
    live, again = run.trace, replay(raw, str(tmp_path / "again.pftrace"))
    assert again.validate() == []
    assert again.op_counts() == live.op_counts()
    assert again.op_counts("backward") == live.op_counts("backward")
    key = lambda s: (s.name, s.ts, s.dur, s.depth)
    # A raw capture keeps the BPF ring's records, not the kernel view's
    # (docs/blind-spots.md): its slices ("blocked in" tracks) are the only
    # difference.
    view = ("syscall", "fault")
    assert not [s for s in again.slices if s.category in view]
    assert sorted(map(key, again.slices)) == \
        sorted(key(s) for s in live.slices if s.category not in view)


def test_replay_refuses_what_is_not_a_capture(tmp_path):
    bad = tmp_path / "bad.raw"
    bad.write_text("hello")
    r = subprocess.run([PTBPF, "replay", str(bad), "-o", str(tmp_path / "x.pftrace")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "not a ptbpf raw capture" in r.stderr


def test_recorded_gpu_timeline_joins_kernels_to_launches(tmp_path):
    """Recorded on the H200 (torch 2.11, mlp on CUDA, 10 steps, agent loaded
    by ptrace, ops and CUDA calls from the agent's callbacks): every kernel
    gets a flow from its launch's correlation on the
    launching thread, starts after it, and the kernels per name are the ones
    torch.profiler saw in the same workload."""
    t = replay(os.path.join(DATA, "agent_mlp.raw"), str(tmp_path / "agent.pftrace"))
    assert t.validate() == []
    kernels = [s for s in t.slices if s.category == "kernel"]
    assert kernels
    corr = {f: s.ts for s in t.instants if s.name == "cupti correlation" for f in s.flows_out}
    for k in kernels:
        assert k.flows_in and k.flows_in[0] in corr, k
        assert k.ts >= corr[k.flows_in[0]], k
        assert {"grid", "block", "registers", "shared_mem"} <= set(k.args)
    prof = profiler_kernel_counts(os.path.join(DATA, "agent_mlp.device.json"))
    ours = {}
    for k in kernels:
        ours[short_kernel_name(k.name)] = ours.get(short_kernel_name(k.name), 0) + 1
    assert ours == prof
    streams = [d.name for d in t.tracks.values() if d.name.startswith("GPU ")]
    assert any(" / stream " in n for n in streams), streams
    # Ops and CUDA calls came from the agent (RecordFunction and CUPTI
    # callbacks, --ops agent): 3 Linear layers x 10 steps, and every
    # launch sits in an op and has a flow from it.
    assert t.op_counts()["aten::addmm"] == 30
    anc = t.ancestors()
    launches = [i for i, s in enumerate(t.slices) if s.name.startswith("cudaLaunchKernel")]
    assert len(launches) == len(kernels)
    for i in launches:
        assert "cpu_op" in [t.slices[a].category for a in anc[i]], t.slices[i]
        assert t.slices[i].flows_in, t.slices[i]


def test_recorded_gpu_trace_says_each_fact_once(tmp_path):
    """The recorded capture again: a launch's correlation is on the agent's
    CUDA call slice alone, where the launch -> kernel flow starts (at its
    "cupti correlation" instant): not on the instant, nor on the GPU
    activity at the flow's end; a call's cbid only where its name does not
    give it; a GPU activity's context once per stream track; a kernel's
    shared memory is shared_mem (static plus dynamic, as Kineto gives it)
    with dynamic_shared_mem only where there is some; a copy's kinds are in
    its name (Kineto's), not again as numbers. The Kineto export still
    gives every GPU activity its correlation, context and the call's cbid."""
    path = str(tmp_path / "agent.pftrace")
    t = replay(os.path.join(DATA, "agent_mlp.raw"), path)
    calls = {(s.track, s.ts): s for s in t.slices
             if s.category in ("cuda_runtime", "cuda_driver")}
    assert calls and not [s for s in calls.values() if "cbid" in s.args]
    launch_corr = {}
    for i in t.instants:
        if i.name == "cupti correlation":
            assert i.args == {}, i
            call = calls[(i.track, i.ts)]
            for f in i.flows_out:
                launch_corr[f] = call.args["correlation"]
    gpu = [s for s in t.slices if s.category in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert gpu and any(s.category == "gpu_memcpy" for s in gpu)
    with_context = {}
    for s in gpu:
        assert s.flows_in[0] in launch_corr and "correlation" not in s.args, s
        if "context" in s.args:
            with_context.setdefault(s.track, []).append(s.args["context"])
        if s.category == "kernel":
            assert "static_shared_mem" not in s.args, s
            dyn = s.args.get("dynamic_shared_mem")
            assert dyn is None or 0 < dyn <= s.args["shared_mem"], s
        else:
            assert not {"copy_kind", "src_kind", "dst_kind", "memory_kind"} & set(s.args), s
            assert s.name.startswith(("Memcpy ", "Memset (")) and s.name.endswith(")"), s
    assert set(with_context) == {s.track for s in gpu}, with_context
    assert all(len(v) == 1 for v in with_context.values()), with_context
    out = str(tmp_path / "agent.json")
    r = subprocess.run([PTBPF, "export", path, "-k", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    events = json.load(open(out))["traceEvents"]
    rt = {e["args"]["correlation"]: e for e in events
          if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    assert rt and all(e["args"].get("cbid", -1) > 0 for e in rt.values())
    kineto_gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(kineto_gpu) == len(gpu)
    for e in kineto_gpu:
        assert e["args"]["correlation"] in rt and e["args"]["context"] == \
            next(iter(with_context.values()))[0], e


def test_graph_replayed_kernels_join_their_capture(tmp_path):
    """A torch.compile(mode="reduce-overhead") job started by `ptbpf run`
    (H200, torch 2.11, 2026-12-02; tests/workloads/compiled.py, 20 steps):
    its CUDA graphs were captured while traced, and every replayed kernel
    names its capture (graph_node, capture_correlation; issue 45). The
    oracle is ptbpf's other path: the capture-time launch that correlation
    names, seen by the libcuda uprobes, launched the same kernel by name,
    into the capturing stream (captured=true)."""
    t = replay(os.path.join(DATA, "graph_capture.raw"), str(tmp_path / "graph.pftrace"))
    assert t.validate() == []
    replayed = [s for s in t.slices if s.category == "kernel" and "graph_id" in s.args]
    assert len(replayed) == 1416
    launches = {}
    for s in t.slices:
        if s.category == "cuda_driver" and s.name.startswith("cuLaunchKernel"):
            launches.setdefault(s.track, []).append(s)
    for v in launches.values():
        v.sort(key=lambda s: s.ts)
    # A correlation -> its driver launch: the one around its instant (a
    # direct driver launch, Triton's), else the next (the instant is at the
    # runtime call's entry, before its driver call).
    by_corr = {}
    for i in t.instants:
        if i.name == "cupti correlation":
            mine = launches.get(i.track, [])
            inside = [c for c in mine if c.ts <= i.ts <= c.ts + c.dur]
            after = [c for c in mine if c.ts >= i.ts]
            by_corr[i.args.get("correlation")] = (inside or after or [None])[0]
    named = 0
    for k in replayed:
        c = by_corr.get(k.args["capture_correlation"])
        assert c is not None and c.args.get("captured") is True, (k, c)
        assert (c.args["grid"], c.args["block"]) == (k.args["grid"], k.args["block"]), (k, c)
        # cuLaunchKernelEx's kernel unnamed; long names cut, some mangled there
        name = c.args["kernel"]
        assert k.name.startswith(name) or name.startswith("_Z"), (k, c)
        named += c.args["kernel"] == k.name
    assert named >= len(replayed) // 2, named


def test_graph_replayed_kernels_name_the_op_that_captured_them(tmp_path):
    """The same job with its ops (H200, 2026-12-02: `ptbpf run` of
    compiled.py reduce-overhead, 3 steps, a warm Inductor cache): every
    replayed kernel's captured_by is the op that encloses, on its thread,
    the CUDA call of its capture_correlation (the oracle: the trace's own
    nesting), and never that call itself."""
    t = replay(os.path.join(DATA, "graph_ops.raw"), str(tmp_path / "graph.pftrace"))
    assert t.validate() == []
    replayed = [s for s in t.slices if s.category == "kernel" and "graph_id" in s.args]
    assert len(replayed) == 413
    calls = {s.args["correlation"]: s for s in t.slices
             if s.category in ("cuda_runtime", "cuda_driver") and "correlation" in s.args}
    ops = {}
    for s in t.slices:
        if s.category in ("cpu_op", "backward_function", "user_annotation"):
            ops.setdefault(s.track, []).append(s)
    for k in replayed:
        call = calls[k.args["capture_correlation"]]
        around = [o for o in ops.get(call.track, [])
                  if o.ts <= call.ts and call.ts + call.dur <= o.ts + o.dur]
        inner = max(around, key=lambda o: o.ts)
        assert k.args.get("captured_by") == inner.name, (k, call, inner)
    assert {k.args["captured_by"] for k in replayed} == {
        "aten::mm", "aten::addmm", "CompiledFunction", "CompiledFunctionBackward"}
    # The Kineto export (HTA, TensorBoard) keeps them on the kernels.
    kernels = kineto_kernels(str(tmp_path / "graph.pftrace"), str(tmp_path / "graph.json"))
    graphed = [e for e in kernels if "graph node id" in e["args"]]
    assert len(graphed) == 413
    assert all(e["args"]["captured by"] in {"aten::mm", "aten::addmm", "CompiledFunction",
                                            "CompiledFunctionBackward"} for e in graphed)


# A graph node's ring record: EV_AGENT_RECORD with AGENT_REC_GRAPH_NODE
# (include/ptbpf_events.h), then struct ptbpf_agent_graph_node.
AGENT_REC_GRAPH_NODE = 4


def graph_node(payload):
    """(kind, node id, original id) of a graph node's ring record, else None."""
    hdr = rawfile.EVENT_HDR
    if len(payload) < hdr + 32 or struct.unpack_from("<HxxI", payload, 16) != (
            rawfile.EV_AGENT_RECORD, AGENT_REC_GRAPH_NODE):
        return None
    node, original = struct.unpack_from("<QQ", payload, hdr)
    return struct.unpack_from("<I", payload, hdr + 24)[0], node, original


def test_graph_nodes_cloned_from_nodes_never_seen_made(tmp_path):
    """CUPTI 13 tells each node of a graph being instantiated as made (inside
    the instantiating call, under the op open then) and then as cloned from
    the captured node, under the same id (graph_ops.raw: 59 captured nodes,
    then 61 made and 59 cloned by the instantiations). Where the captured
    nodes were never seen (the capture before the attach, the
    instantiation after), the clones' kernels have no capturing op: not the
    op of the instantiating call, which the copy's record named."""
    path = os.path.join(DATA, "graph_ops.raw")
    nodes = [g for tag, p in rawfile.items(path) if tag == b"R" for g in [graph_node(p)] if g]
    captured = {original for kind, _, original in nodes if kind == 2}
    assert len(captured) == 59 and len(nodes) == 179
    cut = tmp_path / "uncaptured.raw"
    with open(cut, "wb") as f:
        f.write(rawfile.MAGIC)
        for tag, p in rawfile.items(path):
            g = graph_node(p) if tag == b"R" else None
            if not (g and g[0] == 1 and g[1] in captured):
                f.write(rawfile.item(tag, p))
    t = replay(str(cut), str(tmp_path / "uncaptured.pftrace"))
    assert t.validate() == []
    replayed = [s for s in t.slices if s.category == "kernel" and "graph_id" in s.args]
    assert len(replayed) == 413
    assert [s for s in replayed if "captured_by" in s.args or "capture_correlation" in s.args] \
        == []


def replayed_ops(trace):
    """{kernel name: {captured_by}} of a trace's replayed kernels."""
    ops = {}
    for s in trace.slices:
        if s.category == "kernel" and "graph_id" in s.args:
            ops.setdefault(s.name, set()).add(s.args.get("captured_by"))
    return ops


def test_daemon_window_joins_replays_through_the_kept_map(tmp_path):
    """A `ptbpf daemon --keep-graphs` window over 30 steps of the same
    reduce-overhead job, opened long after its graphs were captured (H200,
    2026-12-04, tests/gpu's test_daemon_keeps_the_capture_map). The window
    holds no capture of its own, only the map the always-on layer kept and
    sent at its start: 61 nodes made in the captures, each with the op open
    then, and the instantiations' 59 clones of them (the agent's clone took
    over each copy made under CompiledFunction). All 1,770 replayed kernels
    join through it, clone to captured node to op. The oracle: graph_ops.raw,
    `ptbpf run` of the same job, which saw each capture itself, names the
    same ops for each of the 18 kernels."""
    t = replay(os.path.join(DATA, "graph_kept.raw"), str(tmp_path / "kept.pftrace"))
    assert t.validate() == []
    replayed = [s for s in t.slices if s.category == "kernel" and "graph_id" in s.args]
    assert len(replayed) == 1770
    assert all(s.args.get("capture_kept") and s.args.get("captured_by") for s in replayed)
    run = replay(os.path.join(DATA, "graph_ops.raw"), str(tmp_path / "run.pftrace"))
    want, got = replayed_ops(run), replayed_ops(t)
    assert len(want) == 18 and got == want
    assert {"aten::mm", "aten::addmm"} <= set.union(*got.values())


def test_triton_kernels_carry_the_aten_ops_they_fuse(tmp_path):
    """torch.compile (default mode, 3 steps, H200, 2026-12-02): every
    Triton kernel names the ATen ops and model nodes it fuses, which ptbpf
    read from the job's Inductor output code while tracing and the raw
    capture kept ('I' items). The oracle: Inductor names each kernel after
    the ATen ops it fuses, so each op is in the kernel's name."""
    t = replay(os.path.join(DATA, "triton_ops.raw"), str(tmp_path / "triton.pftrace"))
    assert t.validate() == []
    triton = [s for s in t.slices if s.category == "kernel" and s.name.startswith("triton_")]
    assert len(triton) == 184 and len({s.name for s in triton}) == 12
    for k in triton:
        ops = k.args["aten_ops"].split(", ")
        assert all(o.startswith("aten::") and o[6:] in k.name for o in ops), k
        assert k.args["source_nodes"] and k.args["inductor_module"].endswith(".py"), k
    others = [s for s in t.slices if s.category == "kernel" and not s.name.startswith("triton")]
    assert others and not [s for s in others if "aten_ops" in s.args]
    kernels = kineto_kernels(str(tmp_path / "triton.pftrace"), str(tmp_path / "triton.json"))
    fused = {e["name"]: e["args"].get("aten ops") for e in kernels if e["name"].startswith("triton")}
    assert len(fused) == 12 and all(fused.values()), fused


def kineto_kernels(trace, out):
    """The kernels of `ptbpf export -k` (Kineto's JSON) of trace."""
    r = subprocess.run([PTBPF, "export", trace, "-k", out], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
