# SPDX-License-Identifier: BSD-2-Clause
"""torch.distributed.rpc as the PyTorch recipe "Profiling PyTorch RPC-Based
Workloads" shows it (tests/workloads/rpc_recipe.py: two workers, TensorPipe
on loopback), traced for real, with torch's own RPC profiler (the legacy
autograd profiler, the only one that records RPC calls and their remote
ops) running on the caller as ground truth: the same calls under the same
names, durations near the profiler's, and each call's remote ops under its
handling on the callee. Then the bad cases: a callee that raises, a call
that times out, a callee that dies mid-call, a call in flight at attach;
the traces of two ptbpf sessions merged; distributed autograd across the
workers."""
import collections
import json
import os
import re
import socket
import statistics
import subprocess

import pftrace
from conftest import PTBPF, PYTHON, ROOT, Proc, require

RECIPE = os.path.join(ROOT, "tests", "workloads", "rpc_recipe.py")
UDF_OPS = collections.Counter(["aten::add", "aten::mul", "aten::relu", "aten::clamp_min",
                               "aten::sigmoid"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_workers(tmp_path, n, flags=()):
    go, port = str(tmp_path / "go"), free_port()
    workers = [Proc([PYTHON, RECIPE, go, str(n)] + list(flags),
                    env=dict(os.environ, RANK=str(r), MASTER_ADDR="127.0.0.1",
                             MASTER_PORT=str(port)))
               for r in range(2)]
    try:
        for w in workers:
            w.wait_line("ready", timeout=180)
    except BaseException:
        for w in workers:
            w.kill()
        raise
    return workers, go


def trace(pids, path, extra=()):
    args = [PTBPF, "-o", path] + list(extra)
    for pid in pids:
        args += ["-p", str(pid)]
    tracer = Proc(args)
    try:
        for _ in pids:
            tracer.wait_line("ptbpf: tracing pid", stream="stderr", timeout=180)
    except BaseException:
        tracer.kill()
        raise
    return tracer


def run_recipe(tmp_path, n, flags=(), sessions=1):
    """Both workers traced (one ptbpf for both, or one each), released,
    finished; the trace paths and the tracers' stderr."""
    require(PTBPF)
    workers, go = start_workers(tmp_path, n, flags)
    pids = [w.p.pid for w in workers]
    tracers = []
    try:
        if sessions == 1:
            paths = [str(tmp_path / "rpc.pftrace")]
            tracers.append(trace(pids, paths[0]))
        else:
            paths = [str(tmp_path / ("worker%d.pftrace" % r)) for r in range(2)]
            tracers += [trace([pid], p) for pid, p in zip(pids, paths)]
        open(go, "w").close()
        for w in workers:
            rc, out, err = w.finish(timeout=300)
            assert rc == 0, out + err
        errs = []
        for t in tracers:
            rc, _, err = t.finish(timeout=120)
            assert rc == 0, err
            errs.append(err)
    finally:
        for p in tracers + workers:
            p.kill()
    return paths, errs


def is_call(s):
    return s.category == "rpc" and s.dur > 0


def call_handlings(t):
    """Each call slice (caller side) -> its handling slice (callee side),
    through the flow from its "rpc send request" instant."""
    handling = {f: s for s in t.slices if s.category == "rpc_remote" for f in s.flows_in}
    out = {}
    for c in (s for s in t.slices if is_call(s)):
        for i in t.instants:
            if i.track == c.track and c.ts <= i.ts <= c.ts + c.dur and \
               i.name == "rpc send request":
                out[id(c)] = next((handling[f] for f in i.flows_out if f in handling), None)
    return out


def remote_ops(t):
    """Each handling slice -> the ops nested in it (any depth), by name."""
    anc, ops = t.ancestors(), collections.defaultdict(collections.Counter)
    for i, s in enumerate(t.slices):
        if s.category == "cpu_op":
            inside = [t.slices[a] for a in anc[i] if t.slices[a].category == "rpc_remote"]
            if inside:
                ops[id(inside[-1])][s.name] += 1
    return ops


def profiler_calls(events):
    """The profiler's RPC calls in order, each with the remote ops it
    recorded for it (remote events lie within their call's time range)."""
    calls = sorted((e for e in events if (e["name"].startswith(("rpc_", "to_here#"))) and
                    "#remote_op: " not in e["name"]), key=lambda e: e["start_us"])
    for c in calls:
        c["remote"] = collections.Counter(
            e["name"].split("#remote_op: ")[1] for e in events
            if e["name"].startswith(c["name"] + "#remote_op: ") and
            c["start_us"] <= e["start_us"] <= c["end_us"])
    return calls


def match_calls(prof, ours, theirs, mine):
    """The profiler's calls, each with the slice of ours that is the same
    call. A kind that both have whole pairs in order. The profiler's clock
    starts at its first event: for a kind it lost calls of, the offset comes
    from the whole kinds, and each of its calls takes the slice of its name
    that begins nearest, closer than half the gap between two of ours. The
    profiler's start lags ours unevenly: the first call's by 2-3 ms more
    than the others' on the CI VM (work done once between the destination
    lookup and the profiler's start), which the old match by time alone,
    within 1 ms, lost."""
    by_name = collections.defaultdict(list)
    for s in ours:
        by_name[s.name].append(s)
    offsets, pairs, partial = [], [], []
    for name in theirs:
        mine_k = by_name[name]
        theirs_k = [c for c in prof if c["name"] == name]
        if len(mine_k) == len(theirs_k):
            offsets += [s.ts / 1e3 - c["start_us"] for c, s in zip(theirs_k, mine_k)]
            pairs += zip(theirs_k, mine_k)
        else:
            partial += theirs_k
    assert offsets, (theirs, mine)
    off = statistics.median(offsets)
    for c in partial:
        mine_k = by_name[c["name"]]
        gap = min((b.ts - a.ts) / 1e3 for a, b in zip(mine_k, mine_k[1:])) \
            if len(mine_k) > 1 else 1e9
        near = min(mine_k, key=lambda s: abs(s.ts / 1e3 - off - c["start_us"]))
        if abs(near.ts / 1e3 - off - c["start_us"]) < gap / 2:
            pairs.append((c, near))
    assert len({id(s) for _, s in pairs}) == len(pairs), "a slice matched twice"
    lag = [s.ts / 1e3 - off - c["start_us"] for c, s in pairs]
    return pairs, (min(lag), max(lag))


def test_rpc_calls_as_the_profiler_shows_them(tmp_path):
    """The recipe under torch's RPC profiler on worker 0, both workers
    traced by one ptbpf: every call the profiler records is in the trace
    under its name (rpc_async#fn(worker0 -> worker1), rpc_sync#aten::add,
    rpc_remote#..., to_here#...), the counts equal, each duration near the
    profiler's; each call's handling on worker 1 holds the ops the profiler
    lists as its remote ops; report prints the recipe's table."""
    n = 5
    out = str(tmp_path / "profile.json")
    (path,), (err,) = run_recipe(tmp_path, n, ["--profile", out])
    t = pftrace.Trace(path)
    assert t.validate() == []
    prof = profiler_calls(json.load(open(out)))
    ours = sorted((s for s in t.slices if is_call(s) and s.name.startswith(("rpc_", "to_here#"))
                   and "_broadcast_to_followers" not in s.name), key=lambda s: s.ts)
    # The recipe makes n calls of each of 5 kinds; ptbpf has every one.
    # torch's profiler now and then loses one on a busy host (a whole
    # kind in ~1 of 15 runs): each call it kept is matched to ours by
    # time, on the clock offset of the kinds it kept whole.
    # A call whose caller's Python stack was not read (once in ~20 runs
    # on the loaded CI VM, twice in one run of the full suite on
    # 2026-11-28; not understood yet) keeps its function but not its mode:
    # "rpc#udf_with_torch_ops(...)". At most two of the 25; the message
    # says whether a stack came with them, and what ptbpf counted of stacks.
    mine = collections.Counter(s.name for s in ours)
    theirs = collections.Counter(c["name"] for c in prof)
    unknown = [s for s in t.slices if is_call(s) and
               s.name.startswith(("rpc#udf_with", "rpc#aten::add"))]
    assert len(unknown) <= 2, ([(s.name, s.args.get("py_stack")) for s in unknown],
                               [l for l in err.splitlines() if "python" in l or "stack" in l])
    unknown = len(unknown)
    assert len(mine) == 5 and sum(mine.values()) + unknown == 5 * n, (mine, unknown)
    assert all(v >= n - unknown for v in mine.values()), (mine, unknown)
    assert set(theirs) == set(mine) and all(theirs[k] <= n for k in theirs), theirs
    pairs, lag = match_calls(prof, ours, theirs, mine)
    assert len(pairs) >= len(prof) - unknown, (len(pairs), len(prof), unknown, lag)
    handling, ops = call_handlings(t), remote_ops(t)
    durs, compared = collections.defaultdict(list), 0
    for c, s in pairs:
        ms_prof, ms_ours = (c["end_us"] - c["start_us"]) / 1e3, s.dur / 1e6
        durs[c["name"]].append((ms_prof, ms_ours))
        # Ours begins where Python looked the destination up (the profiler
        # starts ~0.2 ms later) and ends when the future is completed (the
        # profiler's ends in one of its callbacks, after it has read the
        # remote events out of the response: 0.1-0.8 ms later on this VM).
        # One of the profiler's calls on a loaded VM may be long by a
        # scheduling delay or a wait for the GIL (18.7 ms against our 2.9
        # seen): the medians below are the check; this only catches ours
        # running on past the call.
        assert 0 < ms_ours <= 2.5 * ms_prof + 2.0, (c["name"], ms_prof, ms_ours)
        h = handling.get(id(s))
        assert h is not None and h.name == s.name, s
        assert s.ts <= h.ts and h.ts + h.dur <= s.ts + s.dur, (s, h)
        if c["remote"]:  # torch's profiler loses some calls' remote events
            assert ops[id(h)] == c["remote"], (c["name"], ops[id(h)], c["remote"])
            compared += 1
        if "udf_with_torch_ops" in s.name and not s.name.startswith("to_here"):
            assert ops[id(h)] == UDF_OPS, ops[id(h)]
    assert compared >= n, compared
    for name, d in durs.items():  # 0.80-0.99 in 40 runs on the CI VM
        assert 0.7 <= statistics.median(o / p for p, o in d) <= 1.3, (name, d)
    rep = json.loads(subprocess.run([PTBPF, "report", "--json", path], capture_output=True,
                                    text=True, check=True).stdout)
    calls = {c["name"]: c["calls"] for c in rep["rpc_calls"]}
    remote = {c["name"]: c["calls"] for c in rep["rpc_remote_ops"]}
    for name, count in mine.items():
        assert calls[name] == count, (name, calls)
    for fn in ("rpc_async", "rpc_sync", "rpc_remote"):
        for op in UDF_OPS:
            assert remote["%s#udf_with_torch_ops(worker0 -> worker1)#remote_op: %s" % (fn, op)] == \
                mine["%s#udf_with_torch_ops(worker0 -> worker1)" % fn]
    assert remote["rpc_sync#aten::add(worker0 -> worker1)#remote_op: aten::add"] == \
        mine["rpc_sync#aten::add(worker0 -> worker1)"]
    text = subprocess.run([PTBPF, "report", path], capture_output=True, text=True,
                          check=True).stdout
    assert "rpc_sync#udf_with_torch_ops(worker0 -> worker1)#remote_op: aten::sigmoid" in text
    m = re.search(r"rpc: calls (\d+), requests handled (\d+), flows (\d+); responses and "
                  r"failures of calls begun before tracing 0", err)
    assert m and m.group(1) == m.group(2) and int(m.group(3)) == 2 * int(m.group(1)), err


def test_rpc_merged_from_two_sessions(tmp_path):
    """Each worker traced by its own ptbpf: neither trace knows the other
    side; `ptbpf merge` joins each request to its call (the callee's slice
    takes the call's name, flows go both ways) and report on the merged
    trace gives each call's remote ops."""
    n = 3
    paths, errs = run_recipe(tmp_path, n, sessions=2)
    merged = str(tmp_path / "job.pftrace")
    r = subprocess.run([PTBPF, "merge", paths[0], paths[1], "-o", merged], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    t = pftrace.Trace(merged)
    assert t.validate() == []
    calls = [s for s in t.slices if is_call(s)]
    handling = call_handlings(t)
    assert calls and all(handling.get(id(c)) is not None and handling[id(c)].name == c.name
                         for c in calls), [c.name for c in calls if not handling.get(id(c))]
    assert "joined %d RPC requests" % len(calls) in r.stderr, r.stderr
    responses = [i for i in t.instants if i.name == "rpc response"]
    sent = {f for i in t.instants if i.name == "rpc send response" for f in i.flows_out}
    assert len(responses) == len(calls) and all(i.flows_in and i.flows_in[0] in sent
                                                for i in responses)
    rep = json.loads(subprocess.run([PTBPF, "report", "--json", merged], capture_output=True,
                                    text=True, check=True).stdout)
    remote = {c["name"]: c["calls"] for c in rep["rpc_remote_ops"]}
    for op in UDF_OPS:
        assert remote["rpc_async#udf_with_torch_ops(worker0 -> worker1)#remote_op: " + op] == n


def test_rpc_errors_end_the_calls_that_raised(tmp_path):
    """A remote Python function that raises (its RemoteException travels
    back in a normal response) and a builtin op that fails on the callee
    (an EXCEPTION response): both calls end with the error, on both
    sides, and the workers run on."""
    n = 2
    (path,), _ = run_recipe(tmp_path, n, ["--raise"])
    t = pftrace.Trace(path)
    assert t.validate() == []
    raised = [s for s in t.slices if is_call(s) and s.name == "rpc_sync#raises(worker0 -> worker1)"]
    assert len(raised) == n and all(s.args["error"] == "RemoteException: ValueError"
                                    for s in raised), raised
    failed = [s for s in t.slices if is_call(s) and s.name == "rpc_sync#aten::add(worker0 -> worker1)"
              and "error" in s.args]
    assert len(failed) == n and all("must match the size" in s.args["error"] and
                                    s.args["response_type"] == "EXCEPTION" for s in failed)
    callee = [s for s in t.slices if s.category == "rpc_remote" and "error" in s.args]
    assert len(callee) == 2 * n, [(s.name, s.args) for s in callee]


def test_rpc_timeout_and_a_callee_that_dies(tmp_path):
    """A call whose callee sleeps past its 3 s timeout ends at the
    timeout, marked; then a call whose callee is killed mid-call ends when
    the connection fails, marked. Nothing is left open."""
    require(PTBPF)
    workers, go = start_workers(tmp_path, 1, ["--hang"])
    path = str(tmp_path / "rpc.pftrace")
    tracer = None
    try:
        tracer = trace([w.p.pid for w in workers], path)
        open(go, "w").close()
        workers[0].wait_line("timed out", timeout=120)
        workers[0].wait_line("calling", timeout=120)
        workers[1].p.kill()
        workers[0].wait_line("failed", timeout=120)
        workers[0].p.wait(timeout=60)  # it exits by itself
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
    finally:
        for p in ([tracer] if tracer else []) + workers:
            p.kill()
    t = pftrace.Trace(path)
    assert t.validate() == []
    # ("rpc#sleeps(": a call whose Python stack was not read, as above)
    sleeps = [s for s in t.slices if is_call(s) and
              s.name.startswith(("rpc_sync#sleeps(", "rpc#sleeps("))]
    assert sum(s.name.startswith("rpc#") for s in sleeps) <= 1, [s.name for s in sleeps]
    assert len(sleeps) == 2, [(s.name, s.args) for s in t.slices if is_call(s)]
    timed_out, died = sleeps
    assert timed_out.args.get("timed_out") and "timeout" in timed_out.args["error"], timed_out
    assert 2.9e9 <= timed_out.dur <= 4e9, timed_out.dur
    assert died.args.get("connection_failed") and died.dur < 60e9, died


def test_rpc_call_in_flight_at_attach(tmp_path):
    """ptbpf attached while a call is in flight: its response (and the
    callee's handling, begun before) are counted as begun before tracing,
    nothing is drawn half, and the calls after it are whole."""
    require(PTBPF)
    workers, go = start_workers(tmp_path, 1, ["--hang"])
    path = str(tmp_path / "rpc.pftrace")
    tracer = None
    try:
        open(go, "w").close()
        workers[0].wait_line("calling", timeout=180)  # a call without a timeout is on
        tracer = trace([w.p.pid for w in workers], path)
        workers[1].p.kill()
        workers[0].wait_line("failed", timeout=120)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
    finally:
        for p in ([tracer] if tracer else []) + workers:
            p.kill()
    t = pftrace.Trace(path)
    assert t.validate() == []
    assert "responses and failures of calls begun before tracing" in err, err


def test_rpc_distributed_autograd_crosses_workers(tmp_path):
    """dist_autograd.backward over an RPC forward: each worker's
    RecvRpcBackward node leads (its call, the other worker's handling) to a
    SendRpcBackward node in the other process: one backward pass across
    both, as flows."""
    n = 2
    (path,), _ = run_recipe(tmp_path, n, ["--autograd"])
    t = pftrace.Trace(path)
    assert t.validate() == []
    pid_of = {}
    for s in t.slices + t.instants:
        pid_of.setdefault(s.track, t.pid_of(s.track))
    by_flow_in = {f: s for s in t.slices + t.instants for f in s.flows_in}
    anc = t.ancestors()
    index = {id(s): i for i, s in enumerate(t.slices)}
    hops = collections.Counter()
    for i in t.instants:
        if i.name != "rpc call":
            continue
        parents = [s for s in t.slices if s.track == i.track and s.ts <= i.ts <= s.ts + s.dur]
        if not any(p.name.endswith("RecvRpcBackward") for p in parents):
            continue
        send = by_flow_in[i.flows_out[0]]
        handling = by_flow_in[send.flows_out[0]]
        assert handling.name.startswith("rpc#BACKWARD_AUTOGRAD_REQ(")
        inside = [x for x in t.instants if x.track == handling.track and
                  handling.ts <= x.ts <= handling.ts + handling.dur and
                  x.name.startswith("dist autograd")]
        node = by_flow_in[inside[0].flows_out[0]]
        assert node.name.endswith("SendRpcBackward") and pid_of[node.track] != pid_of[i.track]
        assert index[id(node)] in anc  # a slice of its thread
        hops[(pid_of[i.track], pid_of[node.track])] += 1
    assert len(hops) == 2 and all(v == n for v in hops.values()), hops
