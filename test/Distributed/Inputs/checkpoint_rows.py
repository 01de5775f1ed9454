#!/usr/bin/python3
"""Print what a checkpoint holds of each variable that it does not hold whole.

    checkpoint_rows.py FILE...

One line per file and such variable: "FILE-NAME VARIABLE rows [[a, b], ...]
of N" (a parameter-server table and its optimizer state: the rows that
rank serves), then "FILE-NAME step S, K whole variables".
"""

import json
import os
import struct
import sys

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        head = f.read(32)
        assert head[:8] == b"PXCKPT\r\n", path
        header_bytes, = struct.unpack("<Q", head[16:24])
        header = json.loads(f.read(header_bytes))
    name = os.path.basename(path)
    whole = 0
    for v in header["variables"]:
        rows = v["shape"][0] if v["shape"] else 1
        if v["rows"] == [[0, rows]]:
            whole += 1
        else:
            print(f"{name} {v['name']} rows {v['rows']} of {rows}")
    print(f"{name} step {header['step']}, {whole} whole variables")
