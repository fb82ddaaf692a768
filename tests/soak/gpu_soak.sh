#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Issue 19's GPU round in one command (make gpu-soak), on the GPU machine
# with a ptbpf built elsewhere and carried: the cycles and daemon soak over
# every job kind with untraced twins (DDP on NCCL where there are two GPUs),
# first attaches into fresh on-demand jobs beside it, then what each way of
# ending ptbpf leaves in a job's memory (attach_rss.py). Results under $OUT
# (default .): soak.md, soak.json, soak.log, first_attach.log,
# attach_rss.log, and the stacks of any core a job left.
#
# SOAK_SECONDS: each soak mode's limit (default 170); SOAK_MODE: both
# (default), cycles or daemon (one mode alone: 1,000 cycles fit in one
# device call); SOAK_JOBS,
# SOAK_UNTRACED: the soak's --jobs and --untraced; RSS_KIND, RSS_VARIANTS,
# RSS_ROUNDS, RSS_DEVICE, RSS_HEAP_STRINGS: attach_rss.py's --kind,
# --variants, --rounds, --device, --heap-strings (RSS_ROUNDS=0 leaves
# attach_rss.py out); FIRST_ATTACH=0 leaves first_attach.py out. The
# soak and attach_rss.py run at once (each on its own jobs): about 7
# minutes in all.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-.}
py=${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3}
export PTBPF_TEST_PYTHON=$py PYTHONUNBUFFERED=1
secs=${SOAK_SECONDS:-170}
work=$(mktemp -d /tmp/ptbpf-gpu-soak.XXXXXX)
mkdir -p "$out" "$work/fa"
ulimit -c unlimited
pattern=$(cat /proc/sys/kernel/core_pattern)
echo "$work/core.%e.%p" > /proc/sys/kernel/core_pattern

fa=
if [ "${FIRST_ATTACH:-1}" != 0 ]; then
	"$py" tests/soak/first_attach.py "$work/fa" "$((secs * 2 - 60))" 2 \
		> "$out/first_attach.out" 2>&1 &
	fa=$!
fi
rss=
if [ "${RSS_ROUNDS:-2}" != 0 ]; then
	timeout 500 "$py" tests/bench/attach_rss.py --kind "${RSS_KIND:-graphs}" \
		--device "${RSS_DEVICE:-cuda}" --jobs 2 \
		--rounds "${RSS_ROUNDS:-2}" --per-block 8 \
		--variants "${RSS_VARIANTS:-default,killed,killed-gpu-off,early-int,stopped,sigint2}" \
		--heap-strings "${RSS_HEAP_STRINGS:-40}" \
		2>&1 | grep -v verdict > "$out/attach_rss.log" &
	rss=$!
fi
timeout -s USR1 "$((secs * 3 + 200))" "$py" tests/soak/soak.py --mode "${SOAK_MODE:-both}" \
	--jobs "${SOAK_JOBS:-mlp,graphs,ddp,ondemand}" --untraced "${SOAK_UNTRACED:-mlp,graphs}" \
	--cycles 1000 --windows 200 --every 1s --window 1s --daemons 4 --budget 0 \
	--dur-min 0.2 --dur-max 0.5 --gap-max 0.3 --kill-fraction 0.1 \
	--max-seconds "$secs" --json "$out/soak.json" --markdown "$out/soak.md" \
	--work "$work/soak" > "$out/soak.log" 2>&1
soak=$?
fa_rc=0
if [ -n "$fa" ]; then
	wait "$fa"
	fa_rc=$?
	cp "$work/fa/first_attach.log" "$out/" 2>/dev/null
	tail -1 "$out/first_attach.out"
fi
[ -n "$rss" ] && wait $rss
for c in "$work"/core.*; do
	[ -e "$c" ] || continue
	timeout 60 /usr/local/cuda/bin/cuda-gdb -batch -ex "thread apply all bt 20" "$py" "$c" \
		> "$out/bt.$(basename "$c").txt" 2>&1
done
echo "$pattern" > /proc/sys/kernel/core_pattern
rm -rf "$work"
grep -E "^\| (attach/detach cycles|daemon windows|jobs harmed|profiler sessions|false|unexplained|accumulated|RSS from|RSS grown since|malloc.s totals|malloc chunks|CUPTI.s copies|GPU memory of|the agent.s CUPTI|result) " "$out/soak.md"
[ -n "$rss" ] && sed -n "/kB of RSS left/,\$p" "$out/attach_rss.log" | head -80
[ "$soak" = 0 ] && [ "$fa_rc" = 0 ]
