#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# `make fuzz`: runs each fuzzer given for SECONDS, starting from its corpus
# in tests/fuzz/corpus (traces for report and export, merge, replay, capture: the
# regression inputs, each run first),
# with new finds in a scratch corpus. Exits non-zero on any finding (a
# crash, a sanitizer report, a leak, a timeout or running out of memory),
# keeping the input under build/fuzz/findings/.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=$1
shift
findings=build/fuzz/findings
mkdir -p "$findings"
status=0
for bin in "$@"; do
	name=$(basename "$bin")
	reader=${name#fuzz_}
	case $reader in
	report | export) corpus=tests/fuzz/corpus/traces ;;
	*) corpus=tests/fuzz/corpus/$reader ;;
	esac
	scratch=$(mktemp -d)
	if [ ! -d "$corpus" ]; then
		echo "fuzz: $corpus is missing" >&2
		exit 1
	fi
	# -close_fd_mask=3: the subcommands' own output is not wanted here;
	# libFuzzer still prints its findings.
	if "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -max_len=131072 \
		-close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$findings/$reader-" \
		"$scratch" "$corpus" > "$scratch.log" 2>&1; then
		echo "fuzz: $reader: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch.log" |
			grep -o '[0-9]*$') runs in ${secs}s from $(ls "$corpus" | wc -l) corpus inputs: 0 findings"
	else
		status=1
		tail -n 60 "$scratch.log" >&2
		echo "fuzz: $reader: FINDING (input kept in $findings/)" >&2
	fi
	rm -rf "$scratch" "$scratch.log"
done
exit $status
