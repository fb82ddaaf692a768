# SPDX-License-Identifier: BSD-2-Clause
"""What the soak measures from outside: a job's footprint (/proc), the
probes' breakpoints left in its text, torch's RecordFunction calls in it
(BCC, where installed), and the host's /dev/shm, BPF objects and ptbpf
processes."""
import json
import os
import re
import struct
import subprocess
import sys
import time

AGENT = "libptbpf-agent.so"


def anon_rw(line):
    """An anonymous read-write mapping: Python's object arenas (1 MiB mmaps
    that the kernel merges with their neighbours, freed when empty) and
    malloc's large chunks come and go in a job by themselves (a DDP rank
    on gloo: 3 new and 1 gone in 80 s of nothing but its own work and
    profiler, CI VM, 2026-11-29); their bytes are judged instead."""
    part = line.split()
    return len(part) == 5 and part[1] == "rw-p"


def int3_bytes(pid):
    """int3 bytes in pid's executable file mappings where its file has
    another byte: uprobes' breakpoints in the process's text. Only the
    pages the process has its own copy of are read (a breakpoint is written
    into such a copy; /proc/PID/pagemap: present or swapped, not the
    file's page), so that reading faults nothing into the job's RSS."""
    n, page = 0, os.sysconf("SC_PAGE_SIZE")
    with open("/proc/%d/mem" % pid, "rb") as mem, open("/proc/%d/maps" % pid) as maps, \
            open("/proc/%d/pagemap" % pid, "rb") as pagemap:
        for line in maps:
            f = line.split()
            if len(f) < 6 or "x" not in f[1] or not f[5].startswith("/"):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            pagemap.seek(lo // page * 8)
            flags = struct.unpack("<%dQ" % ((hi - lo) // page), pagemap.read((hi - lo) // page * 8))
            try:
                with open(f[5], "rb") as fh:
                    for i, e in enumerate(flags):
                        if not e >> 62 or e >> 61 & 1:  # not present nor swapped, or the file's
                            continue
                        mem.seek(lo + i * page)
                        fh.seek(int(f[2], 16) + i * page)
                        inside, onfile = mem.read(page), fh.read(page)
                        n += sum(1 for a, b in zip(inside, onfile) if a == 0xCC and b != 0xCC)
            except OSError:
                continue
    return n


def breakpoints(pid, settle=10.0):
    """int3_bytes, polled for up to settle s while not 0: a probe whose link
    was closed a moment ago (the soak's own BCC count's) goes out a moment
    later. None may stay: before ptbpf's link keeper, a link made or closed
    by a ptbpf being killed left them (user/attach/keeper.h). None if pid
    is gone."""
    deadline = time.time() + settle
    while True:
        try:
            n = int3_bytes(pid)
        except OSError:
            return None
        if not n or time.time() > deadline:
            return n
        time.sleep(0.5)


def proc_state(pid):
    """RSS (KiB), threads, mappings other than anonymous read-write ones,
    the KiB of those, mappings of the agent, open fds; None once the process
    is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            status = f.read()
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read().splitlines()
        fds = len(os.listdir("/proc/%d/fd" % pid))
    except (FileNotFoundError, ProcessLookupError):
        return None
    if not re.search(r"VmRSS:", status):  # a zombie: gone but not reaped
        return None
    return dict(rss_kb=int(re.search(r"VmRSS:\s+(\d+)", status).group(1)),
                threads=int(re.search(r"Threads:\s+(\d+)", status).group(1)),
                maps=sum(not anon_rw(m) for m in maps),
                anon_rw_kb=sum(span_kb(m) for m in maps if anon_rw(m)),
                agent_maps=sum(AGENT in m for m in maps), fds=fds)


def span_kb(line):
    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
    return (hi - lo) >> 10


def rss_by_mapping(pid):
    """{"START NAME": RSS kB} from /proc/PID/smaps; {} once the process is
    gone. Anonymous mappings are named "[anon]": their start address is
    what tells them apart from one reading to the next."""
    out = {}
    try:
        with open("/proc/%d/smaps" % pid) as f:
            key = None
            for line in f:
                head = re.match(r"([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
                if head:
                    key = "%s %s" % (head.group(1), head.group(2) or "[anon]")
                elif key and line.startswith("Rss:"):
                    out[key] = int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return out


def heap_spans(pid):
    """[[start, end]] of the process's main heap ([heap]); [] without one."""
    with open("/proc/%d/maps" % pid) as f:
        return [[int(x, 16) for x in line.split()[0].split("-")]
                for line in f if line.rstrip().endswith("[heap]")]


def mallinfo():
    """glibc malloc's own totals over all arenas of this process, in kB:
    what its chunks hold in use (used), what it keeps free and could not
    give back (free), and its mmap'd chunks (mmapped). {} without mallinfo2
    (glibc < 2.33)."""
    import ctypes

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]
    try:
        f = ctypes.CDLL("libc.so.6").mallinfo2
    except AttributeError:
        return {}
    f.restype = Mallinfo2
    m = f()
    return dict(used=m.uordblks >> 10, free=m.fordblks >> 10, mmapped=m.hblkhd >> 10)


def heap_strings(pid, least=12):
    """collections.Counter of the printable strings (least characters or
    more, with a word of 6 letters in them: not random bytes) in the
    process's main heap ([heap]): what a heap that grew holds more of tells
    whose memory it is. Empty once the process is gone."""
    import collections
    got = collections.Counter()
    try:
        spans = heap_spans(pid)
        pat = re.compile(rb"[\x20-\x7e]{%d,}" % least)
        word = re.compile(rb"[A-Za-z_]{6}")
        with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
            for lo, hi in spans:
                for at in range(lo, hi, 64 << 20):
                    mem.seek(at)
                    chunk = mem.read(min(64 << 20, hi - at))
                    got.update(m.group().decode()[:120] for m in pat.finditer(chunk)
                               if word.search(m.group()))
    except (FileNotFoundError, ProcessLookupError, OSError):
        return collections.Counter()
    return got


def heap_chunks(pid):
    """The malloc chunks in use in the process's main heap ([heap], glibc's
    main arena): {address: size}. Read while the job is quiet; a walk that
    meets a chunk it cannot read stops there. (Chunks in tcache and fast
    bins count as in use: a few per size. Chunks malloc mmap'd on their
    own, and other threads' arenas, are not in it.)"""
    try:
        span = next(iter(heap_spans(pid)), None)
        if not span:
            return {}
        with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
            mem.seek(span[0])
            data = mem.read(span[1] - span[0])
    except (FileNotFoundError, ProcessLookupError, OSError):
        return {}
    best = {}
    for start in (0, 0x10):  # the first chunk: where the arena's break began
        got, at, n = {}, start, len(data)
        while at + 16 <= n:
            size = struct.unpack_from("<Q", data, at + 8)[0] & ~7
            nxt = at + size
            if size < 32 or nxt + 16 > n:
                break  # the top chunk, or not a chunk
            if struct.unpack_from("<Q", data, nxt + 8)[0] & 1:
                got[span[0] + at] = size
            at = nxt
        if len(got) > len(best):
            best = got
    return best


def chunks_grown(before, after, top=3):
    """[(how many more, size)] of the chunk sizes in use that grew most in
    bytes from before to after (heap_chunks readings)."""
    import collections
    n = collections.Counter(after.values())
    n.subtract(collections.Counter(before.values()))
    return sorted(((k, sz) for sz, k in n.items() if k > 0), key=lambda x: -x[0] * x[1])[:top]


# CUPTI's host copy of one activity device buffer (its default
# CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, 3,200,000 B, and an index of half
# that), as malloc chunks. CUPTI 13.0.1 keeps new ones after its activity
# kinds go off, with or without ptbpf: tests/bench/cupti_rss.py.
CUPTI_DEVBUF_CHUNKS = (3200016, 1600016)


def cupti_devbufs_new(before, after):
    """The sizes of CUPTI's device-buffer copies (CUPTI_DEVBUF_CHUNKS) in
    use in after that were not in before (heap_chunks readings)."""
    return [sz for a, sz in after.items() if sz in CUPTI_DEVBUF_CHUNKS and before.get(a) != sz]


def new_chunks_report(pid, before, after=None, top=8, samples=3):
    """Text: the chunks in use now (after, or read now) that were not
    before (heap_chunks readings), by size, largest total first; for each,
    what their first words point at (a C++ object's first word is its
    vtable: the library and offset name its class) and the text they
    hold."""
    try:
        return _new_chunks_report(pid, before, heap_chunks(pid) if after is None else after,
                                  top, samples)
    except (OSError, ValueError, struct.error):
        return "process gone, or its heap changed while read"


def _new_chunks_report(pid, before, after, top, samples):
    new = {a: sz for a, sz in after.items() if before.get(a) != sz}
    libs = []
    try:
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                part = line.split()
                lo, hi = (int(x, 16) for x in part[0].split("-"))
                libs.append((lo, hi, int(part[2], 16), part[5] if len(part) > 5 else "[anon]"))
    except (FileNotFoundError, ProcessLookupError, OSError):
        return "process gone"
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        return "\n".join(_describe(mem, libs, new, before, top, samples))


def _describe(mem, libs, new, before, top, samples):
    import collections
    base = {}
    for lo, hi, off, name in libs:
        base.setdefault(name, lo - off)

    def where(v):
        for lo, hi, off, name in libs:
            if lo <= v < hi:
                if name.startswith("/"):
                    return "%s+%#x" % (name.rsplit("/", 1)[-1], v - base[name])
                return name
        return None

    by_size = collections.defaultdict(list)
    for a, sz in new.items():
        by_size[sz].append(a)
    lines = ["%d chunks in use now that were not (%+.1f MB), %d before" % (
        len(new), sum(new.values()) / 2**20, len(before))]
    heads = collections.Counter()
    for a, sz in new.items():
        mem.seek(a + 16)
        w = struct.unpack("<Q", mem.read(8))[0]
        heads[where(w) or "data"] += sz
    lines.append("  by what their first word points at: " + ", ".join(
        "%s %.1f MB" % (k, v / 2**20) for k, v in heads.most_common(8)))
    for sz, addrs in sorted(by_size.items(), key=lambda kv: -kv[0] * len(kv[1]))[:top]:
        lines.append("  size %d: %d chunks, %.1f MB" % (sz, len(addrs), sz * len(addrs) / 2**20))
        for a in sorted(addrs)[:: max(1, len(addrs) // samples)][:samples]:
            mem.seek(a + 16)
            raw = mem.read(min(sz - 16, 160))
            words = [struct.unpack_from("<Q", raw, i)[0] for i in range(0, min(len(raw), 48) - 7, 8)]
            text = re.sub(rb"[^\x20-\x7e]", b".", raw)
            lines.append("    %#x: %s | %s" % (a, " ".join(
                where(w) or "%#x" % w for w in words[:6]), text.decode()[:100]))
    return lines


def rss_growth_by_mapping(first, last, top=6):
    """The mappings whose RSS grew most from first to last: [(kB, key)],
    largest first; a mapping new since first counts whole."""
    grew = [(kb - first.get(k, 0), k) for k, kb in last.items()]
    return sorted((g for g in grew if g[0] > 0), reverse=True)[:top]


def agent_mapped(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return AGENT in f.read()
    except FileNotFoundError:
        return False


def steady_state(pid, samples=3):
    """proc_state, the least of a few samples of each (a job opens a file
    or starts a thread for a moment now and then)."""
    got = [s for s in (proc_state(pid) for _ in range(samples)) if s]
    if not got:
        return None
    return {k: min(s[k] for s in got) for k in got[0]}


RF_COUNTER = r"""
import sys, time
from bcc import BPF
seconds, pids = float(sys.argv[1]), [int(p) for p in sys.argv[2:]]
b = BPF(text='''
BPF_HASH(hits, u32, u64);
int hit(void *ctx) { u32 pid = bpf_get_current_pid_tgid() >> 32; hits.increment(pid); return 0; }
''')
for pid in pids:
    with open("/proc/%d/maps" % pid) as f:
        lib = next(l.split()[-1] for l in f if "libtorch_cpu.so" in l)
    b.attach_uprobe(name=lib, sym_re=r"_ZN2at14RecordFunction6beforeE.*", fn_name="hit", pid=pid)
time.sleep(seconds)
got = {k.value: v.value for k, v in b["hits"].items()}
print(" ".join("%d:%d" % (p, got.get(p, 0)) for p in pids))
"""


def bcc_python():
    """A python that imports bcc: this one, or Debian's."""
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import bcc"],
                                                 capture_output=True).returncode == 0:
            return py
    return None


def record_function_calls(pids, seconds=1.0):
    """How many times torch builds a RecordFunction in each of pids within
    seconds (BCC uprobes on at::RecordFunction::before; 0 when no callback
    is registered: the dispatcher then takes its fast path). ({pid: n},
    None) or (None, why not)."""
    if not pids:
        return {}, None
    py = bcc_python()
    if not py:
        return None, "no python with BCC on this host"
    r = subprocess.run([py, "-c", RF_COUNTER, str(seconds)] + [str(p) for p in pids],
                       capture_output=True, text=True, timeout=300)
    if r.returncode or not r.stdout.strip():
        return None, "BCC failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    last = r.stdout.strip().splitlines()[-1]
    return {int(p): int(n) for p, n in (x.split(":") for x in last.split())}, None


def blocked_in(pid):
    """Where a process that does not answer waits: its threads' kernel
    stacks' first frames and wchan (root reads them)."""
    out = []
    try:
        tids = sorted(os.listdir("/proc/%d/task" % pid), key=int)
    except FileNotFoundError:
        return "gone"
    for tid in tids[:4]:
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            with open(base + "wchan") as f:
                wchan = f.read().strip()
            with open(base + "stack") as f:
                frames = [l.split()[-1].split("+")[0] for l in f.read().splitlines()[:4]]
        except OSError:
            continue
        out.append("%s: %s [%s]" % (tid, wchan, " < ".join(frames)))
    stuck = "; ".join(out) or "?"
    if "unix_wait_for_peer" in stuck:
        stuck += "; claim sockets with a full backlog: " + full_claim_sockets()
    return stuck


def full_claim_sockets():
    """ptbpf's per-pid claim sockets (abstract, listening) whose backlog is
    full: a connect() to one blocks until its holder accepts or exits."""
    try:
        r = subprocess.run(["ss", "-xlp"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "ss not available"
    out = []
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) > 4 and f[4].startswith("@ptbpf/pid/") and int(f[2]) > int(f[3]):
            holder = re.search(r"pid=(\d+)", line)
            out.append("%s (queue %s > backlog %s; held by ptbpf pid %s)" % (
                f[4], f[2], f[3], holder.group(1) if holder else "?"))
    return "; ".join(out) or "none full"


def foreign_tracer(pid, ours=()):
    """'ptbpf pid N: CMD' if a ptbpf other than ours traces pid now."""
    holder = claim_holder(pid)
    if not holder or holder in ours:
        return None
    try:
        with open("/proc/%d/cmdline" % holder) as f:
            cmd = f.read().replace("\0", " ").strip()
    except OSError:
        cmd = "?"
    return "ptbpf pid %d: %s" % (holder, cmd[:200])


def shm_entries():
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def bpf_objects():
    """{"prog"|"link"|"map": set of ids} that bpftool lists, and {link id:
    the pid it probes} for the links that name one (uprobe_multi)."""
    out, link_pids = {}, {}
    for kind in ("prog", "link", "map"):
        r = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True)
        try:
            objs = json.loads(r.stdout or "[]")
        except ValueError:
            objs = []
        # An object that went away while bpftool listed it is an entry
        # without an id (another tracer on the host loads and unloads).
        if not isinstance(objs, list):
            objs = []
        objs = [o for o in objs if isinstance(o, dict) and "id" in o]
        out[kind] = {o["id"] for o in objs}
        if kind == "link":
            link_pids = {o["id"]: o["pid"] for o in objs if isinstance(o.get("pid"), int)}
    return out, link_pids


def claim_holders():
    """{claimed pid: the ptbpf that holds its claim socket (traces it), or
    None where no process holds it}, from /proc alone: the claim sockets
    in /proc/net/unix (this network namespace's), their holders from
    /proc/*/fd, as `ss -xlp` finds them (ss is not on every host: the GPU
    machine has none)."""
    inodes = {}
    try:
        with open("/proc/net/unix") as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                m = len(parts) > 7 and re.match(r"@ptbpf/pid/(\d+)/", parts[7])
                if m:
                    inodes["socket:[%s]" % parts[6]] = int(m.group(1))
    except OSError:
        return {}
    out = dict.fromkeys(inodes.values())
    for holder, _, target in proc_fds() if inodes else []:
        pid = inodes.get(target)
        if pid is not None and out[pid] is None:
            out[pid] = int(holder)
    return out


def proc_fds():
    """(pid, fd, what the fd links to) for every open fd of every process,
    as strings; processes and fds that go meanwhile are skipped."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % p)
        except OSError:
            continue
        for fd in fds:
            try:
                yield p, fd, os.readlink("/proc/%s/fd/%s" % (p, fd))
            except OSError:
                continue


def claim_holder(pid):
    """The ptbpf that holds pid's claim socket (traces it), or None."""
    return claim_holders().get(pid)


FDINFO_KEY = {"bpf-prog": ("prog", "prog_id"), "bpf-link": ("link", "link_id"),
              "bpf-map": ("map", "map_id")}


def bpf_holders():
    """{(kind, id): set of pids that hold an fd of it} from /proc/*/fdinfo
    (this bpftool may lack the pid iterator)."""
    held = {}
    for p, fd, target in proc_fds():
        kind = FDINFO_KEY.get(target[len("anon_inode:"):]) if target.startswith(
            "anon_inode:bpf-") else None
        if not kind:
            continue
        try:
            with open("/proc/%s/fdinfo/%s" % (p, fd)) as f:
                m = re.search(r"^%s:\s+(\d+)" % kind[1], f.read(), re.M)
        except OSError:
            continue
        if m:
            held.setdefault((kind[0], int(m.group(1))), set()).add(int(p))
    return held


def processes_of(exe):
    """Pids of the live processes running the executable exe."""
    real = os.path.realpath(exe)
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/exe" % p) == real:
                with open("/proc/%s/stat" % p) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        pids.append(int(p))
        except OSError:
            continue
    return pids


def gpu_memory():
    """{pid: MiB of GPU memory} of every process using a GPU, from
    nvidia-smi (CUPTI's device buffers are in it, PyTorch's caching
    allocator's too); {} without nvidia-smi."""
    import shutil
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    got = {}
    for line in out.splitlines():
        part = [x.strip() for x in line.split(",")]
        if len(part) == 2 and part[0].isdigit() and part[1].isdigit():
            got[int(part[0])] = got.get(int(part[0]), 0) + int(part[1])
    return got


def host_state(ptbpf):
    bpf, link_pids = bpf_objects()
    return dict(shm=shm_entries(), bpf=bpf, link_pids=link_pids, holders=bpf_holders(),
                ptbpf=processes_of(ptbpf))
