# SPDX-License-Identifier: BSD-2-Clause
"""A CUDA training loop traced on demand by Kineto itself (KINETO_USE_DAEMON,
asked through tests/soak/fakedyno.py): a job whose own on-demand traces
ptbpf must leave whole. Such a session makes no call into CUPTI while it
runs, so an agent that attaches during one cannot see it.

usage: ondemand.py --cue DIR [--steps N]

Prints "ready PID", then trains step after step until DIR/end exists. Each
time DIR/sessionK appears (K = 0, 1, ...) it asks Kineto for a trace of N
optimizer steps, prints "session K tracing" once Kineto has taken the
request and begun, and "session K events {category: n}" (kernels, copies,
sets, CUDA runtime and driver calls) once Kineto has written the trace.
"""
import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")


def environment(cue):
    """Kineto's on-demand client, before torch is imported."""
    ipc = tempfile.mkdtemp(prefix="ptbpf-od-", dir="/tmp")  # a short socket path
    conf = os.path.join(cue, "kineto.conf")
    with open(conf, "w") as f:
        f.write("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
    os.environ.update(KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=ipc, KINETO_CONFIG=conf)
    return ipc


def counts(path):
    c = collections.Counter()
    with open(path) as f:
        for e in json.load(f).get("traceEvents", []):
            if e.get("ph") == "X" and e.get("cat") in CATEGORIES:
                c[e["cat"]] += 1
    return dict(c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cue", required=True)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    ipc = environment(args.cue)
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "soak"))
    from fakedyno import FakeDynolog
    import torch
    import torch.nn as nn
    import torch.profiler  # noqa: F401  (hooks optimizer steps to Kineto's iterations)

    dyno = FakeDynolog(os.environ["KINETO_IPC_SOCKET_DIR"])
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU())
                            for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 256, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()
        time.sleep(0.005)

    deadline = time.time() + 60
    while dyno.requests == 0 and time.time() < deadline:
        step()
    if dyno.requests == 0:
        sys.exit("Kineto never polled the fake dynolog (KINETO_USE_DAEMON=1): no on-demand tracing")

    def session(k):
        base = os.path.join(args.cue, "od%d" % k)
        dyno.post("ACTIVITIES_ENABLED=true\nPROFILE_START_ITERATION=0\n"
                  "PROFILE_START_ITERATION_ROUNDUP=1\nACTIVITIES_ITERATIONS=%d\n"
                  "ACTIVITIES_WARMUP_ITERATIONS=0\nACTIVITIES_LOG_FILE=%s.json\n"
                  "REQUEST_TRACE_ID=%d\n" % (args.steps, base, k + 1))
        while not dyno.taken():
            step()
        for _ in range(3):  # Kineto starts at the next iteration
            step()
        print("session %d tracing" % k, flush=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            step()
            d, stem = os.path.split(base)
            for f in sorted(os.listdir(d)):  # Kineto may add _PID before .json
                if f.startswith(stem) and f.endswith(".json") and f[len(stem)] in "._":
                    try:
                        print("session %d events %s" % (k, counts(os.path.join(d, f))),
                              flush=True)
                        return
                    except ValueError:  # still being written
                        pass
        sys.exit("session %d: Kineto wrote no trace within 120 s" % k)

    print("ready", os.getpid(), flush=True)
    k = 0
    while not os.path.exists(os.path.join(args.cue, "end")):
        if os.path.exists(os.path.join(args.cue, "session%d" % k)):
            session(k)
            k += 1
        else:
            step()
    torch.cuda.synchronize()
    shutil.rmtree(ipc, ignore_errors=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
