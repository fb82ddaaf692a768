# SPDX-License-Identifier: BSD-2-Clause
"""A CUDA training loop traced on demand by Kineto itself (KINETO_USE_DAEMON,
asked through tests/soak/fakedyno.py): a job whose own on-demand traces
ptbpf must leave whole. Such a session makes no call into CUPTI while it
runs, so an agent that attaches during one cannot see it.

usage: ondemand.py --cue DIR [--steps N] [--compile MODE]

Prints "ready PID", then trains step after step until DIR/end exists
(and not while DIR/idle exists: a session then goes quiet). Each
time DIR/sessionK appears (K = 0, 1, ...) it asks Kineto for a trace of N
optimizer steps, prints "session K tracing" once Kineto has taken the
request and begun, and "session K events {category: n}" (kernels, copies,
sets, CUDA runtime and driver calls, and compiled_region: torch.compile's
CPU regions) once Kineto has written the trace. With --compile the model
is torch.compile'd in MODE (Inductor's default or reduce-overhead).
"""
import argparse
import collections
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "soak"))
import fakedyno  # noqa: E402

CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")


def counts(trace):
    from profiled import is_compiled_region
    c = collections.Counter(e["cat"] for e in trace.get("traceEvents", [])
                            if e.get("ph") == "X" and e.get("cat") in CATEGORIES)
    c["compiled_region"] = sum(1 for e in trace.get("traceEvents", [])
                               if e.get("ph") == "X" and e.get("cat") not in CATEGORIES and
                               is_compiled_region(e.get("name", "")))
    return dict(c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cue", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--compile", choices=["default", "reduce-overhead"])
    args = ap.parse_args()
    ipc = fakedyno.environment(args.cue)
    import torch
    import torch.profiler  # noqa: F401  (hooks optimizer steps to Kineto's iterations)
    from profiled import serve, training

    dyno = fakedyno.FakeDynolog(os.environ["KINETO_IPC_SOCKET_DIR"])
    train = training(args.compile)

    def step():
        while os.path.exists(os.path.join(args.cue, "idle")):  # no GPU work: a quiet session
            time.sleep(0.01)
        train()
        torch.cuda.synchronize()
        time.sleep(0.005)

    deadline = time.time() + 60
    while dyno.requests == 0 and time.time() < deadline:
        step()
    if dyno.requests == 0:
        sys.exit("Kineto never polled the fake dynolog (KINETO_USE_DAEMON=1): no on-demand tracing")

    def session(k):
        base = os.path.join(args.cue, "od%d" % k)
        dyno.request_trace(base, args.steps, 1, k + 1)
        while not dyno.taken():
            step()
        for _ in range(3):  # Kineto starts at the next iteration
            step()
        print("session %d tracing" % k, flush=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            step()
            trace = fakedyno.written_trace(base)
            if trace:
                print("session %d events %s" % (k, counts(trace)), flush=True)
                return
        sys.exit("session %d: Kineto wrote no trace within 120 s" % k)

    serve(args.cue, step, session)
    torch.cuda.synchronize()
    shutil.rmtree(ipc, ignore_errors=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
