# SPDX-License-Identifier: BSD-2-Clause
"""Issue 43's job: a busy CUDA loop that never sleeps (4 x Linear(256, 256),
relu, sum, .item() each step: its thread is in CUDA calls most of the
time), which, once CUE exists, runs its own torch.profiler (CPU and CUDA)
over 50 steps.

usage: busy_profiled.py CUE

Prints "ready PID", then, after the session, "ok gpu_events N", or "raised
MESSAGE" (and exits 3) if the profiler raised."""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def main():
    cue = sys.argv[1]
    m = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).cuda()
    x = torch.randn(64, 256, device="cuda")

    def step():
        return m(x).relu().sum().item()

    for _ in range(20):
        step()
    print("ready", os.getpid(), flush=True)
    while not os.path.exists(cue):
        step()
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(50):
                step()
        n = sum(1 for e in p.profiler.kineto_results.events()
                if e.device_type() == torch.autograd.DeviceType.CUDA)
    except RuntimeError as e:
        print("raised", str(e).replace("\n", " ")[:300], flush=True)
        sys.exit(3)
    print("ok gpu_events", n, flush=True)


if __name__ == "__main__":
    main()
