# SPDX-License-Identifier: BSD-2-Clause
"""Hand-made ptbpf traces (the repo's Perfetto schema subset, through the
protobuf runtime): tracks, slices with arguments and flows, instants,
counters, a clock snapshot and trace attributes, for tests of what the
offline tools do with data a recording does not (yet) have."""
import pftrace

MONOTONIC, REALTIME = 3, 1


class Synth:
    def __init__(self, realtime_offset=1_700_000_000_000_000_000):
        self.pb = pftrace.proto_module()
        self.trace = self.pb.Trace()
        self.next_uuid = 1
        snap = self._packet()
        snap.clock_snapshot.clocks.add(clock_id=MONOTONIC, timestamp=1_000)
        snap.clock_snapshot.clocks.add(clock_id=REALTIME, timestamp=1_000 + realtime_offset)

    def _packet(self, ts=None):
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = 1
        if ts is not None:
            p.timestamp = ts
        return p

    def _track(self, name=None, parent=None):
        p = self._packet(ts=1)
        d = p.track_descriptor
        d.uuid = self.next_uuid
        self.next_uuid += 1
        if name is not None:
            d.name = name
        if parent:
            d.parent_uuid = parent
        return d

    def process(self, pid, name, labels=()):
        d = self._track()
        d.process.pid = pid
        d.process.process_name = name
        d.process.process_labels.extend(labels)
        return d.uuid

    def thread(self, pid, tid, name):
        d = self._track()
        d.thread.pid = pid
        d.thread.tid = tid
        d.thread.thread_name = name
        return d.uuid

    def child(self, parent, name):
        return self._track(name, parent).uuid

    def counter(self, parent, name):
        d = self._track(name, parent)
        d.counter.SetInParent()
        return d.uuid

    def _args(self, ev, args):
        for k, v in (args or {}).items():
            a = ev.debug_annotations.add(name=k)
            if isinstance(v, bool):
                a.bool_value = v
            elif isinstance(v, int):
                if v < 0:
                    a.int_value = v
                else:
                    a.uint_value = v
            elif isinstance(v, float):
                a.double_value = v
            else:
                a.string_value = v

    def event(self, track, ts, kind, name=None, cat=None, args=None, flows=(), term=()):
        p = self._packet(ts)
        e = p.track_event
        e.type = kind
        e.track_uuid = track
        if name is not None:
            e.name = name
        if cat is not None:
            e.categories.append(cat)
        self._args(e, args)
        e.flow_ids.extend(flows)
        e.terminating_flow_ids.extend(term)
        return e

    def begin(self, track, ts, name, cat, args=None, flows=(), term=()):
        return self.event(track, ts, pftrace.TYPE_BEGIN, name, cat, args, flows, term)

    def end(self, track, ts, args=None, flows=()):
        return self.event(track, ts, pftrace.TYPE_END, args=args, flows=flows)

    def slice(self, track, ts, dur, name, cat, args=None, end_args=None, flows=(), term=(),
              end_flows=()):
        self.begin(track, ts, name, cat, args, flows, term)
        self.end(track, ts + dur, end_args, end_flows)

    def instant(self, track, ts, name, cat, args=None, flows=(), term=()):
        return self.event(track, ts, pftrace.TYPE_INSTANT, name, cat, args, flows, term)

    def count(self, track, ts, value):
        e = self.event(track, ts, pftrace.TYPE_COUNTER)
        e.counter_value = value

    def sched_bundle(self, cpu, rows, boot, lost_events=False):
        """A compact sched bundle of CPU cpu: rows of (ts, next pid, next
        comm, prev state), ts MONOTONIC, written BOOTTIME (+ boot)."""
        b = self._packet().ftrace_events
        b.cpu = cpu
        b.lost_events = lost_events
        c = b.compact_sched
        c.intern_table.extend(sorted({r[2] for r in rows}))
        last = 0
        for ts, pid, comm, state in rows:
            c.switch_timestamp.append(ts + boot - last)
            last = ts + boot
            c.switch_next_pid.append(pid)
            c.switch_prev_state.append(state)
            c.switch_next_prio.append(120)
            c.switch_next_comm_index.append(list(c.intern_table).index(comm))

    def attribute(self, key, value):
        p = self._packet()
        a = p.trace_attributes.attribute.add(key=key)
        if isinstance(value, str):
            a.string_value = value
        else:
            a.long_value = value

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.trace.SerializeToString())
        return str(path)
