# SPDX-License-Identifier: BSD-2-Clause
"""Two known hot phases on one thread, for the CPU samples' tests
(tests/test_samples.py).

usage: hot.py --go FILE [--py-ms MS] [--mm-ms MS] [--n N]

Prints "ready tid TID", waits for the go file, then on the main thread
(torch with one intra-op thread, so its ops run there):
  python  spins in hot_python_loop(), a pure-Python function, for MS of
          the thread's CPU time
  matmul  multiplies two N x N float matrices with torch.mm over and over
          for MS of its CPU time
and prints one JSON line: per phase its start and end (CLOCK_MONOTONIC ns)
and the thread's CPU time in it (ns).
"""
import argparse
import json
import os
import threading
import time

import torch


def hot_python_loop(until_cpu_ns):
    x = 0
    while time.thread_time_ns() < until_cpu_ns:
        for i in range(1000):
            x = (x * 31 + i) % 1000003
    return x


def matmul_phase(until_cpu_ns, n):
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    while time.thread_time_ns() < until_cpu_ns:
        a = torch.mm(a, b)
        a = a / a.norm()
    return float(a.sum())


def phase(fn, ms, *args):
    t0, c0 = time.monotonic_ns(), time.thread_time_ns()
    fn(c0 + ms * 1000000, *args)
    return {"start": t0, "end": time.monotonic_ns(), "cpu_ns": time.thread_time_ns() - c0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--py-ms", type=int, default=1500)
    ap.add_argument("--mm-ms", type=int, default=1500)
    ap.add_argument("--n", type=int, default=512)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.mm(torch.randn(8, 8), torch.randn(8, 8))  # libtorch's kernels loaded now
    print("ready tid %d" % threading.get_native_id(), flush=True)
    while not os.path.exists(a.go):
        time.sleep(0.01)
    out = {"tid": threading.get_native_id()}
    out["python"] = phase(hot_python_loop, a.py_ms)
    out["matmul"] = phase(matmul_phase, a.mm_ms, a.n)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
