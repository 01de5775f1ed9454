#!/usr/bin/python3
"""Check that two runs on N ranks trained the same model within rounding.

    close_runs.py A.jsonl B.jsonl A.onnx B.onnx --np N [--rtol R]

Every rank's losses (A.rankR.jsonl against B.rankR.jsonl) and every
initializer of the two saved models must agree within R relative (default
1e-5, with an absolute floor of R for values near zero), and the bytes
each rank measured must be equal. Prints "close: N ranks x S steps, V
variables" or the first difference (exit status 1).
"""

import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from same_run import rank_pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("model_a")
    ap.add_argument("model_b")
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    steps = 0
    pairs = rank_pairs(args.a, args.b, args.np)
    if pairs is None:
        return 1
    for r, _, _, la, lb in pairs:
        for x, y in zip(la, lb):
            if not np.isclose(x["loss"], y["loss"], rtol=args.rtol, atol=args.rtol):
                print(f"different: rank {r} step {x['step']}: loss {x['loss']!r} vs {y['loss']!r}")
                return 1
            if x["bytes"] != y["bytes"]:
                print(f"different: rank {r} step {x['step']}: bytes")
                return 1
        steps = len(la)
    wa = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.model_a).graph.initializer}
    wb = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.model_b).graph.initializer}
    if sorted(wa) != sorted(wb):
        print(f"different: initializers {sorted(wa)} vs {sorted(wb)}")
        return 1
    for name in sorted(wa):
        if not np.allclose(wa[name], wb[name], rtol=args.rtol, atol=args.rtol):
            worst = np.max(np.abs(wa[name] - wb[name]))
            print(f"different: {name}: largest difference {worst}")
            return 1
    print(f"close: {args.np} ranks x {steps} steps, {len(wa)} variables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
