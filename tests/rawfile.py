# SPDX-License-Identifier: BSD-2-Clause
"""ptbpf's raw captures (user/record/raw.h) item by item, for tests and
tools that cut or repeat a recording: "PTBPFRAW1\\n", then items of a u8
tag, a u32 length and the payload ('R': one ring record, a struct
ptbpf_event first)."""
import struct

MAGIC = b"PTBPFRAW1\n"
EV_AGENT_RECORD = 14  # include/ptbpf_events.h: enum ptbpf_kind
EVENT_HDR = 56        # sizeof(struct ptbpf_event); its kind (u16) at 16, id (u32) at 20


def items(path):
    """(tag, payload) of each item, tag a one-byte bytes (b"R")."""
    with open(path, "rb") as f:
        b = f.read()
    if not b.startswith(MAGIC):
        raise ValueError("%s is not a ptbpf raw capture" % path)
    i = len(MAGIC)
    while i + 5 <= len(b):
        n = struct.unpack_from("<I", b, i + 1)[0]
        yield b[i:i + 1], b[i + 5:i + 5 + n]
        i += 5 + n


def item(tag, payload):
    """One item's bytes, as the capture holds it."""
    return tag + struct.pack("<I", len(payload)) + payload
