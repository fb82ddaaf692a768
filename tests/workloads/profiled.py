# SPDX-License-Identifier: BSD-2-Clause
"""A CUDA training loop that runs torch.profiler sessions of its own on cue:
a job whose own profiling ptbpf must leave whole.

usage: profiled.py --cue DIR [--steps N] [--pause S] [--schedule] [--compile MODE]

Prints "ready PID", then trains step after step until DIR/end exists. Each
time DIR/sessionK appears (K = 0, 1, ...) it runs its next profiler session
(CPU + CUDA) over N steps and prints "session K gpu_events [n, ...]": the
GPU events (kernels, copies, sets) the profiler recorded, one count per
trace (several with --schedule's repeats), and with --compile, then, the
compiled regions (torch.compile's CPU regions) it recorded. With --compile the model is
torch.compile'd (MODE: Inductor's default, or reduce-overhead: CUDA graphs).
"""
import argparse
import os
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule


COMPILED_REGIONS = ("## Call CompiledFxGraph", "Pregraph bytecode",
                    "AOTDispatcher Runtime Wrapper Prologue", "triton_")


def is_compiled_region(name):
    """torch.compile's CPU regions, as torch.profiler names them (one per
    Triton launch is named after its kernel)."""
    return name.startswith(COMPILED_REGIONS)


def compiled_regions(prof):
    return sum(1 for e in prof.profiler.kineto_results.events()
               if e.device_type() == torch.autograd.DeviceType.CPU and is_compiled_region(e.name()))


def gpu_events(prof):
    return sum(1 for e in prof.profiler.kineto_results.events()
               if e.device_type() == torch.autograd.DeviceType.CUDA)


def training(compile_mode=None):
    """One training step of the job's model (also tests/workloads/ondemand.py's),
    torch.compile'd in COMPILE_MODE if given."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU())
                            for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 256, device="cuda")
    run = torch.compile(model, mode=compile_mode) if compile_mode else model

    def step():
        if compile_mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        run(x).square().mean().backward()
        opt.step()
    return step


def serve(cue, step, session):
    """Says "ready PID", then runs step until CUE/end exists, and
    session(k) instead once CUE/sessionK appears, K = 0, 1, ...
    (also tests/workloads/ondemand.py's)."""
    print("ready", os.getpid(), flush=True)
    k = 0
    while not os.path.exists(os.path.join(cue, "end")):
        if os.path.exists(os.path.join(cue, "session%d" % k)):
            session(k)
            k += 1
        else:
            step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cue", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--pause", type=float, default=0.01)
    ap.add_argument("--schedule", action="store_true")
    ap.add_argument("--compile", choices=["default", "reduce-overhead"])
    args = ap.parse_args()
    step = training(args.compile)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]

    def session(k):
        counts = []
        if args.schedule:
            with profile(activities=acts, schedule=schedule(wait=5, warmup=5, active=20, repeat=3),
                         on_trace_ready=lambda p: counts.append(gpu_events(p))) as p:
                for _ in range(args.steps):
                    step()
                    time.sleep(args.pause)
                    p.step()
        else:
            with profile(activities=acts) as p:
                for _ in range(args.steps):
                    step()
                    time.sleep(args.pause)
                torch.cuda.synchronize()
            counts.append(gpu_events(p))
            if args.compile:
                counts.append(compiled_regions(p))
        print("session %d gpu_events %s" % (k, counts), flush=True)

    def idle_step():
        step()
        time.sleep(0.002)

    serve(args.cue, idle_step, session)
    torch.cuda.synchronize()
    # What ptbpf's --compiled-regions changes while on, as torch has it again.
    P = torch.autograd.profiler
    print("done flag=%r stand-in=%s" % (getattr(P, "_is_profiler_enabled", None),
                                        hasattr(P, "_ptbpf_restore")), flush=True)


if __name__ == "__main__":
    main()
