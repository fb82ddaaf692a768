# SPDX-License-Identifier: BSD-2-Clause
"""A training loop with a known step time, for the always-on step signal's
tests (test_step_signal.py). Each step reads a batch from a DataLoader whose
items take --item-ms, runs an MLP forward/backward and SGD's step, and
sleeps to --step-ms. Steps are marked by:
  manual     record_function("ProfilerStep#N") around each step
  profiler   a real torch.profiler with a schedule (its ProfilerStep#N
             regions); says at the end how many ops the profiler recorded
  optimizer  nothing: the step signal counts from Optimizer.step's ends
--slow STEP (repeatable) makes that step last --slow-s seconds, in regions
slow_work#STEP of a few ms each. Says "ready" once set up, starts when the
--go file appears, and at the end prints one line "done {json}" with what it
measured itself, then waits (--linger s) so the daemon can read its last
counters."""
import argparse
import json
import os
import sys
import time

import torch
from torch import nn
from torch.autograd.profiler import record_function

from loader_region import time_next_data


class SlowItems(torch.utils.data.Dataset):
    def __init__(self, ms):
        self.ms = ms

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        time.sleep(self.ms / 1000)
        return torch.ones(32), torch.tensor(i % 10)


def body(args, n, it, model, opt, clock):
    t = time.perf_counter_ns()
    x, y = next(it)
    clock["loader_ns"] += time.perf_counter_ns() - t
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    t = time.perf_counter_ns()
    opt.step()
    clock["optim_ns"] += time.perf_counter_ns() - t
    if n in args.slow:
        end = time.perf_counter() + args.slow_s
        i = 0
        while time.perf_counter() < end:
            with record_function("slow_work#%d" % n):
                torch.mm(torch.ones(64, 64), torch.ones(64, 64))
                time.sleep(0.005)
            i += 1
        return
    left = clock["step_start"] + args.step_ms * 1e6 - time.perf_counter_ns()
    if left > 0:
        time.sleep(left / 1e9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("manual", "profiler", "optimizer"), default="manual")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=20)
    ap.add_argument("--item-ms", type=float, default=2)
    ap.add_argument("--slow", type=int, action="append", default=[])
    ap.add_argument("--slow-s", type=float, default=3)
    ap.add_argument("--go")
    ap.add_argument("--linger", type=float, default=600)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(torch.utils.data.DataLoader(SlowItems(args.item_ms), batch_size=1))
    clock = {"loader_ns": 0, "loader_inner_ns": 0, "optim_ns": 0, "step_start": 0}
    time_next_data(it, clock, "loader_inner_ns")  # what the loader's region holds
    steps_ns, prof_ops = [], []
    print("ready", flush=True)
    while args.go and not os.path.exists(args.go):
        time.sleep(0.05)
    if args.mode == "profiler":
        sched = torch.profiler.schedule(wait=2, warmup=1, active=3, repeat=1)
        with torch.profiler.profile(schedule=sched, activities=[
                torch.profiler.ProfilerActivity.CPU],
                on_trace_ready=lambda p: prof_ops.append(len(p.events()))) as prof:
            last = time.perf_counter_ns()
            for n in range(args.steps):
                clock["step_start"] = last
                body(args, n, it, model, opt, clock)
                prof.step()
                now = time.perf_counter_ns()
                steps_ns.append(now - last)
                last = now
        # ProfilerStep#0 runs from the profiler's start to the first step();
        # the last one from the last step() to its stop.
        steps_ns.append(time.perf_counter_ns() - last)
    elif args.mode == "manual":
        for n in range(args.steps):
            t = clock["step_start"] = time.perf_counter_ns()
            with record_function("ProfilerStep#%d" % n):
                body(args, n, it, model, opt, clock)
            steps_ns.append(time.perf_counter_ns() - t)
    else:
        last = None
        for n in range(args.steps):
            clock["step_start"] = time.perf_counter_ns()
            body(args, n, it, model, opt, clock)
            now = time.perf_counter_ns()
            if last is not None:  # from one optimizer step's end to the next
                steps_ns.append(now - last)
            last = now
    print("done " + json.dumps({"steps": len(steps_ns), "sum_s": sum(steps_ns) / 1e9,
                                "max_s": max(steps_ns) / 1e9,
                                "loader_s": clock["loader_ns"] / 1e9,
                                "loader_inner_s": clock["loader_inner_ns"] / 1e9,
                                "optim_s": clock["optim_ns"] / 1e9,
                                "profiler_events": prof_ops}), flush=True)
    time.sleep(args.linger)


if __name__ == "__main__":
    sys.exit(main())
