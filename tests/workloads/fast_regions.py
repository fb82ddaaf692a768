# SPDX-License-Identifier: BSD-2-Clause
"""A CPU loop that opens regions the way torch.compile's code does (Inductor's
launchers, CompiledFxGraph, AOTDispatcher): a torch._C._profiler.
_RecordFunctionFast context only while torch.autograd.profiler.
_is_profiler_enabled is set. ptbpf's --compiled-regions is checked on it
where torch.compile itself cannot run (no GPU, no compiler).

usage: fast_regions.py --go FILE [--steps N | --until FILE] [--pause S]
                       [--thread] [--after FILE]

Prints "ready PID"; once --go's FILE exists, sleeps S seconds in one call
(a main thread that runs no Python), then runs N steps of a matmul (or
until --until's FILE exists), each in a region named "## Call
CompiledFxGraph fast_regions ##" when the flag is set, and prints "steps N
regions R" (with --thread, a second thread runs such steps from the go on,
until the main thread's are done: "thread steps N regions R"). With
--after it then waits for that file too. Last it prints "done flag=F
stand-in=S torch-rf=T": the flag, whether ptbpf's stand-in is there, and
whether _RecordFunctionFast is torch's own (None for each where torch has
no such thing, as 1.13)."""
import argparse
import os
import threading
import time

import torch

NAME = "## Call CompiledFxGraph fast_regions ##"


def steps(n, until, stop=None):
    """n steps (or until the file until exists, or stop is set): (steps, regions)."""
    P = torch.autograd.profiler
    C = getattr(torch._C, "_profiler", None)
    x = torch.randn(64, 64)
    done = regions = 0
    while (done < n if not until else not os.path.exists(until)) and not (stop and stop.is_set()):
        if getattr(P, "_is_profiler_enabled", False):
            with C._RecordFunctionFast(NAME):
                x.mm(x)
            regions += 1
        else:
            x.mm(x)
        done += 1
        time.sleep(0.002)
    return done, regions


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--until")
    ap.add_argument("--pause", type=float, default=0)
    ap.add_argument("--thread", action="store_true")
    ap.add_argument("--after")
    a = ap.parse_args()
    print("ready", os.getpid(), flush=True)
    while not os.path.exists(a.go):
        time.sleep(0.01)
    stop, other = threading.Event(), []
    if a.thread:
        t = threading.Thread(target=lambda: other.append(steps(1 << 62, None, stop)))
        t.start()
    time.sleep(a.pause)
    print("steps %d regions %d" % steps(a.steps, a.until), flush=True)
    if a.thread:
        stop.set()
        t.join()
        print("thread steps %d regions %d" % other[0], flush=True)
    while a.after and not os.path.exists(a.after):
        time.sleep(0.01)
    P = torch.autograd.profiler
    rf = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)
    print("done flag=%r stand-in=%s torch-rf=%s" % (
        getattr(P, "_is_profiler_enabled", None), hasattr(P, "_ptbpf_restore"),
        None if rf is None else isinstance(rf, type)), flush=True)


if __name__ == "__main__":
    main()
