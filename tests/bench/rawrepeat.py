# SPDX-License-Identifier: BSD-2-Clause
"""A long capture with a short one's mix: the ring records of a --raw
capture repeated N times, each copy moved later in time (the GPU records'
device times too), for a trace's steady-state bytes per event:

  python3 tests/bench/rawrepeat.py tests/data/gpu/agent_mlp.raw /tmp/x20.raw 20
  build/ptbpf replay /tmp/x20.raw -o /tmp/x20.pftrace
  python3 tests/bench/tracestat.py /tmp/x20.pftrace"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rawfile  # noqa: E402

AGENT_TIMES = (56, 64)    # struct ptbpf_agent_event: its record's start, end


def main():
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        items = list(rawfile.items(src))
    except ValueError as e:
        sys.exit(str(e))
    records = [p for t, p in items if t == b"R"]
    stamps = [struct.unpack_from("<Q", p, 0)[0] for p in records]
    span = max(stamps) - min(stamps) + 1000000
    out = bytearray(rawfile.MAGIC)
    for tag, p in items:
        if tag != b"R":
            out += rawfile.item(tag, p)
    for k in range(n):
        for p in records:
            q = bytearray(p)
            offsets = (0,) + (AGENT_TIMES if struct.unpack_from("<H", q, 16)[0] ==
                              rawfile.EV_AGENT_RECORD else ())
            for off in offsets:
                struct.pack_into("<Q", q, off, struct.unpack_from("<Q", q, off)[0] + k * span)
            out += rawfile.item(b"R", bytes(q))
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
