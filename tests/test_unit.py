# SPDX-License-Identifier: BSD-2-Clause
"""The C unit tests (tests/unit/), built by make, run against real inputs:
the hash table is checked against a brute-force model; the /proc maps
reader against the test's own mappings; the daemon's POST
/capture parser against known payloads, its port's head parser against
good and bad heads; the Perfetto writer
is decoded by protoc; the report's step table is checked against a
brute-force count; the ELF reader, exit-site finder and op namer run on
Debian's libtorch_cpu.so."""
import glob
import os
import subprocess
import time

from conftest import BUILD, ROOT, require

LIBTORCH = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"


def run_unit(name, *args):
    exe = require(os.path.join(BUILD, name))
    r = subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=600)
    summary = [l for l in r.stdout.splitlines() if " passed, " in l]
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert summary and summary[-1].endswith(" 0 failed"), r.stdout[-2000:]


def test_perfetto_writer():
    run_unit("test_perfetto", os.path.join(ROOT, "user", "trace"))


def test_sched_bundles():
    """The kernel view's compact sched bundles, decoded field by field, and
    merge's move of one."""
    run_unit("test_sched_bundle")


def test_hash_table_against_a_model():
    """The one hash table (user/lib/hash.c) and the name containers on it:
    random inserts, removals and lookups up to and past each limit, checked
    against a brute-force model."""
    run_unit("test_hash")


def test_capture_requests():
    """What a POST /capture asks for: direct requests, Alertmanager's
    payload (firing and resolved alerts, several jobs), bad bodies."""
    run_unit("test_capture_parse")


def test_http_request_heads():
    """The daemon port's request heads: what is read, and the status (with
    its one line) of each head it cannot take."""
    run_unit("test_http_parse")


def test_web_config_users():
    """The daemon port's web config: bcrypt users checked, outcomes
    remembered, new checks refused past their CPU budget; bad configs
    refused, one line each."""
    run_unit("test_web_config")


def test_step_table_within_any_budget():
    """report's step table: the same rows, equal to a brute-force count,
    whether it fits its memory budget, finishes older steps during the pass
    or needs windows (more passes)."""
    run_unit("test_step_table")


def test_reorder_merges_streams_in_time_order():
    """The loader's reorder stage: every event once, whole, in time order
    within each release, none held past its time."""
    run_unit("test_reorder")


def test_link_sets_take_end_probes_out_last():
    """user/attach/links.c: at detach the probes that end slices go after
    those that begin them, so that no call is left open."""
    run_unit("test_links")


def test_second_interrupt_line():
    """The line a second Ctrl-C prints (user/attach/leaving.c): what it says
    for each agent state, many processes, a PATH_MAX trace path, one line."""
    run_unit("test_leaving")


def test_proc_maps_reader():
    """The one /proc/PID/maps reader (user/lib/procmaps.c) on the test's own
    mappings: its executable, an anonymous mapping, files at an offset with
    blanks in their names, a deleted one, a path near PATH_MAX."""
    run_unit("test_procmaps")


def test_elf_symbols_exit_sites_op_names():
    libs = glob.glob(LIBTORCH)
    assert libs, "Debian's libtorch (python3-torch) is not installed"
    run_unit("test_elfsym", libs[0])


def test_python_line_tables_and_shape_formatting(tmp_path):
    """ptbpf's line-table decoders against the interpreter's own co_lines(),
    on every code object of a few stdlib modules (Debian's python3 here;
    more versions where pyenv has them)."""
    gen = r'''
import sys, types, importlib
def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)
minor = sys.version_info[1]
out = []
for name in ("json.decoder", "argparse", "collections", "email.message"):
    m = importlib.import_module(name)
    src = open(m.__file__).read()
    for co in codes(compile(src, m.__file__, "exec")):
        pairs = []
        for start, end, line in co.co_lines():
            for b in range(start, end, 2):
                pairs.append("%d:%d" % (b // 2, -1 if line is None else line))
        out.append("%d %d %s %s" % (minor, co.co_firstlineno, co.co_linetable.hex() or "00",
                                    " ".join(pairs)))
print("\n".join(out))
'''
    import shutil
    pythons = ["/usr/bin/python3"] + sorted(glob.glob("/root/.pyenv/versions/3.1[0-3].*/bin/python3"))
    cases = tmp_path / "cases.txt"
    with open(cases, "w") as f:
        for py in pythons:
            if shutil.which(py):
                f.write(subprocess.run([py, "-c", gen], check=True, capture_output=True,
                                       text=True).stdout + "\n")
    run_unit("test_pyline", str(cases))


def test_rpc_payload_names(tmp_path):
    """What an RPC payload names (user/record/rpc_names.c): Python calls
    pickled by torch's RPC pickler and by pickle itself (protocols 2 to 5,
    nested and long qualified names), RemoteException responses (short,
    and longer than the 512 bytes BPF copies), and torch 1.13's own
    torch.jit pickles (in the test)."""
    gen = r'''
import pickle, torch
from torch.distributed.rpc.internal import PythonUDF, RemoteException, _internal_rpc_pickler
def udf(a, b):
    return a + b
class Outer:
    @staticmethod
    def method(x):
        return x
exec("def " + "f" * 200 + "(x):\n    return x")
long_fn = globals()["f" * 200]
out = []
t = torch.ones(2)
for fn in (udf, Outer.method, long_fn):
    payload, _ = _internal_rpc_pickler.serialize(PythonUDF(fn, (t, 1), {"k": t}))
    out.append("fn %s %s" % ((b"\x00" + payload).hex(), fn.__qualname__))
for proto in (2, 3, 4, 5):
    out.append("fn %s udf" % (b"\x01" + pickle.dumps(PythonUDF(udf, (1,), {}), protocol=proto)).hex())
for msg in ("boom", "On WorkerInfo(id=1, name=worker1):\nValueError('boom')\n" + "x" * 2000):
    payload, _ = _internal_rpc_pickler.serialize(RemoteException(msg, ValueError))
    out.append("exc %s ValueError" % payload.hex())
payload, _ = _internal_rpc_pickler.serialize(t + 1)
out.append("none %s" % payload.hex())
print("\n".join(out))
'''
    cases = tmp_path / "rpc_cases.txt"
    cases.write_text(subprocess.run(["/usr/bin/python3", "-c", gen], check=True,
                                    capture_output=True, text=True).stdout)
    run_unit("test_rpc_names", str(cases))


def test_inductor_sources_of_triton_kernels(tmp_path):
    """Triton kernels' ATen ops and source nodes (user/record/inductor.c),
    read from an Inductor cache as a job's environment names it: torch
    2.11's output code from the H200 (tests/data/inductor), a module
    written after the first read, a name two modules define, a file of
    another user (not read), a kernel's source (no output code), a FIFO
    (never opened to block)."""
    cache = tmp_path / "cache"
    data = os.path.join(ROOT, "tests", "data", "inductor")
    for sub, src in (("aa", "forward.py"), ("bb", "backward.py")):
        (cache / sub).mkdir(parents=True)
        with open(os.path.join(data, src)) as f:
            (cache / sub / src).write_text(f.read())
    made = {"cc/old.py": "# Topologically Sorted Source Nodes: [a], Original ATen: [aten.add]\n"
                         "triton_a_0 = async_compile.triton('triton_a_0', '''\n"
                         "# Topologically Sorted Source Nodes: [b], Original ATen: [aten.mul]\n"
                         "triton_b_1 = async_compile.triton('triton_b_1', '''\n",
            "dd/new.py": "# Topologically Sorted Source Nodes: [b], Original ATen: [aten.sub]\n"
                         "triton_b_1 = async_compile.triton('triton_b_1', '''\n",
            "ee/other.py": "# Topologically Sorted Source Nodes: [c], Original ATen: [aten.div]\n"
                           "triton_c_2 = async_compile.triton('triton_c_2', '''\n",
            "ff/kernel.py": "@triton.jit\ndef triton_poi_fused_gelu_1(in_ptr0, xnumel):\n"}
    for name, text in made.items():
        (cache / name).parent.mkdir(exist_ok=True)
        (cache / name).write_text(text)
    os.utime(cache / "cc/old.py", (1e9, 1e9))
    os.chown(cache / "ee/other.py", 12345, 12345)
    (cache / "gg").mkdir()
    (cache / "hh").mkdir()
    os.mkfifo(cache / "hh" / "fifo.py")  # never opened to block the reader
    time.sleep(2.2)  # past 2 s, so that the first read keeps gg as read whole
    exe = require(os.path.join(BUILD, "test_inductor"))
    r = subprocess.run([exe, str(cache)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache)))
    assert r.returncode == 0 and r.stdout.strip().endswith(" 0 failed"), r.stdout + r.stderr


def test_raw_capture_keeps_long_triton_lists(tmp_path):
    """A raw capture's Triton kernel items: ATen op and node lists written
    whole past 16 KB, cut to fit a 1 MiB item past that, the other fields
    whole."""
    run_unit("test_raw", str(tmp_path))
