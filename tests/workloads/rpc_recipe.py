# SPDX-License-Identifier: BSD-2-Clause
"""One worker of the PyTorch recipe "Profiling PyTorch RPC-Based Workloads":
two workers on one machine (TensorPipe, loopback), started once per rank
with RANK, MASTER_ADDR and MASTER_PORT set.

    rpc_recipe.py GO N [--profile OUT.json] [--raise] [--autograd] [--hang]

Both print "ready PID" once init_rpc returned. Worker 0 waits for the file
GO, then N times: rpc_async(worker1, udf_with_torch_ops).wait(),
rpc_sync(worker1, udf_with_torch_ops), rpc_sync(worker1, torch.add) and
remote(worker1, udf_with_torch_ops).to_here(), with tensor arguments; it
prints "done" and both shut down together.
  --profile  the same under torch's own RPC profiler (the legacy autograd
             profiler: RPC calls and their remote ops are recorded only
             there), its events written to OUT.json: the ground truth.
  --raise    also N rpc_sync calls of a function that raises on worker 1
             and N of a builtin op given mismatched shapes (caught).
  --autograd also N distributed autograd passes: a forward over RPC
             (rpc_sync of torch.mul with grad-requiring tensors) inside a
             dist_autograd context, then dist_autograd.backward.
  --hang     then a call whose handler sleeps past its 3 s timeout (worker 0
             prints "timed out"), then "calling" and a call whose handler
             sleeps 60 s, without a timeout: a test kills worker 1 then,
             the call fails ("failed") and worker 0 exits a second later:
             torch's handleClientError completes each pending future (on
             its pool) before it removes the call's id from the timeout
             map, the record ptbpf ends the call on; a process that exits
             at once can go between the two, and its call then ends
             cut_by_exit.
"""
import json
import os
import sys
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc


def udf_with_torch_ops(t1, t2):
    t = torch.add(t1, t2)
    t = torch.mul(t, t)
    t = t.relu()
    t = t.sigmoid()
    return t


def raises(t):
    raise ValueError("raised on purpose by the callee")


def sleeps(seconds):
    time.sleep(seconds)
    return seconds


def calls(n, flags):
    t1, t2 = torch.rand(3, 3), torch.rand(3, 3)
    for _ in range(n):
        rpc.rpc_async("worker1", udf_with_torch_ops, args=(t1, t2)).wait()
        rpc.rpc_sync("worker1", udf_with_torch_ops, args=(t1, t2))
        rpc.rpc_sync("worker1", torch.add, args=(t1, t2))
        rpc.remote("worker1", udf_with_torch_ops, args=(t1, t2)).to_here()
    if "--raise" in flags:
        for _ in range(n):
            try:
                rpc.rpc_sync("worker1", raises, args=(t1,))
            except ValueError:
                pass
            try:
                rpc.rpc_sync("worker1", torch.add, args=(torch.ones(2), torch.ones(3)))
            except RuntimeError:
                pass
    if "--autograd" in flags:
        for _ in range(n):
            with dist_autograd.context() as ctx:
                a = torch.rand(3, 3, requires_grad=True)
                b = torch.rand(3, 3, requires_grad=True)
                loss = rpc.rpc_sync("worker1", torch.mul, args=(a, b)).sum()
                dist_autograd.backward(ctx, [loss])


def hang():
    try:
        rpc.rpc_sync("worker1", sleeps, args=(6.0,), timeout=3)
    except RuntimeError:
        print("timed out", flush=True)
    print("calling", flush=True)
    try:
        rpc.rpc_sync("worker1", sleeps, args=(60.0,), timeout=0)
    except RuntimeError:
        print("failed", flush=True)
    time.sleep(1)  # torch's own bookkeeping of the failure (above)
    os._exit(0)  # worker 1 is gone: no shutdown


def profiled(n, flags, out):
    import torch.autograd.profiler_legacy as legacy

    with legacy.profile() as prof:
        calls(n, flags)
    events = [{"name": e.name, "start_us": e.time_range.start, "end_us": e.time_range.end,
               "node_id": e.node_id} for e in prof.function_events]
    with open(out + ".partial", "w") as f:
        json.dump(events, f)
    os.rename(out + ".partial", out)


def main():
    rank = int(os.environ["RANK"])
    go, n, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rpc.init_rpc("worker%d" % rank, rank=rank, world_size=2)
    print("ready %d" % os.getpid(), flush=True)
    if rank == 0:
        while not os.path.exists(go):
            time.sleep(0.01)
        if "--profile" in flags:
            profiled(n, flags, flags[flags.index("--profile") + 1])
        else:
            calls(n, flags)
        if "--hang" in flags:
            hang()
        print("done", flush=True)
    rpc.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
