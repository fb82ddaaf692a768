# SPDX-License-Identifier: BSD-2-Clause
"""The source tree's shape (docs/architecture.md): includes run one way
down the data path, with no circle; files and functions stay small enough
to read. Exceptions are listed here with their reason."""
import os
import re
import subprocess

from conftest import ROOT

USER = os.path.join(ROOT, "user")
# Each folder may include only folders ranked lower (or itself): the live
# capture drives attach -> record -> trace; the offline tools read traces,
# export and gap_track with the report's reader (report/);
# lib serves everyone. user/agent/ is a separate library (its own build,
# loaded into the job): it includes nothing of the loader's.
RANK = {"agent": 0, "lib": 0, "trace": 1, "attach": 2, "record": 3, "report": 3, "offline": 3.25,
        "fleet": 4, "live": 5, ".": 6}
# The command line (cli*.c, cli.h) sits below the modes that run with its
# options (fleet, live) and above what it parses for (offline).
CLI_RANK = 3.5
# (from, to): why
ALLOWED_UP = {}
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80
MAX_LINE = 100
# (file, function): why
LONG_FUNCTIONS = {}


def sources():
    for d, _, files in os.walk(USER):
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, f), USER)


def includes(rel):
    with open(os.path.join(USER, rel)) as f:
        text = f.read()
    return [m for m in re.findall(r'^#include "([^"]+)"', text, re.M)
            if os.path.exists(os.path.join(USER, m))]


def module(rel):
    """A .c and its .h are one module; a private header (x_int.h, a
    reader's decoders) belongs to the module it serves."""
    base = rel.rsplit(".", 1)[0]
    return re.sub(r"_int$", "", base)


def folder(rel):
    return os.path.dirname(rel) or "."


def rank(rel):
    return CLI_RANK if os.path.basename(rel).startswith("cli") else RANK[folder(rel)]


def test_no_include_circle():
    edges = {}
    for rel in sources():
        for inc in includes(rel):
            if module(inc) != module(rel):
                edges.setdefault(module(rel), set()).add(module(inc))
    # Tarjan's strongly connected components.
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                circles.append(sorted(scc))

    for v in list(edges):
        if v not in index:
            visit(v)
    assert circles == []


def test_includes_run_down_the_data_path():
    up = []
    for rel in sources():
        for inc in includes(rel):
            if folder(rel) != folder(inc) and rank(inc) >= rank(rel) and \
                    (rel, inc) not in ALLOWED_UP:
                up.append((rel, inc))
    assert up == []


def functions(text):
    """(name, lines) of each function: its body opens with "{" at the left
    margin, under a signature that starts at the left margin."""
    out, lines = [], text.split("\n")
    for i, line in enumerate(lines):
        if line != "{":
            continue
        j = i - 1
        while j > 0 and not re.match(r"^[A-Za-z].*\b(\w+)\(", lines[j]):
            j -= 1
        name = re.match(r"^[A-Za-z].*?\b(\w+)\(", lines[j]).group(1)
        end = lines.index("}", i)
        out.append((name, end - j))
    return out


def test_files_and_functions_stay_small():
    big_files, long_functions = [], []
    for rel in sources():
        with open(os.path.join(USER, rel)) as f:
            text = f.read()
        if text.count("\n") > MAX_FILE_LINES:
            big_files.append((rel, text.count("\n")))
        if rel.endswith(".c"):
            for name, n in functions(text):
                if n > MAX_FUNCTION_LINES and (rel, name) not in LONG_FUNCTIONS:
                    long_functions.append((rel, name, n))
    assert big_files == []
    assert long_functions == []


def test_lines_stay_narrow():
    """The product's C (user/, bpf/, include/): lines of at most
    MAX_LINE characters, a tab counted as one."""
    wide = []
    for top in ("user", "bpf", "include"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    path = os.path.join(d, f)
                    with open(path) as src:
                        wide += [(os.path.relpath(path, ROOT), i + 1, len(line))
                                 for i, line in enumerate(src.read().split("\n"))
                                 if len(line) > MAX_LINE]
    assert wide == []


# The fixed top level (the project's layout), with the benchmark figures
# and docs/ (the guides, the man page, the examples) beside it. Hidden entries (.ci, .git, tools'
# caches) and what .gitignore leaves out (build/, traces written in the
# work tree) are not looked at.
TOP_LEVEL = {"bpf", "user", "include", "tests", "vmlinux", "Makefile", "README.md", "LICENSE",
             "BENCHMARKS.md", "docs"}


def test_top_level_is_the_fixed_layout():
    """Nothing else at the top: a stray file committed by accident (v.txt,
    an error line, was) fails here."""
    stray = [n for n in os.listdir(ROOT) if not n.startswith(".") and n not in TOP_LEVEL
             and n not in ("build", "__pycache__") and not n.endswith((".pftrace", ".raw"))]
    assert stray == []


def test_every_file_says_what_it_is():
    """Each source opens with its license line, then a comment."""
    silent = []
    for rel in sources():
        with open(os.path.join(USER, rel)) as f:
            head = f.read(400).split("\n")
        if not (head[0].startswith(("// SPDX", "/* SPDX")) and head[1].startswith("/*")):
            silent.append(rel)
    assert silent == []


# OS plumbing is written once, in lib/ (bcc libbpf-tools' trace_helpers.c
# is the model): /proc/PID/maps is read by lib/procmaps.c alone. (file: why)
MAPS_READERS = {
    "lib/procmaps.c": "the one reader",
    "agent/stubs.c": "the agent is a library of its own, loaded into the job: it links "
                     "nothing of the loader's and reads its own /proc/self/maps",
}


def test_proc_maps_read_in_one_place():
    """No other file names a /proc/*/maps path to open it (a message that
    mentions the file is not an open)."""
    readers = []
    for rel in sources():
        with open(os.path.join(USER, rel)) as f:
            if re.search(r'"/proc/[^"\s]*/maps"', f.read()) and rel not in MAPS_READERS:
                readers.append(rel)
    assert readers == []


# The clock every record and deadline uses is read in lib/clock.h alone.
CLOCK_READERS = {
    "lib/clock.h": "the one reader",
    "agent/agent.h": "the agent is a library of its own, loaded into the job: it links "
                     "nothing of the loader's",
}


def test_monotonic_clock_read_in_one_place():
    """No other file passes CLOCK_MONOTONIC (or its coarse twin) to a call;
    comments that name the clock are not reads."""
    readers = []
    for rel in sources():
        with open(os.path.join(USER, rel)) as f:
            if re.search(r"\w\(\s*CLOCK_MONOTONIC", f.read()) and rel not in CLOCK_READERS:
                readers.append(rel)
    assert readers == []


BPF = os.path.join(ROOT, "bpf")
# Each bpf/X.bpf.c is loaded by attach/X_probes.c (libbpf-tools has one
# loader per X.bpf.c); where another file loads it: (file, why).
LOADERS = {
    "ptbpf": ("attach/probes.c", "the op object, whose ring, loss counters and traced set "
              "every other object shares: probes.c loads it and places its uprobes"),
    "samples": ("attach/sample_probes.c", "the CPU sampler's object, named for the samples "
                "it makes (record/samples.c reads them)"),
}


def test_every_bpf_object_is_loaded_in_attach():
    """bpf/X.bpf.c's skeleton is opened (X_bpf__open) by its loader in
    attach/ and by no other file: live/ only orchestrates."""
    want, opened = {}, {}
    for f in os.listdir(BPF):
        if f.endswith(".bpf.c"):
            x = f[:-len(".bpf.c")]
            want[x] = [LOADERS.get(x, ("attach/%s_probes.c" % x,))[0]]
    for rel in sources():
        with open(os.path.join(USER, rel)) as f:
            for x in set(re.findall(r"\b(\w+)_bpf__open\w*\(", f.read())):
                opened.setdefault(x, []).append(rel)
    assert {x: sorted(opened.get(x, [])) for x in want} == want


# Every function or variable a file shares (not static) is named for where
# it lives, by a prefix its folder registers here (libbpf's rule: a prefix
# on every non-static symbol): a reader who meets one knows where to look.
# The prefix is the name's first word; most are a file's (join_, pf_ for
# trace/perfetto*), some an object's that a file serves (str_set_, insn_).
PREFIXES = {
    "": {"main", "cli", "argp"},  # argp_: the names argp looks up
    "attach": {"agent", "exec", "func", "gpu", "inject", "insn", "keeper", "leaving", "link", "op",
               "probes", "ptbpf", "sample", "sched", "target", "tramp"},
    "record": {"gpu", "inductor", "join", "mem", "natsym", "offcpu", "ops", "pystack", "raw",
               "reorder", "rf", "route", "rpc", "sample", "sched", "shapes"},
    "offline": {"cuda", "device", "distributed", "export", "gap", "int", "json", "merge",
                "put"},
    # rd_: the trace as the report reads it (report_data.c and its helpers),
    # rc_: causes (report_causes.c), rk_: ranks (report_ranks.c)
    "report": {"json", "kname", "rc", "rd", "report", "rk", "steps"},
    "lib": {"bpf", "c10", "cuda", "demangle", "elf", "elfsym", "hash", "infile", "log", "op",
            "outfile", "procmap", "procmaps", "str", "syscall", "text", "u64", "yield",
            "clock"},
    "trace": {"pb", "pf", "sample", "tr"},
    "live": {"budget", "read", "session", "summary", "targets"},
    "fleet": {"capture", "daemon", "http", "metrics", "select", "step", "web"},
}


def test_shared_names_say_where_they_live():
    """The built objects' symbol tables (nm): each global of user/X/*.c
    starts with a prefix X registers. (The agent is a library of its own,
    whose exported names are checked by its own tests.)"""
    obj = os.path.join(ROOT, "build", "obj")
    assert os.path.isdir(obj), "build first: make"
    bad = []
    for d, _, files in os.walk(obj):
        folder = os.path.relpath(d, obj)
        folder = "" if folder == "." else folder
        if folder == "agent" or folder.startswith("agent/"):
            continue
        for f in sorted(files):
            if not f.endswith(".o"):
                continue
            out = subprocess.run(["nm", "--defined-only", os.path.join(d, f)],
                                 capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRG":
                    name = parts[2]
                    if "_" not in name.strip("_") and name != "main" or \
                            name.split("_")[0] not in PREFIXES.get(folder, ()):
                        bad.append("%s/%s: %s" % (folder, f, name))
    assert bad == []


def test_every_gpu_test_file_is_in_a_part_of_gpu_check():
    """`make gpu-check` runs tests/gpu in parts that each fit one device
    call; a file none of them names would never run."""
    script = open(os.path.join(ROOT, "tests", "gpu", "gpu_check.sh")).read()
    named = set(re.findall(r"tests/gpu/(test_\w+\.py)", script))
    files = {f for f in os.listdir(os.path.join(ROOT, "tests", "gpu"))
             if f.startswith("test_") and f.endswith(".py")}
    assert files <= named, sorted(files - named)
