#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The GPU machine's checks: torch 2.x + CUDA. Uses build/ptbpf and
# build/pb2 made elsewhere (`make all test-progs pb2`); writes logs under ${OUT:-.}.
# All of it takes over 10 minutes on an H100 (a device call's limit):
# PTBPF_GPU_PART=1 runs tests/gpu/test_coexist.py (the job's own profiler
# beside ptbpf), 5 test_coexist_detach.py (on-demand traces, ptbpf leaving
# as sessions start; the two about 13 minutes on an H200), 2 test_gpu.py and
# test_cupti.py, 6 test_compiled_gpu.py (CUDA graphs, torch.compile) and
# test_kineto_transformer.py, 3 the CPU-side files on torch 2.x, 4 the
# benchmark; unset, all. Each part fits one 10-minute device call.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PTBPF_TEST_PYTHON=${PTBPF_TEST_PYTHON:-/opt/torch/.venv/bin/python3}
export PTBPF_PB2_DIR=$PWD/build/pb2 PYTHONUNBUFFERED=1
out=${OUT:-.}
rc=0
part=${PTBPF_GPU_PART:-all}
case $part in 1|2|3|4|5|6|all) ;; *) echo "PTBPF_GPU_PART is 1 to 6 or all, not '$part'" >&2; exit 2 ;; esac
mkdir -p "$out/recorded"
export PTBPF_SAVE_DIR=$out/recorded
tests=()
case $part in 1|all) tests+=(tests/gpu/test_coexist.py) ;; esac
case $part in 5|all) tests+=(tests/gpu/test_coexist_detach.py) ;; esac
case $part in 2|all) tests+=(tests/gpu/test_gpu.py tests/gpu/test_cupti.py) ;; esac
case $part in 6|all) tests+=(tests/gpu/test_compiled_gpu.py tests/gpu/test_kineto_transformer.py) ;; esac
case $part in 3|all) tests+=(tests/test_fidelity.py tests/test_shapes.py tests/test_memory.py
	tests/test_pystacks.py tests/test_compiled_regions.py
	"tests/test_exceptions.py::test_python_try_except_loop") ;; esac
if [ ${#tests[@]} -gt 0 ]; then
	"$PTBPF_TEST_PYTHON" -m pytest -v -rfE -p no:cacheprovider --durations=10 --ignore=tests/gpu/multi \
		"${tests[@]}" 2>&1 | tee "$out/gpu-tests$part.log" || rc=1
fi
if [ "${PTBPF_BENCH:-1}" = 1 ] && { [ "$part" = 4 ] || [ "$part" = all ]; }; then
	for dev in ${PTBPF_BENCH_DEVICES:-cuda}; do
		"$PTBPF_TEST_PYTHON" tests/bench/bench.py --python "$PTBPF_TEST_PYTHON" \
			--device $dev --paired steps,steps:switch,rf7,rf7:switch,sched:switch,sched_nosys:switch --out "$out/bench-gpu-machine.md" 2>&1 | tee -a "$out/bench.log" || rc=1
	done
fi
exit $rc
