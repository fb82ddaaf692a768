# SPDX-License-Identifier: BSD-2-Clause
"""What one ptbpf run (a cycle, or a daemon's window) said, judged: its
outcome (success, killed by the soak, or a known and explained failure;
anything else is unexplained), the lines that contradict each other or the
facts (false messages), and its attach timing (-v)."""
import os
import re

# A failure that says why, and what it says.
EXPLAINED = [
    (re.compile(r"interrupted during attach; detaching"), "interrupted during attach"),
    (re.compile(r"is already traced by another ptbpf"), "another ptbpf traces the pid"),
    (re.compile(r"loading the BPF programs failed"), "BPF programs could not be loaded"),
]
# Lines that say something went wrong, even in a run that exits 0.
WARNING = re.compile(r"^ptbpf: warning: |cannot|failed|did not|stays loaded|not found|no agent|"
                     r"refus|error|missing|skipped|ended early|without its thread")
# Counts in ptbpf's closing summary that must be 0.
NONZERO_LOSS = re.compile(r"(lost|not written:|ring full|no free ring|malformed|gone without a "
                          r"last copy|cut where records were lost|end not seen|unreadable names) "
                          r"[1-9]")
# ptbpf's ordinary lines (-v included): not listed as unclassified.
ORDINARY = re.compile(
    r"^ptbpf: (BPF programs loaded|writing |pid \d+: (agent|attach)|tracing pid|events by kind|"
    r"BPF ring:|agent op rings:|slices |top ops|loader peak RSS|reader: |wrote |daemon: |--all: |"
    r"GPU |CUPTI|no exec tracepoint|interrupted during attach|pid \d+ is already traced|"
    r"\d+ events/s|kernel view|stop: |CPU samples)|^  |^libbpf: ")
P = r"^ptbpf: (?:warning: )?"
TRACING = re.compile(P + r"tracing pid (\d+) \(([^)]*)\): (.*)")
CANNOT_LOAD = re.compile(P + r"pid (\d+): cannot load the agent: (.*)")
SWITCHED_ON = re.compile(P + r"pid (\d+): agent switched on")
ATTACH = re.compile(P + r"pid (\d+): attach: (.*)")
BPF_LOAD = re.compile(P + r"BPF programs loaded in (\d+) ms")
WROTE = re.compile(P + r"wrote (.*) \(([\d.]+) MB\): open it")
ALREADY = re.compile(r"already traced by another ptbpf \(pid (\d+)\)")
WRITE_FAILED = re.compile(P + r"writing .* failed|the trace up to the failure")
STAYS = re.compile(r"stays loaded")
FORK_CHILD = re.compile(P + r"pid (\d+) maps an agent without its thread \(a child forked by a "
                        r"traced process\)")
NO_ANSWER = re.compile(P + r"pid (\d+): its agent did not answer within 3 s")
ACKED = re.compile(P + r"pid (\d+): agent: loaded in .* acknowledged in ([\d.]+) ms")
EXITED_IN_ATTACH = re.compile(P + r"pid (\d+) exited during the attach")
INTERRUPTED = re.compile(P + r"interrupted during attach; detaching, nothing written(.*)")
PARTIAL = re.compile(P + r"writing (\S+\.partial) ")
STAYS_IN = re.compile(r"the unfinished trace stays in (\S+\.partial)|the trace up to the failure "
                      r"\([^)]*\) is in (\S+\.partial)")
# What is said of a process that fails, which a process that is gone must not get.
DIAGNOSIS = re.compile(r"cannot|failed|does not map|maps neither|no longer|not answer|no probe|"
                       r"records no ops")


GPU_OFF = re.compile(r"GPU timeline off: .*?(\d+) buffers copied to the job's profiler, "
                     r"(\d+) not, (\d+) of its own passed through, (\d+) empty ones handed "
                     r"back, (\d+) left with it; (\d+) of the agent's \d+ buffers still with "
                     r"CUPTI")
BUFFER_KEYS = ("copied", "not_copied", "passed", "handed_back", "left", "still_with_cupti")


def agent_buffers(lines):
    """The agent's buffer counts from its "GPU timeline off" lines (each
    switch-off of its GPU side), summed: buffers copied into the job's
    profiler, anchors left with it (a Kineto buffer that is never freed),
    its own buffers CUPTI kept."""
    out = dict.fromkeys(BUFFER_KEYS, 0)
    for _, text in lines:
        m = GPU_OFF.search(text)
        if m:
            for k, v in zip(BUFFER_KEYS, m.groups()):
                out[k] += int(v)
    return out


def ms_sum(text):
    return sum(float(x) for x in re.findall(r"in ([\d.]+) ms", text))


def attach_timing(lines, t0=0.0):
    """{pid: dict(wall_ms, attach_ms)}: from the run's start (t0) to its
    "tracing pid" line, and the sum of the -v "attach:" line's parts; and
    the BPF load time."""
    out, bpf_ms = {}, None
    for t, text in lines:
        m = BPF_LOAD.match(text)
        if m and bpf_ms is None:
            bpf_ms = float(m.group(1))
        m = ATTACH.match(text)
        if m:
            out.setdefault(int(m.group(1)), {})["attach_ms"] = ms_sum(m.group(2))
        m = TRACING.match(text)
        if m:
            out.setdefault(int(m.group(1)), {})["wall_ms"] = (t - t0) * 1e3
    return out, bpf_ms


def pids_named(lines):
    """Every pid a run's lines speak of."""
    return {int(p) for _, t in lines for p in re.findall(r"\bpid (\d+)", t)}


def false_messages(lines, rc, pids, files_gone=()):
    """Lines that contradict each other, the exit status or the disk, for
    the job pids (a daemon also meets other processes). files_gone: paths
    that the run's own later lines explain away (retention)."""
    out = []
    cannot = {int(m.group(1)) for m in (CANNOT_LOAD.match(t) for _, t in lines) if m}
    on = {int(m.group(1)) for m in (SWITCHED_ON.match(t) for _, t in lines) if m}
    agent_ops = {int(m.group(1)) for m in (TRACING.match(t) for _, t in lines)
                 if m and "from the agent" in m.group(3)}
    for pid in sorted(cannot & set(pids)):
        if pid in on:
            out.append("pid %d: 'cannot load the agent' and 'agent switched on'" % pid)
        if pid in agent_ops:
            out.append("pid %d: 'cannot load the agent' and 'ops from the agent'" % pid)
    for m in (FORK_CHILD.match(t) for _, t in lines):
        if m and int(m.group(1)) in pids:
            out.append("pid %s: 'a child forked by a traced process', which it is not (the soak "
                       "started it)" % m.group(1))
    no_answer = {int(m.group(1)) for m in (NO_ANSWER.match(t) for _, t in lines) if m}
    for m in (ACKED.match(t) for _, t in lines):
        if m and int(m.group(1)) in no_answer & set(pids) and float(m.group(2)) < 2900:
            out.append("pid %s: 'its agent did not answer within 3 s' after %s ms" % m.groups())
    out += attach_story(lines, rc, pids)
    wrote = [m for m in (WROTE.match(t) for _, t in lines) if m]
    interrupted = any("interrupted during attach" in t for _, t in lines)
    if wrote and rc is not None and rc > 0 and not (rc == 130 and interrupted):
        out.append("'wrote %s' and exit status %d" % (wrote[-1].group(1), rc))
    if rc == 0 and any(WRITE_FAILED.search(t) for _, t in lines):
        out.append("a write failed, and exit status 0")
    for m in wrote:
        path, mb = m.group(1), float(m.group(2))
        if path in files_gone:
            continue
        if not os.path.exists(path):
            out.append("'wrote %s', which does not exist%s" % (
                path, " (%s.partial does)" % path if os.path.exists(path + ".partial") else ""))
        elif abs(os.path.getsize(path) / 1e6 - mb) > 0.051:
            out.append("'wrote %s (%.1f MB)', which has %.2f MB" % (
                path, mb, os.path.getsize(path) / 1e6))
    return out


def attach_story(lines, rc, pids):
    """An attach told two ways: a diagnosis of a process said to have
    exited during the attach; "tracing pid N" and then "interrupted during
    attach" of a single process; "nothing written" and then a .partial
    said to stay; a .partial left on disk without a word (unless ptbpf was
    SIGKILLed)."""
    out = []
    texts = [t for _, t in lines]
    exited = {int(m.group(1)) for m in map(EXITED_IN_ATTACH.match, texts) if m}
    for t in texts:
        named = {int(p) for p in re.findall(r"\bpid (\d+)", t)} & exited & set(pids)
        if named and DIAGNOSIS.search(t) and not EXITED_IN_ATTACH.match(t):
            out.append("pid %d exited during the attach, and: %s" % (min(named), t[:160]))
    tracing = [int(m.group(1)) for m in map(TRACING.match, texts) if m]
    for i, t in enumerate(texts):
        m = INTERRUPTED.match(t)
        if m and any(TRACING.match(x) for x in texts[:i]) and not m.group(1):
            out.append("'tracing pid %d' and then '%s'" % (tracing[0], t[:80]))
        if m and any(STAYS_IN.search(x) for x in texts[i:]):
            out.append("'nothing written' and then a .partial said to stay")
    said = {p for m in map(STAYS_IN.search, texts) if m for p in m.groups() if p}
    for m in map(PARTIAL.match, texts):
        if m and rc != -9 and os.path.exists(m.group(1)) and m.group(1) not in said:
            out.append("%s left without a word (%d bytes)" % (m.group(1),
                                                              os.path.getsize(m.group(1))))
    return out


def already_traced_by_the_dead(text):
    """The refusal names a ptbpf that is not there: a false message. Judged
    when the line is read."""
    m = ALREADY.search(text)
    return bool(m) and not os.path.exists("/proc/%s" % m.group(1))


def outcome(rc, lines, action, pid):
    """'ok', 'killed', 'explained: ...' or 'unexplained: ...' for a cycle
    that the soak ended with action ('stop', 'sigint', 'sigkill',
    'sigstop')."""
    if rc == -9 and action == "sigkill":
        return "killed"
    if rc == -2 and action in ("sigint", "sigint2"):
        return "explained: SIGINT before ptbpf set its handler"
    if rc == 130 and action == "sigint2" and not lines_say(lines, "interrupted during attach"):
        return "explained: a second SIGINT leaves at once"
    if rc == 0:
        if not any(WROTE.match(t) for _, t in lines):
            return "unexplained: exit 0 without 'wrote'"
        if not any(TRACING.match(t) and int(TRACING.match(t).group(1)) == pid for _, t in lines):
            return "unexplained: exit 0 without 'tracing pid %d'" % pid
        return "ok"
    for pattern, why in EXPLAINED:
        if any(pattern.search(t) for _, t in lines):
            if why == "interrupted during attach" and (rc != 130 or
                                                       action not in ("sigint", "sigint2")):
                break
            return "explained: " + why
    last = lines[-1][1] if lines else "(no output)"
    return "unexplained: exit %s after %s; last line: %s" % (rc, action, last[:200])


def lines_say(lines, text):
    return any(text in t for _, t in lines)


def is_warning(text):
    if ORDINARY.search(text) and not text.startswith("ptbpf: warning: "):
        return bool(NONZERO_LOSS.search(text)) or (
            "daemon: " in text and bool(WARNING.search(text)))
    return text.startswith("ptbpf: ") and bool(WARNING.search(text))


def warnings(lines):
    return [t for _, t in lines if is_warning(t)]


def unclassified(lines):
    return [t for _, t in lines if not ORDINARY.search(t) and not is_warning(t)]


def normalize(text):
    """A line with its numbers and paths generalized, for counting kinds."""
    text = re.sub(r"/\S+", "PATH", text)
    return re.sub(r"\d+(\.\d+)?", "N", text)[:160]
