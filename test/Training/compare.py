#!/usr/bin/python3
"""Compare a parallax-run training run with a PyTorch reference (a golden).

The goldens are made by `examples/make_models.py --references` (see
docs/models.md, "Training references"): examples/models/golden/<model>/
holds data/<input>.npy and one <optimizer>.json per optimizer with the
parallax-opt flags, the losses of every step and the trained values of every
trainable variable (all elements, or a fixed sample of positions for large
variables).  Needs numpy and onnx only, not torch.

    compare.py check GOLDEN.json --metrics RUN.jsonl --trained RUN.onnx [--plan PLAN.json]
        RUN.jsonl: parallax-run --metrics; RUN.onnx: parallax-run --save;
        PLAN.json: parallax-run PLAN --print-plan (checks that the plan was
        compiled with the golden's optimizer flags).  Every loss must be
        within 1e-4 relative, every golden weight value within
        |a - b| <= 1e-4 * max(1, |b|).  Prints the worst mismatch; exits 1 on
        failure.

    compare.py perturb GOLDEN.json -o BAD.json (--loss STEP | --weight NAME) [--by R]
        A copy of the golden with loss STEP (1-based) or the first recorded
        value of NAME scaled by 1 + R (default 1e-3; shifted by R if its
        magnitude is below 1, where the tolerance is absolute): for negative
        tests.

    compare.py emulate GOLDEN.json --model MODEL.onnx --metrics OUT.jsonl --trained OUT.onnx
        Writes what a run that matches the golden exactly would write (its
        losses; MODEL's initializers with the golden values put in): lets the
        comparison itself be tested without running anything.
"""

import argparse
import json
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper

LOSS_RTOL = 1e-4
WEIGHT_TOL = 1e-4


class Failure(Exception):
    pass


def load_golden(path):
    with open(path) as f:
        g = json.load(f)
    for key in ("model", "optimizer", "compile", "steps", "losses", "weights"):
        if key not in g:
            raise Failure(f"{path}: not a golden (no '{key}')")
    if len(g["losses"]) != g["steps"]:
        raise Failure(f"{path}: {len(g['losses'])} losses for {g['steps']} steps")
    return g


def load_metrics(path):
    losses = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                losses[int(rec["step"])] = float(rec["loss"])
            except (ValueError, KeyError, TypeError) as e:
                raise Failure(f"{path}:{n}: not a metrics line ({e})")
    return losses


def flags_of(compile_flags):
    """["--optimizer=adam", "--lr=0.001"] -> {"optimizer": "adam", "lr": "0.001"}"""
    out = {}
    for f in compile_flags:
        if not f.startswith("--") or "=" not in f:
            raise Failure(f"golden compile flag {f!r} is not --name=value")
        k, v = f[2:].split("=", 1)
        out[k.replace("-", "_")] = v
    return out


def check_plan(golden, plan_path):
    with open(plan_path) as f:
        options = json.load(f).get("options", {})
    for k, v in flags_of(golden["compile"]).items():
        got = options.get(k)
        if k == "optimizer":
            same = got == v
        else:
            same = isinstance(got, (int, float)) and math.isclose(got, float(v), rel_tol=1e-12)
        if not same:
            raise Failure(f"the plan was compiled with {k}={got}, the golden with "
                          f"--{k.replace('_', '-')}={v}")


def fmt(x):
    return f"{x:.9g}"


def check(args):
    g = load_golden(args.golden)
    tag = f"{g['model']} {g['optimizer']}"
    if args.plan:
        check_plan(g, args.plan)
    failed = False

    # Losses.
    measured = load_metrics(args.metrics)
    steps = g["steps"]
    if sorted(measured) != list(range(1, len(measured) + 1)) or len(measured) != steps:
        raise Failure(f"{tag}: {args.metrics} has steps {sorted(measured)[:3]}... "
                      f"({len(measured)} in all), expected 1..{steps}")
    worst = None
    bad = 0
    for step, ref in enumerate(g["losses"], 1):
        got = measured[step]
        err = abs(got - ref) / max(abs(ref), 1e-30)
        ok = err <= LOSS_RTOL
        bad += not ok
        if worst is None or not (err <= worst[0]):
            worst = (err, step, got, ref)
    err, step, got, ref = worst
    print(f"{tag}: losses: worst relative error {err:.2e} at step {step} "
          f"(parallax {fmt(got)}, reference {fmt(ref)}; tolerance {LOSS_RTOL:g})")
    if bad:
        failed = True
        print(f"{tag}: FAIL: {bad} of {steps} losses differ by more than {LOSS_RTOL:g} "
              f"(relative); worst: step {step}: parallax {fmt(got)}, reference {fmt(ref)}, "
              f"relative error {err:.2e}")

    # Weights.
    model = onnx.load(args.trained)
    inits = {t.name: t for t in model.graph.initializer}
    worst = None  # (error / allowed, name, position, got, ref)
    bad = count = 0
    for name, w in g["weights"].items():
        if name not in inits:
            raise Failure(f"{tag}: {args.trained} has no initializer '{name}'")
        a = numpy_helper.to_array(inits[name])
        if list(a.shape) != w["shape"]:
            raise Failure(f"{tag}: {name} is {list(a.shape)} in {args.trained}, "
                          f"{w['shape']} in the golden")
        pos = np.asarray(w["positions"], dtype=np.int64)
        ref = np.asarray(w["values"], dtype=np.float32).astype(np.float64)
        got = a.reshape(-1)[pos].astype(np.float64)
        allowed = WEIGHT_TOL * np.maximum(1.0, np.abs(ref))
        ratio = np.abs(got - ref) / allowed
        ratio[~np.isfinite(ratio)] = np.inf
        bad += int(np.count_nonzero(~(ratio <= 1.0)))
        count += len(pos)
        i = int(np.argmax(ratio))
        if worst is None or ratio[i] > worst[0]:
            worst = (float(ratio[i]), name, int(pos[i]), float(got[i]), float(ref[i]), w["shape"])
    r, name, p, got, ref, shape = worst
    index = ",".join(str(int(i)) for i in np.unravel_index(p, shape)) if shape else ""
    where = f"{name}[{index}] (flat {p})"
    print(f"{tag}: weights: {len(g['weights'])} variables, {count} values; worst error "
          f"{abs(got - ref):.2e} = {r:.3f} x tolerance at {where} "
          f"(parallax {fmt(got)}, reference {fmt(ref)})")
    if bad:
        failed = True
        print(f"{tag}: FAIL: {bad} of {count} weight values differ by more than "
              f"{WEIGHT_TOL:g} * max(1, |reference|); worst: {where}: parallax {fmt(got)}, "
              f"reference {fmt(ref)}, error {abs(got - ref):.2e}")

    print(f"{tag}: {'FAILED' if failed else 'OK'}")
    return 1 if failed else 0


def perturb(args):
    g = load_golden(args.golden)
    if (args.loss is None) == (args.weight is None):
        raise Failure("give exactly one of --loss STEP and --weight NAME")
    if args.loss is not None:
        if not 1 <= args.loss <= len(g["losses"]):
            raise Failure(f"--loss {args.loss}: the golden has steps 1..{len(g['losses'])}")
        g["losses"][args.loss - 1] *= 1 + args.by
    else:
        if args.weight not in g["weights"]:
            raise Failure(f"--weight {args.weight}: not in the golden")
        v = g["weights"][args.weight]["values"]
        v[0] = v[0] * (1 + args.by) if abs(v[0]) >= 1 else v[0] + args.by
    with open(args.output, "w") as f:
        json.dump(g, f)
    return 0


def emulate(args):
    g = load_golden(args.golden)
    with open(args.metrics, "w") as f:
        for step, loss in enumerate(g["losses"], 1):
            f.write(json.dumps({"step": step, "loss": loss}) + "\n")
    model = onnx.load(args.model)
    for t in model.graph.initializer:
        if t.name in g["weights"]:
            w = g["weights"][t.name]
            a = numpy_helper.to_array(t).copy()
            a.reshape(-1)[np.asarray(w["positions"], dtype=np.int64)] = \
                np.asarray(w["values"], dtype=np.float32)
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    onnx.save(model, args.trained)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="compare a run with a golden")
    c.add_argument("golden")
    c.add_argument("--metrics", required=True, help="parallax-run --metrics output")
    c.add_argument("--trained", required=True, help="parallax-run --save output")
    c.add_argument("--plan", help="parallax-run --print-plan output")
    c.set_defaults(fn=check)
    p = sub.add_parser("perturb", help="write a perturbed golden (negative tests)")
    p.add_argument("golden")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--loss", type=int, metavar="STEP")
    p.add_argument("--weight", metavar="NAME")
    p.add_argument("--by", type=float, default=1e-3)
    p.set_defaults(fn=perturb)
    e = sub.add_parser("emulate", help="write the outputs of a run that matches a golden")
    e.add_argument("golden")
    e.add_argument("--model", required=True, help="the ONNX model the run starts from")
    e.add_argument("--metrics", required=True)
    e.add_argument("--trained", required=True)
    e.set_defaults(fn=emulate)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except (Failure, OSError) as e:
        print(f"compare.py: error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
