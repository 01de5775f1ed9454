#!/usr/bin/python3
"""Check that a run on a Pr x Pc grid trained what one rank trains.

    grid_compare.py ONE.jsonl GRID ONE.onnx GRID.onnx --np N [--rtol R]

Every rank's losses (GRID.rankR.jsonl) against the single rank's
(ONE.jsonl), and every initializer of the two saved models (the grid's
gathered from its blocks), within R relative (default 1e-5, with an
absolute floor of R near zero). Prints "grid matches one rank: N ranks x S
steps, V initializers" or the first difference (exit status 1).
"""

import argparse
import json
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def close(a, b, rtol):
    return np.all(np.abs(np.asarray(a) - np.asarray(b)) <= rtol * np.maximum(np.abs(a), 1.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("one")
    ap.add_argument("grid")
    ap.add_argument("one_model")
    ap.add_argument("grid_model")
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    reference = losses(args.one)
    for r in range(args.np):
        mine = losses(f"{args.grid}.rank{r}.jsonl")
        if len(mine) != len(reference):
            print(f"rank {r}: {len(mine)} steps, one rank ran {len(reference)}")
            return 1
        for step, (a, b) in enumerate(zip(reference, mine), 1):
            if not close(a, b, args.rtol):
                print(f"rank {r} step {step}: loss {b}, one rank {a}")
                return 1
    one = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.one_model).graph.initializer}
    grid = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.grid_model).graph.initializer}
    for name, value in one.items():
        if name not in grid or grid[name].shape != value.shape:
            print(f"initializer {name}: missing or reshaped in {args.grid_model}")
            return 1
        if value.dtype.kind == "f" and not close(value, grid[name], args.rtol):
            worst = np.max(np.abs(value - grid[name]))
            print(f"initializer {name}: differs by up to {worst}")
            return 1
    print(f"grid matches one rank: {args.np} ranks x {len(reference)} steps, "
          f"{len(one)} initializers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
