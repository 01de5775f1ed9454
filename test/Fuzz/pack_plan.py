#!/usr/bin/python3
"""Packs a plan fuzzer input into a plan file parallax-run reads.

    pack_plan.py INPUT OUTPUT [--zeros]

INPUT is what the plan fuzzer takes (FuzzTargets.h): a whole plan file
(copied as it is), or a JSON program optionally followed by a NUL byte and
the blobs, which get the header and checksum of Plan.h's format. With
--zeros, initial values that name the source ONNX model become zeros, as the
fuzzer makes them (there is no model file behind a fuzzed plan).
"""

import json
import struct
import sys
import zlib

MAGIC = b"PXPLAN\r\n"
VERSION = 5


def main():
    args = [a for a in sys.argv[1:] if a != "--zeros"]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = open(args[0], "rb").read()
    if data.startswith(MAGIC):
        out = data
    else:
        program, _, blobs = data.partition(b"\0")
        if "--zeros" in sys.argv:
            j = json.loads(program)
            for v in j.get("variables", []):
                if "onnx" in v.get("init", {}):
                    v["init"] = {"splat": 0}
            for c in j.get("constants", []):
                if "onnx" in c.get("value", {}):
                    c["value"] = {"splat": 0}
            program = json.dumps(j, separators=(",", ":")).encode()
        out = MAGIC + struct.pack("<IIQQ", VERSION, 0, len(program), len(blobs)) \
            + program + blobs
        out += struct.pack("<I", zlib.crc32(out) & 0xffffffff)
    open(args[1], "wb").write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
