#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The GPU machine has no bpftool, which the soak (tests/soak/probes.py) and
# the tests' leftover checks (tests/conftest.py) call. `make test-progs`
# puts this machine's bpftool into DIR (build/tools), with the shared
# libraries it needs beside it (not libc's) and a wrapper that finds them;
# build/ travels to the GPU machine, and tests/gpu/*.sh put DIR on PATH
# where the machine has no bpftool of its own.
set -eu
dir=$1
bt=$(command -v bpftool || echo /usr/sbin/bpftool)
mkdir -p "$dir/lib"
cp "$bt" "$dir/lib/bpftool.bin"
for lib in $(ldd "$bt" | awk '/=> \// { print $3 }'); do
	case $(basename "$lib") in
	libc.so.*|libm.so.*|ld-linux*) ;;
	*) cp -L "$lib" "$dir/lib/" ;;
	esac
done
cat > "$dir/bpftool" <<'WRAP'
#!/bin/sh
lib=$(dirname "$(readlink -f "$0")")/lib
LD_LIBRARY_PATH=$lib exec "$lib/bpftool.bin" "$@"
WRAP
chmod +x "$dir/bpftool"
"$dir/bpftool" version > /dev/null
