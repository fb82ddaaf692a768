# SPDX-License-Identifier: BSD-2-Clause
"""A training loop (MLP, SGD) that runs until killed and, once the file
--slow-file appears, sleeps --slow-s seconds inside every step from the next
one on: a rank that turns slow at a known step, for the triggered-window
tests. Says "ready" once torch is imported and "slow from step N" when the
slowdown starts."""
import argparse
import os
import sys
import time

import torch
from torch import nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slow-file")
    ap.add_argument("--slow-s", type=float, default=0.3)
    ap.add_argument("--pause", type=float, default=0.02)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))
    print("ready", flush=True)
    step, slow_from = 0, 0
    while True:
        step += 1
        if not slow_from and args.slow_file and os.path.exists(args.slow_file):
            slow_from = step
            print("slow from step %d" % step, flush=True)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if slow_from:
            time.sleep(args.slow_s)
        opt.step()
        time.sleep(args.pause)


if __name__ == "__main__":
    sys.exit(main())
