#!/usr/bin/python3
"""Compile and train one example model for every --sync scheme and rank count.

    train_matrix.py MODEL.onnx --out DIR --batch B --steps S
                    [--schemes hybrid,allreduce,ps,allgatherv] [--np 1,2,3,4]
                    [--data DIR]
                    [-- parallax-opt flags (optimizer, lr, ...)]

For each scheme and N: `parallax-opt MODEL --emit=plan --np N --sync=SCHEME
--batch-size B FLAGS` (B is the global batch), then `parallax-run PLAN --np N
--threads 1 --synthetic --seed 0 --steps S --metrics --save` (--data DIR
instead of --synthetic with --data).  A plan whose
program is identical to one already run for the same N (e.g. --sync=hybrid,
allreduce and allgatherv on a model with no sparse variable; only the
recorded option differs) is not run again: the manifest points to the run it
equals.  Writes DIR/manifest.json for compare_ranks.py:

    {"model": NAME, "model_path", "batch": B, "steps": S, "data": DIR|null,
     "flags": [...],
     "runs": [{"scheme", "np", "plan", "plan_json", "metrics": [per rank],
               "trained", "same_as": null | "SCHEME", "seconds"}]}

(file names relative to DIR, so that a copy of DIR is a manifest of its own).

parallax-opt and parallax-run are found on PATH (lit puts the build's first).
Exits 1, naming the command and its output, if one fails or runs for more
than 300 s (a hung job).
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time


def run(cmd, what, timeout=300):
    t0 = time.monotonic()
    # A session of its own, so that a hung job (the launcher, mpirun and the
    # ranks) can be ended as a whole.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        sys.stdout.write(out or "")
        print(f"train_matrix.py: error: {what} did not end within {timeout} s: "
              + " ".join(shlex.quote(c) for c in cmd))
        sys.exit(1)
    if p.returncode != 0:
        sys.stdout.write(out)
        print(f"train_matrix.py: error: {what} failed (exit status {p.returncode}): "
              + " ".join(shlex.quote(c) for c in cmd))
        sys.exit(1)
    return out, time.monotonic() - t0


def program(plan_json):
    """The plan minus what does not change the computation (the --sync
    option it records)."""
    p = dict(plan_json)
    p["options"] = {k: v for k, v in p.get("options", {}).items() if k != "sync"}
    return json.dumps(p, sort_keys=True)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--schemes", default="hybrid,allreduce,ps,allgatherv")
    ap.add_argument("--np", default="1,2,3,4")
    ap.add_argument("--data", help="train on this directory of .npy inputs "
                    "instead of --synthetic")
    args = ap.parse_args(argv)

    name = os.path.splitext(os.path.basename(args.model))[0]
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    schemes = args.schemes.split(",")
    nps = [int(n) for n in args.np.split(",")]
    runs = []
    total = time.monotonic()
    for n in nps:
        programs = {}  # program text -> scheme that ran it
        for scheme in schemes:
            rel = f"{scheme}-n{n}"  # the manifest's paths are relative to it
            base = os.path.join(args.out, rel)
            plan = base + ".pxplan"
            run(["parallax-opt", args.model, "--emit=plan", f"--np={n}",
                 f"--sync={scheme}", f"--batch-size={args.batch}", *extra, "-o", plan],
                f"{name} {scheme} np={n}: parallax-opt")
            text, _ = run(["parallax-run", plan, "--print-plan"],
                          f"{name} {scheme} np={n}: parallax-run --print-plan")
            with open(base + ".plan.json", "w") as f:
                f.write(text)
            key = program(json.loads(text))
            entry = {"scheme": scheme, "np": n, "plan": rel + ".pxplan",
                     "plan_json": rel + ".plan.json", "same_as": None,
                     "metrics": [], "trained": rel + ".onnx", "seconds": 0.0}
            if key in programs:
                entry["same_as"] = programs[key]
                print(f"{name} {scheme} np={n}: the plan of {programs[key]}, not run again")
                runs.append(entry)
                continue
            programs[key] = scheme
            metrics = base + ".jsonl"
            source = ["--data", args.data] if args.data else ["--synthetic"]
            cmd = ["parallax-run", plan, "--threads", "1", *source, "--seed", "0",
                   "--steps", str(args.steps), "-q", "--metrics", metrics,
                   "--save", base + ".onnx"]
            if n > 1:
                cmd[2:2] = ["--np", str(n)]
            _, seconds = run(cmd, f"{name} {scheme} np={n}: parallax-run")
            entry["seconds"] = round(seconds, 2)
            entry["metrics"] = ([rel + ".jsonl"] if n == 1 else
                                [f"{rel}.rank{r}.jsonl" for r in range(n)])
            print(f"{name} {scheme} np={n}: trained {args.steps} steps in {seconds:.1f} s")
            runs.append(entry)
    manifest = {"model": name, "model_path": os.path.abspath(args.model),
                "batch": args.batch, "steps": args.steps, "data": args.data,
                "flags": extra, "runs": runs}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{name}: {len(runs)} configurations in {time.monotonic() - total:.1f} s")


if __name__ == "__main__":
    main()
