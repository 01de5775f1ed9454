#!/usr/bin/python3
"""Check a train_matrix.py manifest's 1-rank run against PyTorch's losses.

    check_reference.py DIR/manifest.json REFERENCE.json [--tol 1e-4]

REFERENCE.json holds {"losses": [...]} for the same data, optimizer and
steps (export_layers.py writes it). Every step's loss of the first 1-rank
run must be within tol relative. Prints the worst difference and
"MODEL: matches PyTorch", or the step that differs and exits 1.
"""

import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("manifest")
    ap.add_argument("reference")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    with open(args.manifest) as f:
        manifest = json.load(f)
    with open(args.reference) as f:
        ref = json.load(f)["losses"]
    run = next(r for r in manifest["runs"] if r["np"] == 1 and not r["same_as"])
    path = os.path.join(os.path.dirname(args.manifest), run["metrics"][0])
    with open(path) as f:
        losses = [float(json.loads(line)["loss"]) for line in f if line.strip()]
    model = manifest["model"]
    if len(losses) != len(ref):
        print(f"{model}: {len(losses)} losses, PyTorch has {len(ref)}")
        return 1
    worst, at = 0.0, 0
    for s, (a, b) in enumerate(zip(losses, ref), 1):
        e = abs(a - b) / max(abs(b), 1e-12)
        if e >= worst:
            worst, at = e, s
    print(f"{model} {run['scheme']} np=1 against PyTorch: worst relative loss "
          f"difference {worst:.2e} (step {at}: {losses[at - 1]!r} vs {ref[at - 1]!r})")
    if worst > args.tol:
        print(f"{model}: FAILED")
        return 1
    print(f"{model}: matches PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
