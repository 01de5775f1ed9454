#!/usr/bin/python3
"""Train one example model on one rank and on every grid asked for, and compare.

    grid_matrix.py MODEL.onnx --out DIR --grids 2x1,1x2,2x2,4x1 --steps S
                   [-- parallax-opt flags (optimizer, lr, ...)]

For one rank and for each grid PrxPc: `parallax-opt MODEL --emit=plan
[--np Pr*Pc --grid=PrxPc] FLAGS`, `parallax-run PLAN [--np N] --synthetic
--threads 1 --steps S --metrics --save`; then grid_compare.py (every rank's
losses and the saved model against one rank's, within 1e-5) and
predicted_bytes.py (every rank's bytes in every step against the plan's
prediction). --layer-split SPLITS and --sequence-parallel are passed on to
the grids with Pr > 1. Prints one line per grid:

    MODEL PrxPc: matches one rank (S steps); bytes as predicted (B per rank and step)

("as predicted outside the parameter servers" where the plan only estimates
some variables' bytes: the rest is held exact).

A grid may also be a point of the strategy search's frontier, pK@N: the
plan of `--np N --plan-point K` (docs/strategy.md), printed as "point K of
N ranks"; frontierM@N stands for M points spread over the frontier of N
ranks (its first and last included).

and, with --memory-rtol R, that every rank's largest memory_bytes (what its
session added to the process at its peak) is within R of the plan's
predicted peak; with --memory-slack S as well, a measure up to S bytes
over the prediction passes too (the heap that library temporaries
fragment, which the estimate lacks: docs/grid.md), one below it by more
than R does not.

or the first failure's command and output (exit status 1). parallax-opt and
parallax-run are found on PATH (lit puts the build's first).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, timeout=300):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: {' '.join(cmd)}"
    out = (p.stdout + p.stderr).strip()
    return p.returncode, out


def main():
    argv = sys.argv[1:]
    flags = []
    if "--" in argv:
        i = argv.index("--")
        argv, flags = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--grids", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layer-split", default="",
                    help="parallax-opt's --layer-split for the grids whose model axis "
                         "splits layers (Pr > 1)")
    ap.add_argument("--sequence-parallel", action="store_true",
                    help="parallax-opt's --sequence-parallel for the grids with Pr > 1")
    ap.add_argument("--memory-rtol", type=float,
                    help="also hold every rank's measured memory_bytes to the plan's "
                         "predicted peak within this relative tolerance")
    ap.add_argument("--memory-slack", type=int, default=0,
                    help="with --memory-rtol: also pass a measure at most this many "
                         "bytes over the predicted peak")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    name = os.path.splitext(os.path.basename(a.model))[0]

    def train(tag, np_, grid):
        plan = os.path.join(a.out, f"{tag}.pxplan")
        dist = ["--np", str(np_), f"--grid={grid}"] if grid else []
        if grid and a.layer_split and not grid.startswith(("p", "1x")):
            dist.append(f"--layer-split={a.layer_split}")
        if grid and a.sequence_parallel and not grid.startswith(("p", "1x")):
            dist.append("--sequence-parallel")
        if grid and grid.startswith("p"):
            dist = ["--np", str(np_), "--plan-point", grid[1:].split("@")[0]]
        steps = [
            ["parallax-opt", a.model, "--emit=plan", "-o", plan] + dist + flags,
            ["parallax-run", plan, "--synthetic", "--threads", "1", "-q",
             "--steps", str(a.steps), "--metrics", os.path.join(a.out, f"{tag}.jsonl"),
             "--save", os.path.join(a.out, f"{tag}.onnx")] + (["--np", str(np_)] if grid else []),
        ]
        for cmd in steps:
            rc, out = run(cmd)
            if rc != 0:
                print(f"{name} {grid or 'one rank'}: failed: {' '.join(cmd)}\n{out}")
                return False
        return True

    if not train("one", 1, None):
        return 1
    grids = []
    for grid in a.grids.split(","):
        if not grid.startswith("frontier"):
            grids.append(grid)
            continue
        count, ranks = (int(x) for x in grid[len("frontier"):].split("@"))
        path = os.path.join(a.out, f"frontier{ranks}.json")
        rc, out = run(["parallax-opt", a.model, "--np", str(ranks), "--frontier", path] + flags)
        if rc != 0:
            print(f"{name} frontier of {ranks} ranks: failed\n{out}")
            return 1
        with open(path) as f:
            n = len(json.load(f)["frontier"])
        picked = sorted({round(i * (n - 1) / max(count - 1, 1)) for i in range(min(count, n))})
        grids += [f"p{k}@{ranks}" for k in picked]
    for grid in grids:
        if grid.startswith("p"):
            np_ = int(grid.split("@")[1])
            tag = grid.replace("@", "n")
            label = f"point {grid[1:].split('@')[0]} of {np_} ranks"
        else:
            pr, pc = (int(x) for x in grid.split("x"))
            np_ = pr * pc
            tag = f"g{grid}"
            label = grid
        if not train(tag, np_, grid):
            return 1
        rc, plan = run(["parallax-run", os.path.join(a.out, f"{tag}.pxplan"), "--print-plan"])
        plan_json = os.path.join(a.out, f"{tag}.json")
        with open(plan_json, "w") as f:
            f.write(plan)
        checks = [
            [sys.executable, os.path.join(HERE, "grid_compare.py"),
             os.path.join(a.out, "one.jsonl"), os.path.join(a.out, tag),
             os.path.join(a.out, "one.onnx"), os.path.join(a.out, f"{tag}.onnx"),
             "--np", str(np_)],
            [sys.executable, os.path.join(HERE, "predicted_bytes.py"), plan_json,
             os.path.join(a.out, tag), "--np", str(np_)],
        ]
        outs = []
        for cmd in checks:
            rc, out = run(cmd)
            if rc != 0:
                print(f"{name} {label}: {out}")
                return 1
            outs.append(out)
        predicted = outs[1].split(": ")[1].split(" B ")[0]
        memory = ""
        if a.memory_rtol is not None:
            with open(plan_json) as f:
                peak = json.load(f)["memory"]["peak"]
            measured = max(json.loads(line)["memory_bytes"]
                           for r in range(np_)
                           for line in open(os.path.join(a.out, f"{tag}.rank{r}.jsonl"))
                           if line.strip())
            ratio = measured / peak
            slack = a.memory_slack and 0 <= measured - peak <= a.memory_slack
            if abs(ratio - 1) > a.memory_rtol and not slack:
                print(f"{name} {label}: measured memory {measured} B is {ratio:.3f}x the "
                      f"predicted peak {peak} B")
                return 1
            memory = f"; memory within {a.memory_rtol:g} of the prediction"
            if a.memory_slack:
                memory += f" or {a.memory_slack} B over it"
        how = ("as predicted outside the parameter servers" if "outside the parameter servers"
               in outs[1] else "as predicted")
        print(f"{name} {label}: matches one rank ({a.steps} steps); "
              f"bytes {how} ({predicted} per rank and step){memory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
