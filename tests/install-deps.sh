#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Installs what ptbpf's build, demo, tests and fuzzers (clang's libFuzzer and
# sanitizer runtimes: libclang-rt-14-dev) need on Debian 12 (as root), the
# report page's tests included (chromium, headless, driven through the
# DevTools protocol with python3-websocket) and the man page's (man-db,
# groff-base: docs/ptbpf.8 renders without warnings); the daemon's port links
# OpenSSL (TLS), libxcrypt (bcrypt) and libyaml (its web config) statically,
# and its tests make certificates (openssl) and a network namespace's address (ip):
# libbpf 1.4.6 and bpftool from bookworm-backports (bookworm's libbpf 1.1
# lacks uprobe.multi), everything else from bookworm. libelf stays at
# bookworm's 0.188: backports' 0.192 libelf.a cannot be linked statically.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root (apt-get, /lib/modules)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
	echo "deb http://deb.debian.org/debian bookworm-backports main" \
		> /etc/apt/sources.list.d/bookworm-backports.list
fi
apt-get update -q
apt-get install -y -q libbpf-dev/bookworm-backports libbpf1/bookworm-backports \
	bpftool/bookworm-backports
apt-get install -y -q --allow-downgrades make gcc g++ clang llvm libclang-rt-14-dev \
	libelf-dev/bookworm \
	libelf1/bookworm zlib1g-dev libzstd-dev libcapstone-dev protobuf-compiler \
	python3-protobuf python3-pytest python3-torch libtorch-dev python3-bpfcc libamdhip64-dev \
	linux-headers-amd64 util-linux procps strace binutils libevent-dev libjson-c-dev \
	libssl-dev libcrypt-dev libyaml-dev openssl iproute2 \
	prometheus prometheus-alertmanager \
	chromium python3-websocket man-db groff-base

# BCC (the test oracle) compiles against kernel headers; this kernel ships
# none, so Debian's are linked in where BCC looks for them.
mod=/lib/modules/$(uname -r)
if [ ! -e "$mod/build" ] || [ ! -e "$mod/source" ]; then
	hdr=$(ls -d /usr/src/linux-headers-*-amd64 | sort -V | tail -n 1)
	mkdir -p "$mod"
	ln -sfn "$hdr" "$mod/build"
	ln -sfn "${hdr%-amd64}-common" "$mod/source"
fi
# bpftool and BCC read tracefs; libbpf (ptbpf) does not need it.
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
echo "install-deps: done"
