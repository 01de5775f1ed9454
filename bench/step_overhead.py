#!/usr/bin/python3
"""Step time of parallax-run variants on one plan, runs interleaved.

    bench/step_overhead.py PLAN --np 4 [--steps 40] [--warmup 10] [--repeats 5]
        --variant NAME=COMMAND [--variant NAME=COMMAND ...] [--json FILE]

Each COMMAND is a parallax-run executable with options (split on spaces),
e.g. `base=/tmp/old/bin/parallax-run`, `trace=build/bin/parallax-run
--trace /tmp/t.json`; the script appends `PLAN --np N --threads 1
--synthetic --steps S -q --metrics FILE`. Variants run in turn, --repeats
rounds (so that load that comes and goes on the machine hits them alike).
A step's time is the slowest rank's `step_time_s`; a run's figure is the
median over the steps after --warmup; the table gives, per variant, the
median and the minimum of its runs' figures and their ratio to the first
variant's. Prints the load average before and after: measure on a quiet
machine.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


def run(command, plan, np_, steps, work, tag):
    metrics = os.path.join(work, f"{tag}.jsonl")
    cmd = shlex.split(command) + [plan, "--np", str(np_), "--threads", "1", "--synthetic",
                                  "--steps", str(steps), "-q", "--metrics", metrics]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit(f"step_overhead.py: error: {' '.join(cmd)} failed:\n{done.stdout}")
    files = [metrics] if np_ == 1 else [
        metrics.replace(".jsonl", f".rank{r}.jsonl") for r in range(np_)]
    per_rank = [[json.loads(line)["step_time_s"] for line in open(f)] for f in files]
    return [max(ts) for ts in zip(*per_rank)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variant", action="append", required=True, help="NAME=COMMAND")
    ap.add_argument("--json")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variant]
    print(f"load average before: {os.getloadavg()}")
    figures = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory(prefix="px-overhead-") as work:
        for r in range(a.repeats):
            for i, (name, command) in enumerate(variants):
                times = run(command, a.plan, a.np, a.steps, work, f"{name}{r}")
                figures[name].append(statistics.median(times[a.warmup:]))
    print(f"load average after: {os.getloadavg()}")
    base_med = statistics.median(figures[variants[0][0]])
    base_min = min(figures[variants[0][0]])
    print(f"\n{a.np} ranks, {a.steps} steps ({a.warmup} warm-up), {a.repeats} runs each, "
          f"ms per step (slowest rank):\n")
    print("| variant | median | min | median / first | min / first |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, _ in variants:
        med, low = statistics.median(figures[name]), min(figures[name])
        print(f"| {name} | {med * 1e3:.2f} | {low * 1e3:.2f} | {med / base_med:.3f} | "
              f"{low / base_min:.3f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"variants": dict(variants), "run_medians_s": figures}, f, indent=1)


if __name__ == "__main__":
    main()
