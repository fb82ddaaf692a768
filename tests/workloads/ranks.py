# SPDX-License-Identifier: BSD-2-Clause
"""One rank of a small gloo training job (CPU), started once per rank with
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment (as
torchrun sets them). Each step (a ProfilerStep#N region, as
torch.profiler's step() opens) runs an MLP forward and backward, averages
the gradients with one all_reduce and steps an SGD optimizer. Prints
"ready PID" once the process group is up, then trains until killed (or
--steps). For the hang and straggler tests, one rank (--rank-of-interest)
misbehaves:

  --stall sleep|lock|spin|die   from step --stall-step on, it never reaches
      the next all_reduce: it sleeps in a loop (stuck_sleeping), blocks on a
      lock no one releases (stuck_on_lock), spins in Python (stuck_spinning),
      or exits (os._exit, before which a child it forked after the process
      group came up keeps its sockets open, as a forked DataLoader worker
      would: the other ranks then wait, as NCCL's do for a dead peer, instead
      of seeing gloo's closed connection);
  --straggle sleep|work|faults|fresh  every step it is late to its
      all_reduce: it sleeps --straggle-ms (late_sleep), does --straggle-ms
      of extra compute (late_work: slow when a CPU hog shares its CPU),
      touches pages of a file-backed mapping whose page cache it dropped
      (Faulter: major page faults, blocked in or, where the VM's host reads
      the page first, on CPU), or writes --fresh-mb of fresh memory
      (late_fresh: minor page faults, all on CPU)."""
import argparse
import mmap
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch import nn


def stuck_sleeping():
    while True:
        time.sleep(1)


def stuck_on_lock():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()


def stuck_spinning():
    n = 0
    while True:
        n += 1


def die(child):
    print("dying", os.getpid(), "child", child, flush=True)
    os._exit(3)


def late_sleep(ms):
    time.sleep(ms / 1000)


def late_work(ms, x):
    t = time.thread_time()
    while time.thread_time() - t < ms / 1000:
        torch.mm(x, x)


def late_fresh(mb):
    m = mmap.mmap(-1, mb << 20)
    for off in range(0, mb << 20, mmap.PAGESIZE):
        m[off] = 1
    m.close()


class Faulter:
    """Pages of a file mapped, evicted from the page cache before each
    step's touch: each touch is a major fault."""

    def __init__(self, path, pages):
        self.size = pages * mmap.PAGESIZE
        with open(path, "wb") as f:
            f.write(os.urandom(self.size))
            f.flush()
            os.fsync(f.fileno())
        self.fd = os.open(path, os.O_RDONLY)
        self.mm = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
        self.mm.madvise(mmap.MADV_RANDOM)

    def touch(self):
        self.mm.madvise(mmap.MADV_DONTNEED)
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)
        s = 0
        for off in range(0, self.size, mmap.PAGESIZE):
            s += self.mm[off]
        return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--rank-of-interest", type=int, default=-1)
    ap.add_argument("--stall", choices=["sleep", "lock", "spin", "die"])
    ap.add_argument("--stall-step", type=int, default=40)
    ap.add_argument("--stall-file", help="stall once this file exists (else at --stall-step)")
    ap.add_argument("--straggle", choices=["sleep", "work", "faults", "fresh"])
    ap.add_argument("--straggle-ms", type=float, default=30)
    ap.add_argument("--fault-file", default="/tmp/ptbpf-ranks-faults")
    ap.add_argument("--fault-pages", type=int, default=400)
    ap.add_argument("--fresh-mb", type=int, default=32)
    ap.add_argument("--pause", type=float, default=0.01)
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    me = rank == args.rank_of_interest
    dist.init_process_group("gloo")
    child = 0
    if me and args.stall == "die":
        child = os.fork()
        if not child:  # until killed, or 5 minutes at most
            time.sleep(300)
            os._exit(0)
    faulter = None
    if me and args.straggle == "faults":
        faulter = Faulter("%s.%d" % (args.fault_file, os.getpid()), args.fault_pages)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    w = torch.randn(128, 128)
    dist.barrier()
    print("ready", os.getpid(), flush=True)
    step = 0
    while not args.steps or step < args.steps:
        step += 1
        with torch.autograd.profiler.record_function("ProfilerStep#%d" % step):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            if me and args.stall and (os.path.exists(args.stall_file) if args.stall_file
                                      else step >= args.stall_step):
                print("stalled at step", step, flush=True)
                {"sleep": stuck_sleeping, "lock": stuck_on_lock, "spin": stuck_spinning,
                 "die": lambda: die(child)}[args.stall]()
            if me and args.straggle == "sleep":
                late_sleep(args.straggle_ms)
            elif me and args.straggle == "work":
                late_work(args.straggle_ms, w)
            elif faulter:
                faulter.touch()
            elif me and args.straggle == "fresh":
                late_fresh(args.fresh_mb)
            flat = torch.cat([p.grad.flatten() for p in model.parameters()])
            dist.all_reduce(flat)
            opt.step()
        time.sleep(args.pause)
    dist.barrier()
    print("done", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
