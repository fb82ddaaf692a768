# SPDX-License-Identifier: BSD-2-Clause
"""Deterministic PyTorch workloads that ptbpf's tests attach to.

usage: workload.py KIND [--steps N] [--go FILE] [--profile OUT.json] [--threads N]

Prints "ready" once imports and warm-up are done, waits until --go FILE
exists (so a tracer can attach first), runs KIND, prints one result line and
leaves with os._exit so that interpreter teardown runs no ops. With
--profile, the same steps run under torch.profiler and the per-op call
counts (key_averages) are written to OUT.json.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn


DEVICE = "cpu"


def mlp(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10)).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32, device=DEVICE)
    y = torch.randint(0, 10, (16,), device=DEVICE)
    loss = None
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return "loss %.6f" % loss.item()


def conv(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8 * 7 * 7, 10)).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 3, 16, 16, device=DEVICE)
    y = torch.randint(0, 10, (4,), device=DEVICE)
    loss = None
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return "loss %.6f" % loss.item()


def threads(steps):
    """Ops issued from several Python threads at once, plus intra-op work."""
    import threading
    torch.manual_seed(0)
    a = torch.randn(256, 256)
    out = []

    def work():
        s = 0.0
        for _ in range(steps):
            s += float(torch.mm(a, a).sum())
        out.append(s)
    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return "sums %d" % len(out)


def checked(steps):
    """An MLP trained on the main thread while two Python threads multiply
    matrices, for as long as `steps` steps: every step prints its loss, and
    the threads their sums at the end, values that a clobbered register, a
    lost wakeup or a stolen signal would change. A short sleep per step
    keeps it blocked in a system call at times, as real jobs are."""
    import threading
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))
    a = torch.randn(48, 48)
    sums = {}

    def work(k):
        s = 0.0
        for i in range(steps):
            s += float(torch.mm(a, a * ((i % 7) + k)).sum())
            time.sleep(0.004)
        sums[k] = round(s, 3)
    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for i in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (i, loss.item()), flush=True)
        time.sleep(0.002)
    for t in threads:
        t.join()
    return "threads %s" % sorted(sums.items())


def exceptions(steps):
    """An op throwing inside try/except, in a loop, and from nested ops."""
    caught = 0
    a, b = torch.ones(2, 3), torch.ones(4, 5)
    for _ in range(steps):
        try:
            torch.mm(a, b)
        except RuntimeError:
            caught += 1
        try:
            nn.functional.linear(a, b)  # linear -> matmul/t/mm: thrown deep
        except RuntimeError:
            caught += 1
        torch.add(a, 1)
    return "caught %d" % caught


def burst(steps):
    """Exactly `steps` aten::add calls and nothing else. With
    WORKLOAD_BURST_LIST=N they come N at a time from torch's C++, one
    aten::_foreach_add over N one-element tensors (its slow path adds them
    one by one), which Python's own speed does not limit; from
    WORKLOAD_BURST_THREADS threads then (torch lets go of the GIL in it)."""
    n = int(os.environ.get("WORKLOAD_BURST_LIST", "0"))
    if n > 0:  # WORKLOAD_BURST_THREADS Python threads at once, a share each
        import threading
        nt = max(1, int(os.environ.get("WORKLOAD_BURST_THREADS", "1")))
        calls = [steps // n // nt + (i < steps // n % nt) for i in range(nt)]

        def adds(count):
            ts = [torch.ones(1) for _ in range(n)]
            for _ in range(count):
                torch._foreach_add(ts, ts)

        threads = [threading.Thread(target=adds, args=(c,)) for c in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return "adds %d" % (steps // n * n)
    a = torch.ones(1)
    add = torch.add
    for _ in range(steps):
        add(a, a)
    return "adds %d" % steps


def regions(steps):
    """record_function regions, nested, around ops."""
    from torch.autograd.profiler import record_function
    a = torch.ones(4)
    for i in range(steps):
        with record_function("outer_region"):
            with record_function("inner_region"):
                a = a + 1
    return "sum %.1f" % float(a.sum())


def dataloader(steps):
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    ds = TensorDataset(torch.randn(steps * 4, 8), torch.randn(steps * 4, 1))
    workers = int(os.environ.get("WORKLOAD_NUM_WORKERS", "0"))
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n = 0
    for x, y in DataLoader(ds, batch_size=4, num_workers=workers):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        n += 1
    return "batches %d" % n


def compiled(steps):
    """A torch.compile'd region (Triton kernels launched through libcuda,
    no ATen ops) next to an eager op; compiled in the warm-up call."""
    global _compiled
    if "_compiled" not in globals():
        _compiled = torch.compile(lambda a: torch.nn.functional.gelu(a * 2.0 + 1.0).sum(dim=1))
    a = torch.randn(64, 256, device=DEVICE)
    s = None
    for _ in range(steps):
        s = _compiled(a) + torch.ones(64, device=DEVICE)
    torch.cuda.synchronize()
    return "sum %.3f" % float(s.sum())


def graph(steps):
    """CUDA graph replays: one cuGraphLaunch each, no ops, no kernel launches."""
    global _graph
    if "_graph" not in globals():
        x = torch.randn(64, 64, device=DEVICE)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            (x @ x).relu()  # warm up on the side stream, as the docs ask
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            y = (x @ x).relu()
        _graph = (g, y)
    g, y = _graph
    for _ in range(steps):
        g.replay()
    torch.cuda.synchronize()
    return "sum %.3f" % float(y.sum())


def nccl(steps):
    """Single-rank NCCL all_reduce (NCCL launches its kernels via libcuda)."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", rank=0,
                                world_size=1)
    t = torch.ones(1024, device=DEVICE)
    for _ in range(steps):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    return "sum %.1f" % float(t.sum())


_fresh_calls = 0


def fresh(steps):
    """Ops whose kernels are first used after warm-up (so after ptbpf has
    attached): CUDA loads them lazily, through cuLibraryGetKernel, and ptbpf
    learns their names."""
    global _fresh_calls
    _fresh_calls += 1
    if _fresh_calls == 1:
        return "warm-up"
    a = torch.rand(1000, device=DEVICE)
    s = None
    for _ in range(steps):
        s = torch.special.erfcx(a).cumsum(0) + torch.special.i0e(a)
    torch.cuda.synchronize()
    return "sum %.3f" % float(s.sum())


def memory(steps):
    """Known allocations: a step keeps a 1 MiB tensor (aten::empty) and makes
    two 1 MiB temporaries (aten::ones, aten::mul) that the next step frees.
    On the CPU the allocator reports only under the memory profiler, so the
    steps run in one there. The result is a JSON list of (CLOCK_MONOTONIC
    ns, torch.cuda.memory_allocated(), memory_reserved()) after each step
    (zeros on the CPU)."""
    import contextlib
    cuda = DEVICE == "cuda"
    samples = []
    ctx = contextlib.nullcontext() if cuda else \
        torch.autograd.profiler.profile(profile_memory=True)
    with ctx:
        keep, x, y = [], None, None
        for _ in range(steps):
            keep.append(torch.empty(1 << 20, dtype=torch.uint8, device=DEVICE))
            x = torch.ones(256, 1024, device=DEVICE)
            y = x * 2
            samples.append((time.clock_gettime_ns(time.CLOCK_MONOTONIC),
                            torch.cuda.memory_allocated() if cuda else 0,
                            torch.cuda.memory_reserved() if cuda else 0))
        del keep, x, y
    return json.dumps(samples)


KINDS = dict(memory=memory, fresh=fresh, compiled=compiled, graph=graph, nccl=nccl, mlp=mlp, conv=conv, threads=threads, exceptions=exceptions, burst=burst, checked=checked,
             regions=regions, dataloader=dataloader)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--go")
    ap.add_argument("--profile")
    ap.add_argument("--profile-cuda", action="store_true",
                    help="profile CUDA activity too (runtime and driver API records)")
    ap.add_argument("--profile-shapes",
                    help="run under torch.profiler(record_shapes=True) and write "
                    "{'op|input shapes': count} here")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (mlp, conv)")
    ap.add_argument("--loop", action="store_true", help="repeat until killed (demo)")
    ap.add_argument("--under-profiler", action="store_true",
                    help="run inside a torch.profiler session started before 'ready'")
    ap.add_argument("--linger", type=float, default=0,
                    help="seconds to stay alive after the work, as a job that goes on would")
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    fn = KINDS[args.kind]
    fn(1)  # warm-up: lazy initialisation happens before tracing starts
    user_prof = None
    if args.under_profiler:
        from torch.profiler import profile, ProfilerActivity
        user_prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        user_prof.__enter__()
    print("ready", os.getpid(), flush=True)
    while args.go and not os.path.exists(args.go):
        time.sleep(0.01)
    if args.profile_shapes:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            result = fn(args.steps)
        # The profiler's own records, as below: its Python post-processing
        # merges a same-named only child into its parent by timestamps
        # (aten::resolve_conj 44 or 45 times in the same run).
        counts = {}
        for e in prof.profiler.kineto_results.events():
            key = "%s|%s" % (e.name(), e.shapes())
            counts[key] = counts.get(key, 0) + 1
        with open(args.profile_shapes, "w") as f:
            json.dump(counts, f, indent=1, sort_keys=True)
    elif args.profile:
        from torch.profiler import profile, ProfilerActivity
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.profile_cuda else [])
        with profile(activities=acts) as prof:
            result = fn(args.steps)
            if DEVICE == "cuda":
                torch.cuda.synchronize()
        # The profiler's own records, before its Python post-processing
        # (which merges a same-named only child into its parent, depending
        # on microsecond timestamps, so its key_averages vary run to run).
        counts, kernels = {}, {}
        for e in prof.profiler.kineto_results.events():
            counts[e.name()] = counts.get(e.name(), 0) + 1
            if args.profile_cuda and e.device_type() == torch.autograd.DeviceType.CUDA:
                k = kernels.setdefault(e.name(), [0, 0.0])
                k[0] += 1
                k[1] += e.duration_ns() if hasattr(e, "duration_ns") else e.duration_us() * 1e3
        if args.profile_cuda:  # device activity: count and total ns per name
            with open(args.profile + ".device.json", "w") as f:
                json.dump(kernels, f, indent=1, sort_keys=True)
        with open(args.profile, "w") as f:
            json.dump(counts, f, indent=1, sort_keys=True)
    else:
        result = fn(args.steps)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        while args.loop:
            result = fn(args.steps)
    if user_prof is not None:
        user_prof.__exit__(None, None, None)
        kernels = sum(1 for e in user_prof.profiler.kineto_results.events()
                      if e.device_type() == torch.autograd.DeviceType.CUDA)
        print("profiler saw GPU kernels:", kernels > 0, flush=True)
    print(args.kind, result, flush=True)
    sys.stdout.flush()
    time.sleep(args.linger)
    os._exit(0)


if __name__ == "__main__":
    main()
