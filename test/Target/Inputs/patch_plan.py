"""Writes a damaged copy of a Parallax plan, for the runtime's error tests.

usage: patch_plan.py IN OUT (truncate N | version V | json KEY VALUE | flip OFFSET)

`json` edits a top-level field of the program and re-checksums the file, so
only the semantic check (world size, mode, ...) can catch it.
"""
import json
import struct
import sys
import zlib

src, dst, what = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
if what == "truncate":
    data = data[: int(sys.argv[4])]
elif what == "flip":
    i = int(sys.argv[4])
    data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
else:
    program_len, blob_len = struct.unpack_from("<QQ", data, 16)
    program = json.loads(data[32 : 32 + program_len])
    blobs = data[32 + program_len : 32 + program_len + blob_len]
    header = bytearray(data[:32])
    if what == "version":
        struct.pack_into("<I", header, 8, int(sys.argv[4]))
    elif what == "json":
        program[sys.argv[4]] = json.loads(sys.argv[5])
    else:
        sys.exit("unknown edit " + what)
    text = json.dumps(program).encode()
    struct.pack_into("<Q", header, 16, len(text))
    body = bytes(header) + text + blobs
    data = body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)
open(dst, "wb").write(data)
