# SPDX-License-Identifier: BSD-2-Clause
"""One rank of a DistributedDataParallel training job, started once per
rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in its environment
(as torchrun sets them). Backend nccl on cuda:RANK (or gloo on the CPU with
--cpu). Prints "ready PID" once the process group is up and the model is
built, waits for the go file, trains, prints "done", lingers, exits.

usage: ddp.py --steps N --go FILE [--cpu] [--linger S]"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--go", required=True)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--linger", type=float, default=0.5)
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    device = torch.device("cpu") if args.cpu else torch.device("cuda", rank)
    if not args.cpu:
        torch.cuda.set_device(device)
    dist.init_process_group("gloo" if args.cpu else "nccl")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)).to(device)
    ddp = DDP(model, device_ids=None if args.cpu else [rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(32, 256, device=device)
    # One warm-up step: DDP's first backward builds its buckets.
    ddp(x).square().mean().backward()
    opt.step()
    if not args.cpu:
        torch.cuda.synchronize()
    dist.barrier()
    print("ready", os.getpid(), flush=True)
    while not os.path.exists(args.go):
        time.sleep(0.01)
    for _ in range(args.steps):
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
    if not args.cpu:
        torch.cuda.synchronize()
    dist.barrier()
    print("done", flush=True)
    time.sleep(args.linger)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
