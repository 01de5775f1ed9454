#!/usr/bin/python3
"""Check that N ranks train exactly what one rank trains.

    compare_ranks.py DIR/manifest.json [--tol 1e-5]

DIR/manifest.json is written by train_matrix.py: one model trained with each
--sync scheme on 1 and on N ranks, the global batch the same.  For every
scheme and every N > 1, against the 1-rank run of the same scheme:

  * every step's loss, as every rank reports it (the global mean loss), and
  * every value of every trainable variable (role "parameter" in the plan)
    and of every state variable (BatchNormalization running statistics) in
    the model parallax-run --save wrote

must agree within |a - b| <= tol * max(1, |b|) (b: the 1-rank value).
Also checks that training moved the trainable variables (a --save that
wrote the initial values back would pass otherwise; some may legitimately
stay, e.g. an attention key bias, whose gradient is zero) and that every
rank wrote one metrics line per step.

Prints one line per scheme and N with the worst loss and weight differences,
then "MODEL: OK", or the worst mismatch (model, scheme, N, step or variable
and position, both values) and "MODEL: FAILED", exiting 1.  Needs numpy and
onnx only.
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


class Failure(Exception):
    pass


def load_losses(path, steps):
    losses = []
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    losses.append(float(json.loads(line)["loss"]))
    except OSError as e:
        raise Failure(f"{path}: {e.strerror}")
    if len(losses) != steps:
        raise Failure(f"{path}: {len(losses)} metrics lines, expected {steps}")
    return losses


def load_weights(path, names):
    try:
        model = onnx.load(path)
    except Exception as e:  # onnx raises several kinds
        raise Failure(f"{path}: cannot load ({e})")
    inits = {t.name: t for t in model.graph.initializer}
    missing = [n for n in names if n not in inits]
    if missing:
        raise Failure(f"{path}: no initializer {missing[0]!r}")
    return {n: numpy_helper.to_array(inits[n]).astype(np.float64) for n in names}


def checked_variables(plan_json):
    """(trainable, state) ONNX initializer names of a plan."""
    with open(plan_json) as f:
        plan = json.load(f)
    trainable, state = [], []
    for v in plan["variables"]:
        onnx_name = v.get("init", {}).get("onnx")
        if onnx_name is None:
            continue
        if v["role"] == "parameter":
            trainable.append(onnx_name)
        elif v["role"] == "state":
            state.append(onnx_name)
    return trainable, state


def relative(a, b):
    return abs(a - b) / max(1.0, abs(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("manifest")
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    try:
        with open(args.manifest) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        print(f"compare_ranks.py: error: {args.manifest}: {e}")
        return 1
    model, steps, tol = m["model"], m["steps"], args.tol

    # File names in the manifest are relative to its directory.
    here = os.path.dirname(os.path.abspath(args.manifest))
    for r in m["runs"]:
        for key in ("plan_json", "trained"):
            r[key] = os.path.join(here, r[key])
        r["metrics"] = [os.path.join(here, p) for p in r["metrics"]]
    by_key = {(r["scheme"], r["np"]): r for r in m["runs"]}

    def resolve(run):
        return by_key[(run["same_as"], run["np"])] if run["same_as"] else run

    failures = []
    compared, worst = 0, [0.0, 0.0]
    try:
        baselines, initial_values = {}, {}
        for run in m["runs"]:
            if run["np"] != 1:
                continue
            src = resolve(run)
            trainable, state = checked_variables(src["plan_json"])
            names = trainable + state
            losses = load_losses(src["metrics"][0], steps)
            weights = load_weights(src["trained"], names)
            # Training must have moved every trainable variable.
            with open(src["plan_json"]) as f:
                source = json.load(f)["source"]["path"]
            if source not in initial_values:
                initial_values[source] = load_weights(source, trainable)
            initial = initial_values[source]
            moved = [n for n in trainable if not np.array_equal(initial[n], weights[n])]
            if not moved:
                raise Failure(f"{model} {run['scheme']} np=1: no trainable variable "
                              f"changed in {steps} steps: nothing to compare")
            baselines[run["scheme"]] = (losses, weights, trainable, state)

        for run in m["runs"]:
            n, scheme = run["np"], run["scheme"]
            if n == 1:
                continue
            if scheme not in baselines:
                raise Failure(f"{model} {scheme}: no 1-rank run to compare with")
            base_losses, base_weights, trainable, state = baselines[scheme]
            src = resolve(run)
            if len(src["metrics"]) != n:
                raise Failure(f"{model} {scheme} np={n}: {len(src['metrics'])} metrics "
                              f"files, expected one per rank")
            # Losses: every rank reports the global mean loss.
            worst_loss = (0.0, None)
            for r, path in enumerate(src["metrics"]):
                for s, (a, b) in enumerate(zip(load_losses(path, steps), base_losses), 1):
                    e = abs(a - b) / abs(b) if b != 0 else abs(a)
                    if e > worst_loss[0] or worst_loss[1] is None:
                        worst_loss = (e, f"step {s} (rank {r}): {n} ranks {a!r}, "
                                         f"1 rank {b!r}")
            # Weights: every value of every trainable and state variable.
            weights = load_weights(src["trained"], trainable + state)
            worst_w = (0.0, None)
            bad_values = 0
            for name in trainable + state:
                a, b = weights[name], base_weights[name]
                if a.shape != b.shape:
                    raise Failure(f"{model} {scheme} np={n}: {name} has shape "
                                  f"{list(a.shape)}, 1 rank {list(b.shape)}")
                err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
                if err.size == 0:
                    continue
                bad_values += int(np.count_nonzero(err > tol))
                k = int(np.argmax(err))
                if err.flat[k] > worst_w[0] or worst_w[1] is None:
                    pos = list(np.unravel_index(k, a.shape)) if a.ndim else []
                    worst_w = (float(err.flat[k]),
                               f"{name}{pos}: {n} ranks {a.flat[k]!r}, 1 rank {b.flat[k]!r}")
            compared += 1
            worst[0] = max(worst[0], worst_loss[0])
            worst[1] = max(worst[1], worst_w[0])
            same = f" (plan of {run['same_as']})" if run["same_as"] else ""
            print(f"{model} {scheme} np={n}{same}: losses: worst relative "
                  f"{worst_loss[0]:.2e}; weights: {len(trainable)} trainable + "
                  f"{len(state)} state variables, worst relative {worst_w[0]:.2e}")
            if worst_loss[0] > tol:
                failures.append(f"{model} {scheme} np={n}: loss differs by "
                                f"{worst_loss[0]:.2e} (relative) > {tol:g}: {worst_loss[1]}")
            if worst_w[0] > tol:
                failures.append(f"{model} {scheme} np={n}: {bad_values} weight values "
                                f"differ by more than {tol:g} * max(1, |1-rank value|); "
                                f"worst {worst_w[0]:.2e}: {worst_w[1]}")
    except Failure as e:
        print(f"compare_ranks.py: error: {e}")
        return 1
    for f in failures:
        print(f"FAIL: {f}")
    schemes = sorted({r["scheme"] for r in m["runs"]})
    nps = sorted({r["np"] for r in m["runs"] if r["np"] > 1})
    print(f"{model}: {compared} comparisons ({len(schemes)} schemes: {', '.join(schemes)}; "
          f"np {', '.join(map(str, nps))}); worst relative difference: losses "
          f"{worst[0]:.2e}, weights {worst[1]:.2e}")
    print(f"{model}: {'FAILED' if failures else 'OK'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
