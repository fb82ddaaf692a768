# SPDX-License-Identifier: BSD-2-Clause
"""A training loop whose thread is kept off CPU by known, injected causes,
for the kernel view's tests (tests/test_sched.py).

usage: offcpu.py [--steps N] [--ms MS] [--hog-ms MS] --go FILE [--fault-mb MB]
                 [--major-mb MB] [--gil-ms MS] [--loader-ms MS [--workers N]]
                 [--device cuda]

Each step, after a small MLP step, the training thread (pinned to CPU 0):
  pipe    reads one byte from a pipe that a helper thread writes MS later
  sleep   time.sleep(MS)
  futex   waits on a threading.Event that a helper thread sets MS later
  hog     (--hog-ms) spins, while a CPU hog process pinned to CPU 0 spins
          for HOG_MS of its own CPU time: the training thread waits for
          the CPU that long
  fault   (--fault-mb) first touch of a fresh anonymous mapping (minor faults)
  major   (--major-mb) reads a file's mapping whose pages were just dropped
          from the page cache, at random (major faults: the thread blocks
          in them)
  gil     (--gil-ms) runs a pure-Python loop for MS of its own CPU time
          while a thread on CPU 1 spins in Python holding the GIL: the
          wall time beyond its CPU time is its wait for the GIL
  loader  (--loader-ms) takes the next batch of a DataLoader whose
          __getitem__ sleeps MS (--workers N: in N worker processes)
Prints "ready" (with the training thread's tid and the hog's pid), waits
for --go, and at the end one JSON line: per cause, the time the training
thread spent in it as measured here (ns), the hog's CPU time, and when the
loop ended (CLOCK_MONOTONIC ns).
"""
import argparse
import json
import mmap
import os
import threading
import time

import torch
import torch.nn as nn

from loader_region import time_next_data


def hog(cpu, go_r, done_w):
    """Pinned to cpu: for each request, spins for the asked CPU time."""
    os.sched_setaffinity(0, {cpu})
    while True:
        req = os.read(go_r, 8)
        if not req:
            os._exit(0)
        want = int.from_bytes(req, "little") * 1000000
        t0 = time.thread_time_ns()
        while time.thread_time_ns() - t0 < want:
            pass
        os.write(done_w, (time.thread_time_ns() - t0).to_bytes(8, "little"))


def start_hog(cpu):
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.close(done_r)
        hog(cpu, go_r, done_w)
    os.close(go_r)
    os.close(done_w)
    os.set_blocking(done_r, False)
    return pid, go_w, done_r


def later(ms, fn):
    t = threading.Thread(target=lambda: (time.sleep(ms / 1000), fn()))
    t.start()
    return t


def major_file(path, mb):
    with open(path, "wb") as f:
        f.write(os.urandom(mb << 20))
        f.flush()
        os.fsync(f.fileno())
    return path


def read_dropped(path, mb):
    """Touches one byte per page of path's mapping, its cache dropped first."""
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    m = mmap.mmap(fd, mb << 20, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)
    t0 = time.monotonic_ns()
    s = 0
    for off in range(0, mb << 20, 4096):
        s += m[off]
    spent = time.monotonic_ns() - t0
    m.close()
    os.close(fd)
    return spent


def gil_spinner(stop):
    """On CPU 1, a pure-Python loop that holds the GIL but for the
    interpreter's switch interval."""
    os.sched_setaffinity(0, {1 % os.cpu_count()})
    n = 0
    while not stop.is_set():
        n += 1


def gil_phase(ms):
    """MS of this thread's CPU time in Python while gil_spinner runs: the
    wall time it took beyond that (its wait for the GIL)."""
    stop = threading.Event()
    t = threading.Thread(target=gil_spinner, args=(stop,))
    t.start()
    time.sleep(0.005)
    w0, c0 = time.monotonic_ns(), time.thread_time_ns()
    n = 0
    while time.thread_time_ns() - c0 < ms * 1000000:
        n += 1
    waited = (time.monotonic_ns() - w0) - (time.thread_time_ns() - c0)
    stop.set()
    t.join()
    return waited


class Sleepy(torch.utils.data.Dataset):
    def __init__(self, ms):
        self.ms = ms

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(self.ms / 1000)
        return torch.zeros(4)


def hold(name):
    """A thread blocked in a read of a pipe until it is written: (its tid,
    the pipe's write end)."""
    r, w = os.pipe()
    tids = []
    started = threading.Event()

    def run():
        tids.append(threading.get_native_id())
        started.set()
        os.read(r, 1)
    threading.Thread(target=run, name=name, daemon=True).start()
    started.wait()
    time.sleep(0.05)  # in its read
    return tids[0], w


def timed(fn):
    t0 = time.monotonic_ns()
    fn()
    return time.monotonic_ns() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ms", type=int, default=20)
    ap.add_argument("--hog-ms", type=int, default=0)
    ap.add_argument("--fault-mb", type=int, default=0)
    ap.add_argument("--major-mb", type=int, default=0)
    ap.add_argument("--gil-ms", type=int, default=0)
    ap.add_argument("--loader-ms", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--held", action="store_true", help="two threads blocked in a pipe read "
                    "from before 'ready': 'held' is let go after half the steps, 'stuck' never")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--go", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    hog_pid = None
    if a.hog_ms:
        hog_pid, hog_go, hog_done = start_hog(0)
    os.sched_setaffinity(0, {0})
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(a.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32, device=a.device), torch.randint(0, 10, (16,), device=a.device)
    if a.major_mb:
        major_file(a.go + ".data", a.major_mb)
    spent = {}
    if a.loader_ms:
        batches = iter(torch.utils.data.DataLoader(Sleepy(a.loader_ms), batch_size=1,
                                                   num_workers=a.workers))
        # "loader" is what the iterator's region holds; next() as a whole
        # ("loader_call") takes more (loader_region.py).
        time_next_data(batches, spent, "loader")
    held = {}
    if a.held:
        for name in ("held", "stuck"):
            held[name] = hold(name)
    print("ready tid %d hog %s%s" % (threading.get_native_id(), hog_pid, "".join(
        " %s %d" % (k, v[0]) for k, v in held.items())), flush=True)
    while not os.path.exists(a.go):
        time.sleep(0.01)
    spent.update({"pipe": 0, "sleep": 0, "futex": 0, "hog": 0, "hog_cpu": 0, "fault": 0,
                  "major": 0, "gil": 0, "loader": 0, "loader_call": 0})
    major = a.go + ".data"
    r, w = os.pipe()
    for step in range(a.steps):
        if held and step == a.steps // 2:
            spent["held_released"] = time.monotonic_ns()
            os.write(held["held"][1], b"x")
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        t = later(a.ms, lambda: os.write(w, b"x"))
        spent["pipe"] += timed(lambda: os.read(r, 1))
        t.join()
        spent["sleep"] += timed(lambda: time.sleep(a.ms / 1000))
        ev = threading.Event()
        t = later(a.ms, ev.set)
        spent["futex"] += timed(ev.wait)
        t.join()
        if a.hog_ms:
            t0 = time.monotonic_ns()
            os.write(hog_go, a.hog_ms.to_bytes(8, "little"))
            got = b""
            while len(got) < 8:  # spin: runnable, never blocked
                try:
                    got += os.read(hog_done, 8 - len(got))
                except BlockingIOError:
                    pass
            spent["hog"] += time.monotonic_ns() - t0
            spent["hog_cpu"] += int.from_bytes(got, "little")
        if a.fault_mb:
            m = mmap.mmap(-1, a.fault_mb << 20)
            t0 = time.monotonic_ns()
            for off in range(0, a.fault_mb << 20, 4096):
                m[off] = 1
            spent["fault"] += time.monotonic_ns() - t0
            m.close()
        if a.major_mb:
            spent["major"] += read_dropped(major, a.major_mb)
        if a.gil_ms:
            spent["gil"] += gil_phase(a.gil_ms)
        if a.loader_ms:
            spent["loader_call"] += timed(lambda: next(batches))
    if a.hog_ms:
        os.close(hog_go)
        os.waitpid(hog_pid, 0)
    if a.device == "cuda":
        # The agent hands CUPTI's records over every 200 ms; a job that
        # _exit()s at once takes its last step's kernels with it, and the
        # gap before them would not close.
        torch.cuda.synchronize()
        time.sleep(0.5)
    spent["end"] = time.monotonic_ns()  # the loop's end (CLOCK_MONOTONIC)
    print(json.dumps(spent), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
