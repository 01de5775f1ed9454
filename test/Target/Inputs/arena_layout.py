#!/usr/bin/python3
"""The arena buffers of a plan (parallax-run --print-plan) by alignment:

    arena_layout.py PLAN.json

prints, for the buffers of a page (4096 bytes) or more and for the smaller
ones, how many there are and how many start off a page (resp. off 64
bytes), and the arena's size against the largest buffer end.
"""
import json
import math
import sys

SIZES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "ui8": 1, "i1": 1}


def main(argv):
    plan = json.load(open(argv[1]))
    large = small = large_off = small_off = 0
    end = 0
    for t in plan["tensors"]:
        if t["kind"] != "arena":
            continue
        size = SIZES[t["dtype"]] * math.prod(t["shape"])
        end = max(end, t["offset"] + size)
        if size >= 4096:
            large += 1
            large_off += t["offset"] % 4096 != 0
        else:
            small += 1
            small_off += t["offset"] % 64 != 0
    print(f"{large} page-sized buffers, {large_off} off a page")
    print(f"{small} smaller buffers, {small_off} off 64 bytes")
    print(f"arena covers its buffers: {plan['arena_bytes'] >= end}")


if __name__ == "__main__":
    main(sys.argv)
