#!/usr/bin/python3
"""Check a grid run's measured bytes against the collectives of its plan.

    grid_bytes.py PLAN.json GRID --np N

PLAN.json is `parallax-run PLAN --print-plan`; GRID.rankR.jsonl are the
ranks' metrics. On every rank and step:

  * the model-axis traffic (what px-shard-model's collectives move, counted
    under "(other)"): the sum, over the plan's all_reduce, all_gather and
    all_to_all kernels over the grid's last (model) axis that synchronize
    no variable, of what a ring moves per rank: 2 (G-1)/G of an
    all-reduce's bytes, (G-1)/G of an all-gather's result and of an
    all-to-all's input (px.all_slice is a local copy: nothing);
  * the synchronized batch norms' traffic ("(batchnorm)"): per training
    batch norm, the all-reduces of the channels' sums and squared
    deviations (C doubles each), per batch norm gradient those again and
    the two gradient sums (2C doubles), each over the group of the kernel's
    grid_axes, C being this rank's channels.

Prints "model axis: K collectives, B bytes; batch norm: M kernels, D bytes
per rank and step, as measured on N ranks x S steps" or the first
difference (exit status 1).
"""

import argparse
import json
import sys
from math import prod


def ring(nbytes, g):
    return 2 * nbytes * (g - 1) // g


def group_size(attrs):
    shape = attrs["grid_shape"]
    axes = attrs.get("grid_axes") or list(range(len(shape)))
    return prod(shape[a] for a in axes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("grid")
    ap.add_argument("--np", type=int, required=True)
    args = ap.parse_args()
    plan = json.load(open(args.plan))
    tensors = plan["tensors"]

    def nbytes(t):
        return prod(tensors[t]["shape"]) * 4

    model = 0
    collectives = 0
    bn = 0
    norms = 0
    for k in plan["kernels"]:
        a = k.get("attrs", {})
        if k["op"] in ("all_reduce", "all_gather", "all_to_all", "all_slice") \
                and "variables" not in a:
            shape = a["grid_shape"]
            if a.get("grid_axes") != [len(shape) - 1]:
                continue
            g = shape[-1]
            collectives += 1
            if k["op"] == "all_reduce":
                model += ring(nbytes(k["in"][0]), g)
            elif k["op"] == "all_gather":
                model += nbytes(k["in"][0]) * (g - 1)
            elif k["op"] == "all_to_all":
                model += nbytes(k["in"][0]) // g * (g - 1)
        elif k["op"] in ("batch_norm", "batch_norm_grad") and "grid" in a:
            g = group_size(a)
            c = tensors[k["in"][2 if k["op"] == "batch_norm_grad" else 1]]["shape"][0]
            norms += 1
            bn += 2 * ring(8 * c, g)
            if k["op"] == "batch_norm_grad":
                bn += ring(16 * c, g)
    steps = None
    for r in range(args.np):
        with open(f"{args.grid}.rank{r}.jsonl") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        steps = len(lines)
        for line in lines:
            b = line["bytes"]
            for name, want in (("(other)", model), ("(batchnorm)", bn)):
                got = b.get(name, {"sent": 0, "received": 0})
                if got["sent"] != want or got["received"] != want:
                    print(f"rank {r} step {line['step']}: {name} moved {got}, "
                          f"the plan's collectives {want} bytes")
                    return 1
    print(f"model axis: {collectives} collectives, {model} bytes; batch norm: "
          f"{norms} kernels, {bn} bytes per rank and step, as measured on "
          f"{args.np} ranks x {steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
