# SPDX-License-Identifier: BSD-2-Clause
"""Fleet mode: `ptbpf --all` finds every torch process on the host, those
started after it too, and labels each with its distributed environment."""
import os
import signal
import subprocess
import time

from conftest import PTBPF, PYTHON, WORKLOAD, Proc, pftrace, require

# Every --all here takes this run's processes only (--match-env), never
# another test's.
TAG = str(os.getpid())
MINE = ["--match-env", "PTBPF_TEST_FLEET=" + TAG]


def tagged(**env):
    return dict(os.environ, PTBPF_TEST_FLEET=TAG, **env)


def start_rank(tmp_path, rank, world, steps):
    go = str(tmp_path / ("go%d" % rank))
    env = tagged(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                 MASTER_ADDR="127.0.0.1", TORCHELASTIC_RUN_ID="ptbpf-test")
    p = Proc([PYTHON, WORKLOAD, "mlp", "--steps", str(steps), "--go", go, "--linger", "0.5"],
             env=env)
    p.wait_line("ready")
    return p, go


def test_all_finds_torch_processes_before_and_after_start(tmp_path):
    require(PTBPF)
    steps, world = 20, 3
    trace_path = str(tmp_path / "all.pftrace")
    procs = [start_rank(tmp_path, r, world, steps) for r in range(2)]
    tracer = Proc([PTBPF, "--all", "-o", trace_path] + MINE)
    try:
        tracer.wait_line("ptbpf: --all: tracing", stream="stderr", timeout=120)
        procs.append(start_rank(tmp_path, 2, world, steps))
        # It is found within a second or two of mapping libtorch.
        tracer.wait_line("ptbpf: tracing pid %d" % procs[2][0].p.pid, stream="stderr",
                         timeout=30)
        for _, go in procs:
            open(go, "w").close()
        for p, _ in procs:
            rc, _, err = p.finish(timeout=120)
            assert rc == 0, err
        time.sleep(0.5)
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
    finally:
        tracer.kill()
        for p, _ in procs:
            p.kill()
    t = pftrace.Trace(trace_path)
    assert t.validate() == []
    pids = {p.p.pid: r for r, (p, _) in enumerate(procs)}
    seen = {}
    for d in t.tracks.values():
        if d.HasField("process") and d.process.pid in pids:
            seen[d.process.pid] = d.process
    assert set(seen) == set(pids), (seen, pids)
    for pid, rank in pids.items():
        proc = seen[pid]
        assert proc.process_name.endswith("[rank %d/%d]" % (rank, world)), proc
        assert {"RANK=%d" % rank, "WORLD_SIZE=%d" % world, "MASTER_ADDR=127.0.0.1",
                "TORCHELASTIC_RUN_ID=ptbpf-test"} <= set(proc.process_labels), proc
    # Each process's ops are on its own threads: 3 Linear layers a step. The
    # late one is caught at exec and attached as soon as it maps libtorch,
    # so its warm-up step (before "ready") is in the trace too.
    addmm = {}
    thread_pid = {u: d.thread.pid for u, d in t.tracks.items() if d.HasField("thread")}
    for s in t.slices:
        if s.name == "aten::addmm" and s.track in thread_pid:
            addmm[thread_pid[s.track]] = addmm.get(thread_pid[s.track], 0) + 1
    late = procs[2][0].p.pid
    assert {pid: addmm.get(pid, 0) for pid in pids if pid != late} == \
        {pid: 3 * steps for pid in pids if pid != late}
    assert addmm.get(late, 0) in (3 * steps, 3 * steps + 3), addmm


def test_gloo_ddp_two_ranks(tmp_path):
    """A 2-rank DistributedDataParallel job on gloo (loopback), traced end
    to end with --all and the agent's ops: each rank's collectives appear as
    c10d ops with their gloo work, one all_reduce per step on each rank."""
    require(PTBPF)
    steps, port = 5, 29600 + os.getpid() % 300
    go = str(tmp_path / "go")
    ranks = []
    for r in range(2):
        env = tagged(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port))
        ranks.append(Proc([PYTHON, os.path.join(os.path.dirname(WORKLOAD), "ddp.py"), "--cpu",
                           "--steps", str(steps), "--go", go], env=env))
    trace_path = str(tmp_path / "ddp.pftrace")
    tracer = None
    try:
        for p in ranks:
            p.wait_line("ready", timeout=120)
        tracer = Proc([PTBPF, "--all", "--ops", "agent", "-o", trace_path] + MINE)
        tracer.wait_line("ptbpf: --all: tracing 2 processes", stream="stderr", timeout=120)
        open(go, "w").close()
        for p in ranks:
            rc, out, err = p.finish(timeout=120)
            assert rc == 0 and "done" in out, err
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
        assert "gone without a last copy 0" in err, err
    finally:
        if tracer:
            tracer.kill()
        for p in ranks:
            p.kill()
    t = pftrace.Trace(trace_path)
    assert t.validate() == []
    thread_pid = {u: d.thread.pid for u, d in t.tracks.items() if d.HasField("thread")}
    counts = {}
    for s in t.slices:
        if s.track in thread_pid and s.name in ("c10d::allreduce_", "gloo:all_reduce"):
            key = (thread_pid[s.track], s.name)
            counts[key] = counts.get(key, 0) + 1
    pids = {p.p.pid for p in ranks}
    for pid in pids:
        assert counts.get((pid, "c10d::allreduce_")) == steps, counts
        assert counts.get((pid, "gloo:all_reduce")) == steps, counts
    names = {d.process.process_name for d in t.tracks.values()
             if d.HasField("process") and d.process.pid in pids}
    assert names == {"python3 [rank 0/2]", "python3 [rank 1/2]"}, names


def test_rpc_requests_joined_across_processes(tmp_path):
    """torch.distributed.rpc on loopback (TensorPipe): each request worker 0
    sends is handled by worker 1 (a slice there) under the same message id,
    joined by a flow; worker 1 sends a response for each."""
    require(PTBPF)
    n, port = 5, 29900 + os.getpid() % 90
    go = str(tmp_path / "go")
    workers = [Proc([PYTHON, os.path.join(os.path.dirname(WORKLOAD), "rpc.py"), go, str(n)],
                    env=tagged(RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
               for r in range(2)]
    trace_path = str(tmp_path / "rpc.pftrace")
    tracer = None
    try:
        for w in workers:
            w.wait_line("ready", timeout=120)
        tracer = Proc([PTBPF, "--all", "-o", trace_path] + MINE)
        tracer.wait_line("ptbpf: --all: tracing 2 processes", stream="stderr", timeout=120)
        open(go, "w").close()
        for w in workers:
            rc, _, err = w.finish(timeout=120)
            assert rc == 0, err
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=120)
        assert rc == 0, err
    finally:
        if tracer:
            tracer.kill()
        for w in workers:
            w.kill()
    t = pftrace.Trace(trace_path)
    assert t.validate() == []
    w0, w1 = (w.p.pid for w in workers)
    sends = [s for s in t.instants if s.name == "rpc send request" and t.pid_of(s.track) == w0]
    handles = [s for s in t.slices if s.category == "rpc_remote" and t.pid_of(s.track) == w1]
    responses = [s for s in t.instants
                 if s.name == "rpc send response" and t.pid_of(s.track) == w1]
    # n builtin calls and n Python calls (shutdown adds its own messages).
    types = [s.args["type"] for s in sends]
    assert types.count("SCRIPT_CALL") == n and types.count("PYTHON_CALL") >= n, types
    assert len(handles) == len(sends) == len(responses)
    by_flow = {f: s for s in sends for f in s.flows_out}
    for h in handles:
        assert h.flows_in and h.flows_in[0] in by_flow, h
        assert by_flow[h.flows_in[0]].args["message_id"] == h.args["message_id"]
        assert by_flow[h.flows_in[0]].ts < h.ts


# Inductor's compile worker as torch 2.x starts it (torch/_inductor/
# compile_worker/subproc_pool.py): a sidecar run from that path with the
# job's environment, mapping torch, and its workers, forked (the same
# arguments) or spawned (multiprocessing's arguments). Each goes when its
# parent does.
FAKE_COMPILE_WORKER = r"""
import multiprocessing as mp, os, sys, time
import torch


def idle(parent):
    while os.getppid() == parent:
        time.sleep(0.2)


if __name__ == "__main__":
    kids = [mp.get_context(kind).Process(target=idle, args=(os.getpid(),), daemon=True)
            for kind in ("fork", "spawn")]
    for k in kids:
        k.start()
    time.sleep(2)  # the spawned one imports torch
    print("workers", " ".join(str(k.pid) for k in kids), flush=True)
    idle(os.getppid())
"""


def fake_compile_worker(tmp_path):
    script = tmp_path / "torch" / "_inductor" / "compile_worker" / "__main__.py"
    script.parent.mkdir(parents=True)
    script.write_text(FAKE_COMPILE_WORKER)
    return script


def test_inductor_compile_workers_are_never_selected(tmp_path):
    """torch.compile's compile workers map torch and carry the job's
    environment, so --match-env selected them: --all traced each (a trace
    with nothing of the job's in it) and the daemon loaded its agent into
    each (up to one per CPU). Neither does now; the job beside them is
    traced as before."""
    require(PTBPF)
    script = fake_compile_worker(tmp_path)
    go = str(tmp_path / "go")
    job = Proc([PYTHON, WORKLOAD, "mlp", "--steps", "5", "--go", go], env=tagged())
    # As the sidecar is started: a child of the job's launcher, not the job.
    sidecar = Proc([PYTHON, str(script), "--kind=fork", "--workers=2"], env=tagged())
    tracer = daemon = None
    try:
        job.wait_line("ready")
        line, _ = sidecar.wait_line("workers", timeout=120)
        workers = {sidecar.p.pid} | {int(x) for x in line.split()[1:]}
        assert len(workers) == 3, line
        tracer = Proc([PTBPF, "--all", "--no-samples", "-o", str(tmp_path / "all.pftrace")] +
                      MINE)
        _, said = tracer.wait_line("ptbpf: --all: tracing 1 processes", stream="stderr",
                                   timeout=120)
        time.sleep(6)  # one rescan (every 5 s) too
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=120)
        err = said + err
        assert rc == 0, err
        assert "tracing pid %d" % job.p.pid in err, err
        assert not [w for w in workers if "pid %d" % w in err], (workers, err)
        t = pftrace.Trace(str(tmp_path / "all.pftrace"))
        assert not {d.process.pid for d in t.tracks.values()
                    if d.HasField("process")} & workers
        daemon = Proc([PTBPF, "daemon", "--out-dir", str(tmp_path / "out"), "--every", "1h",
                       "--budget", "0"] + MINE)
        _, said = daemon.wait_line("ptbpf: daemon: pid %d (python3): step signal on" % job.p.pid,
                                   stream="stderr", timeout=120)
        time.sleep(5)  # new processes are looked for every 2 s
        daemon.p.send_signal(signal.SIGTERM)
        rc, _, err = daemon.finish(timeout=120)
        err = said + err
        assert rc == 0, err
        assert not [w for w in workers if "pid %d" % w in err], (workers, err)
        open(go, "w").close()
        assert job.finish(timeout=120)[0] == 0
    finally:
        for p in (tracer, daemon, sidecar, job):
            if p:
                p.kill()


# A job that starts the compile worker as Inductor does (subprocess.Popen).
LAUNCHER = r"""
import subprocess, sys, time, torch
p = subprocess.Popen([sys.executable, sys.argv[1], "--kind=fork"], stdout=subprocess.PIPE,
                     text=True)
print("sidecar", p.pid, p.stdout.readline().strip(), flush=True)
time.sleep(3)  # a child that exec'd is looked at every 200 ms
for _ in range(100):
    torch.ones(4).sum()
"""


def test_follow_children_leaves_out_compile_workers(tmp_path):
    """--follow-children traces what a traced job forks; a child that has
    become (or becomes) Inductor's compile worker is not traced, and that
    is said; the job's own ops are all there."""
    require(PTBPF)
    script = fake_compile_worker(tmp_path)
    out = tmp_path / "f.pftrace"
    r = subprocess.run([PTBPF, "run", "--follow-children", "--no-samples", "-o", str(out), "--",
                        PYTHON, "-c", LAUNCHER, str(script)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    said = [x for x in r.stdout.splitlines() if x.startswith("sidecar")]
    assert said, r.stdout
    sidecar, workers = int(said[0].split()[1]), {int(x) for x in said[0].split()[3:]}
    assert ("pid %d, a child of a traced process, is Inductor's compile worker: not traced"
            % sidecar in r.stderr or "pid %d exec'd into Inductor's compile worker: not traced"
            % sidecar in r.stderr), r.stderr
    assert not [w for w in workers | {sidecar} if "tracing pid %d" % w in r.stderr], r.stderr
    t = pftrace.Trace(str(out))
    assert not {d.process.pid for d in t.tracks.values() if d.HasField("process")} & \
        (workers | {sidecar})
    assert sum(1 for x in t.slices if x.name == "aten::ones") == 100
