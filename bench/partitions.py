#!/usr/bin/python3
"""The partition-count model against measured step times.

Parallax (EuroSys'19, section 4.3) chose the number of parameter-server
partitions P by timing the job at several P and fitting
t(P) = theta1 / P + theta2 (P - 1) + theta0. parallax-opt's px-partition
derives the thetas from the link model instead of re-launching. This script
does what the paper did, on this machine: it forces P = 1..N on every
parameter-server variable of a model's hybrid plan (parallax-opt
--partitions P; --sync=ps puts the dense variables on servers too), times
the steps, fits the curve by least squares, and prints the measured argmin
next to the compiler's own choice.

usage: bench/partitions.py [--model lm] [--ranks 4] [--steps 12] [--warmup 4]
                           [--sync hybrid] [--build DIR] [--profile FILE]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def step_time(build, plan, ranks, steps, warmup, work):
    metrics = os.path.join(work, "m.jsonl")
    run([os.path.join(build, "bin", "parallax-run"), plan, "--np", str(ranks),
         "--synthetic", "--steps", str(steps), "-q", "--metrics", metrics])
    times = [json.loads(l)["step_time_s"]
             for l in open(re.sub(r"\.jsonl$", ".rank0.jsonl", metrics))]
    return float(np.median(times[warmup:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="lm")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--sync", default="hybrid", choices=["hybrid", "ps"])
    ap.add_argument("--build", default=os.path.join(
        ROOT, "build-bench" if os.path.isdir(os.path.join(ROOT, "build-bench")) else "build"))
    ap.add_argument("--profile", help="calibration profile for the compiler's choice")
    args = ap.parse_args()
    model = os.path.join(ROOT, "examples", "models", args.model + ".onnx")
    opt = os.path.join(args.build, "bin", "parallax-opt")
    common = [model, "--np", str(args.ranks), "--sync=" + args.sync, "--optimizer=sgd"]
    if args.profile:
        common += ["--profile", args.profile]
    with tempfile.TemporaryDirectory() as work:
        plan = os.path.join(work, "p.pxplan")
        report = run([opt] + common + ["--report", "--emit=none"])
        chosen = sorted(set(re.findall(r"ps P=(\d+)", report)))
        ps, ts = [], []
        for p in range(1, args.ranks + 1):
            run([opt] + common + ["--partitions", str(p), "--emit=plan", "-o", plan])
            t = step_time(args.build, plan, args.ranks, args.steps, args.warmup, work)
            ps.append(p)
            ts.append(t)
            print(f"P={p}: {t * 1e3:.1f} ms/step", flush=True)
    # Least squares for t(P) = theta1 / P + theta2 (P - 1) + theta0.
    a = np.array([[1.0 / p, p - 1.0, 1.0] for p in ps])
    theta, *_ = np.linalg.lstsq(a, np.array(ts), rcond=None)
    fitted = a @ theta
    best_fit = ps[int(np.argmin(fitted))]
    best_measured = ps[int(np.argmin(ts))]
    print(f"\n{args.model}, {args.ranks} ranks, --sync={args.sync}, SGD, synthetic data")
    print(f"{'P':>3} {'measured ms':>12} {'fitted ms':>10}")
    for p, t, f in zip(ps, ts, fitted):
        print(f"{p:>3} {t * 1e3:>12.1f} {f * 1e3:>10.1f}")
    print(f"fit: theta1 = {theta[0] * 1e3:.2f} ms, theta2 = {theta[1] * 1e3:.2f} ms, "
          f"theta0 = {theta[2] * 1e3:.2f} ms")
    print(f"argmin: measured P={best_measured}, fitted P={best_fit}, "
          f"px-partition chose P in {{{', '.join(chosen)}}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
