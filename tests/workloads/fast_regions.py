# SPDX-License-Identifier: BSD-2-Clause
"""A CPU loop that opens regions the way torch.compile's code does (Inductor's
launchers, CompiledFxGraph, AOTDispatcher): a torch._C._profiler.
_RecordFunctionFast context only while torch.autograd.profiler.
_is_profiler_enabled is set. ptbpf's --compiled-regions is checked on it
where torch.compile itself cannot run (no GPU, no compiler).

usage: fast_regions.py --go FILE --steps N [--after FILE]

Prints "ready PID"; once FILE exists runs N steps of a matmul, each in a
region named "## Call CompiledFxGraph fast_regions ##" when the flag is set
and prints "steps N regions R"; with --after, then waits for that file
too. Last it prints "done flag=F stand-in=S torch-rf=T": the flag, whether
ptbpf's stand-in is there, and whether _RecordFunctionFast is torch's own
(None for each where torch has no such thing, as 1.13)."""
import argparse
import os
import time

import torch

NAME = "## Call CompiledFxGraph fast_regions ##"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--after")
    a = ap.parse_args()
    P = torch.autograd.profiler
    C = getattr(torch._C, "_profiler", None)
    print("ready", os.getpid(), flush=True)
    while not os.path.exists(a.go):
        time.sleep(0.01)
    x = torch.randn(64, 64)
    regions = 0
    for _ in range(a.steps):
        if getattr(P, "_is_profiler_enabled", False):
            with C._RecordFunctionFast(NAME):
                x.mm(x)
            regions += 1
        else:
            x.mm(x)
        time.sleep(0.002)
    print("steps", a.steps, "regions", regions, flush=True)
    while a.after and not os.path.exists(a.after):
        time.sleep(0.01)
    rf = getattr(C, "_RecordFunctionFast", None)
    print("done flag=%r stand-in=%s torch-rf=%s" % (
        getattr(P, "_is_profiler_enabled", None), hasattr(P, "_ptbpf_restore"),
        None if rf is None else isinstance(rf, type)), flush=True)


if __name__ == "__main__":
    main()
