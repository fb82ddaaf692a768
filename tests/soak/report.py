# SPDX-License-Identifier: BSD-2-Clause
"""The soak's figures and checks (JSON) and its Markdown section for the
benchmark journal (docs/benchmarks-history.md)."""
import collections
import datetime
import re
import statistics

import classify
import probes


def tenths(values):
    """Medians of the first and last tenth and their ratio (from 10 values;
    judged from 50: on a busy host a few runs' times are noise)."""
    values = [v for v in values if v is not None]
    if len(values) < 10:
        return dict(n=len(values), first=None, last=None, ratio=None, judged=False)
    k = len(values) // 10
    first, last = statistics.median(values[:k]), statistics.median(values[-k:])
    return dict(n=len(values), first=round(first, 1), last=round(last, 1),
                ratio=round(last / first, 2) if first else None, judged=len(values) >= 50)


def worst_tenths(records, key):
    """tenths() of each daemon's own windows (each owns other jobs, so
    other sizes), the one that grew most."""
    groups = sorted({r["group"] for r in records})
    per = [tenths([r[key] for r in records if r["group"] == g]) for g in groups] or [tenths([])]
    return max(per, key=lambda t: (t["ratio"] is not None, t["ratio"] or 0))


def unheld_new_bpf(base, end, pids):
    """BPF objects that appeared since the start and no process holds (but
    for links that probe a process other than the jobs: another user's)."""
    out = []
    for kind, ids in end["bpf"].items():
        for i in sorted(ids - base["bpf"].get(kind, set())):
            probed = end["link_pids"].get(i) if kind == "link" else None
            if (kind, i) not in end["holders"] and (probed is None or probed in pids):
                out.append("%s %d" % (kind, i))
    return out


def held_by(host, pids):
    return ["%s %d (pid %s)" % (k, i, sorted(p & set(pids))) for (k, i), p in
            sorted(host["holders"].items()) if p & set(pids)]


def top(lines, n=12):
    return collections.Counter(classify.normalize(t) for t in lines).most_common(n)


class Result:
    def __init__(self, o, env, jobs, fleet, base, end, cleanup, seconds):
        self.o, self.env, self.jobs, self.fleet = o, env, jobs, fleet
        self.base, self.end, self.cleanup, self.seconds = base, end, cleanup, seconds
        self.checks = []

    def check(self, name, ok, detail):
        self.checks.append(dict(name=name, ok=bool(ok), detail=detail))

    def summary(self):
        s = dict(date=datetime.datetime.now().isoformat(timespec="seconds"), machine=self.env,
                 modes=self.o.modes, seconds=round(self.seconds),
                 options={k: v for k, v in vars(self.o).items() if k not in ("modes",)})
        s["cycles"] = self.cycle_figures()
        s["daemon"] = self.daemon_figures()
        s["jobs"] = self.job_figures()
        s["messages"] = self.message_figures()
        s["accumulation"] = self.accumulation()
        s["host"] = self.host_figures()
        s["unreadable_traces"] = self.fleet.unreadable
        s["final_cleanup_cycles"] = self.cleanup
        s["checks"] = self.checks
        s["records"] = dict(
            cycles=[{k: r.get(k) for k in ("n", "job", "pid", "action", "dur", "use_d", "rc",
                                            "outcome", "wall_ms", "attach_ms", "bpf_ms",
                                            "trace_bytes", "agent_before", "agent_after",
                                            "signals", "false", "rss_kb", "agent_buffers")}
                    for r in self.fleet.cycles],
            windows=[{k: w.get(k) for k in ("run", "path", "state", "size", "bytes_per_event",
                                             "gpu_paused", "ended_early",
                                             "wall_ms", "attach_line_ms", "false", "agent_buffers")}
                     for w in self.fleet.windows])
        return s

    def cycle_figures(self):
        recs = [r for r in self.fleet.cycles if not r.get("final_cleanup")]
        ok = [r for r in recs if r["outcome"] == "ok"]
        f = dict(total=len(recs), requested=self.o.cycles,
                 outcomes=collections.Counter(re.sub(r":.*", "", r["outcome"]) for r in recs),
                 explained=collections.Counter(r["outcome"] for r in recs
                                               if r["outcome"].startswith("explained")),
                 actions=collections.Counter(r["action"] for r in recs),
                 attach_wall_ms=tenths([r["wall_ms"] for r in ok]),
                 attach_line_ms=tenths([r["attach_ms"] for r in ok]),
                 bpf_load_ms=tenths([r["bpf_ms"] for r in ok]),
                 agent_left=[r["n"] for r in self.fleet.cycles if r["agent_left"]],
                 traced_by_others=[r["foreign"] for r in self.fleet.cycles if r.get("foreign")])
        f["agent_left_since"] = self.agent_left_since()
        f["rss_steps"] = self.rss_steps()
        f["agent_buffers"] = {job: {k: sum(r.get("agent_buffers", {}).get(k, 0)
                                           for r in recs if r["job"] == job)
                                    for k in classify.BUFFER_KEYS}
                              for job in sorted({r["job"] for r in recs})}
        if "cycles" in self.o.modes:
            self.check("cycles done", len(recs) >= self.o.cycles,
                       "%d of %d" % (len(recs), self.o.cycles))
            self.flat("attach time (cycles, ms to 'tracing pid')", f["attach_wall_ms"])
            self.flat("attach time (cycles, the -v 'attach:' line's parts)", f["attach_line_ms"])
        self.check("agent unloaded after every clean detach", not f["agent_left"],
                   "mapped after cycles %s; %s" % (f["agent_left"][:20],
                                                   "; ".join(f["agent_left_since"])))
        return f

    def rss_steps(self):
        """A job's RSS from one clean detach to its next, by what ran on it
        in between ("clean": nothing else; else the actions of the runs
        that did not end cleanly): {what: [mean kB, how many]}. The RSS is
        not trimmed, so one step is noise; a mean over many is not."""
        steps = collections.defaultdict(list)
        for job in {r["job"] for r in self.fleet.cycles}:
            prev, between = None, set()
            for r in sorted((r for r in self.fleet.cycles if r["job"] == job),
                            key=lambda r: r["n"]):
                if r.get("rss_kb") is None:
                    between.add(r["action"])
                    continue
                if prev is not None:
                    steps["+".join(sorted(between)) or "clean"].append(r["rss_kb"] - prev)
                prev, between = r["rss_kb"], set()
        return {k: [round(statistics.mean(v), 1), len(v)] for k, v in sorted(steps.items())}

    def agent_left_since(self):
        """For each job that kept an agent through a clean cycle: the run
        before the first such cycle, which left it."""
        out = []
        for job in sorted({r["job"] for r in self.fleet.cycles if r["agent_left"]}):
            mine = sorted((r for r in self.fleet.cycles if r["job"] == job), key=lambda r: r["n"])
            first = next(i for i, r in enumerate(mine) if r["agent_left"])
            if first:
                p = mine[first - 1]
                out.append("%s: since cycle %d (%s, %s, rc %s; its last line: %s)" % (
                    job, p["n"], p["action"], ", ".join(p["signals"]) or "-", p["rc"],
                    p["last_line"]))
        return out

    def daemon_figures(self):
        wins = self.fleet.windows
        runs = self.fleet.daemons
        written = [w for w in wins if w["state"] == "written"]
        full = [w for w in written if not w["ended_early"]]
        bw = self.fleet.between_windows
        f = dict(runs=len(runs), requested=self.o.windows,
                 run_outcomes=collections.Counter(getattr(r, "outcome", "?") for r in runs),
                 windows=len(wins), written=len(written),
                 states=collections.Counter(re.sub(r":.*", "", w["state"]) for w in wins),
                 ended_early=collections.Counter(w["ended_early"] for w in written
                                                 if w["ended_early"]),
                 daemons_at_once=self.o.daemons,
                 size_bytes=worst_tenths(full, "size"),
                 bytes_per_event=worst_tenths([w for w in full if not w["gpu_paused"]],
                                              "bytes_per_event"),
                 attach_wall_ms=worst_tenths(wins, "wall_ms"),
                 attach_line_ms=worst_tenths(wins, "attach_line_ms"),
                 between_windows=dict(checked=bw["checked"], agent_mapped=bw["agent_mapped"],
                                      skipped=bw["skipped"],
                                      traced_by_others=bw.get("foreign", [])))
        if "daemon" in self.o.modes:
            self.check("daemon windows written", len(written) >= self.o.windows,
                       "%d of %d" % (len(written), self.o.windows))
            # A window's size follows what its jobs did in it (on the H200,
            # 2026-11-29, one daemon's windows were 0.5-0.9 MB or 2.3-3.9
            # MB, and their tenths' medians x2.05 apart): judged is what
            # the trace spends per event it records, which grows with
            # state carried over from earlier windows and not with the
            # job; in windows where the GPU timeline ran throughout, since
            # kernel records are larger than the rest (the graphs job's
            # windows: 60 or 29 bytes per event).
            self.flat("bytes per recorded event (daemon, full windows, GPU timeline not paused)",
                      f["bytes_per_event"])
            # Judged by ptbpf's own -v 'attach:' parts: the time from the
            # window's line to the 'tracing pid' line is when the soak read
            # them, and it reads late on a loaded host (on the H200,
            # 2026-11-29, the first windows' two lines were read 0.05 ms
            # apart, and their attach "grew" x6447 by the last tenth).
            self.flat("attach time (daemon, the -v 'attach:' line's parts, slowest job)",
                      f["attach_line_ms"])
            self.check("no agent mapped between daemon windows", not bw["agent_mapped"],
                       "; ".join(bw["agent_mapped"][:5]))
        return f

    def flat(self, what, t):
        if not t["judged"] or t["ratio"] is None:
            self.check("flat: " + what, True, "too few values to judge (%d)" % t["n"])
        else:
            self.check("flat: " + what, t["ratio"] <= self.o.flat_factor,
                       "first tenth %s, last tenth %s: x%s (at most x%s)" % (
                           t["first"], t["last"], t["ratio"], self.o.flat_factor))

    def job_figures(self):
        out = []
        for j in self.jobs:
            v = j.verdict or {}
            harmed = (not v or v.get("harmed") or j.p.returncode != 0 or
                      getattr(j, "killed_at_end", False))
            out.append(dict(name=j.name, pid=j.pid, exit=j.p.returncode, harmed=bool(harmed),
                            verdict=v, control=j.control,
                            messages=[l for l in j.lines if l.startswith(("session", "epoch"))][:20]))
        harmed = [j["name"] for j in out if j["harmed"]]
        self.check("no job harmed (results, profiler, exit)", not harmed, ", ".join(harmed))
        unstable = [j["name"] for j in out if j["verdict"].get("control_unstable")]
        self.check("every job's control sessions agree", not unstable, ", ".join(unstable))
        diff = sum(j["verdict"].get("sessions_differing", 0) for j in out)
        exc = sum(j["verdict"].get("profiler_exceptions", 0) for j in out)
        self.check("profiler sessions equal to the control", diff == 0 and exc == 0,
                   "%d differing, %d exceptions" % (diff, exc))
        return out

    def message_figures(self):
        false, unexplained, warn, uncl = [], [], [], []
        for r in self.fleet.cycles:
            false += ["cycle %d (%s): %s" % (r["n"], r["job"], x) for x in r["false"]]
            if r["outcome"].startswith(("unexplained", "hung")):
                unexplained.append("cycle %d (%s, %s): %s" % (r["n"], r["job"], r["action"],
                                                               r["outcome"]))
            warn += r["warnings"]
            uncl += r["unclassified"]
        for i, run in enumerate(self.fleet.daemons):
            false += ["daemon run %d: %s" % (i, x) for x in getattr(run, "false", [])]
            if run.outcome.startswith(("unexplained", "hung")):
                unexplained.append("daemon run %d: %s" % (i, run.outcome))
        for w in self.fleet.windows:
            false += ["window %s: %s" % (w["path"].rsplit("/", 1)[-1], x) for x in w["false"]]
            if w["state"].startswith(("unexplained", "hung")):
                unexplained.append("window %s: %s" % (w["path"].rsplit("/", 1)[-1], w["state"]))
            warn += w["warnings"]
            uncl += w["unclassified"]
        others = ["window %s: %s" % (w["path"].rsplit("/", 1)[-1], x) for w in self.fleet.windows
                  for x in w.get("false_others", [])]
        self.check("no false messages", not false, "; ".join(false[:10]))
        self.check("every run succeeded, was killed by the soak, or failed with a known "
                   "reason", not unexplained, "; ".join(unexplained[:10]))
        self.check("untraced jobs never traced", not self.fleet.untraced_traced,
                   "; ".join(self.fleet.untraced_traced[:5]))
        self.check("every trace sampled is readable", not self.fleet.unreadable,
                   "; ".join(self.fleet.unreadable[:5]))
        return dict(false=false, unexplained=unexplained, warnings=top(warn),
                    unclassified=top(uncl), false_about_other_processes=others)

    def accumulation(self):
        """Each job's footprint at the end against before the first run and
        after the first clean detach; and its RSS after every clean detach,
        first tenth against last (median kB and how many), where a leak per
        cycle shows as a slope that start-up costs do not have."""
        o, out = self.o, {}
        for label, m in (("before", self.base), ("end", self.end)):
            self.check("jobs measured %s without another user's ptbpf on them" % label,
                       not m.get("foreign"), m.get("foreign"))
        for j in self.jobs:
            b = self.base["jobs"].get(j.name)
            e = self.end["jobs"].get(j.name)
            if not b or not e or not b["state"] or not e["state"]:
                self.check("job %s measured" % j.name, False, "gone before the end")
                continue
            b, e, first = b["state"], e["state"], j.first_clean or None
            d = {k: e[k] - b[k] for k in b}
            g = {k: e[k] - first[k] for k in b} if first else {}
            out[j.name] = dict(before=b, first_clean=first, end=e, delta=d, growth=g,
                               rss_tenths=tenths(j.clean_rss),
                               malloc_grew={k: v - first["malloc"][k] for k, v in
                                            self.end["jobs"][j.name].get("malloc", {}).items()
                                            if k in first.get("malloc", {})} if first else {},
                               chunks_grown=self.end["jobs"][j.name].get("chunks_grown"),
                               new_chunks=self.end["jobs"][j.name].get("new_chunks"),
                               cupti_devbuf_kb=self.end["jobs"][j.name].get("cupti_devbuf_kb", 0),
                               gpu_mib=(self.base["jobs"][j.name].get("gpu_mib"), j.first_gpu_mib,
                                        self.end["jobs"][j.name].get("gpu_mib")),
                               rss_grew_in=probes.rss_growth_by_mapping(
                                   j.first_maps, self.end["jobs"][j.name].get("maps", {})),
                               rf_before=self.base["jobs"][j.name]["rf_calls"],
                               rf_end=self.end["jobs"][j.name]["rf_calls"],
                               rf_why=self.end["jobs"][j.name]["rf_why"],
                               breakpoints=(self.base["jobs"][j.name].get("breakpoints"),
                                            self.end["jobs"][j.name].get("breakpoints")))
            bad = []
            if d["rss_kb"] > o.rss_slack_mb * 1024:
                bad.append("RSS +%.1f MB" % (d["rss_kb"] / 1024))
            # CUPTI's copies of its device buffers are CUPTI's own residue
            # (it keeps new ones at every switch-off, with or without ptbpf):
            # told apart, in their own row.
            cupti = out[j.name]["cupti_devbuf_kb"]
            if g and g["rss_kb"] - cupti > o.rss_growth_mb * 1024:
                bad.append("RSS +%.1f MB after the first detach (less CUPTI's device-buffer "
                           "copies, %.1f MB)" % ((g["rss_kb"] - cupti) / 1024, cupti / 1024))
            used = out[j.name]["malloc_grew"].get("used")
            if used is not None and used - cupti > o.malloc_growth_mb * 1024:
                bad.append("malloc's chunks in use +%.1f MB after the first detach (less CUPTI's "
                           "device-buffer copies, %.1f MB)" % ((used - cupti) / 1024,
                                                                cupti / 1024))
            if d["threads"] > o.threads_slack:
                bad.append("threads %+d" % d["threads"])
            if d["maps"] > o.maps_slack:
                bad.append("mappings %+d" % d["maps"])
            if g and g["maps"] > o.maps_growth:
                bad.append("mappings %+d after the first detach" % g["maps"])
            if g and g.get("anon_rw_kb", 0) > o.anon_growth_mb * 1024:
                bad.append("anonymous read-write mappings +%.1f MB after the first detach" %
                           (g["anon_rw_kb"] / 1024))
            if d["fds"] > o.fds_slack:
                bad.append("fds %+d" % d["fds"])
            if e["agent_maps"]:
                bad.append("%d agent mappings" % e["agent_maps"])
            left = out[j.name]["breakpoints"][1]
            if left:
                bad.append("%d probe breakpoints left in its text" % left)
            rb, re_ = out[j.name]["rf_before"], out[j.name]["rf_end"]
            if rb is not None and re_ is not None and re_ > (0 if rb == 0 else rb * 1.5 + 10):
                bad.append("RecordFunction calls/s %d -> %d" % (rb, re_))
            self.check("nothing accumulated in %s" % j.name, not bad, ", ".join(bad) or
                       "RSS %+.1f MB, threads %+d, mappings %+d, fds %+d, agent mappings %d, "
                       "probe breakpoints %s, RecordFunction calls/s %s -> %s" % (
                           d["rss_kb"] / 1024, d["threads"], d["maps"], d["fds"],
                           e["agent_maps"], out[j.name]["breakpoints"][1], rb,
                           re_ if re_ is not None else
                           out[j.name]["rf_why"]))
        return out

    def host_figures(self):
        b, e = self.base["host"], self.end["host"]
        pids = [j.pid for j in self.jobs]
        new_shm = sorted(e["shm"] - b["shm"])
        ours = [n for n in new_shm if "ptbpf" in n or "agent" in n or
                any(str(p) in n for p in pids)]
        f = dict(shm_new=new_shm, shm_new_ours=ours, bpf_unheld_new=unheld_new_bpf(b, e, pids),
                 bpf_settle_s=self.end.get("settle_s"),
                 bpf_held_by_jobs=held_by(e, pids),
                 bpf_counts={k: (len(b["bpf"][k]), len(e["bpf"][k])) for k in e["bpf"]},
                 ptbpf_left=e["ptbpf"])
        self.check("host: no /dev/shm entry left by ptbpf or the jobs", not ours, ours[:5])
        self.check("host: no BPF object held by a job", not f["bpf_held_by_jobs"],
                   f["bpf_held_by_jobs"][:5])
        self.check("host: no new BPF object left unheld", not f["bpf_unheld_new"],
                   f["bpf_unheld_new"][:10])
        self.check("host: no ptbpf process left", not e["ptbpf"], e["ptbpf"])
        return f

    def markdown(self, s):
        return markdown(s)


def fmt_tenths(t, unit=""):
    if t["ratio"] is None:
        return "%d values (too few for tenths)" % t["n"]
    return "%s%s -> %s%s (x%s, %d values%s)" % (t["first"], unit, t["last"], unit, t["ratio"],
                                               t["n"], "" if t["judged"] else ", not judged")


def counter(c):
    return ", ".join("%s %d" % (k, n) for k, n in sorted(c.items(), key=lambda x: -x[1])) or "-"


def markdown(s):
    m, o, c, d = s["machine"], s["options"], s["cycles"], s["daemon"]
    jobs = s["jobs"]
    sessions = sum(j["verdict"].get("sessions", 0) for j in jobs)
    differing = sum(j["verdict"].get("sessions_differing", 0) for j in jobs)
    epochs = sum(j["verdict"].get("epochs", 0) for j in jobs)
    mism = sum(j["verdict"].get("checksum_mismatches", 0) for j in jobs)
    failed = [x for x in s["checks"] if not x["ok"]]
    gpus = ", ".join(m["names"]) or "no GPU"
    out = ["", "### Soak (%s): %s, %s" % ("+".join(s["modes"]), m["host"], s["date"][:10]), "",
           "%s, %d CPUs, %d GB, %s; kernel %s; torch %s (%s); %s. %d s, kill fraction %s, "
           "jobs' own profiler every %s s on average." % (
               m["cpu"], m["cpus"], m["mem_gb"], gpus, m["kernel"], m["torch"], o["device"],
               m["ptbpf"], s["seconds"], o["kill_fraction"], o["session_every"]), "",
           "| | |", "|---|---|"]
    row = lambda k, v: out.append("| %s | %s |" % (k, v))
    if "cycles" in s["modes"]:
        row("attach/detach cycles", "%d of %d: %s; actions %s" % (
            c["total"], c["requested"], counter(c["outcomes"]), counter(c["actions"])))
        row("explained failures", counter(c["explained"]))
        row("attach, ms to 'tracing pid' (first -> last tenth)", fmt_tenths(c["attach_wall_ms"]))
        row("attach, -v 'attach:' parts (first -> last tenth)", fmt_tenths(c["attach_line_ms"]))
    if "daemon" in s["modes"]:
        row("daemon windows", "%d written of %d asked (%s), %d daemon runs (%s; %d at once, "
            "each over its own jobs); ended early: %s"
            % (d["written"], d["requested"], counter(d["states"]), d["runs"],
               counter(d["run_outcomes"]), d.get("daemons_at_once", 1), counter(d["ended_early"])))
        row("window size, bytes (first -> last tenth)", fmt_tenths(d["size_bytes"]))
        if "bytes_per_event" in d:
            row("window bytes per recorded event, GPU timeline not paused (first -> last tenth)",
                fmt_tenths(d["bytes_per_event"]))
        row("window attach, ms to 'tracing pid' as read (first -> last tenth)",
            fmt_tenths(d["attach_wall_ms"]))
        if "attach_line_ms" in d:
            row("window attach, -v 'attach:' parts (first -> last tenth)",
                fmt_tenths(d["attach_line_ms"]))
        bw = d["between_windows"]
        row("between windows", "%d checks, agent mapped in %d; not checked: %s" % (
            bw["checked"], len(bw["agent_mapped"]), counter(bw.get("skipped", {}))))
    others = c["traced_by_others"] + d["between_windows"]["traced_by_others"]
    if others:
        row("jobs found traced by a ptbpf not the soak's (not counted)", "%d times, e.g. %s" % (
            len(others), others[0]))
    row("jobs harmed", "%d of %d (%s)" % (sum(j["harmed"] for j in jobs), len(jobs),
                                         ", ".join(j["name"] for j in jobs)))
    row("epochs checked / checksum mismatches", "%d / %d" % (epochs, mism))
    row("profiler sessions compared / differing", "%d / %d" % (sessions, differing))
    unavailable = [j["verdict"].get("unavailable") for j in jobs if j["verdict"].get("unavailable")]
    if unavailable:
        row("Kineto on demand", "not run: " + unavailable[0])
    steps = s["cycles"].get("rss_steps")
    if steps:
        row("RSS from one clean detach to the next, by what ran between (mean, how many)",
            ", ".join("%s %+.0f kB (%d)" % (k, v[0], v[1]) for k, v in steps.items()))
    bufs = dict(s["cycles"].get("agent_buffers", {}))
    wins = [w.get("agent_buffers") or {} for w in s["records"]["windows"]]
    if wins:
        bufs["daemon windows"] = {k: sum(w.get(k, 0) for w in wins) for k in classify.BUFFER_KEYS}
    if any(any(b.values()) for b in bufs.values()):
        row("the agent's CUPTI buffers at switch-off (copied to the job's profiler / anchors "
            "left with it, 4 MiB each that Kineto never frees / its own still with CUPTI)",
            ", ".join("%s %d/%d/%d" % (k, b["copied"], b["left"], b["still_with_cupti"])
                      for k, b in sorted(bufs.items()) if any(b.values())))
    row("false messages", len(s["messages"]["false"]))
    row("unexplained runs", len(s["messages"]["unexplained"]))
    for name, a in sorted(s["accumulation"].items()):
        dl = a["delta"]
        row("accumulated in %s" % name, "RSS %+.1f MB (%+.1f MB after the first detach), "
            "threads %+d, mappings %+d (%+d after the first detach; anonymous read-write "
            "ones apart, %+.1f MB of those after it), fds %+d, agent mappings "
            "%d, probe breakpoints %s, RecordFunction calls/s %s -> %s" % (
                dl["rss_kb"] / 1024, a["growth"].get("rss_kb", 0) / 1024, dl["threads"],
                dl["maps"], a["growth"].get("maps", 0), a["growth"].get("anon_rw_kb", 0) / 1024,
                dl["fds"], a["end"]["agent_maps"], a.get("breakpoints", (None, None))[1],
                a["rf_before"],
                a["rf_end"] if a["rf_end"] is not None else a["rf_why"]))
    h = s["host"]
    for name, a in sorted(s["accumulation"].items()):
        t = a.get("rss_tenths")
        if t and t["first"] is not None:
            row("RSS after each detach in %s (first -> last tenth, median)" % name,
                "%.1f -> %.1f MB (%+.1f MB over %d detaches)" % (
                    t["first"] / 1024, t["last"] / 1024, (t["last"] - t["first"]) / 1024, t["n"]))
        if any(x is not None for x in a.get("gpu_mib", ())):
            row("GPU memory of %s (nvidia-smi, MiB): before, after the first detach, end" % name,
                " / ".join("-" if x is None else str(x) for x in a["gpu_mib"]))
        if a.get("malloc_grew"):
            row("malloc's totals since the first detach in %s" % name, ", ".join(
                "%s %+.1f MB" % (k, kb / 1024) for k, kb in sorted(a["malloc_grew"].items())))
        if a.get("chunks_grown"):
            row("malloc chunks in use grown since the first detach in %s" % name, ", ".join(
                "%d B x%+d (%.1f MB)" % (sz, n, sz * n / 2**20) for n, sz in a["chunks_grown"]))
            row("CUPTI's copies of its device buffers new since the first detach in %s "
                "(%s B chunks; CUPTI's own residue, tests/bench/cupti_rss.py)" % (
                    name, " and ".join(str(x) for x in probes.CUPTI_DEVBUF_CHUNKS)),
                "%.1f MB" % (a.get("cupti_devbuf_kb", 0) / 1024))
        if a.get("rss_grew_in"):
            row("RSS grown since the first detach in %s, by mapping" % name, ", ".join(
                "%s %+.1f MB" % (k, kb / 1024) for kb, k in a["rss_grew_in"]))
    row("host afterwards", "/dev/shm new %d (ptbpf's %d), BPF objects new and unheld %d, held "
        "by jobs %d, ptbpf processes %d" % (len(h["shm_new"]), len(h["shm_new_ours"]),
                                            len(h["bpf_unheld_new"]), len(h["bpf_held_by_jobs"]),
                                            len(h["ptbpf_left"])))
    row("result", "passed" if not failed else "FAILED: " + "; ".join(
        "%s (%s)" % (x["name"], str(x["detail"])[:200]) for x in failed))
    if s["messages"]["false"]:
        where = re.compile(r"^(cycle \d+ \([^)]*\)|window \S+|daemon run \d+): ")
        kinds = collections.Counter(classify.normalize(where.sub("", x))
                                    for x in s["messages"]["false"])
        out += ["", "False messages by kind:", ""]
        out += ["    %5d  %s" % (n, t) for t, n in kinds.most_common(10)]
    for kind, title in (("false", "False messages"), ("unexplained", "Unexplained runs"),
                        ("false_about_other_processes", "False messages about processes "
                         "other than the soak's (not counted)"),
                        ("unclassified", "Lines not classified")):
        if s["messages"][kind]:
            out += ["", "%s:" % title, ""]
            out += ["    " + str(x)[:300] for x in s["messages"][kind][:15]]
    if s["messages"]["warnings"]:
        out += ["", "Warnings ptbpf printed (by kind):", ""]
        out += ["    %5d  %s" % (n, t) for t, n in s["messages"]["warnings"]]
    return "\n".join(out) + "\n"
