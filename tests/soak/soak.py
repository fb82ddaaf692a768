# SPDX-License-Identifier: BSD-2-Clause
"""Soak ptbpf as a fleet uses it (issue 19): jobs that check their own
numeric results and their own profiler sessions (tests/soak/jobs.py) run
while ptbpf attaches and detaches over and over (--mode cycles) or runs as
a daemon (--mode daemon), a fraction of its runs killed, interrupted or
stopped at random moments. Every run's exit status and lines are judged
(tests/soak/classify.py); afterwards nothing of ptbpf may have accumulated
in the jobs or on the host. Prints progress, a summary, and a Markdown
section (--markdown FILE appends it); writes JSON (--json FILE); exits 1 on
any harm, difference, false message, unexplained run or accumulation.

  PTBPF_TEST_PYTHON=/opt/torch/.venv/bin/python3 PYTHONUNBUFFERED=1 \\
      $PTBPF_TEST_PYTHON tests/soak/soak.py --mode cycles --cycles 1000
"""
import argparse
import faulthandler
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import daemon_drive  # noqa: E402
import drive  # noqa: E402
import probes  # noqa: E402
import report  # noqa: E402

JOBS = os.path.join(HERE, "jobs.py")
ENV_PROBE = ("import json, torch; print(json.dumps(dict(torch=torch.__version__, "
             "cuda=torch.cuda.is_available(), gpus=torch.cuda.device_count(), "
             "names=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())], "
             "kineto=torch.autograd.kineto_available())))")


def options(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    a = ap.add_argument
    a("--mode", default="cycles", help="cycles, daemon, both (cycles then daemon), or none "
      "(the jobs alone for --max-seconds: a control soak)")
    a("--python", default=os.environ.get("PTBPF_TEST_PYTHON", "/usr/bin/python3"))
    a("--ptbpf", default=os.path.join(ROOT, "build", "ptbpf"))
    a("--device", default="auto", choices=["auto", "cpu", "cuda"])
    a("--jobs", default="auto", help="comma list of mlp, graphs, ddp, ondemand (NAME:N for N "
      "of one kind); auto: mlp, ddp, ondemand, and graphs on CUDA")
    a("--cycles", type=int, default=100)
    a("--dur-min", type=float, default=0.3, help="seconds traced per cycle, from")
    a("--dur-max", type=float, default=2.0, help="... to")
    a("--gap-min", type=float, default=0.0)
    a("--gap-max", type=float, default=0.5)
    a("--kill-fraction", type=float, default=0.2, help="runs (cycles; daemon windows) met by "
      "SIGKILL, SIGINT (once or twice) or SIGSTOP+SIGCONT at a random moment")
    a("--windows", type=int, default=20, help="daemon windows to write")
    a("--every", default="2s")
    a("--daemons", type=int, default=1, help="daemons at once, each owning its share of the "
      "jobs through --match-env PTBPF_SOAK_GROUP=K (a job's ranks together), as a host that "
      "several jobs share runs one daemon per job")
    a("--untraced", default="", help="jobs started like the others (KIND[,KIND...]) but "
      "never traced, sampled after every clean detach as the traced ones are: the RSS trend "
      "of the same work without ptbpf")
    a("--window", default="1s")
    a("--budget", default="2", help="the daemon's --budget")
    a("--max-bytes", default="1G", help="the daemon's --max-bytes")
    a("--ops", default="auto")
    a("--gpu-timeline", default="auto", help="ptbpf's --gpu-timeline (cycles): off tells the "
      "agent's CUPTI side from the rest")
    a("--max-seconds", type=float, default=480, help="per mode, at most")
    a("--hang-seconds", type=int, default=60, help="a run that is not tracing, or a window "
      "that has not ended, this long after it should have is hung")
    a("--session-every", type=float, default=3.0, help="mean seconds between a job's own "
      "profiler sessions")
    a("--seed", type=int, default=1)
    a("--work", help="working directory (default: a new one under /tmp, removed at the end "
      "unless --keep)")
    a("--keep", action="store_true")
    a("--keep-traces", action="store_true")
    a("--all-logs", action="store_true", help="keep every cycle's ptbpf -v output in the "
      "work directory (by default only runs with something to look at)")
    a("--validate-every", type=int, default=25, help="read every Nth trace with ptbpf report "
      "(cut ones always); 0: none")
    a("--no-rf", action="store_true", help="skip the RecordFunction count (BCC)")
    a("--json")
    a("--markdown")
    a("--rss-slack-mb", type=float, default=64, help="RSS end - before, at most (untraced, "
      "the CPU jobs' own profiler sessions add 11-13 MB in 4 minutes)")
    a("--rss-growth-mb", type=float, default=32, help="RSS end - after the first detach, "
      "less CUPTI's copies of its device buffers")
    a("--malloc-growth-mb", type=float, default=16, help="memory held in malloc's chunks, end - "
      "after the first detach, less CUPTI's copies of its device buffers")
    a("--threads-slack", type=int, default=0)
    a("--maps-slack", type=int, default=10, help="mappings end - before (the agent's two stub "
      "pages and its thread's arena stay: +4 documented; an untraced DDP rank adds up to 3)")
    a("--maps-growth", type=int, default=4, help="mappings end - after the first detach "
      "(anonymous read-write ones apart: the job's Python arenas and large malloc chunks "
      "come and go)")
    a("--anon-growth-mb", type=float, default=64, help="anonymous read-write mappings' size, "
      "end - after the first detach (one op ring reservation left mapped is 256 MB)")
    a("--fds-slack", type=int, default=0)
    a("--flat-factor", type=float, default=2.0, help="last tenth's median / first tenth's, "
      "at most (attach time, window size)")
    o = ap.parse_args(argv)
    o.modes = {"both": ["cycles", "daemon"]}.get(o.mode, o.mode.split(","))
    return o


def environment(o):
    r = subprocess.run([o.python, "-c", ENV_PROBE], capture_output=True, text=True, timeout=300)
    if r.returncode:
        sys.exit("%s cannot import torch: %s" % (o.python, r.stderr[-500:]))
    env = json.loads(r.stdout.strip().splitlines()[-1])
    if o.device == "auto":
        o.device = "cuda" if env["cuda"] else "cpu"
    v = subprocess.run([o.ptbpf, "--version"], capture_output=True, text=True)
    env["ptbpf"] = (v.stdout or v.stderr).strip()
    env["host"] = socket.gethostname()
    env["kernel"] = os.uname().release
    env["cpus"] = os.cpu_count()
    with open("/proc/cpuinfo") as f:
        env["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")),
                          "?")
    with open("/proc/meminfo") as f:
        env["mem_gb"] = round(int(f.readline().split()[1]) / 2**20)
    return env


def exit_text(rc):
    if rc is not None and rc < 0:
        return "killed by %s" % signal.Signals(-rc).name
    return "exit %s" % rc


class Job:
    """One job process (a DDP rank is one), read line by line."""

    def __init__(self, name, argv, cue, env):
        self.name, self.cue = name, cue
        self.group = int(env.get("PTBPF_SOAK_GROUP", "0"))
        self.untraced = self.group < 0
        os.makedirs(cue, exist_ok=True)
        self.err = open(os.path.join(cue, "stderr"), "w")
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err,
                                  stdin=subprocess.DEVNULL, env=env)
        self.pid = self.p.pid
        self.lines, self.verdict, self.control = [], None, None
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.first_clean = None
        self.clean_rss = []  # RSS (kB) after every clean detach, in order
        self.first_maps = {}  # RSS (kB) by mapping after the first clean detach
        self.first_chunks = None  # heap chunks in use then (probes.heap_chunks)
        self.first_gpu_mib = None  # its GPU memory then (nvidia-smi), None without
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            text = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(text)
            if text.startswith("ready"):
                self.ready.set()
            elif text.startswith("verdict "):
                self.verdict = json.loads(text[len("verdict "):])
            else:
                if text.startswith("control"):
                    self.control = text
                print("[%s %d] %s" % (self.name, self.pid, text[:400]), flush=True)
        self.ready.set()
        # Said at once, with the time: a job that dies mid-soak (a DDP rank's
        # peer then waits in its collective) is the finding to look at.
        rc = self.p.wait()
        self.died_at = None if os.path.exists(os.path.join(self.cue, "end")) else time.time()
        if self.died_at:
            print("[%s %d] DIED at %s: %s; its stderr ends: %s" % (
                self.name, self.pid, time.strftime("%H:%M:%S"), exit_text(rc),
                open(os.path.join(self.cue, "stderr"), errors="replace").read()[-1500:]),
                flush=True)

    def after_clean(self, key, state):
        """The job's footprint after a clean detach (or between windows):
        the first one is the base that growth is measured from, taken as
        the end is (the job paused, its freed memory given back), so that
        the two compare."""
        with self.lock:
            first = self.first_clean is None
            if first:
                self.first_clean = {}  # being measured
        if first:
            trimmed = self.trimmed_state(chunks=True) or state
            with self.lock:
                self.first_clean = dict(trimmed, at=key)
                self.first_maps = probes.rss_by_mapping(self.pid)
        with self.lock:
            self.clean_rss.append(state["rss_kb"])

    def trimmed_state(self, chunks=False):
        """steady_state with the job paused: no session of its own running,
        gc run and malloc_trim'd (jobs.py does both on "pause"); with
        chunks, the malloc chunks in use in its main heap go to
        self.first_chunks (what is new at the end is told by size)."""
        def read(pid):
            state = probes.steady_state(pid)
            if state:
                state["malloc"] = self.malloc_totals()
                if chunks:
                    self.first_chunks = probes.heap_chunks(pid)
                    self.first_gpu_mib = probes.gpu_memory().get(pid)
            return state
        return self.paused(read)

    def paused(self, read):
        """read(pid) while the job is paused and quiet (None if it never
        got quiet); it runs again, its "quiet" gone, before this returns, so
        that the next reading cannot take this one's for a fresh one."""
        self.cue_file("pause", True)
        quiet = os.path.join(self.cue, "quiet")
        deadline = time.time() + 120
        while self.alive() and not os.path.exists(quiet) and time.time() < deadline:
            time.sleep(0.05)
        try:
            return read(self.pid) if os.path.exists(quiet) else None
        finally:
            self.cue_file("pause", False)
            while self.alive() and os.path.exists(quiet) and time.time() < deadline:
                time.sleep(0.05)

    def malloc_totals(self):
        """While paused: malloc's totals the job wrote ({"used": kB,
        "free": kB, "mmapped": kB}; {} where it cannot tell)."""
        try:
            words = open(os.path.join(self.cue, "quiet")).read().split()
        except OSError:
            return {}
        return {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}

    def alive(self):
        return self.p.poll() is None

    def cue_file(self, name, present):
        path = os.path.join(self.cue, name)
        if present and not os.path.exists(path):
            open(path, "w").close()
        elif not present and os.path.exists(path):
            os.unlink(path)

    def quiet(self):
        return os.path.exists(os.path.join(self.cue, "quiet"))


def job_plan(o, env):
    if o.jobs != "auto":
        plan = []
        for item in o.jobs.split(","):
            kind, _, n = item.partition(":")
            plan += [kind] * int(n or 1)
        return plan
    plan = ["mlp"] + (["graphs"] if o.device == "cuda" else []) + ["ddp"]
    return plan + (["ondemand"] if env["kineto"] else [])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_argv(o, kind, device, seed, cue):
    return [o.python, JOBS, kind, "--device", device, "--seed", str(seed), "--session-every",
            str(o.session_every), "--cue", cue]


def start_jobs(o, env, work):
    jobs, seen = [], {}
    for kind in filter(None, o.untraced.split(",")):
        if kind not in ("mlp", "graphs", "ondemand"):
            sys.exit("--untraced: %s: mlp, graphs or ondemand" % kind)
        name = kind + ".untraced"
        cue = os.path.join(work, "jobs", name)
        jobs.append(Job(name, job_argv(o, kind, o.device, o.seed, cue), cue,
                        dict(os.environ, PTBPF_SOAK_GROUP="-1")))
    for i, kind in enumerate(job_plan(o, env)):
        seen[kind] = seen.get(kind, 0) + 1
        name = kind + ("%d" % seen[kind] if seen[kind] > 1 else "")
        if kind == "graphs" and o.device != "cuda":
            sys.exit("graphs needs CUDA")
        group = dict(PTBPF_SOAK_GROUP=str(i % o.daemons))
        if kind != "ddp":
            cue = os.path.join(work, "jobs", name)
            jobs.append(Job(name, job_argv(o, kind, o.device, o.seed + i, cue), cue,
                            dict(os.environ, **group)))
            continue
        # NCCL on cuda:0 and cuda:1; with fewer GPUs, gloo on the CPU.
        nccl = o.device == "cuda" and env["gpus"] >= 2
        port = str(free_port())
        for rank in range(2):
            rname = "%s.r%d%s" % (name, rank, "" if nccl else ".gloo")
            cue = os.path.join(work, "jobs", rname)
            e = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **group)
            jobs.append(Job(rname, job_argv(o, kind, "cuda" if nccl else "cpu", o.seed + i, cue),
                            cue, e))
    for j in jobs:
        if not j.ready.wait(timeout=900) or not j.alive():
            for k in jobs:
                k.p.kill()
            sys.exit("job %s did not start: %s\n%s" % (j.name, "\n".join(j.lines[-5:]),
                                                       open(os.path.join(j.cue, "stderr")).read()[-3000:]))
    return jobs


def measure(o, jobs, label):
    """Each job's footprint and RecordFunction calls with its own profiler
    paused (its sessions register callbacks of their own), and the host's."""
    live = [j for j in jobs if j.alive()]
    for j in live:
        j.cue_file("pause", True)
    deadline = time.time() + 300
    while time.time() < deadline and not all(j.quiet() or not j.alive() for j in live):
        # A rank whose peer died waits in its collective until NCCL's
        # timeout (jobs.py sets 60 s) ends it: no longer than that.
        if any(not j.alive() for j in jobs):
            deadline = min(deadline, time.time() + 90)
        time.sleep(0.1)
    # Another user's ptbpf (--all, a daemon) may be tracing a job: wait for
    # it to leave (two minutes at most), or say so.
    deadline = time.time() + 120
    while True:
        foreign = {j.name: probes.foreign_tracer(j.pid) for j in live}
        foreign = {k: v for k, v in foreign.items() if v}
        if not foreign or time.time() > deadline:
            break
        time.sleep(1)
    out = dict(label=label, jobs={}, foreign=foreign)
    rf, why = (None, "skipped (--no-rf)") if o.no_rf else probes.record_function_calls(
        [j.pid for j in live])
    gpu = probes.gpu_memory()
    for j in live:
        out["jobs"][j.name] = dict(state=probes.steady_state(j.pid), rf_why=why,
                                   gpu_mib=gpu.get(j.pid),
                                   rf_calls=rf.get(j.pid) if rf else None, quiet=j.quiet(),
                                   breakpoints=probes.breakpoints(j.pid) if label == "end"
                                   else None,
                                   maps=probes.rss_by_mapping(j.pid), malloc=j.malloc_totals())
        if label == "end" and j.first_chunks and j.quiet():  # whose memory stayed, by size
            now = probes.heap_chunks(j.pid)
            out["jobs"][j.name]["chunks_grown"] = probes.chunks_grown(j.first_chunks, now, 4)
            out["jobs"][j.name]["cupti_devbuf_kb"] = sum(
                probes.cupti_devbufs_new(j.first_chunks, now)) // 1024
            out["jobs"][j.name]["new_chunks"] = probes.new_chunks_report(
                j.pid, j.first_chunks, now, top=4, samples=2)
    out["host"] = probes.host_state(o.ptbpf)
    for j in live:
        j.cue_file("pause", False)
    print("measured %s: %s" % (label, {k: (v["state"], v["rf_calls"])
                                       for k, v in out["jobs"].items()}), flush=True)
    return out


def settle_host(o, jobs, base, end):
    """BPF objects new since the start and held by no process may be a
    killed ptbpf's, still being released (an RCU grace period per uprobe
    link): wait up to two minutes for them to go."""
    pids = [j.pid for j in jobs]
    t0 = time.time()
    while time.time() < t0 + 120 and report.unheld_new_bpf(base["host"], end["host"], pids):
        time.sleep(1)
        end["host"] = probes.host_state(o.ptbpf)
    end["settle_s"] = round(time.time() - t0)
    print("host settled in %d s" % end["settle_s"], flush=True)


def end_jobs(jobs):
    for j in jobs:
        j.cue_file("end", True)
    t0 = time.time()
    deadline = t0 + 600
    for j in jobs:
        try:
            j.p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            j.p.kill()
            j.p.wait()
            j.killed_at_end = True
    print("jobs ended in %.1f s%s" % (time.time() - t0, "".join(
        "; %s killed" % j.name for j in jobs if getattr(j, "killed_at_end", False))), flush=True)
    time.sleep(0.5)  # the readers take the verdict lines


def soak(o, env, work):
    fleet = None
    jobs = start_jobs(o, env, work)
    try:
        base = measure(o, jobs, "before")
        fleet = drive.Fleet(o, [j for j in jobs if not j.untraced], work,
                            [j for j in jobs if j.untraced])
        began = time.time()
        for mode in o.modes:
            t0 = time.time()
            if mode == "cycles":
                drive.run_cycles(fleet)
            elif mode == "daemon":
                daemon_drive.run_daemon(fleet)
            elif mode == "none":
                time.sleep(o.max_seconds)
            print("mode %s done in %.0f s" % (mode, time.time() - t0), flush=True)
        cleanup = drive.final_cleanup(fleet)
        end = measure(o, jobs, "end")
        settle_host(o, jobs, base, end)
        seconds = time.time() - began
    finally:
        end_jobs(jobs)
    return report.Result(o, env, jobs, fleet, base, end, cleanup, seconds)


def main(argv=None):
    # SIGUSR1 (e.g. from `timeout -s USR1`): where every thread is, then on.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # Started in the background by a shell without job control, the soak
    # has SIGINT ignored, and so would every ptbpf it starts until ptbpf
    # installs its handler: a SIGINT in its first milliseconds was lost,
    # and ptbpf traced on (cycle 799 of the 2026-11-28 CPU soak).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    o = options(argv)
    if not os.path.exists(o.ptbpf):
        sys.exit("%s is missing: run `make all` first" % o.ptbpf)
    env = environment(o)
    work = os.path.abspath(o.work or tempfile.mkdtemp(prefix="ptbpf-soak-", dir="/tmp"))
    os.makedirs(work, exist_ok=True)
    # The soak tests one build: its own copy of ptbpf and of the agent
    # beside it (where ptbpf looks for it), so a rebuild meanwhile changes
    # nothing here.
    own = os.path.join(work, "bin")
    os.makedirs(own, exist_ok=True)
    for name in ("ptbpf", "libptbpf-agent.so"):
        shutil.copy2(os.path.join(os.path.dirname(o.ptbpf), name), own)
    o.ptbpf = os.path.join(own, "ptbpf")
    print("soak: %s, torch %s, %s (%s), ptbpf %s, modes %s, work %s" % (
        env["host"], env["torch"], o.device, ", ".join(env["names"]) or "no GPU", env["ptbpf"],
        "+".join(o.modes), work), flush=True)
    result = soak(o, env, work)
    summary = result.summary()
    text = result.markdown(summary)
    print(text, flush=True)
    for name, a in sorted(summary["accumulation"].items()):
        if a.get("new_chunks"):
            print("heap of %s since the first clean detach: %s" % (name, a["new_chunks"]))
    if o.json:
        with open(o.json, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True, default=str)
    if o.markdown:
        with open(o.markdown, "a") as f:
            f.write(text)
    failed = [c for c in summary["checks"] if not c["ok"]]
    for c in failed:
        print("FAILED: %s: %s" % (c["name"], c["detail"]), flush=True)
    print("soak: %s" % ("FAILED (%d checks)" % len(failed) if failed else "passed"), flush=True)
    if not o.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
