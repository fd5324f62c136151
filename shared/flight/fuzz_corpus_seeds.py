#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz_corpus/flight_reader_fuzzer/ (flight_reader_fuzzer.cc's
input layout: [flags][FileHeader][rest]; checksums left to the fuzzer's fix-up, flags 7):
metadata records of every type, a sealed chunk whose last block straddles into the chunk in
use. Run from the repository root: python3 shared/flight/fuzz_corpus_seeds.py"""
import struct

HALF = 512
STRIDE = 128 + 96 + 512
NSLOTS = 3
META_OFF = 4096
SLOTS_OFF = META_OFF + 2 * HALF


def header(clean=0, active=0):
    return b"STRATAFR" + struct.pack(
        "<IIQQQQIIIIQiIqQIIqQQ", 1, 4096, SLOTS_OFF + NSLOTS * STRIDE, META_OFF, HALF, SLOTS_OFF,
        NSLOTS, STRIDE, 128 + 96, 512, 1 << 20, 1234, 0, 1000000, 0, active, clean,
        5000000 if clean else 0, 0, 0)


def s(t):
    b = t.encode()
    return struct.pack("<I", len(b)) + b


def record(typ, payload):
    pad = (8 - len(payload) % 8) % 8
    return struct.pack("<II", typ, len(payload)) + payload + b"\0" * pad + b"\0" * 8


def uleb(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def main():
    session = (struct.pack("<qqdI", 1000000, 1700000000000000000, 1.0, 7) + s("stackwalk") +
               struct.pack("<I", 42) + s("prog") + struct.pack("<I", 2) + s("Other") + s("grey") +
               s("Idle") + s("transparent"))
    threads = (struct.pack("<I", 2) + struct.pack("<I", 42) + s("main") + struct.pack("<qqB", 1000000, 0, 1) +
               struct.pack("<I", 43) + s("worker") + struct.pack("<qqB", 1100000, 3000000, 0))
    libs = (struct.pack("<I", 1) + struct.pack("<QQQ", 0x400000, 0x500000, 0) + s("prog") + s("/bin/true") +
            s("prog") + s("/bin/true") + s("ABC") + s("abc") + s("x86_64") + struct.pack("<qq", 0, 0))
    mtypes = struct.pack("<I", 1) + bytes([2]) + s("MyType") + s('{"name":"MyType","data":[]}')
    counters = struct.pack("<I", 1) + bytes([1]) + s("c") + s("cat") + s("desc")
    log = b"".join([record(1, session), record(2, threads), record(3, libs), record(4, mtypes),
                    record(5, counters)])
    meta = (struct.pack("<QQ", 1, 64 + len(log)) + b"\0" * 48 + log).ljust(HALF, b"\0")[:HALF] + b"\0" * HALF
    marker = (bytes([64]) + struct.pack("<iBqq", 42, 0, 1500000, 0) + uleb((4 << 1) | 1) +
              struct.pack("<Q", 0x401000) + bytes([0, 0, 0]))
    sample = (bytes([68]) + struct.pack("<iq", 42, 1600000) + bytes([0]) + struct.pack("<Q", 0x401234) +
              bytes([1]) + uleb(5 << 1) + b"label" + bytes([0, 0]))
    blocks = [uleb(len(e)) + e for e in [marker, sample] * 12]
    data = b"".join(blocks)
    pos = 0
    for b in blocks:
        if pos + len(b) > 512:
            tail = pos + len(b) - 512
            break
        pos += len(b)

    def descriptor(seq, state, first, committed, bb, rs):
        return struct.pack("<QIIIIQqqQQ", seq, state, first, committed, bb, rs, 1000000,
                           2000000 if state >= 2 else 0, 0, 0)

    def slot(desc, payload):
        return (desc + b"\0" * 128)[:128] + b"\0" * 96 + payload.ljust(512, b"\0")[:512]

    s0 = slot(descriptor(3, 3, 0, 512, 512, 1), data[:512])
    s1 = slot(descriptor(2, 1, tail, len(data) - 512, 512, 513), data[512:])
    s2 = slot(b"", b"")

    def write(name, flags, hdr, body):
        with open("shared/flight/fuzz_corpus/flight_reader_fuzzer/" + name, "wb") as f:
            f.write(bytes([flags]) + hdr + body)

    write("seed-two-chunks", 7, header(), meta + s0 + s1 + s2)
    write("seed-clean-end", 7, header(clean=1), meta + s0 + s1 + s2)
    write("seed-no-fixup", 0, header(), meta + s0 + s1 + s2)
    write("seed-truncated", 7, header(), meta + s0[:300])
    write("seed-other-log", 7, header(active=1), meta + s0 + s1 + s2)


if __name__ == "__main__":
    main()
