# SPDX-License-Identifier: BSD-2-Clause
"""First attaches, many of them: fresh Kineto on-demand jobs
(tests/workloads/ondemand.py), each attached once by `ptbpf -p PID -d 1 -v`
inside its first on-demand trace, in parallel loops. What a soak's cycles
rarely do (each of its jobs is new to ptbpf only once) and where the
agent's first activation in a process meets a CUPTI session it cannot
see: on 2026-11-28 (H200, CUPTI 13.0.1) 10 of 127 such jobs died of a
SIGSEGV inside libcupti while the agent subscribed to CUPTI's callbacks.

usage: first_attach.py OUTDIR SECONDS [WORKERS]    (on a CUDA machine)

Writes OUTDIR/first_attach.log: each run's outcome (the job's event counts,
or ptbpf's stderr and the job's exit status and faulthandler stacks), the
first two runs' ptbpf stderr of each worker, and a last line of totals.
Exits 1 unless every run was ok."""
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "gpu"))
from conftest import PTBPF  # noqa: E402
from sessions import OnDemandJob  # noqa: E402


def main():
    out = pathlib.Path(sys.argv[1])
    until = time.time() + float(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    out.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    stats = {"runs": 0, "ok": 0, "job died": 0, "ptbpf failed": 0, "other": 0}

    def log(s):
        with lock, open(out / "first_attach.log", "a") as f:
            f.write(time.strftime("%H:%M:%S ") + s + "\n")

    def one(w, n, tmp):
        job = OnDemandJob(tmp, "od", "--steps", "300")
        try:
            job.session()
            job.tracing(0)
            time.sleep((n % 5) * 0.05)  # inside the trace, at varied moments
            r = subprocess.run([PTBPF, "-p", str(job.pid), "-o", str(tmp / "a.pftrace"), "-d",
                                "1", "-v"], capture_output=True, text=True, timeout=120)
            if job.p.p.poll() is not None:
                log("w%d run %d: JOB DIED (ptbpf rc %d)\nptbpf:\n%s\njob: %s" % (
                    w, n, r.returncode, r.stderr[-4000:], job.how()))
                return "job died"
            if r.returncode != 0:
                log("w%d run %d: ptbpf rc %d\n%s" % (w, n, r.returncode, r.stderr[-3000:]))
                return "ptbpf failed"
            try:
                c = job.result(0)
            except AssertionError as e:  # died after ptbpf left
                log("w%d run %d: JOB DIED after ptbpf left: %s" % (w, n, e))
                return "job died"
            job.end()
            log("w%d run %d ok %s" % (w, n, c))
            if n <= 2:
                log("w%d run %d ptbpf stderr:\n%s" % (w, n, r.stderr[-6000:]))
            return "ok"
        finally:
            if job.p.p.poll() is None:
                job.p.p.kill()
                job.p.p.wait()

    def worker(w):
        n = 0
        while time.time() < until - 25:
            n += 1
            tmp = pathlib.Path("/tmp/first_attach/w%d-%d" % (w, n))
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            try:
                what = one(w, n, tmp)
            except Exception as e:  # noqa: BLE001  (said, and counted)
                log("w%d run %d: %r" % (w, n, e))
                what = "other"
            shutil.rmtree(tmp, ignore_errors=True)
            with lock:
                stats["runs"] += 1
                stats[what] += 1

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    log("totals %s" % stats)
    print("first attaches: %s" % stats)
    return 0 if stats["ok"] == stats["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
