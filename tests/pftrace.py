# SPDX-License-Identifier: BSD-2-Clause
"""Reads a .pftrace with the real protobuf runtime (python3-protobuf) and
the repo's schema subset, compiled by protoc at first use, and rebuilds what
trace_processor would: tracks, slices (BEGIN/END pairs), flows, counters,
and from the kernel view's compact sched bundles the CPUs' switches and
each thread's states (thread_states()), in MONOTONIC like the rest.
validate() lists every way a trace breaks the rules ptbpf promises."""
import collections
import importlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTO_DIR = os.path.join(ROOT, "user", "trace")
PROTO = "perfetto_trace.proto"
_module = None


def proto_module():
    global _module
    if _module is None:
        # Where protoc is not installed (the GPU machine), a module that
        # protoc generated elsewhere (make pb2) is used instead.
        out = os.environ.get("PTBPF_PB2_DIR")
        if not out:
            out = tempfile.mkdtemp(prefix="ptbpf-proto-")
            subprocess.run(["protoc", "-I", PROTO_DIR, "--python_out", out, PROTO], check=True)
        sys.path.insert(0, out)
        _module = importlib.import_module(PROTO.replace(".proto", "_pb2"))
    return _module


def protoc_decode(path):
    """protoc --decode against the repo's .proto: (returncode, text)."""
    with open(path, "rb") as f:
        r = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", PROTO_DIR, PROTO],
                           stdin=f, capture_output=True)
    return r.returncode, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def _flows(ev, terminating=False):
    """Flow ids in either form (fixed64, or the writer's short varint ones)."""
    if terminating:
        return list(ev.terminating_flow_ids) + list(ev.terminating_flow_ids_old)
    return list(ev.flow_ids) + list(ev.flow_ids_old)


Slice = collections.namedtuple("Slice", "track name category ts dur depth args flows_out flows_in")
Switch = collections.namedtuple("Switch", "ts cpu prev_state next_pid next_prio next_comm")
Waking = collections.namedtuple("Waking", "ts cpu pid target_cpu prio comm")
State = collections.namedtuple("State", "start end state cpu waker")

# prev_state bits (kernels 4.14+, as trace_processor reads them)
_STATE_LETTERS = [(0x1, "S"), (0x2, "D"), (0x4, "T"), (0x8, "t"), (0x10, "X"), (0x20, "Z"),
                  (0x40, "P"), (0x80, "I")]


def state_name(prev_state):
    if prev_state == 0 or prev_state & 0x100:
        return "R"
    return "".join(c for bit, c in _STATE_LETTERS if prev_state & bit) or "?"


def _thread_states(switches, wakings):
    events = [(s.ts, 0, s) for s in switches] + [(w.ts, 1, w) for w in wakings]
    events.sort(key=lambda e: (e[0], e[1]))
    on_cpu, states, open_ = {}, collections.defaultdict(list), {}

    def close(tid, ts):
        st = open_.pop(tid, None)
        if st is not None:
            states[tid].append(st._replace(end=ts))

    for ts, kind, e in events:
        if kind == 0:
            prev = on_cpu.get(e.cpu)
            on_cpu[e.cpu] = e.next_pid
            if prev is None:
                continue  # the CPU's first switch only says who runs
            if prev:
                close(prev, ts)
                open_[prev] = State(ts, None, state_name(e.prev_state), e.cpu, None)
            if e.next_pid:
                close(e.next_pid, ts)
                open_[e.next_pid] = State(ts, None, "Running", e.cpu, None)
        else:
            if e.cpu not in on_cpu:
                continue  # no switch on the waker's CPU yet: skipped, as trace_processor does
            cur = open_.get(e.pid)
            if cur is not None and cur.state in ("Running", "R"):
                continue  # a spurious wakeup
            close(e.pid, ts)
            open_[e.pid] = State(ts, None, "R", None, on_cpu[e.cpu])
    for tid, st in open_.items():
        states[tid].append(st)
    return dict(states)

TYPE_BEGIN, TYPE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4


def _annotation_value(a, strings=None):
    for field in ("bool_value", "uint_value", "int_value", "double_value", "string_value",
                  "pointer_value"):
        if a.HasField(field):
            return getattr(a, field)
    if a.HasField("string_value_iid") and strings is not None:
        return strings.get(a.string_value_iid)
    return None


Frame = collections.namedtuple("Frame", "name mapping rel_pc")
# frames: outermost first; Python frames (mapping "[python]") above native ones
Sample = collections.namedtuple("Sample", "ts cpu pid tid frames")


class Trace:
    def __init__(self, path):
        pb = proto_module()
        with open(path, "rb") as f:
            self.raw = f.read()
        self.trace = pb.Trace.FromString(self.raw)
        self.tracks = {}          # uuid -> TrackDescriptor
        self.slices = []          # closed slices
        self.instants = []
        self.counters = collections.defaultdict(list)  # uuid -> [(ts, value)]
        self.attrs = {}
        self.errors = []
        self.clock_snapshots = 0
        self.boot_minus_mono = None  # of the first snapshot with both clocks
        self.switches = []           # Switch tuples, in BOOTTIME until _build ends
        self.wakings = []            # Waking tuples
        self.lost_cpus = set()       # CPUs with a bundle marked lost_events
        self.system_info = None
        self.samples = []            # Sample tuples (perf samples), in order
        self._build()

    def _device_track(self, uuid):
        d = self.tracks.get(uuid)
        return d is not None and d.name.startswith("GPU ") and " / stream " in d.name

    def _intern(self, seq, table, iid):
        return self._interned[(seq, table)].get(iid)

    def _name(self, seq, ev):
        if ev.HasField("name_iid"):
            n = self._intern(seq, "event_names", ev.name_iid)
            if n is None:
                self.errors.append("event name iid %d not interned" % ev.name_iid)
            return n
        return ev.name if ev.HasField("name") else None

    def _args(self, seq, ev):
        out = {}
        for a in ev.debug_annotations:
            if a.HasField("name_iid"):
                name = self._intern(seq, "debug_annotation_names", a.name_iid)
                if name is None:
                    self.errors.append("annotation name iid %d not interned" % a.name_iid)
            else:
                name = a.name
            if a.HasField("string_value_iid") and \
               self._intern(seq, "debug_annotation_string_values", a.string_value_iid) is None:
                self.errors.append("string value iid %d not interned" % a.string_value_iid)
            out[name] = _annotation_value(
                a, self._interned[(seq, "debug_annotation_string_values")])
        return out

    def _sequence(self, p, seq):
        """Applies p's sequence defaults (track, clock) and incremental clock
        (as trace_processor does); p's timestamp in full and its default
        track."""
        st = self._seqs.setdefault(seq, {})
        if p.sequence_flags & 1:
            st.clear()
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            if d.HasField("timestamp_clock_id"):
                st["clock"] = d.timestamp_clock_id
            if d.HasField("track_event_defaults") and \
               d.track_event_defaults.HasField("track_uuid"):
                st["track"] = d.track_event_defaults.track_uuid
        if p.HasField("clock_snapshot"):
            incr = [c for c in p.clock_snapshot.clocks if c.is_incremental]
            mono = [c for c in p.clock_snapshot.clocks if c.clock_id == 3]
            if incr and mono:
                st["incr"], st["now"] = incr[0].clock_id, incr[0].timestamp
                st["mono"] = mono[0].timestamp - incr[0].timestamp
        ts = p.timestamp
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else st.get("clock", 0)
        if "incr" in st and clock == st["incr"]:
            st["now"] += ts
            ts = st["now"] + st["mono"]
        elif clock not in (0, 3) and p.HasField("track_event"):
            self.errors.append("track event in clock %d on sequence %d" % (clock, seq))
        return ts, st.get("track", 0)

    def _build(self):
        self._interned = collections.defaultdict(dict)
        self._seqs = {}
        stacks = collections.defaultdict(list)
        last_ts = {}
        seq_cleared = set()
        for p in self.trace.packet:
            seq = p.trusted_packet_sequence_id
            if p.sequence_flags & 1:
                seq_cleared.add(seq)
                for key in [k for k in self._interned if k[0] == seq]:
                    del self._interned[key]
            if p.HasField("interned_data"):
                d = p.interned_data
                for table in ("event_names", "event_categories", "debug_annotation_names"):
                    for e in getattr(d, table):
                        self._interned[(seq, table)][e.iid] = e.name
                for e in d.debug_annotation_string_values:
                    self._interned[(seq, "debug_annotation_string_values")][e.iid] = \
                        e.str.decode(errors="replace")
                self._intern_callstacks(seq, d)
            if p.HasField("track_descriptor"):
                self.tracks[p.track_descriptor.uuid] = p.track_descriptor
            if p.HasField("clock_snapshot"):
                self.clock_snapshots += 1
                clocks = {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks}
                if self.boot_minus_mono is None and 6 in clocks and 3 in clocks:
                    self.boot_minus_mono = clocks[6] - clocks[3]
            if p.HasField("ftrace_events"):
                self._bundle(p.ftrace_events)
            if p.HasField("system_info"):
                self.system_info = p.system_info
            if p.HasField("perf_sample"):
                self._sample(seq, p)
            if p.HasField("trace_attributes"):
                for a in p.trace_attributes.attribute:
                    self.attrs[a.key] = a.long_value if a.HasField("long_value") else a.string_value
            ts, default_track = self._sequence(p, seq)
            if not p.HasField("track_event"):
                continue
            if seq not in seq_cleared:
                self.errors.append("track event before its sequence was cleared")
            ev = p.track_event
            track = ev.track_uuid if ev.HasField("track_uuid") else default_track
            # GPU stream tracks get each slice as an adjacent BEGIN/END pair,
            # in the order the device's records arrive, which is not always
            # time order; trace_processor sorts them. What must hold there
            # is that slices never overlap (checked below).
            if ts < last_ts.get(track, 0) and not self._device_track(track):
                d = self.tracks.get(track)
                self.errors.append("timestamp goes back on track %d (%s): %d < %d (%s)" %
                                   (track, d and (d.name or d.thread.thread_name or
                                                  d.process.process_name),
                                    ts, last_ts[track], self._name(seq, ev) or ev.type))
            last_ts[track] = ts
            self._event(seq, ev, ts, track, stacks)
        for track, st in stacks.items():
            for b in st:
                self.errors.append("BEGIN without END on track %d: %s" % (track, b["name"]))
        device = collections.defaultdict(list)
        for s in self.slices:
            if self._device_track(s.track):
                device[s.track].append((s.ts, s.ts + s.dur, s.name))
        for track, spans in device.items():
            spans.sort()
            for a, b in zip(spans, spans[1:]):
                if b[0] < a[1]:
                    self.errors.append("overlapping slices on GPU track %d: %s, %s" %
                                       (track, a, b))
        for uuid in set(s.track for s in self.slices) | set(self.counters):
            if uuid not in self.tracks:
                self.errors.append("events on track %d, which has no descriptor" % uuid)
        for uuid, d in self.tracks.items():
            if d.HasField("parent_uuid") and d.parent_uuid not in self.tracks:
                self.errors.append("track %d has an undefined parent %d" % (uuid, d.parent_uuid))
        self._sched_to_mono()

    def _intern_callstacks(self, seq, d):
        for table in ("function_names", "mapping_paths"):
            for e in getattr(d, table):
                self._interned[(seq, table)][e.iid] = e.str.decode(errors="replace")
        for e in d.mappings:
            self._interned[(seq, "mappings")][e.iid] = "/".join(
                self._interned[(seq, "mapping_paths")].get(i, "?") for i in e.path_string_ids)
        for e in d.frames:
            self._interned[(seq, "frames")][e.iid] = (e.function_name_id, e.mapping_id, e.rel_pc)
        for e in d.callstacks:
            self._interned[(seq, "callstacks")][e.iid] = list(e.frame_ids)

    def _frame(self, seq, iid):
        """A Frame tuple for frame iid of sequence seq (errors where an iid
        is not interned: trace_processor would drop the sample's stack)."""
        f = self._intern(seq, "frames", iid)
        if f is None:
            self.errors.append("frame iid %d not interned" % iid)
            return Frame(None, "?", 0)
        name_iid, map_iid, rel_pc = f
        name = self._intern(seq, "function_names", name_iid) if name_iid else None
        mapping = self._intern(seq, "mappings", map_iid)
        if (name_iid and name is None) or mapping is None:
            self.errors.append("frame %d: function name %d or mapping %d not interned" %
                               (iid, name_iid, map_iid))
        return Frame(name, mapping or "?", rel_pc)

    def _sample(self, seq, p):
        """A perf sample: its frames, outermost first, as trace_processor
        builds its callsites."""
        s = p.perf_sample
        if p.timestamp_clock_id not in (0, 3):
            self.errors.append("perf sample in clock %d" % p.timestamp_clock_id)
        frames = []
        if s.HasField("callstack_iid"):
            ids = self._intern(seq, "callstacks", s.callstack_iid)
            if ids is None:
                self.errors.append("callstack iid %d not interned" % s.callstack_iid)
            frames = [self._frame(seq, i) for i in ids or []]
        self.samples.append(Sample(p.timestamp, s.cpu, s.pid, s.tid, frames))

    def _bundle(self, b):
        """A compact sched bundle: its switches and wakings (BOOTTIME)."""
        c = b.compact_sched
        names = list(c.intern_table)
        if b.lost_events:
            self.lost_cpus.add(b.cpu)
        for ts, (state, pid, prio, comm) in self._compact_rows("switch", (
                c.switch_timestamp, c.switch_prev_state, c.switch_next_pid,
                c.switch_next_prio, c.switch_next_comm_index)):
            self.switches.append(Switch(ts, b.cpu, state, pid, prio, names[comm]))
        for ts, (pid, tcpu, prio, comm) in self._compact_rows("waking", (
                c.waking_timestamp, c.waking_pid, c.waking_target_cpu, c.waking_prio,
                c.waking_comm_index)):
            self.wakings.append(Waking(ts, b.cpu, pid, tcpu, prio, names[comm]))

    def _compact_rows(self, what, cols):
        """A compact sched event's parallel arrays as rows, the first column
        (delta-encoded timestamps) summed into absolute times."""
        if len(set(map(len, cols))) > 1:
            self.errors.append("compact sched %s arrays of different lengths" % what)
        ts = 0
        for d, *rest in zip(*cols):
            ts = (ts + d) & (2**64 - 1)
            yield ts, rest

    def _sched_to_mono(self):
        """Bundles are BOOTTIME: moved to MONOTONIC (the first snapshot) and
        sorted by time, as trace_processor sorts them."""
        off = self.boot_minus_mono
        if (self.switches or self.wakings) and off is None:
            self.errors.append("scheduler bundles but no snapshot with BOOTTIME and MONOTONIC")
            off = 0
        self.switches = sorted((x._replace(ts=x.ts - off) for x in self.switches),
                               key=lambda x: x.ts)
        self.wakings = sorted((x._replace(ts=x.ts - off) for x in self.wakings),
                              key=lambda x: x.ts)

    def thread_states(self):
        """tid -> [State(start, end, state, cpu, waker)] as trace_processor's
        thread_state: a switch's previous task is the CPU's last next one
        (the first switch of a CPU only says who runs); a wakeup makes a
        sleeping thread Runnable, woken by the task the CPU runs. States are
        'Running', 'R' (runnable: woken or preempted), 'S', 'D', or the
        kernel's other letters; the last state of a thread has end None."""
        if not hasattr(self, "_states"):
            self._states = _thread_states(self.switches, self.wakings)
        return self._states

    def _event(self, seq, ev, ts, track, stacks):
        if ev.type == TYPE_BEGIN:
            cat = None
            if len(ev.category_iids):
                cat = self._intern(seq, "event_categories", ev.category_iids[0])
            elif len(ev.categories):
                cat = ev.categories[0]
            stacks[track].append(dict(name=self._name(seq, ev), cat=cat, ts=ts,
                                      args=self._args(seq, ev), flows_out=_flows(ev),
                                      flows_in=_flows(ev, True)))
        elif ev.type == TYPE_END:
            if ev.HasField("name_iid") or ev.HasField("name"):
                self.errors.append("END event carries a name")
            st = stacks[track]
            if not st:
                self.errors.append("END without BEGIN on track %d" % track)
                return
            b = st.pop()
            b["args"].update(self._args(seq, ev))
            self.slices.append(Slice(track, b["name"], b["cat"], b["ts"], ts - b["ts"], len(st),
                                     b["args"], b["flows_out"] + _flows(ev),
                                     b["flows_in"] + _flows(ev, True)))
        elif ev.type == TYPE_INSTANT:
            self.instants.append(Slice(track, self._name(seq, ev), None, ts, 0,
                                       len(stacks[track]), self._args(seq, ev),
                                       _flows(ev), _flows(ev, True)))
        elif ev.type == TYPE_COUNTER:
            if track not in self.tracks or not self.tracks[track].HasField("counter"):
                self.errors.append("COUNTER on a non-counter track %d" % track)
            self.counters[track].append((ts, ev.counter_value))

    # Queries -------------------------------------------------------------
    def thread_tracks(self):
        return {u: d for u, d in self.tracks.items() if d.HasField("thread")}

    def process_tracks(self):
        return {u: d for u, d in self.tracks.items() if d.HasField("process")}

    def _owner(self, uuid):
        """The thread or process descriptor a track is or lies under; None."""
        while uuid in self.tracks:
            d = self.tracks[uuid]
            if d.HasField("thread") or d.HasField("process"):
                return d
            if not d.HasField("parent_uuid"):
                return None
            uuid = d.parent_uuid
        return None

    def tid_of(self, uuid):
        """The tid of the thread a track is (or lies under); None if none."""
        d = self._owner(uuid)
        return d.thread.tid if d is not None and d.HasField("thread") else None

    def pid_of(self, uuid):
        """The pid a track belongs to: a thread's, or (GPU stream tracks and
        other children of a process track) its process's; None if neither."""
        d = self._owner(uuid)
        if d is None:
            return None
        return d.thread.pid if d.HasField("thread") else d.process.pid

    def counter_by_name(self, name):
        for u, d in self.tracks.items():
            if d.name == name and d.HasField("counter"):
                return self.counters.get(u, [])
        return None

    def ancestors(self):
        """For each slice (by index), the indices of the slices enclosing it
        on its track, outermost first."""
        out = {}
        by_track = collections.defaultdict(list)
        for i, sl in enumerate(self.slices):
            by_track[sl.track].append(i)
        for idx in by_track.values():
            idx.sort(key=lambda i: (self.slices[i].ts, -self.slices[i].dur,
                                    self.slices[i].depth))
            stack = []
            for i in idx:
                sl = self.slices[i]
                while stack:
                    top = self.slices[stack[-1]]
                    if top.ts <= sl.ts and sl.ts + sl.dur <= top.ts + top.dur:
                        break
                    stack.pop()
                out[i] = list(stack)
                stack.append(i)
        return out

    def op_counts(self, category="cpu_op"):
        c = collections.Counter()
        for s in self.slices:
            if s.category == category:
                c[s.name] += 1
        return c

    def validate(self):
        problems = list(self.errors)
        if self.clock_snapshots == 0:
            problems.append("no ClockSnapshot")
        for s in self.slices:
            if s.dur < 0:
                problems.append("negative duration: %s" % (s,))
        return problems
