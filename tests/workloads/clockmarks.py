# SPDX-License-Identifier: BSD-2-Clause
"""record_function regions bracketed by the process's own CLOCK_MONOTONIC
reads (time.monotonic_ns), so that a test can check the timestamps ptbpf's
agent gives their begins and ends against the kernel's clock.

usage: clockmarks.py --go FILE [--seconds S]

Prints "ready", waits for FILE, then for S seconds (default 3) runs regions
"mark#i" (each around a torch.add), one every ~1 ms, and prints one JSON
line: [[i, before_ns, after_ns], ...]."""
import argparse
import json
import os
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    a, b = torch.ones(4), torch.ones(4)
    rf = torch.autograd.profiler.record_function
    print("ready", flush=True)
    while not os.path.exists(args.go):
        time.sleep(0.01)
    marks = []
    end = time.monotonic_ns() + int(args.seconds * 1e9)
    i = 0
    while time.monotonic_ns() < end:
        t0 = time.monotonic_ns()
        with rf("mark#%d" % i):
            torch.add(a, b)
        marks.append([i, t0, time.monotonic_ns()])
        i += 1
        time.sleep(0.001)
    print(json.dumps(marks), flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
