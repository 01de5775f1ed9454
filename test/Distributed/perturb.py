#!/usr/bin/python3
"""Damage a run's outputs in place, for the negative tests of
compare_ranks.py and check_bytes.py.

    perturb.py loss METRICS.jsonl STEP --by R        loss of STEP (1-based) * (1 + R)
    perturb.py weight MODEL.onnx NAME FLAT --by R    value FLAT of NAME * (1 + R), or + R
                                                     where |value| < 1 (the tolerance is
                                                     absolute there)
    perturb.py bytes METRICS.jsonl STEP VARIABLE --add K
                                                     VARIABLE's sent bytes of STEP + K
"""

import json
import sys

import numpy as np


def rewrite_metrics(path, step, change):
    with open(path) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    change(lines[step - 1])
    with open(path, "w") as f:
        for rec in lines:
            f.write(json.dumps(rec) + "\n")


def main():
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "loss":
        path, step, by = args[0], int(args[1]), float(args[3])
        rewrite_metrics(path, step, lambda r: r.update(loss=r["loss"] * (1 + by)))
    elif kind == "weight":
        import onnx
        from onnx import numpy_helper
        path, name, flat, by = args[0], args[1], int(args[2]), float(args[4])
        model = onnx.load(path)
        for i, t in enumerate(model.graph.initializer):
            if t.name == name:
                a = numpy_helper.to_array(t).copy()
                v = a.flat[flat]
                a.flat[flat] = v * (1 + by) if abs(v) >= 1 else v + by
                model.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, name))
                break
        else:
            sys.exit(f"perturb.py: {path}: no initializer {name}")
        onnx.save(model, path)
    elif kind == "bytes":
        path, step, var, add = args[0], int(args[1]), args[2], int(args[4])

        def change(r):
            r["bytes"][var]["sent"] += add
            r["bytes_sent"] += add
        rewrite_metrics(path, step, change)
    else:
        sys.exit(f"perturb.py: unknown kind {kind!r}")


if __name__ == "__main__":
    main()
