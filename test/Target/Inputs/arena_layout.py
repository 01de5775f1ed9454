#!/usr/bin/python3
"""The arena buffers of a plan (parallax-run --print-plan) of a page or more:

    arena_layout.py PLAN.json

prints how many buffers of 4096 bytes or more the arena has and how many
of them start off a page. (The plan reader already refuses a buffer off
64 bytes or outside the arena.)
"""
import json
import math
import sys

SIZES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "ui8": 1, "i1": 1}


def main(argv):
    plan = json.load(open(argv[1]))
    large = off = 0
    for t in plan["tensors"]:
        if t["kind"] == "arena" and SIZES[t["dtype"]] * math.prod(t["shape"]) >= 4096:
            large += 1
            off += t["offset"] % 4096 != 0
    print(f"{large} page-sized buffers, {off} off a page")


if __name__ == "__main__":
    main(sys.argv)
