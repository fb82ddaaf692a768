# SPDX-License-Identifier: BSD-2-Clause
"""The process that `make bench` measures. It times one workload in rounds
of phases, and stops at barriers so the driver can attach or detach ptbpf:

  untraced -> [attach] traced [detach] -> after_detach  (repeated --rounds)
  then untraced -> profiler                              (repeated --rounds)

The profiler rounds come last: once Kineto has run, it keeps CUPTI's one
subscriber slot, and ptbpf's agent steps aside (no GPU timeline).

usage: bench_target.py WORKLOAD --device cpu|cuda --ctl DIR [--rounds N]
Prints "value PHASE ROUND SECONDS_PER_UNIT" lines, and "barrier NAME" when
it waits for DIR/NAME to exist."""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn


def barrier(ctl, name):
    print("barrier", name, flush=True)
    path = os.path.join(ctl, name)
    while not os.path.exists(path):
        time.sleep(0.005)


def smallop(device):
    a = torch.ones(1, device=device)
    add = torch.add

    def run(n):
        for _ in range(n):
            add(a, a)
        if device == "cuda":
            torch.cuda.synchronize()
    return run, 20000


def step(device):
    """Launch-bound: 8x[Linear256+LayerNorm+GELU], AdamW, batch 64."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU()]
    model = nn.Sequential(*layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device=device)

    def run(n):
        for _ in range(n):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
    return run, 50 if device == "cuda" else 20


def gpubound(device):
    """GPU-bound: 8x 8192^2 bf16 matmul + gelu per step."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def run(n):
        for _ in range(n):
            x = a
            for _ in range(8):
                x = torch.nn.functional.gelu(x @ a) * 1e-4
        torch.cuda.synchronize()
    return run, 20


def timed(run, n):
    t0 = time.perf_counter()
    run(n)
    return (time.perf_counter() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["smallop", "step", "gpubound"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profilers", default="plain",
                    help="torch.profiler variants to time: plain, shapes (record_shapes), "
                    "stack (with_stack), memory (profile_memory)")
    args = ap.parse_args()
    variants = dict(plain={}, shapes=dict(record_shapes=True), stack=dict(with_stack=True),
                    memory=dict(profile_memory=True))
    torch.set_num_threads(1)
    run, n = globals()[args.workload](args.device)
    for _ in range(3):
        run(n)  # warm-up: lazy init, allocator, cuBLAS handles
    from torch.profiler import profile, ProfilerActivity
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    print("ready", os.getpid(), flush=True)
    for r in range(args.rounds):
        print("value untraced", r, timed(run, n), flush=True)
        barrier(args.ctl, "attached%d" % r)
        print("value traced", r, timed(run, n), flush=True)
        barrier(args.ctl, "detached%d" % r)
        print("value after_detach", r, timed(run, n), flush=True)
    names = args.profilers.split(",")
    for r in range(args.rounds):
        print("value untraced", args.rounds + r, timed(run, n), flush=True)
        for name in names:
            prof = profile(activities=acts, **variants[name])
            prof.__enter__()
            v = timed(run, n)
            t0 = time.perf_counter()
            prof.__exit__(None, None, None)
            prof.key_averages()
            suffix = "" if name == "plain" else "_" + name
            print("value profiler%s" % suffix, r, v, flush=True)
            print("value profiler%s_postprocess" % suffix, r, time.perf_counter() - t0,
                  flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
