# SPDX-License-Identifier: BSD-2-Clause
"""The C unit tests (tests/unit/), built by make, run against real inputs:
the Perfetto writer is decoded by protoc; the ELF reader, exit-site finder
and op namer run on Debian's libtorch_cpu.so."""
import glob
import os
import subprocess

from conftest import BUILD, ROOT, require

LIBTORCH = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"


def run_unit(name, *args):
    exe = require(os.path.join(BUILD, name))
    r = subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=600)
    summary = [l for l in r.stdout.splitlines() if " passed, " in l]
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert summary and summary[-1].endswith(" 0 failed"), r.stdout[-2000:]


def test_perfetto_writer():
    run_unit("test_perfetto", os.path.join(ROOT, "user"))


def test_elf_symbols_exit_sites_op_names():
    libs = glob.glob(LIBTORCH)
    assert libs, "Debian's libtorch (python3-torch) is not installed"
    run_unit("test_elfsym", libs[0])
