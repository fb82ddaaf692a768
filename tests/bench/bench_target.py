# SPDX-License-Identifier: BSD-2-Clause
"""The process that `make bench` measures (tests/bench/bench.py drives it).

It builds one workload, warms it up, sizes a phase to about --phase-s
seconds, prints "ready PID UNITS", then serves commands from stdin, one a
line:

  run PHASE     times UNITS units of the workload under PHASE and prints
                "value PHASE SECONDS_PER_UNIT POSTPROCESS_S|- CPU_S_PER_UNIT"
                (CPU: the timing thread's own CPU time, time.thread_time)
  pair PHASE K BY [X]
                X (default 3) x UNITS units in blocks of K, each block once with PHASE
                on and once off (in a random order per pair); prints "pairs
                PHASE R R ...", R = on / off - 1 of each pair: a floor's cost
                within one phase, the blocks a few milliseconds apart, so the
                machine's drift between phases cancels. BY "thread": PHASE
                stays on, and torch's RecordFunction is switched for this
                thread (thread-local, inherited by autograd's threads): no
                switching cost, but what the registered callback costs
                whether or not it runs is in both halves (on torch 2.x every
                autograd task copies the registered callbacks when it sets
                its thread's state). BY "switch": PHASE itself is switched
                on before the block and off after it (a callback registered
                and removed, the agent told): all of it is in, and so is
                whatever stays on, and each block (on or off) follows a
                switch (the step signal and the kernel view: a command
                answered) and one untimed unit (graphs_kept: K, its switch
                lingers), so what switching itself costs is in neither.
                PHASE "sched" (switched only): ptbpf's
                kernel view, attached and detached by build/sched_floor
                (--sched-floor); "sched_nosys": the same without its system
                call programs
  block PHASE K S
                S units untimed, then K units timed; prints "block PHASE
                SECONDS". PHASE "plain" (the driver may have attached ptbpf
                just before) or a profiler phase (below), entered before the
                S units and left after the K, its post-processing untimed:
                one half of a pair of blocks with a whole tool on or off
                (bench.py's `--paired ptbpf,profiler`)
  quit

PHASE is what the process itself switches on around the timed units:
  plain            nothing (the driver may have attached ptbpf or a probe)
  profiler         torch.profiler, CPU (+ CUDA on a CUDA device) activities;
  profiler_cuda    CUDA activity only; profiler_cpu  CPU only; profiler_shapes,
                   profiler_stack, profiler_memory: with record_shapes,
                   with_stack, profile_memory. Their
                   post-processing (leaving the context, key_averages) is
                   timed apart and printed after the per-unit value; a
                   profiler phase times --profiler-units units (its
                   post-processing grows with the events it holds)
  rf1, rf4, rf7    empty global RecordFunction callbacks (one on all scopes;
                   the agent's four by scope; one on USER_SCOPE alone, as the
                   always-on step signal's): torch's own machinery
  cupti_cb         CUPTI callbacks on the CUDA calls the agent subscribes
                   to, empty; cupti_cb_rt: on the runtime ones only;
                   cupti_graph: on CUDA graph nodes made or cloned alone
                   (what the agent's capture map subscribes to)
  cupti_act        CUPTI activity: kernels, copies, sets; cupti_act_api:
                   also the runtime API's records (torch.profiler's way)
  floors           rf1 + cupti_cb + cupti_act at once (CUDA; rf1 on the CPU)
The floors come from build/libptbpf-floor.so (tests/bench/floor.c).
"""
import argparse
import ctypes
import errno
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import agentsteps  # beside this script
from step_signal_cost import WORK  # floor.c's FLOOR_W_* bits of its w_ phases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def smallop(device):
    """One aten::add on one-element tensors a unit (and one launch on CUDA)."""
    a = torch.ones(1, device=device)
    add = torch.add

    def run(n):
        for _ in range(n):
            add(a, a)
        sync(device)
    return run


def step(device):
    """Launch-bound training step: 8x[Linear256+LayerNorm+GELU], AdamW,
    batch 64 (about 560 ops and 170 launches a step)."""
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
        sync(device)
    return run


class Tokens(torch.utils.data.Dataset):
    """Random token sequences (inputs and next-token targets)."""

    def __init__(self, vocab, seq):
        self.vocab, self.seq = vocab, seq

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        t = torch.randint(self.vocab, (self.seq + 1,), generator=g)
        return t[:-1], t[1:]


class LM(nn.Module):
    def __init__(self, vocab, d, heads, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


def transformer(device):
    """A transformer training step: bf16 autocast, AdamW, gradient clipping,
    batches from DataLoader worker processes."""
    torch.manual_seed(0)
    if device == "cuda":
        vocab, d, heads, layers, seq, batch = 8192, 512, 8, 6, 128, 16
    else:
        vocab, d, heads, layers, seq, batch = 1000, 128, 4, 2, 64, 8
    model = LM(vocab, d, heads, layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(Tokens(vocab, seq), batch_size=batch, num_workers=2,
                                         persistent_workers=True, prefetch_factor=4,
                                         pin_memory=device == "cuda")
    it = iter(loader)

    def run(n):
        for _ in range(n):
            x, y = next(it)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        sync(device)
    return run


def gpubound(device):
    """GPU-bound: 8x 8192^2 bf16 matmul + gelu a step."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)

    def run(n):
        for _ in range(n):
            x = a
            for _ in range(8):
                x = F.gelu(x @ a) * 1e-4
        sync(device)
    return run


def compiled_loop(device, mode):
    """tests/workloads/compiled.py's 4 pre-LN MLP blocks and AdamW,
    torch.compile'd in mode, compiled (and captured) before it returns."""
    if device != "cuda":
        raise SystemExit("bench_target: the compiled workloads are CUDA workloads (Triton, "
                         "CUDA graphs)")
    sys.path.insert(0, os.path.join(ROOT, "tests", "workloads"))
    from compiled import Block
    torch.manual_seed(0)
    model = torch.compile(nn.Sequential(*[Block(256) for _ in range(4)]).to(device), mode=mode)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device=device)

    def run(n):
        for _ in range(n):
            if mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
        sync(device)
    run(5)
    return run


def graphs(device):
    """torch.compile(mode="reduce-overhead"): the model's forward and
    backward replayed as CUDA graphs (CUDA only)."""
    return compiled_loop(device, "reduce-overhead")


def compiled(device):
    """torch.compile, Inductor's default mode: Triton kernels launched
    one by one (CUDA only)."""
    return compiled_loop(device, "default")


WORKLOADS = dict(smallop=smallop, step=step, transformer=transformer, gpubound=gpubound,
                 graphs=graphs, compiled=compiled)


class SchedFloor:
    """ptbpf's kernel view switched by build/sched_floor (run by bench.py
    for this process), through the two FIFOs in DIR: "on" or "off", then
    its answer."""

    def __init__(self, fifo_dir):
        self.dir = fifo_dir
        self.cmd = self.ack = None
        self.on = False

    def open(self):
        """In sched_floor's order: commands, then answers; without waiting
        for ever where sched_floor never opens its end."""
        path, deadline = os.path.join(self.dir, "cmd"), time.time() + 30
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:  # ENXIO: no reader yet
                if e.errno != errno.ENXIO or time.time() > deadline:
                    raise RuntimeError("sched_floor does not read its commands: %s" % e)
                time.sleep(0.01)
        os.set_blocking(fd, True)
        self.cmd = os.fdopen(fd, "w")
        self.ack = open(os.path.join(self.dir, "ack"))

    def set(self, on, syscalls=True):
        if self.cmd is None:
            self.open()
        self.cmd.write(("on\n" if syscalls else "on nosys\n") if on else "off\n")
        self.cmd.flush()
        answer = self.ack.readline().strip()
        self.on = bool(on) and answer.startswith("ok")
        if not answer.startswith("ok"):
            raise RuntimeError("sched_floor: %s" % (answer or "gone"))


class Floors:
    def __init__(self, path, steps, sched_dir=None):
        self.lib = ctypes.CDLL(path)
        self.lib.floor_why.restype = ctypes.c_char_p
        self.lib.floor_cupti_records.restype = ctypes.c_ulong
        # The daemon's always-on layer: the agent loaded up front, so that
        # every ptbpf phase finds this same agent (ptbpf then loads none).
        self.steps = agentsteps.StepSignal(os.path.dirname(path)) if steps else None
        self.steps_on = False
        self.sched = SchedFloor(sched_dir) if sched_dir else None
        self.is_on = False

    def set(self, phase, device, on):
        """PHASE on or off for the next block of a switched pair. The step
        signal and the kernel view are told either way (each half then
        follows the same wait for an answer); the others are switched
        only when the state changes."""
        if phase == "steps":
            if self.steps.command(" steps" if on else "") != bool(on):
                raise RuntimeError("the agent's step signal did not switch")
            self.steps_on = bool(on)
        elif phase == "graphs_kept":  # the kept capture map, over the step signal in both
            if not self.steps.command(" steps graphs" if on else " steps"):
                raise RuntimeError("the agent's step signal did not stay on")
            self.steps_on = True
        elif phase in ("sched", "sched_nosys"):
            self.sched.set(on, phase == "sched")
        elif on and not self.is_on:
            self.on(phase, device)
            self.is_on = True
        elif not on and self.is_on:
            self.off()  # is_on too

    def check(self, rc, what):
        if rc:
            raise RuntimeError("%s: %s" % (what, self.lib.floor_why().decode()))

    def on(self, phase, device):
        if phase == "steps":
            self.steps.on()
            self.steps_on = True
            return
        if phase in WORK:
            self.check(self.lib.floor_rf_work_on(WORK[phase]), phase)
            return
        parts = {"rf1": ["rf1"], "rf4": ["rf4"], "rf7": ["rf7"], "cupti_cb": ["cb0"],
                 "cupti_cb_rt": ["cb1"],
                 "cupti_graph": ["cb2"], "cupti_graph_v2": ["cb3"], "cupti_act": ["act0"],
                 "cupti_act_api": ["act1"],
                 "floors": ["rf1"] + (["cb0", "act0"] if device == "cuda" else [])}[phase]
        for p in parts:
            if p.startswith("rf"):
                self.check(self.lib.floor_rf_on(int(p[2:])), p)
            elif p.startswith("cb"):
                self.check(self.lib.floor_cupti_cb_on(int(p[2:])), p)
            else:
                self.check(self.lib.floor_cupti_act_on(int(p[3:])), p)

    def off(self):
        if self.steps_on:
            self.steps.off()
            self.steps_on = False
        if self.sched and self.sched.on:
            self.sched.set(False)
        self.is_on = False
        self.lib.floor_rf_off()
        self.lib.floor_cupti_cb_off()
        self.lib.floor_cupti_act_off()


def paired(floors, phase, device, run, n, block, by):
    """bench_target's `pair`: by "thread" or "switch" (see the top)."""
    out = []
    # Switching the kept capture map on walks the job's every object for
    # its GOT hooks (25 ms on the agent's thread), and off writes them back:
    # on the H200 (reduce-overhead, 8-step blocks) the block after one
    # untimed unit ran +2.3% and +2.6% (95% +1.2..+3.2%, +0.8..+4.3%), an
    # agent without the hooks +0.5%, and after 8 or 20 units -0.1% and
    # -1.1%, the same steps switched with nothing +0.0..+1.4%; no CUPTI
    # callback of the map's runs in those steps (0 in 200). It switches
    # once in a daemon's life: its steady state is measured, after a
    # block's worth of units untimed.
    settle = block if phase == "graphs_kept" else 1
    if by == "thread":
        floors.on(phase, device)
    try:
        for _ in range(max(1, n // (2 * block))):
            t = {}
            for on in random.sample((1, 0), 2):
                if by == "thread":
                    floors.check(floors.lib.floor_rf_thread(on), "RecordFunction for the thread")
                else:
                    # Both halves switch and then run untimed: the
                    # switch's own wake-ups and cold caches stay out of
                    # either timed block; what stays on is in the "on" one.
                    floors.set(phase, device, on)
                    run(settle)
                t0 = time.perf_counter()
                run(block)
                t[on] = time.perf_counter() - t0
            out.append(t[1] / t[0] - 1)
    finally:
        floors.lib.floor_rf_thread(1)
        floors.off()
    return out


def block(prof_args, run, k, settle):
    """bench_target's `block`: the seconds K units take after SETTLE
    untimed ones, under torch.profiler if PROF_ARGS (its activities and
    options), which is left (and its events dropped) untimed."""
    from torch.profiler import profile
    prof = profile(activities=prof_args[0], **prof_args[1]) if prof_args else None
    if prof:
        prof.__enter__()
    run(settle)
    t0 = time.perf_counter()
    run(k)
    dt = time.perf_counter() - t0
    if prof:
        prof.__exit__(None, None, None)
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--phase-s", type=float, default=0.3,
                    help="seconds of untraced work a phase times")
    ap.add_argument("--profiler-s", type=float, default=0.1,
                    help="the same for profiler phases")
    ap.add_argument("--floor-lib", default=os.path.join(ROOT, "build", "libptbpf-floor.so"))
    ap.add_argument("--steps", action="store_true",
                    help="load the agent for the `steps` phase (its always-on step signal)")
    ap.add_argument("--sched-floor", metavar="DIR",
                    help="the FIFOs of build/sched_floor, for `pair sched N switch`")
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = WORKLOADS[args.workload](args.device)
    run(2)  # lazy init: allocator, cuBLAS handles, DataLoader workers
    n = 1
    while True:  # size the phase
        t0 = time.perf_counter()
        run(n)
        dt = time.perf_counter() - t0
        if dt > args.phase_s / 4:
            break
        n *= 2
    units = max(1, int(n * args.phase_s / dt))
    # The profiler's post-processing grows with what it holds: smallop's
    # phase is kept to 20,000 ops (5,000 and their launches on CUDA).
    prof_units = max(1, int(n * args.profiler_s / dt))
    if args.workload == "smallop":
        prof_units = min(prof_units, 5000 if args.device == "cuda" else 20000)
    floors = Floors(args.floor_lib, args.steps, args.sched_floor)
    from torch.profiler import profile, ProfilerActivity
    both = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    acts = {"profiler": (both, {}), "profiler_cuda": ([ProfilerActivity.CUDA], {}),
            "profiler_cpu": ([ProfilerActivity.CPU], {}),
            "profiler_shapes": (both, dict(record_shapes=True)),
            "profiler_stack": (both, dict(with_stack=True)),
            "profiler_memory": (both, dict(profile_memory=True))}
    print("ready", os.getpid(), units, prof_units, flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        phase = words[1]
        if words[0] == "block":
            print("block", phase, "%.9g" % block(acts.get(phase), run, int(words[2]),
                                                 int(words[3])), flush=True)
            continue
        if words[0] == "pair":
            print("pairs", phase, " ".join("%.6g" % r for r in paired(
                floors, phase, args.device, run, int(float(words[4]) * units) if len(words) > 4
                else 3 * units, int(words[2]), words[3])),
                flush=True)
            continue
        extra = " -"
        if phase in acts:
            prof = profile(activities=acts[phase][0], **acts[phase][1])
            prof.__enter__()
            c0, t0 = time.thread_time(), time.perf_counter()
            run(prof_units)
            v = (time.perf_counter() - t0) / prof_units
            cpu = (time.thread_time() - c0) / prof_units
            t0 = time.perf_counter()
            prof.__exit__(None, None, None)
            prof.key_averages()
            extra = " %.4f" % (time.perf_counter() - t0)
        else:
            if phase != "plain":
                floors.on(phase, args.device)
            c0, t0 = time.thread_time(), time.perf_counter()
            run(units)
            v = (time.perf_counter() - t0) / units
            cpu = (time.thread_time() - c0) / units
            floors.off()
        print("value", phase, "%.9g" % v + extra, "%.9g" % cpu, flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
