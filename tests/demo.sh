#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The demo: a small training loop on Debian's python3-torch, started on its
# own; ptbpf attaches to it by pid for a few seconds and writes demo.pftrace.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
/usr/bin/python3 tests/workloads/workload.py dataloader --steps 50 --loop > "$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
until grep -q '^ready' "$log"; do
	kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
	sleep 0.2
done
echo "demo: training loop running as pid $pid; tracing it for 5 seconds" \
	"(ops from the agent, a Python stack for one top-level op in 20)"
build/ptbpf -p "$pid" -d 5 --ops agent --py-stacks=20 -o demo.pftrace --force
build/ptbpf report demo.pftrace --top 8
echo "demo: open demo.pftrace at https://ui.perfetto.dev (Open trace file)"
