# SPDX-License-Identifier: BSD-2-Clause
"""A small transformer's training, the same deterministic steps every run:
a DataLoader (pinned batches copied with non_blocking), bf16 autocast,
AdamW, gradient clipping. For the GPU test that compares ptbpf's Kineto
export with torch.profiler's own trace of the same steps
(tests/gpu/test_kineto_transformer.py).

usage: transformer.py [--steps N] [--device cuda] [--go FILE] [--profile OUT.json]
                      [--linger S]

Warms up (lazy initialisation, cuBLAS handles, the allocator's first
blocks), prints "ready", waits for --go FILE (a tracer attaches), runs the
steps, synchronizes, lingers (the GPU's last records reach the tracer) and
leaves with os._exit. With --profile the steps run under torch.profiler
(CPU and CUDA activities, a schedule with every step active, prof.step()
after each) and its Chrome trace is
written to OUT.json.
"""
import argparse
import os
import time

import torch
import torch.nn as nn

VOCAB, D_MODEL, HEADS, LAYERS, SEQ, BATCH = 1000, 256, 4, 4, 128, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, 4 * D_MODEL, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)))


def loader(steps, device):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (steps * BATCH, SEQ + 1), generator=g)
    ds = torch.utils.data.TensorDataset(tokens[:, :-1], tokens[:, 1:])
    return torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=0,
                                       pin_memory=device == "cuda")


def train(model, opt, batches, device, step_done=None, last=False):
    """The steps; with last, the last one ends by synchronizing and reading
    the loss, inside the step (what the profiler records and what ptbpf
    records are then the same work)."""
    dtype = torch.bfloat16
    n = len(batches)
    # Exactly n batches: no last next() that ends the iteration (after the
    # profiler's last step), and the iterator outlives the run (os._exit).
    train.batches = it = iter(batches)
    for i in range(n):
        x, y = next(it)
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=dtype):
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if last and i == n - 1:
            if device == "cuda":
                torch.cuda.synchronize()
            loss = loss.item()
        if step_done:
            step_done()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--go")
    ap.add_argument("--profile")
    ap.add_argument("--linger", type=float, default=1.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = Model().to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(model, opt, loader(2, args.device), args.device)  # warm-up
    torch.manual_seed(0)
    model = Model().to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batches = loader(args.steps, args.device)
    if args.device == "cuda":
        torch.cuda.synchronize()
    print("ready", os.getpid(), flush=True)
    while args.go and not os.path.exists(args.go):
        time.sleep(0.01)
    if args.profile:
        # A schedule, so that the profiler marks its steps (ProfilerStep#N):
        # all of them active, the trace written when the last one ends.
        from torch.profiler import ProfilerActivity, profile, schedule
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=0, warmup=0, active=args.steps, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(args.profile)) as prof:
            value = train(model, opt, batches, args.device, prof.step, last=True)
    else:
        value = train(model, opt, batches, args.device, last=True)
    print("loss %.6f" % value, flush=True)
    time.sleep(args.linger)
    os._exit(0)


if __name__ == "__main__":
    main()
