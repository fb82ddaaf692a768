# SPDX-License-Identifier: BSD-2-Clause
"""What CUPTI's activity API alone leaves in a process each time it is
switched on and off, as ptbpf's agent does at every attach and detach: the
job's RSS over blocks of on/off cycles, interleaved with blocks of the same
GPU work and no CUPTI call at all. No ptbpf, no agent, no Kineto: libcupti
through ctypes, with buffers of Python's own.

usage: cupti_rss.py [--blocks 3] [--cycles 50] [--graphs] [--agent LIB] [--kineto-first]
                    [--phases P,P...] [--seconds S] [--marathon S]

Each cycle: buffer callbacks registered, the agent's kinds (concurrent
kernel, memcpy, memset) on, some steps of GPU work, a forced flush, the
kinds off, a forced flush. With --agent, a third phase switches ptbpf's
agent (LIB, loaded with dlopen) on and off around the same work instead:
its GPU side alone, without ptbpf. --kineto-first runs one torch.profiler
session first, so that Kineto holds CUPTI's subscriber as in a job that
has profiled itself. A phase "thread" makes the same CUPTI calls as
"cupti" from a new thread each cycle, as the agent's thread is new at
each attach: what CUPTI keeps per thread that ever called it. Phases that
trace for --seconds (as a real attach does) and flush meanwhile every
0.2 s: "forced" (the agent's forced flush), "plain" (completed buffers
only), "period" (CUPTI's own flush thread), "tflush" (forced, from another
thread while kernels run), "tplain" (the same, not forced), "pend" (CUPTI's
flush thread, then kinds off and a forced flush from another thread while
kernels run, as a detach could), "tdrain" (tplain, then kinds off and plain
flushes 20 ms apart until every buffer is back, at most 25, then a forced
one only if not, from another thread while kernels run: the agent's way
since 2026-11-29), "still" (no flush until the end), "subscribed" (forced, with callbacks on the
launch calls the agent enables them on, subscribed for the cycle), "domain" (the same with every runtime and
driver call's callback on), "pool"
(forced, with the agent's buffers: at most 8 of 1 MiB out, more declined), "agentlong"
(the agent on for that long), "kineto" (a torch.profiler session as long).
--marathon S instead: one session of S seconds, saying every 10 s how many
kernel records came (from graphs, without a start time), malloc's memory
in use and the GPU's free memory: whether CUPTI uses its device buffers
again or keeps one per so many records. Prints the RSS after each
block and the growth per cycle with CUPTI and without, and how many host
copies of CUPTI's device buffers each phase left in the heap."""
import argparse
import ctypes
import glob
import os
import sys
import threading
import time

import torch

KINDS = (10, 1, 2)  # CONCURRENT_KERNEL, MEMCPY, MEMSET
FORCED = 1
BUF = 8 << 20
KERNEL_START, KERNEL_GRAPH_ID = 16, 156  # offsets in CUpti_ActivityKernel10 (CUPTI 13.0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "soak"))
import probes  # noqa: E402

DEVBUF = probes.CUPTI_DEVBUF_CHUNKS[0]  # CUPTI's host copy of one device buffer, as a chunk


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def devbufs_new(before, after):
    """How many of CUPTI's device-buffer host copies are in use in after
    and were not in before (heap_chunks readings)."""
    return probes.cupti_devbufs_new(before, after).count(DEVBUF)


def load_cupti():
    base = os.path.dirname(torch.__file__)
    for pat in (os.path.join(base, "..", "nvidia", "cu13", "lib", "libcupti.so.13"),
                os.path.join(base, "lib", "libcupti.so*")):
        for p in glob.glob(pat):
            return ctypes.CDLL(p)
    return ctypes.CDLL("libcupti.so.13")


REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                       ctypes.POINTER(ctypes.c_size_t))
# Phases that trace for --seconds, each a flush policy of Cupti.cycle.
TIMED = ("forced", "plain", "period", "still", "tflush", "subscribed", "pool", "domain", "tplain",
         "pend", "tdrain")
DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_size_t)
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
# (domain, cbid) of launches the agent enables callbacks on (user/agent/launch_cbids.h):
# cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernel, cuGraphLaunch
LAUNCH_CBIDS = ((2, 211), (2, 311), (1, 307), (1, 514))


class Cupti:
    def __init__(self):
        self.lib = load_cupti()
        self.out = {}
        self.records = 0  # bytes of records
        self.walk = False  # count kernel records (slower): kernels, from graphs, no start time
        self.kernels = self.graph_kernels = self.no_time = 0
        self.req = REQ(self._req)
        self.done = DONE(self._done)
        self.callback = CALLBACK(lambda *a: None)
        self.pool = None  # (buffers, bytes each): at most so many out, as the agent's pool
        self.declined = 0
        self.forced_at_end = 0  # tdrain: sessions whose plain flushes left buffers out
        self.subscriber = ctypes.c_void_p()

    def _req(self, buf, size, maxrec):
        maxrec[0] = 0
        if self.pool and len(self.out) >= self.pool[0]:  # as the agent's pool: declined
            self.declined += 1
            buf[0] = None
            size[0] = 0
            return
        n = self.pool[1] if self.pool else BUF
        b = ctypes.create_string_buffer(n + 8)
        a = (ctypes.addressof(b) + 7) & ~7
        self.out[a] = b
        buf[0] = a
        size[0] = n

    def _done(self, ctx, stream, buf, size, valid):
        self.records += valid
        if self.walk and valid:
            rec = ctypes.c_void_p()
            nxt = self.lib.cuptiActivityGetNextRecord
            while nxt(ctypes.c_void_p(buf), ctypes.c_size_t(valid), ctypes.byref(rec)) == 0:
                kind = ctypes.c_uint32.from_address(rec.value).value
                if kind in (3, 10):  # KERNEL, CONCURRENT_KERNEL: CUpti_ActivityKernel10
                    self.kernels += 1
                    if ctypes.c_uint32.from_address(rec.value + KERNEL_GRAPH_ID).value:
                        self.graph_kernels += 1
                    if not ctypes.c_uint64.from_address(rec.value + KERNEL_START).value:
                        self.no_time += 1
        self.out.pop(buf, None)

    def marathon(self, work, seconds, every=10.0):
        """One session of `seconds` (kinds on once, a forced flush every
        0.2 s, as the agent does), saying every `every` s how many kernel
        records came (from graphs, without a start time), malloc's memory in
        use and the GPU's free memory: whether CUPTI's device buffers are
        used again or kept, one per so many records."""
        c = self.lib
        self.walk = True
        assert c.cuptiActivityRegisterCallbacks(self.req, self.done) == 0
        for k in KINDS:
            assert c.cuptiActivityEnable(ctypes.c_int(k)) == 0
        t0 = time.time()
        next_flush, next_say = t0 + 0.2, t0
        while True:
            now = time.time()
            if now >= next_say:
                free, _ = torch.cuda.mem_get_info()
                print("marathon %5.0f s: kernels %d (from graphs %d, no start time %d), "
                      "malloc in use %.1f MB, GPU free %.1f MB" % (
                          now - t0, self.kernels, self.graph_kernels, self.no_time,
                          probes.mallinfo().get("used", 0) / 1024, free / 2**20), flush=True)
                next_say += every
            if now - t0 >= seconds:
                break
            work()
            if now >= next_flush:
                c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED))
                next_flush = now + 0.2
        c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED))
        for k in KINDS:
            c.cuptiActivityDisable(ctypes.c_int(k))
        c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED))
        self.walk = False

    def cycle(self, work, seconds=0, flush=None, every=0.2):
        """One on/off cycle around work; with seconds, work for that long,
        flushing meanwhile (every `every` s) by the policy flush: one of
        TIMED (the module's docstring says what each does) or None."""
        c = self.lib
        subscribed = flush in ("subscribed", "domain")  # forced, with launch callbacks on
        domain = flush == "domain"  # every runtime and driver call's callback, as with --api
        self.pool = (8, 1 << 20) if flush == "pool" else None  # forced, the agent's pool
        if subscribed or flush == "pool":
            flush = "forced"
        if subscribed:
            assert c.cuptiSubscribe(ctypes.byref(self.subscriber), self.callback, None) == 0
            for dom, cbid in LAUNCH_CBIDS:
                c.cuptiEnableCallback(ctypes.c_uint32(1), self.subscriber, ctypes.c_int(dom),
                                      ctypes.c_uint32(cbid))
            for dom in (1, 2) if domain else ():
                c.cuptiEnableDomain(ctypes.c_uint32(1), self.subscriber, ctypes.c_int(dom))
        assert c.cuptiActivityRegisterCallbacks(self.req, self.done) == 0
        for k in KINDS:
            assert c.cuptiActivityEnable(ctypes.c_int(k)) == 0
        if flush in ("period", "pend"):
            c.cuptiActivityFlushPeriod(ctypes.c_uint32(int(every * 1000)))
        stop = threading.Event()
        flusher = None
        if flush in ("tflush", "tplain", "tdrain"):  # as the agent's thread, while kernels run
            def flushing():
                while not stop.wait(every):
                    c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED if flush == "tflush" else 0))
            flusher = threading.Thread(target=flushing)
            flusher.start()
        work()
        end, next_flush = time.time() + seconds, time.time() + every
        while time.time() < end:
            work()
            if flush in ("forced", "plain") and time.time() >= next_flush:
                c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED if flush == "forced" else 0))
                next_flush += every
        if flusher:
            stop.set()
            flusher.join()
        if flush in ("period", "pend"):
            c.cuptiActivityFlushPeriod(ctypes.c_uint32(0))
        if flush in ("pend", "tdrain"):  # kinds off, then a forced flush, from another thread,
            def end():                    # kernels running (tdrain: plain ones first, as the agent)
                for k in KINDS:
                    c.cuptiActivityDisable(ctypes.c_int(k))
                for _ in range(25 if flush == "tdrain" else 0):
                    c.cuptiActivityFlushAll(ctypes.c_uint32(0))
                    if not self.out:
                        return
                    time.sleep(0.02)
                self.forced_at_end += 1
                c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED))
            ender = threading.Thread(target=end)
            ender.start()
            while ender.is_alive():
                work()
            ender.join()
        else:
            c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED))
            for k in KINDS:
                c.cuptiActivityDisable(ctypes.c_int(k))
            c.cuptiActivityFlushAll(ctypes.c_uint32(FORCED))
        if subscribed:
            c.cuptiUnsubscribe(self.subscriber)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=50)
    ap.add_argument("--graphs", action="store_true", help="the work replays a CUDA graph")
    ap.add_argument("--agent", help="libptbpf-agent.so: a phase with it switched on and off")
    ap.add_argument("--kineto-first", action="store_true")
    ap.add_argument("--phases", default="cupti,thread,none",
                    help="of cupti, thread, agent (with --agent), none, and with --seconds: "
                         "forced, plain, period, tflush, still (no flush until the end), "
                         "agentlong, kineto")
    ap.add_argument("--attr", action="append", default=[], metavar="N=V",
                    help="cuptiActivitySetAttribute(N, V) once CUDA is up, as the agent "
                         "could at attach (N: CUpti_ActivityAttribute's number)")
    ap.add_argument("--marathon", type=float, metavar="S",
                    help="instead of the phases: one session of S seconds, read every 10 s")
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="how long a forced/plain/period/still cycle works")
    a = ap.parse_args()
    m = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).cuda()
    x = torch.randn(64, 512, device="cuda")
    if a.graphs:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            m(x)

        def step():
            g.replay()
    else:
        def step():
            m(x).sum().item()

    def work():
        for _ in range(20):
            step()
        torch.cuda.synchronize()

    if a.kineto_first:
        import torch.profiler as tp
        with tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.CUDA]):
            work()
    cu = Cupti()
    for nv in a.attr:
        n, v = (int(x) for x in nv.split("="))
        val, size = ctypes.c_size_t(v), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
        if n in (5, 8, 9):  # ZEROED_OUT_ACTIVITY_BUFFER, HOST_PINNED, PER_THREAD: uint8_t
            val, size = ctypes.c_uint8(v), ctypes.c_size_t(1)
        rc = cu.lib.cuptiActivitySetAttribute(ctypes.c_int(n), ctypes.byref(size),
                                              ctypes.byref(val))
        print("attribute %d = %d: %s" % (n, v, "ok" if rc == 0 else "error %d" % rc))
    for _ in range(30):  # warm: the allocator, CUPTI loaded and once on
        work()
    if a.marathon:
        chunks = probes.heap_chunks(os.getpid())
        cu.marathon(work, a.marathon)
        print("CUPTI device buffers' host copies (%d B chunks) new: %d" % (
            DEVBUF, devbufs_new(chunks, probes.heap_chunks(os.getpid()))))
        return
    cu.cycle(work)
    def thread_cycle():
        t = threading.Thread(target=cu.cycle, args=(work,))
        t.start()
        t.join()

    phases = a.phases.split(",")
    known = {"cupti", "thread", "none", "kineto"} | set(TIMED)
    known |= {"agent", "agentlong"} if a.agent else set()
    for p in phases:
        if p not in known:
            sys.exit("--phases: %s: one of %s%s" % (p, ", ".join(sorted(known)),
                                                    "" if a.agent else " (agent phases need "
                                                    "--agent)"))
    if a.agent:
        agent = ctypes.CDLL(os.path.abspath(a.agent))

        def agent_cycle(seconds=0):
            agent.ptbpf_agent_activate()
            work()
            end = time.time() + seconds
            while time.time() < end:
                work()
            agent.ptbpf_agent_deactivate()
        agent_cycle()
    grow = {p: [] for p in phases}
    devbufs = {p: 0 for p in phases}
    chunks = probes.heap_chunks(os.getpid())
    for b in range(a.blocks):
        for phase in phases:
            r0 = rss_kb()
            for _ in range(a.cycles):
                if phase == "cupti":
                    cu.cycle(work)
                elif phase == "agent":
                    agent_cycle()
                elif phase == "agentlong":
                    agent_cycle(a.seconds)
                elif phase == "kineto":  # torch.profiler's own session, as long
                    import torch.profiler as tp
                    with tp.profile(activities=[tp.ProfilerActivity.CUDA]):
                        end = time.time() + a.seconds
                        while time.time() < end:
                            work()
                elif phase == "thread":
                    thread_cycle()
                elif phase in TIMED:
                    cu.cycle(work, a.seconds, None if phase == "still" else phase)
                else:
                    work()
            r1 = rss_kb()
            grow[phase].append((r1 - r0) / a.cycles)
            now = probes.heap_chunks(os.getpid())
            more = dict((sz, n) for n, sz in probes.chunks_grown(chunks, now, 3))
            chunks_before, chunks = chunks, now
            devbufs[phase] += devbufs_new(chunks_before, now)
            print("block %d %-6s RSS %d -> %d kB: %+.1f kB per cycle; chunks in use grown: %s" % (
                b, phase, r0, r1, (r1 - r0) / a.cycles,
                ", ".join("%d B x%+d" % kv for kv in more.items()) or "-"), flush=True)
    for phase, g in grow.items():
        g = sorted(g)
        print("%s: median %+.1f kB per cycle (blocks %s); CUPTI device buffers' host copies "
              "(%d B chunks) new: %d in %d cycles" % (
                  phase, g[len(g) // 2], ", ".join("%+.1f" % v for v in g), DEVBUF,
                  devbufs[phase], a.blocks * a.cycles))
    print("records %d bytes, buffers still out %d, requests declined %d, sessions ended by "
          "a forced flush (tdrain) %d" % (cu.records, len(cu.out), cu.declined, cu.forced_at_end))


if __name__ == "__main__":
    main()
