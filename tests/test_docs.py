# SPDX-License-Identifier: BSD-2-Clause
"""The documents: a short README whose first screen shows install, trace,
open and report; links that lead somewhere; BENCHMARKS.md on one page; a
man page that renders without warnings and names every option of every
command's --help, and no other; `make install` putting ptbpf, its agent
and the man page where ptbpf and man look for them."""
import glob
import os
import re
import subprocess

import pytest

from conftest import PTBPF, ROOT

README = os.path.join(ROOT, "README.md")
MAN = os.path.join(ROOT, "docs", "ptbpf.8")


def lines_of(path):
    with open(path) as f:
        return f.read().split("\n")


def test_readme_is_a_short_front_door():
    lines = lines_of(README)
    assert len(lines) <= 250
    first_screen = "\n".join(lines[:50])
    for what in ("## Install", "tests/install-deps.sh && make demo", "## Trace a job",
                 "sudo ptbpf -p", "## Open the trace", "ui.perfetto.dev",
                 "## Read the report", "ptbpf report"):
        assert what in first_screen, what


def test_the_setup_commands_stay_as_they_are():
    """One installs, builds and runs the demo; one installs, builds and runs
    every test, and CI runs that one (.ci/run)."""
    lines = lines_of(README)
    assert "    tests/install-deps.sh && make demo" in lines
    assert "    tests/install-deps.sh && make test" in lines
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert "tests/install-deps.sh && make test" in f.read()


def test_benchmarks_is_one_page():
    assert len(lines_of(os.path.join(ROOT, "BENCHMARKS.md"))) <= 400


def anchors(path):
    """GitHub's anchors of a Markdown file's headings."""
    out = set()
    fenced = False
    for line in lines_of(path):
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#+ (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = 1
            base = slug
            while slug in out:
                slug = "%s-%d" % (base, n)
                n += 1
            out.add(slug)
    return out


def markdown_files():
    return [README, os.path.join(ROOT, "BENCHMARKS.md")] + \
        sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_links_lead_somewhere(path):
    """Every relative link names a file of the tree, and a heading of it
    where it names one (the README's docs/ links among them)."""
    text = open(path).read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            broken.append(target)
        elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
            broken.append(target)
    assert broken == []


def test_man_page_renders_without_warnings():
    r = subprocess.run(["man", "--warnings", "-l", MAN], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80"), timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "EXAMPLES" in r.stdout
    r = subprocess.run(["groff", "-man", "-ww", "-z", MAN], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def help_of(*command):
    r = subprocess.run([PTBPF] + list(command) + ["--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


# "  -p, --pid=PID   ..." or "      --bpf-stats   ...": the option items of
# argp's help, as (short or None, long).
HELP_ITEM = re.compile(r"^\s{2,6}(?:-(\S), )?--([a-z][a-z0-9-]*)", re.M)


def helps():
    """Each command's options by the man page's section: the live command's
    help holds the tracing options, then the daemon's under their header."""
    live = help_of()
    trace, daemon = live.split("\n ptbpf daemon", 1)
    out = {"trace": trace, "daemon": daemon}
    for cmd in ("report", "export", "merge", "replay"):
        out[cmd] = help_of(cmd)
    return {name: set(HELP_ITEM.findall(text)) for name, text in out.items()}


EVERY = {("?", "help"), ("", "usage"), ("V", "version")}


def man_options():
    """The option items (".TP" then the item) of each section the page
    marks with '.\\" options: NAME'."""
    out, section, after_tp = {}, None, False
    for line in lines_of(MAN):
        m = re.match(r'\.\\" options: (\w+)', line)
        if m:
            section = m.group(1)
            out[section] = set()
        elif line.startswith(".SH"):
            section = None
        elif section and after_tp:
            item = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-")
            item = re.sub(r'\s*"\s*,\s*"\s*', ", ", item)
            m = re.search(r"(?:-(\S), )?--([a-z][a-z0-9-]*)", item)
            assert m, line
            out[section].add((m.group(1) or "", m.group(2)))
        after_tp = line == ".TP"
    return out


@pytest.mark.parametrize("section", ["trace", "daemon", "report", "export", "merge", "replay"])
def test_man_page_and_help_name_the_same_options(section):
    """Every option of the command's --help is in its section of the man
    page (or in "Every command"), with its short form, and the page names no
    option the command does not take."""
    man = man_options()
    assert man["every"] == EVERY
    in_help = helps()[section] - EVERY
    in_man = man[section]
    assert in_help - in_man == set(), "in --help, not in the man page"
    assert in_man - in_help == set(), "in the man page, not in --help"


def test_make_install_puts_ptbpf_its_agent_and_the_man_page(tmp_path):
    """Into PREFIX under DESTDIR, without building anything (`make all` ran
    before the tests); the installed ptbpf finds its agent through the link
    in bin/, and man finds the page."""
    dest = str(tmp_path)
    r = subprocess.run(["make", "-s", "-o", "all", "install", "DESTDIR=" + dest, "PREFIX=/usr"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lib = os.path.join(dest, "usr", "lib", "ptbpf")
    assert os.access(os.path.join(lib, "ptbpf"), os.X_OK)
    assert os.path.isfile(os.path.join(lib, "libptbpf-agent.so"))
    ptbpf = os.path.join(dest, "usr", "bin", "ptbpf")
    assert os.path.realpath(ptbpf) == os.path.join(lib, "ptbpf")
    r = subprocess.run([ptbpf, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("ptbpf "), r.stderr
    # `run` looks for the agent next to ptbpf before it starts the command.
    r = subprocess.run([ptbpf, "run", "--", "true"], capture_output=True, text=True, timeout=60)
    assert "not found next to ptbpf" not in r.stderr, r.stderr
    assert "exited before it loaded torch or CUDA" in r.stderr, r.stderr
    man8 = os.path.join(dest, "usr", "share", "man", "man8", "ptbpf.8")
    r = subprocess.run(["man", "--warnings", "-l", man8], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "ptbpf" in r.stdout, r.stderr
