# SPDX-License-Identifier: BSD-2-Clause
"""Training jobs for the soak (tests/soak/soak.py) that check their own
results while ptbpf comes and goes.

usage: jobs.py KIND --cue DIR [--device cpu|cuda] [--wait W --active A --repeat R]
               [--session-every S] [--pause S] [--seed N] [--threads N]
KIND: mlp, graphs (CUDA graphs), ddp (RANK, WORLD_SIZE, MASTER_ADDR/PORT in
the environment; NCCL on cuda:RANK, gloo on the CPU), ondemand (traced on
demand by Kineto itself, through tests/soak/fakedyno.py).

The job trains in epochs of E = (W + 1 + A) * R identical steps, each from
the same initial parameters, so every epoch must end with the same
parameters, bit for bit (deterministic algorithms, fixed threads); the first
epochs run before "ready", before any ptbpf is around, and are the control.
At random moments (every --session-every seconds on average) an epoch runs
under the job's own torch.profiler with schedule(wait=W, warmup=1,
active=A, repeat=R): the events each of its R traces recorded (CPU ops, GPU
kernels, copies and sets, by name) must equal those of the control session,
run at start-up. The ondemand job asks Kineto for an on-demand trace of E
iterations instead, and compares the trace file's events the same way.

Control files in --cue: "pause" (no new sessions; the job then creates
"quiet" while none is running), "end" (finish). Prints "ready PID", one
line per differing epoch or session, and at the end "verdict {json}".
"""
import argparse
import collections
import ctypes
import faulthandler
import gc
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import time
import traceback

import fakedyno  # the soak's directory, this script's own
import probes

# Kineto's bookkeeping in a trace, not events of the job: their number
# follows buffer sizes and timing, not the work. "Buffer Flush" and
# "Resource" are CUPTI's own overhead records (CUPTI_ACTIVITY_KIND_OVERHEAD):
# CUPTI creating its resources, which any CUPTI user, ptbpf's agent
# included, can start (once in ~500 sessions on the H100s).
BOOKKEEPING = ("Activity Buffer Request", "Iteration Start: PyTorch Profiler",
               "Record Window End", "Trace", "overhead", "Buffer Flush", "Resource",
               "PyTorch Profiler")
# Kineto ends an on-demand trace on a thread of its own (the step hook
# starts that), racing the end of the optimizer step region that the hook
# runs in, and the device synchronization Kineto itself does at the end:
# their counts are timing, not work.
ONDEMAND_RACY = ("Optimizer.step#", "cudaDeviceSynchronize")
# A DDP job over NCCL: ProcessGroupNCCL's watchdog thread polls each
# collective's end event (cudaEventQuery, with the stream-capture checks
# around it), so how many of these fall inside a trace is timing, not work
# (2026-11-27, H100 x2, no ptbpf: cudaEventQuery 0..45 per trace, and
# cudaEventRecordWithFlags 6 -> 11 in 2 of 20 sessions).
NCCL_POLLING = ("cudaEventQuery", "cudaThreadExchangeStreamCaptureMode", "cudaStreamIsCapturing",
                "cudaEventRecordWithFlags")
ONDEMAND_CATS = {"cpu_op", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset",
                 "cuda_runtime", "cuda_driver", "gpu_user_annotation"}


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["mlp", "graphs", "ddp", "ondemand"])
    ap.add_argument("--cue", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--wait", type=int, default=2)
    ap.add_argument("--active", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--session-every", type=float, default=3.0)
    ap.add_argument("--pause", type=float, default=0.002, help="seconds between steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--width", type=int, default=256)
    return ap.parse_args()


def set_environment(args):
    """What must be in the environment before torch is imported."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if args.kind == "ondemand":
        fakedyno.environment(args.cue)
        os.environ["KINETO_ONDEMAND_TRACE_DIR"] = args.cue


ARGS = parse_args()
set_environment(ARGS)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def checksum(params):
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def mlp_model(width, device):
    return nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(),
                         nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(),
                         nn.Linear(width, 16)).to(device)


class Mlp:
    """A small MLP trained with SGD (momentum) from the same start each epoch."""

    def __init__(self, args, device, wrap=None):
        torch.manual_seed(args.seed)
        self.device, self.pause = device, args.pause
        self.model = mlp_model(args.width, device)
        self.net = wrap(self.model) if wrap else self.model
        self.params = list(self.model.parameters())
        self.init = [p.detach().clone() for p in self.params]
        self.x = torch.randn(64, args.width, device=device)
        self.y = torch.randn(64, 16, device=device)
        self.steps = (args.wait + 1 + args.active) * args.repeat

    def reset(self):
        with torch.no_grad():
            for p, p0 in zip(self.params, self.init):
                p.copy_(p0)

    def epoch(self, step_hook=None, before_step=None):
        self.reset()
        opt = torch.optim.SGD(self.params, lr=0.01, momentum=0.9)
        for _ in range(self.steps):
            if before_step:
                before_step()
            opt.zero_grad(set_to_none=True)
            nn.functional.mse_loss(self.net(self.x), self.y).backward()
            opt.step()
            if step_hook:
                step_hook()
            if self.pause:
                time.sleep(self.pause)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return checksum(self.params)


class Graphs(Mlp):
    """The whole training step (forward, backward, SGD update) captured once
    as a CUDA graph and replayed E times per epoch."""

    def __init__(self, args, device):
        super().__init__(args, device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture, as torch asks
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.reset()
        for p in self.params:
            p.grad = None
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()
        torch.cuda.synchronize()

    def _step(self):
        for p in self.params:
            p.grad = None
        nn.functional.mse_loss(self.model(self.x), self.y).backward()
        with torch.no_grad():
            for p in self.params:
                p.add_(p.grad, alpha=-0.01)

    def epoch(self, step_hook=None, before_step=None):
        self.reset()
        for _ in range(self.steps):
            if before_step:
                before_step()
            self.graph.replay()
            if step_hook:
                step_hook()
            if self.pause:
                time.sleep(self.pause)
        torch.cuda.synchronize()
        return checksum(self.params)


def ddp_job(args, device):
    import datetime
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    # A rank whose peer died ends after 60 s instead of NCCL's 10 minutes.
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                            timeout=datetime.timedelta(seconds=60))
    ids = [device.index] if device.type == "cuda" else None

    def wrap(m):
        ddp = DDP(m, device_ids=ids)
        # DDP times its first 10 iterations and then every 100th (its
        # runtime logging: 4 cudaEventElapsedTime and 8 cudaEventSynchronize
        # on CUDA), so a profiler session held those calls or not by where
        # it fell in the count (H100 x2, 2026-11-28: 4 of ~60 sessions
        # differed by exactly these 12 calls). Past the control, never again.
        ddp._set_ddp_runtime_logging_sample_rate(2**31 - 1)
        return ddp
    return Mlp(args, device, wrap=wrap)


def event_counts(prof):
    """The events one torch.profiler trace recorded, by device and name,
    from the profiler's own records (before its Python post-processing,
    which merges a same-named only child into its parent by timestamps)."""
    c = collections.Counter()
    for e in prof.profiler.kineto_results.events():
        name = e.name()
        if name.startswith(BOOKKEEPING) or (ARGS.kind == "ddp" and name in NCCL_POLLING):
            continue
        if e.device_type() != torch.autograd.DeviceType.CPU:
            c["gpu:" + name] += 1
        elif getattr(e, "is_async", bool)():
            c["async:" + name] += 1
        else:
            c["cpu:" + name] += 1
    return c


def kinds(counts):
    """Event counts by kind ("kernel", "cuda_runtime", ...), from by name."""
    out = collections.Counter()
    for k, n in counts.items():
        out[k.split(":", 1)[0]] += n
    return out


def same(control, got, by_kind=False):
    """Every trace's events equal the control's, by name; async ones (a
    collective recorded when it completes, on its communication thread,
    which races the trace's end) within one of the control's count. By
    kind (Kineto on demand, whose traces differ at their edges without
    ptbpf too): every kind of event the control has (cpu_op, kernel,
    cuda_runtime, ...), at least half as many."""
    if len(control) != len(got):
        return False
    if by_kind:
        for a, b in zip(control, got):
            have = kinds(b)
            if any(have[k] * 2 < n for k, n in kinds(a).items()):
                return False
        return True
    for a, b in zip(control, got):
        for k in set(a) | set(b):
            slack = 1 if k.startswith("async:") else 0
            if abs(a.get(k, 0) - b.get(k, 0)) > slack:
                return False
    return True


def summary(counts):
    """[cpu events, gpu events, async cpu events] of each trace of a session."""
    return [[sum(n for k, n in c.items() if k.startswith(dev))
             for dev in ("cpu:", "gpu:", "async:")] for c in counts]


def diff(control, got):
    """The first names whose counts differ, for the job's log."""
    out = []
    for i, (a, b) in enumerate(zip(control, got)):
        for k in sorted(set(a) | set(b)):
            if a.get(k, 0) != b.get(k, 0):
                out.append("trace %d %s: %d -> %d" % (i, k, a.get(k, 0), b.get(k, 0)))
    if len(control) != len(got):
        out.append("traces: %d -> %d" % (len(control), len(got)))
    return out[:12]


class ProfilerSessions:
    """torch.profiler sessions, each over one epoch, compared with the first."""

    name = "torch.profiler"
    by_kind = False

    def __init__(self, job, args, device):
        from torch.profiler import ProfilerActivity, profile, schedule
        self.job, self.profile, self.schedule = job, profile, schedule
        self.acts = [ProfilerActivity.CPU]
        if device.type == "cuda":
            self.acts.append(ProfilerActivity.CUDA)
        self.w, self.a, self.r = args.wait, args.active, args.repeat

    def run(self, check):
        got = []
        sched = self.schedule(wait=self.w, warmup=1, active=self.a, repeat=self.r)
        with self.profile(activities=self.acts, schedule=sched,
                          on_trace_ready=lambda p: got.append(event_counts(p))) as p:
            check(self.job.epoch(step_hook=lambda: self.step(p)))
        return got

    def step(self, p):
        """Kineto keeps only GPU work that ended before the trace's end (and
        began after its start): a kernel still running at a step boundary
        would be in or out by timing alone. The job waits for its GPU work
        at each boundary, and then 2 ms more (the GPU's timestamps are
        converted to the host's clock, a few microseconds off), so every
        session records the same steps."""
        if self.job.device.type == "cuda":
            torch.cuda.synchronize()
            time.sleep(0.002)
        p.step()

    def close(self):
        pass


class OnDemandSessions:
    """Kineto's own on-demand tracing: a trace of E iterations (optimizer
    steps, counted by torch's step hook under KINETO_USE_DAEMON), starting
    at a multiple of E, so every trace covers the same work; asked for
    through the fake dynolog's socket and read back from the JSON Kineto
    writes."""

    name = "kineto on-demand"
    # Its traces differ at their edges with no ptbpf anywhere (H100 x2,
    # 2026-11-28: 31 of 40 in a control soak, copies 19 -> 13..20, fill
    # kernels), so they are judged by kind: a whole kind lost is harm.
    by_kind = True

    def __init__(self, job, args, cue):
        # Under KINETO_USE_DAEMON, importing torch.profiler hooks every
        # optimizer step to Kineto's iteration count.
        import torch.profiler  # noqa: F401
        self.job, self.cue, self.k = job, cue, 0
        self.dyno = fakedyno.FakeDynolog(os.environ["KINETO_IPC_SOCKET_DIR"])
        self.unavailable = self._check()

    def _check(self):
        if not torch.autograd.kineto_available():
            return "this torch has no Kineto"
        deadline = time.time() + 30
        while self.dyno.requests == 0 and time.time() < deadline:
            self.job.epoch()
        if self.dyno.requests == 0:
            return ("Kineto never polled %s within 30 s (KINETO_USE_DAEMON=1): this torch's "
                    "Kineto has no IPC fabric, or its daemon client did not start; "
                    "dynolog would not help either" % self.dyno.path)
        return None

    def run(self, check):
        steps = self.job.steps
        base = os.path.join(self.cue, "od%d" % self.k)
        self.k += 1
        self.dyno.request_trace(base, steps, steps, self.k)
        deadline = time.time() + 120
        while time.time() < deadline:
            # A pause before each step while a trace may be open: Kineto ends
            # it on another thread, which must be done before the next step;
            # and the GPU's work done first, as ProfilerSessions.step says.
            check(self.job.epoch(before_step=self._between_steps))
            trace = fakedyno.written_trace(base)
            if trace:
                return [self._counts(trace)]
        raise RuntimeError("no on-demand trace %s*.json within 120 s (config %s)" % (
            base, "taken" if self.dyno.taken() else "never polled"))

    def _between_steps(self):
        if self.job.device.type == "cuda":
            torch.cuda.synchronize()
        time.sleep(0.03)

    @staticmethod
    def _counts(trace):
        c = collections.Counter()
        for e in trace.get("traceEvents", []):
            if e.get("ph") != "X" or e.get("cat") not in ONDEMAND_CATS:
                continue
            if e["name"].startswith(ONDEMAND_RACY + BOOKKEEPING):
                continue
            c["%s:%s" % (e["cat"], e["name"])] += 1
        return c

    def close(self):
        pass


class Verdict:
    def __init__(self, kind, rank):
        self.v = dict(kind=kind, pid=os.getpid(), rank=rank, epochs=0, checksum_mismatches=0,
                      sessions=0, sessions_differing=0, profiler_exceptions=0, errors=[],
                      control=None, control_unstable=False, unavailable=None)
        self.expected = None

    def check(self, cs):
        """One epoch's parameters against the control's."""
        self.v["epochs"] += 1
        if cs != self.expected:
            self.v["checksum_mismatches"] += 1
            print("epoch %d: checksum %s, expected %s" % (self.v["epochs"], cs, self.expected),
                  flush=True)

    def line(self):
        v = self.v
        v["harmed"] = bool(v["checksum_mismatches"] or v["profiler_exceptions"] or
                           v["sessions_differing"] or v["errors"])
        return "verdict " + json.dumps(v, sort_keys=True)


def utc(t):
    return time.strftime("%H:%M:%S", time.gmtime(t)) + ".%03d" % (t * 1000 % 1000)


def control_session(sessions, verdict):
    """Three sessions at start-up, before any ptbpf: the first may include
    the profiler's own lazy start-up; the last two must agree, and are what
    every later session must record. (A fixed number: DDP ranks run the
    same epochs.)"""
    runs = [sessions.run(verdict.check) for _ in range(3)]
    if not same(runs[1], runs[2], sessions.by_kind):
        verdict.v["control_unstable"] = True
        print("control unstable: %s" % "; ".join(diff(runs[1], runs[2])), flush=True)
    return runs[2]


def session(sessions, control, verdict):
    verdict.v["sessions"] += 1
    t0 = time.time()
    try:
        counts = sessions.run(verdict.check)
    except Exception:
        verdict.v["profiler_exceptions"] += 1
        print("session %d: exception\n%s" % (verdict.v["sessions"], traceback.format_exc()),
              flush=True)
        return
    if not same(control, counts, sessions.by_kind):
        verdict.v["sessions_differing"] += 1
        print("session %d differs (%s to %s UTC): %s -> %s; %s" % (
            verdict.v["sessions"], utc(t0), utc(time.time()), summary(control), summary(counts),
            "; ".join(diff(control, counts))), flush=True)


def malloc_totals():
    """malloc's totals (probes.mallinfo), as "used KB free KB mmapped KB"."""
    return "".join("%s %d " % kv for kv in probes.mallinfo().items()).strip() + "\n"


def main_loop(job, sessions, control, args, verdict, ddp):
    rng = random.Random(args.seed * 7919 + os.getpid())
    cue = lambda n: os.path.join(args.cue, n)
    next_session = time.time() + rng.expovariate(1 / args.session_every)
    parent = os.getppid()
    while True:
        end = os.path.exists(cue("end")) or os.getppid() != parent
        if ddp:  # rank 0 decides for all ranks, outside any session
            flag = torch.tensor([1.0 if end else 0.0], device=job.device)
            ddp.broadcast(flag, 0)
            end = flag.item() > 0
        if end:
            return
        paused = os.path.exists(cue("pause"))
        if paused != os.path.exists(cue("quiet")):
            if paused:  # memory the sessions freed goes back before it is measured
                gc.collect()
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                if job.device.type == "cuda":  # GPU memory is read too: the cache's goes back
                    torch.cuda.empty_cache()
                with open(cue("quiet.new"), "w") as f:  # whole when it appears
                    f.write(malloc_totals())
                os.rename(cue("quiet.new"), cue("quiet"))
            else:
                os.unlink(cue("quiet"))
        if sessions and not paused and time.time() >= next_session:
            next_session = time.time() + rng.expovariate(1 / args.session_every)
            session(sessions, control, verdict)
        else:
            verdict.check(job.epoch())


def build(args):
    device = torch.device(args.device)
    rank = int(os.environ.get("RANK", "0"))
    if device.type == "cuda":  # set_device needs an index
        device = torch.device("cuda", rank if args.kind == "ddp" else device.index or 0)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    if args.kind == "ddp":
        return ddp_job(args, device), device, rank
    if args.kind == "graphs":
        return Graphs(args, device), device, rank
    return Mlp(args, device), device, rank


def main():
    # A fatal signal prints where each thread was to the job's stderr,
    # which the soak shows when a job dies; so does SIGUSR1 (`timeout -s
    # USR1` signals the soak's whole process group), and the job goes on.
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    args = ARGS
    job, device, rank = build(args)
    verdict = Verdict(args.kind, rank)
    ddp = None
    if args.kind == "ddp":
        import torch.distributed as ddp
    for _ in range(2):  # lazy initialisation, DDP's bucket rebuild
        job.epoch()
    verdict.expected = job.epoch()
    if args.kind == "ondemand":
        sessions = OnDemandSessions(job, args, args.cue)
        if sessions.unavailable:
            verdict.v["unavailable"] = sessions.unavailable
            sessions = None
    else:
        sessions = ProfilerSessions(job, args, device)
    control = control_session(sessions, verdict) if sessions else None
    verdict.v["control"] = dict(checksum=verdict.expected,
                                summary=summary(control) if control else None,
                                sessions=sessions.name if sessions else None)
    print("control checksum %s, %s %s" % (
        verdict.expected, sessions.name if sessions else "no sessions:",
        summary(control) if control else verdict.v["unavailable"]), flush=True)
    print("ready", os.getpid(), flush=True)
    try:
        main_loop(job, sessions, control, args, verdict, ddp)
    except Exception:
        verdict.v["errors"].append(traceback.format_exc()[-2000:])
    print(verdict.line(), flush=True)
    if ddp:
        ddp.destroy_process_group()
    if args.kind == "ondemand":
        shutil.rmtree(os.environ["KINETO_IPC_SOCKET_DIR"], ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main()
