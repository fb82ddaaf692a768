# SPDX-License-Identifier: BSD-2-Clause
"""What a .pftrace holds, counted fast and without the protobuf runtime (the
GPU machine has none): track events, slice begins by category, CUDA
launches, and bytes by kind of packet. `python3 tracestat.py FILE` prints
it; bench.py uses scan()."""
import collections
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b, i, end):
    """(field, wire type, value or (start, end)) of a message."""
    while i < end:
        k, i = varint(b, i)
        f, wt = k >> 3, k & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        elif wt == 2:
            n, i = varint(b, i)
            v, i = (i, i + n), i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def scan(path):
    b = open(path, "rb").read()
    names = collections.defaultdict(dict)  # (seq, table) -> iid -> str
    out = dict(events=0, packets=0, bytes=len(b), begins=collections.Counter(), launches=0,
               by_type=collections.Counter(), bytes_by_type=collections.Counter())
    i = 0
    while i < len(b):
        start = i
        _, i = varint(b, i)
        n, i = varint(b, i)
        end = i + n
        if end > len(b):
            break
        seq = flags = 0
        te = interned = None
        for f, wt, v in fields(b, i, end):
            if f == 10 and wt == 0:
                seq = v
            elif f == 13 and wt == 0:
                flags = v
            elif f == 11 and wt == 2:
                te = v
            elif f == 12 and wt == 2:
                interned = v
        if flags & 1:
            for k in [k for k in names if k[0] == seq]:
                del names[k]
        if interned:
            for f, wt, v in fields(b, *interned):
                if wt == 2 and f in (1, 2):
                    iid, s = 0, ""
                    for g, gwt, gv in fields(b, *v):
                        if g == 1:
                            iid = gv
                        elif g == 2 and gwt == 2:
                            s = b[gv[0]:gv[1]].decode(errors="replace")
                    names[(seq, f)][iid] = s
        out["packets"] += 1
        if te:
            typ, name, cat = 0, None, None
            for f, wt, v in fields(b, *te):
                if f == 9:
                    typ = v
                elif f == 10:
                    name = names[(seq, 2)].get(v)
                elif f == 23 and wt == 2:
                    name = b[v[0]:v[1]].decode(errors="replace")
                elif f == 3 and cat is None:
                    cat = names[(seq, 1)].get(v)
                elif f == 22 and wt == 2 and cat is None:
                    cat = b[v[0]:v[1]].decode(errors="replace")
            out["events"] += 1
            out["by_type"][typ] += 1
            out["bytes_by_type"][typ] += end - start
            if typ == 1:
                out["begins"][cat] += 1
                if cat in ("cuda_runtime", "cuda_driver") and name and "Launch" in name:
                    out["launches"] += 1
        else:
            out["bytes_by_type"]["other"] += end - start
        i = end
    return out


def main():
    for path in sys.argv[1:]:
        s = scan(path)
        print("%s: %d bytes, %d packets, %d track events, %.1f bytes per track event" % (
            path, s["bytes"], s["packets"], s["events"], s["bytes"] / max(s["events"], 1)))
        for t, n in sorted(s["by_type"].items()):
            print("  type %d: %d events, %.1f bytes each" % (t, n, s["bytes_by_type"][t] / n))
        print("  other packets: %d bytes" % s["bytes_by_type"]["other"])
        print("  begins by category:", dict(s["begins"].most_common()))


if __name__ == "__main__":
    main()
