#!/usr/bin/env python3
"""Reads a Gecko profile (.json) and prints, per process, what its native frames carry:

  process pid=P frames=N named=N with_address=N inline=N file_line=N versioned=N bad_lib=N

named: native frames ("name (in lib)..."); with_address: frames with the frameTable's address
and lib columns (docs/symbols.md, "Addresses kept beside names"); inline: frames with
inlineDepth > 0; file_line: locations with "(file:line)"; versioned: names with a symbol
version ('@'); bad_lib: frames whose lib index is out of range or whose address, made
absolute with the lib's start - offset, falls outside the lib's mapping.
Exit status 1 when the file cannot be read.
"""
import json
import re
import sys

NATIVE = re.compile(r"^(.*) \(in ([^)]*)\)( \(.*:[0-9]+\))?$")


def processes(profile):
    yield profile
    for child in profile.get("processes", []):
        yield from processes(child)


def main():
    with open(sys.argv[1]) as f:
        profile = json.load(f)
    for process in processes(profile):
        libs = process.get("libs", [])
        counts = dict(frames=0, named=0, with_address=0, inline=0, file_line=0, versioned=0, bad_lib=0)
        pid = None
        for thread in process.get("threads", []):
            pid = thread.get("pid", pid)
            table = thread["frameTable"]
            schema = table["schema"]
            strings = thread["stringTable"]

            def cell(row, name):
                i = schema.get(name)
                return row[i] if i is not None and i < len(row) else None

            for row in table["data"]:
                counts["frames"] += 1
                location = strings[cell(row, "location")]
                match = NATIVE.match(location)
                if match:
                    counts["named"] += 1
                    # A symbol version ("@GLIBC_2.2.5"); a PLT stub's "@plt" is its name.
                    if "@" in match.group(1).replace("@plt", ""):
                        counts["versioned"] += 1
                    if match.group(3):
                        counts["file_line"] += 1
                address, lib = cell(row, "address"), cell(row, "lib")
                if address is not None and lib is not None:
                    counts["with_address"] += 1
                    if lib >= len(libs):
                        counts["bad_lib"] += 1
                    else:
                        l = libs[lib]
                        absolute = l["start"] - l["offset"] + address
                        if not (l["start"] <= absolute <= l["end"]):
                            counts["bad_lib"] += 1
                depth = cell(row, "inlineDepth")
                if depth:
                    counts["inline"] += 1
        print("process pid=%s %s" % (pid, " ".join("%s=%d" % kv for kv in counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
