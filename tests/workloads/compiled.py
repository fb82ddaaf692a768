# SPDX-License-Identifier: BSD-2-Clause
"""Issue 45's training loop: 4 pre-LN MLP blocks and AdamW, eager or
torch.compile'd (Inductor's default mode, or "reduce-overhead": its CUDA
graphs).

usage: compiled.py MODE STEPS [--start-cue FILE] [--cue FILE] [--profile JSON]
                   [--linger S]

MODE is eager, default or reduce-overhead. With --start-cue, prints "cuda
PID" once CUDA is in use and waits for that FILE first. Compiles (and, for
reduce-overhead, captures) in the first steps, prints "ready PID", then,
once FILE exists (at once without --cue), runs STEPS steps and prints
"done graphs=N" (the graphs Dynamo compiled in all). With --profile, torch.profiler (CPU and CUDA) records those steps
and JSON gets its counts: CPU events by name, kernels by name. With
--linger, it stays S seconds after "done" (idle: a window that traced the
steps ends before the job does)."""
import argparse
import json
import os
import time

import torch


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln(x))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["eager", "default", "reduce-overhead"])
    ap.add_argument("steps", type=int)
    ap.add_argument("--start-cue")
    ap.add_argument("--cue")
    ap.add_argument("--profile")
    ap.add_argument("--linger", type=float, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(256) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device="cuda")
    if a.start_cue:
        print("cuda", os.getpid(), flush=True)
        while not os.path.exists(a.start_cue):
            time.sleep(0.05)

    run = model if a.mode == "eager" else torch.compile(model, mode=a.mode)

    def step():
        if a.mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        loss = run(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    print("ready", os.getpid(), flush=True)
    while a.cue and not os.path.exists(a.cue):
        time.sleep(0.05)
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(a.steps):
                step()
            torch.cuda.synchronize()
        cpu, kernels = {}, {}
        for e in p.profiler.kineto_results.events():
            d = kernels if e.device_type() == torch.autograd.DeviceType.CUDA else cpu
            d[e.name()] = d.get(e.name(), 0) + 1
        with open(a.profile, "w") as f:
            json.dump({"cpu": cpu, "kernels": kernels}, f, indent=1, sort_keys=True)
    else:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    graphs = 0
    if a.mode != "eager":
        from torch._dynamo.utils import counters
        graphs = counters["stats"]["unique_graphs"]
    print("done graphs=%d" % graphs, flush=True)
    time.sleep(a.linger)


if __name__ == "__main__":
    main()
