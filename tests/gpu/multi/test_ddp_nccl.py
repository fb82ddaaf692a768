# SPDX-License-Identifier: BSD-2-Clause
"""Two GPUs (make gpu-check-multi): a 2-rank NCCL DistributedDataParallel
job, traced (1) whole with --all and (2) per rank with -p, then merged. In
both, each rank's NCCL all-reduces appear once per step, and the k-th NCCL
kernel ends on both GPUs at nearly the same instant (the collective
synchronizes them): the alignment check. The measured skews are printed
and written to $PTBPF_SAVE_DIR/ddp-alignment.txt."""
import os
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
from conftest import PTBPF, PYTHON, WORKLOAD, Proc, pftrace, require  # noqa: E402

STEPS = 30
DDP = os.path.join(os.path.dirname(WORKLOAD), "ddp.py")


def start_job(tmp_path, port, tag):
    go = str(tmp_path / ("go-" + tag))
    ranks = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PTBPF_TEST_NCCL="%d-%s" % (os.getpid(), tag))
        ranks.append(Proc([PYTHON, DDP, "--steps", str(STEPS), "--go", go], env=env))
    for p in ranks:
        p.wait_line("ready", timeout=300)
    return ranks, go


def finish_job(ranks):
    for p in ranks:
        rc, out, err = p.finish(timeout=300)
        assert rc == 0 and "done" in out, err


def per_rank(t, pids):
    """pid -> (NCCL API slices, NCCL kernel end times in order)."""
    thread_pid = {u: d.thread.pid for u, d in t.tracks.items() if d.HasField("thread")}
    api, ends = {p: [] for p in pids}, {p: [] for p in pids}
    for s in t.slices:
        if s.category == "nccl" and thread_pid.get(s.track) in api and \
                s.name == "ncclAllReduce":
            api[thread_pid[s.track]].append(s)
        elif s.category == "kernel" and "nccl" in s.name.lower():
            pid = t.pid_of(s.track)  # GPU stream tracks hang below the process
            if pid in ends:
                ends[pid].append(s.ts + s.dur)
    return api, {p: sorted(v) for p, v in ends.items()}


def check_alignment(t, pids, label):
    api, ends = per_rank(t, pids)
    a, b = sorted(pids)
    assert len(api[a]) == len(api[b]) >= STEPS, {p: len(v) for p, v in api.items()}
    assert len(ends[a]) == len(ends[b]) >= STEPS, {p: len(v) for p, v in ends.items()}
    skew = [abs(x - y) / 1e3 for x, y in zip(ends[a], ends[b])]
    line = "%s: %d all-reduces per rank; NCCL kernel end skew median %.1f us, max %.1f us" % (
        label, len(api[a]), statistics.median(skew), max(skew))
    print(line)
    save = os.environ.get("PTBPF_SAVE_DIR")
    if save:
        with open(os.path.join(save, "ddp-alignment.txt"), "a") as f:
            f.write(line + "\n")
    assert statistics.median(skew) < 200, line
    return line


def test_nccl_ddp_all(tmp_path):
    require(PTBPF)
    ranks, go = start_job(tmp_path, 29710, "all")
    trace = str(tmp_path / "all.pftrace")
    # The GPU timeline is off by default in NCCL processes
    # (docs/blind-spots.md): these checks need its kernels.
    tracer = Proc([PTBPF, "--all", "--gpu-timeline", "on", "-o", trace, "--match-env",
                   "PTBPF_TEST_NCCL=%d-all" % os.getpid()])
    try:
        tracer.wait_line("ptbpf: --all: tracing 2 processes", stream="stderr", timeout=300)
        open(go, "w").close()
        finish_job(ranks)
        tracer.p.send_signal(signal.SIGINT)
        rc, _, err = tracer.finish(timeout=300)
        assert rc == 0, err
    finally:
        tracer.kill()
        for p in ranks:
            p.kill()
    t = pftrace.Trace(trace)
    assert t.validate() == []
    check_alignment(t, {p.p.pid for p in ranks}, "--all, one host")


def test_nccl_ddp_per_rank_merged(tmp_path):
    require(PTBPF)
    ranks, go = start_job(tmp_path, 29711, "ranks")
    tracers = []
    try:
        for r, p in enumerate(ranks):
            tracers.append(Proc([PTBPF, "-p", str(p.p.pid), "--gpu-timeline", "on", "-o",
                                 str(tmp_path / ("rank%d.pftrace" % r))]))
        for tr in tracers:
            tr.wait_line("ptbpf: tracing pid", stream="stderr", timeout=300)
        open(go, "w").close()
        finish_job(ranks)
        for tr in tracers:
            rc, _, err = tr.finish(timeout=300)
            assert rc == 0, err
    finally:
        for tr in tracers:
            tr.kill()
        for p in ranks:
            p.kill()
    save = os.environ.get("PTBPF_SAVE_DIR")
    if save:  # real per-rank traces for CI's merge test (tests/data/ddp)
        for r in range(2):
            subprocess.run(["cp", str(tmp_path / ("rank%d.pftrace" % r)),
                            os.path.join(save, "ddp_rank%d.pftrace" % r)], check=True)
    # Merged pids are moved into a range per input: rank0 +2^22, rank1 +2^23.
    pids = {p.p.pid + (i + 1) * (1 << 22) for i, p in enumerate(ranks)}
    for extra, label in (([], "per rank, merged by REALTIME"),
                         (["--align-collectives"], "per rank, merged by collectives")):
        out = str(tmp_path / "job.pftrace")
        if os.path.exists(out):
            os.unlink(out)
        r = subprocess.run([PTBPF, "merge"] + extra + [str(tmp_path / "rank0.pftrace"),
                                                       str(tmp_path / "rank1.pftrace"), "-o", out],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        print(r.stderr)
        t = pftrace.Trace(out)
        assert t.validate() == []
        check_alignment(t, pids, label)
