# SPDX-License-Identifier: BSD-2-Clause
"""A long capture with a short one's mix: the ring records of a --raw
capture repeated N times, each copy moved later in time (the GPU records'
device times too), for a trace's steady-state bytes per event:

  python3 tests/bench/rawrepeat.py tests/data/gpu/agent_mlp.raw /tmp/x20.raw 20
  build/ptbpf replay /tmp/x20.raw -o /tmp/x20.pftrace
  python3 tests/bench/tracestat.py /tmp/x20.pftrace"""
import struct
import sys

MAGIC = b"PTBPFRAW1\n"
EV_AGENT_RECORD = 14      # include/ptbpf_events.h
AGENT_TIMES = (56, 64)    # struct ptbpf_agent_event: its record's start, end


def main():
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    b = open(src, "rb").read()
    if not b.startswith(MAGIC):
        sys.exit("%s is not a ptbpf raw capture" % src)
    items, i = [], len(MAGIC)
    while i + 5 <= len(b):
        tag, length = b[i], struct.unpack_from("<I", b, i + 1)[0]
        items.append((tag, b[i + 5:i + 5 + length]))
        i += 5 + length
    records = [p for t, p in items if t == ord("R")]
    stamps = [struct.unpack_from("<Q", p, 0)[0] for p in records]
    span = max(stamps) - min(stamps) + 1000000
    out = bytearray(MAGIC)
    for tag, p in items:
        if tag != ord("R"):
            out += bytes([tag]) + struct.pack("<I", len(p)) + p
    for k in range(n):
        for p in records:
            q = bytearray(p)
            offsets = (0,) + (AGENT_TIMES if struct.unpack_from("<H", q, 16)[0] ==
                              EV_AGENT_RECORD else ())
            for off in offsets:
                struct.pack_into("<Q", q, off, struct.unpack_from("<Q", q, off)[0] + k * span)
            out += b"R" + struct.pack("<I", len(q)) + q
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
