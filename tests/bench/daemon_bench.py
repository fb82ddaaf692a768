# SPDX-License-Identifier: BSD-2-Clause
"""`ptbpf daemon`'s cost: its own CPU and memory between and during windows,
and the step time a traced training loop sees in and out of windows, with
the governor's budget. The loop (bench_target's launch-bound step) prints
each step's end; the daemon's metrics endpoint says when a window is open.
With --alternate N it measures the always-on layer alone instead: N
rounds of the loop without ptbpf and then under a daemon that opens no
window (--every 24h --align), each for --period seconds; each round's median step
under the daemon over the mean of the medians of the periods without it
on either side, so that the machine's drift over minutes cancels. Steps
in the first second of a period (the daemon's start and its agent's
injection, its stop and the agent's unload) are left out.
Prints a Markdown section; with --out it is appended to that file."""
import argparse
import datetime
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import median_interval  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

LOOP = r"""
import sys, time, torch, torch.nn as nn
dev = sys.argv[1]
torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU()]
model = nn.Sequential(*layers).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device=dev)
print("ready", flush=True)
while True:
    t0 = time.time()
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
    if dev == "cuda":
        torch.cuda.synchronize()
    print("step %.6f %.6f" % (t0, time.time() - t0), flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_rss(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open("/proc/%d/statm" % pid) as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--every", default="5s")
    ap.add_argument("--window", default="2s")
    ap.add_argument("--budget", default="2")
    ap.add_argument("--ops", default="auto")
    ap.add_argument("--warmup", type=float, default=8)
    ap.add_argument("--alternate", type=int, default=0, metavar="N",
                    help="N rounds of no daemon / a daemon without windows (see above)")
    ap.add_argument("--period", type=float, default=8, help="seconds of each --alternate period")
    ap.add_argument("--out")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ptbpf-daemon-bench-")
    loop = subprocess.Popen([args.python, "-c", LOOP, args.device], stdout=subprocess.PIPE,
                            text=True)
    assert loop.stdout.readline().strip() == "ready"
    steps = []

    def read_steps():
        for line in loop.stdout:
            if line.startswith("step "):
                _, t0, dt = line.split()
                steps.append((float(t0), float(dt)))
    threading.Thread(target=read_steps, daemon=True).start()
    time.sleep(args.warmup)  # warm up, then a baseline, untraced
    if args.alternate:
        return alternate(args, loop, steps, tmp)
    base_from = time.time()
    time.sleep(5)
    port = free_port()
    daemon = subprocess.Popen([args.ptbpf, "daemon", "--out-dir", os.path.join(tmp, "out"),
                               "--every", args.every, "--window", args.window,
                               "--budget", args.budget, "--ops", args.ops, "--metrics-listen",
                               "127.0.0.1:%d" % port],
                              stderr=subprocess.PIPE, text=True)
    errs = []
    threading.Thread(target=lambda: errs.extend(daemon.stderr), daemon=True).start()
    open_at, samples, state = [], [], None
    t_end = time.time() + args.seconds
    last_sample = 0
    while time.time() < t_end:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
                text = r.read().decode()
            now_open = re.search(r"^ptbpf_window_open (\d)", text, re.M).group(1) == "1"
        except OSError:
            time.sleep(0.05)
            continue
        now = time.time()
        if now_open != state:
            open_at.append((now, now_open))
            state = now_open
        if now - last_sample >= 0.5:
            samples.append((now, now_open) + proc_cpu_rss(daemon.pid))
            last_sample = now
        time.sleep(0.05)
    daemon.send_signal(signal.SIGINT)
    daemon.wait(timeout=60)
    loop.kill()

    def in_window(t):
        st = False
        for at, o in open_at:
            if at > t:
                break
            st = o
        return st
    # Steps wholly in or out of windows, away from the switches (attach and
    # detach themselves are counted with neither).
    edges = [at for at, _ in open_at]
    clean = [(t0, dt) for t0, dt in steps if t0 > open_at[0][0] and
             all(abs(t0 - e) > 0.3 and abs(t0 + dt - e) > 0.3 for e in edges)]
    base = [dt for t0, dt in steps if base_from <= t0 < open_at[0][0] - 0.5]
    inside = [dt for t0, dt in clean if in_window(t0)]
    outside = [dt for t0, dt in clean if not in_window(t0)]

    def cpu_rate(open_state):
        rates = [(b[2] - a[2]) / (b[0] - a[0]) for a, b in zip(samples, samples[1:])
                 if a[1] == b[1] == open_state]
        return statistics.mean(rates) * 100 if rates else float("nan")
    rss_out = max((s[3] for s in samples if not s[1]), default=0) / 1e6
    rss_in = max((s[3] for s in samples if s[1]), default=0) / 1e6
    windows = sum(1 for _, o in open_at if o)
    cut = [e for e in errs if "ended early" in e]
    med = lambda v: statistics.median(v) * 1e3 if v else float("nan")
    # A stall at a window's edge (attach, the switch to full tracing and
    # back, detach) shows as the longest step near it: the longest step
    # of the SPAN s from just before each edge, against the longest of
    # SPAN-s stretches of steps between windows, away from the edges.
    span = 1.5

    def longest(t_from):
        return max((dt for t0, dt in steps if t_from <= t0 < t_from + span), default=None)
    at_open = [x for x in (longest(e - 0.3) for e, o in open_at if o) if x is not None]
    at_close = [x for x in (longest(e - 0.3) for e, o in open_at if not o) if x is not None]
    calm, cur, cur_from = [], [], None
    for t0, dt in sorted((t0, dt) for t0, dt in clean if not in_window(t0)):
        if cur_from is None or t0 - cur_from > span:
            if len(cur) > 1:
                calm.append(max(cur))
            cur, cur_from = [], t0
        cur.append(dt)
    if len(cur) > 1:
        calm.append(max(cur))
    mx = lambda v: max(v) * 1e3 if v else float("nan")  # noqa: E731
    text = ("\n### ptbpf daemon: %s, %s, --ops %s --every %s --window %s --budget %s%%\n\n"
            "| | step ms (median) | vs before the daemon | daemon CPU | daemon RSS |\n"
            "|---|---|---|---|---|\n"
            "| before the daemon | %.3f | | | |\n"
            "| between windows | %.3f | %+.1f%% | %.1f%% of a core | %.1f MB |\n"
            "| in windows | %.3f | %+.1f%% | %.1f%% of a core | %.1f MB |\n\n"
            "%d windows in %.0f s, %d ended early by the governor or the size cap; %d, %d "
            "and %d steps measured.\n\n"
            "Longest step of the %.1f s from 0.3 s before a window opens: median %.3f ms, "
            "max %.3f ms (%d windows); from 0.3 s before it closes: median %.3f, max %.3f ms; "
            "the same over %.1f s stretches between windows away from the edges: median "
            "%.3f, max %.3f ms (%d stretches).\n" % (
                datetime.date.today().isoformat(), args.device, args.ops, args.every, args.window,
                args.budget, med(base), med(outside), (med(outside) / med(base) - 1) * 100,
                cpu_rate(False), rss_out, med(inside), (med(inside) / med(base) - 1) * 100,
                cpu_rate(True), rss_in, windows, args.seconds, len(cut), len(base),
                len(outside), len(inside), span, med(at_open), mx(at_open), len(at_open),
                med(at_close), mx(at_close), span, med(calm), mx(calm), len(calm)))
    print(text)
    if cut:
        print("".join(cut[:3]))
    if args.out:
        with open(args.out, "a") as f:
            f.write(text)
    return 0


def alternate(args, loop, steps, tmp):
    """--alternate: the daemon's always-on layer, paired with the periods
    without it on either side."""
    def period_median(t0, t1):
        v = [dt for t, dt in steps if t0 + 1 <= t < t1]
        return statistics.median(v) if len(v) > 4 else None
    periods = []  # (daemon on, start, end)
    errs = []
    for _ in range(args.alternate):
        t0 = time.time()
        time.sleep(args.period)
        periods.append((False, t0, time.time()))
        # Epoch-aligned to a day: its first window is at midnight (UTC).
        daemon = subprocess.Popen([args.ptbpf, "daemon", "--out-dir", os.path.join(tmp, "out"),
                                   "--every", "24h", "--align", "--ops", args.ops],
                                  stderr=subprocess.PIPE, text=True)
        on = threading.Event()  # once the loop's agent says so

        def read(daemon=daemon, on=on):  # all of it: a pipe nobody reads fills
            for line in daemon.stderr:
                errs.append(line)
                if "pid %d " % loop.pid in line and "step signal on" in line:
                    on.set()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        if not on.wait(timeout=60):
            daemon.kill()
            loop.kill()
            print("the daemon's step signal did not come on:", "".join(errs[-5:]))
            return 1
        t0 = time.time()
        time.sleep(args.period)
        periods.append((True, t0, time.time()))
        daemon.send_signal(signal.SIGINT)
        daemon.wait(timeout=60)
        reader.join(timeout=10)
    t0 = time.time()
    time.sleep(args.period)
    periods.append((False, t0, time.time()))
    loop.kill()
    meds = [(on, period_median(a, b)) for on, a, b in periods]
    ratios = []
    for i, (on, m) in enumerate(meds):
        if on and m and meds[i - 1][1] and meds[i + 1][1]:
            ratios.append(m / ((meds[i - 1][1] + meds[i + 1][1]) / 2) - 1)
    if not ratios:
        print("no round measured:", "".join(errs[-5:]))
        return 1
    lo, hi = median_interval(ratios)
    text = ("\n### ptbpf daemon's always-on layer, alternating: %s, %s, --ops %s, %d rounds of "
            "%.0f s\n\nStep %.3f ms without the daemon (median of the periods). Under a "
            "daemon that opens no window, over the periods without it on either side: median "
            "%+.2f%% (95%% interval of the median %+.2f%% .. %+.2f%%, min %+.2f%%, max %+.2f%%, "
            "%d rounds).\n" % (
                datetime.date.today().isoformat(), args.device, args.ops, args.alternate,
                args.period, statistics.median(m for on, m in meds if not on and m) * 1e3,
                statistics.median(ratios) * 100, lo * 100, hi * 100, min(ratios) * 100,
                max(ratios) * 100, len(ratios)))
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
