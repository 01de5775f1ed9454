#!/usr/bin/python3
"""Damage a file the way a crash or a bad disk would.

    damage.py FILE truncate N     keep the first N bytes
    damage.py FILE flip OFFSET    flip one bit of the byte at OFFSET (from the
                                  end when negative)
"""

import sys

path, how, arg = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = bytearray(open(path, "rb").read())
if how == "truncate":
    data = data[:arg]
elif how == "flip":
    data[arg] ^= 1
else:
    sys.exit(f"unknown damage '{how}'")
open(path, "wb").write(bytes(data))
