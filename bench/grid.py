#!/usr/bin/python3
"""Integrated model and batch parallelism: every Pr x Pc grid of N ranks, measured
against its prediction and against pure data parallelism (1 x N), in one run.

    /usr/bin/python3 bench/grid.py                         # wide_mlp mlp gru_classifier dlrm lm cnn, 4 ranks
    /usr/bin/python3 bench/grid.py --models wide_mlp --steps 30 --np 4
    /usr/bin/python3 bench/grid.py --json out.json

For each model and grid: `parallax-opt MODEL --np N --grid=PrxPc --optimizer=adam
--profile PROFILE --emit=plan` (PROFILE from `parallax-run --calibrate` on the
same N ranks, run first), `parallax-run PLAN --np N --synthetic --threads 1
--steps S --metrics` (S and the warm-up scaled up where the predicted steps
would span less than --min-seconds); the median step time over the steps
after the warm-up
and the part of it spent drawing the next batch's synthetic inputs
(data_s), every rank's bytes per step and the largest memory_bytes of the
ranks, beside what the plan predicts (options.predicted: bytes and step
time from StepPrediction; memory.peak). The step time is predicted for the
plan's kernels, without the inputs: pred/meas holds it against the median
step less its data time (pxbench.steps_less_data: where the ranks share
the machine's cores, all ranks' drawing spread over the cores). The --domain-models (cnn) run their model-split
grids again with convolutions split by rows (--conv-split=domain, domain
parallelism) and each the cheaper way (--conv-split=auto, "mixed"); the
--sequence-models (lm) run them again with --sequence-parallel (layer
norms, dropouts and residual additions on a block of rows, "sequence").
Then `--grid=auto` is compiled and the grid it chose is compared with the
fastest measured one.

wide_mlp (made here with torch: 1024 -> 4096 -> 4096 -> 1024 -> 10, batch
64) is the model whose dense weights dominate. The memory-limited case runs
it with `parallax-run --memory-limit` set between what pure data
parallelism and what the grid with the most model ranks predict: 1 x N must
be refused, N x 1 must train.
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402


def make_wide_mlp(path):
    """The dense-dominated model, exported as users export (default args)."""
    return pxbench.export_mlp(path, [1024, 4096, 4096, 1024, 10], batch=64)


def grids(n, domain=False, sequence=False):
    """(Pr, Pc, variant): every grid, and with `domain` the model-split
    ones again with convolutions split by rows (--conv-split=domain) and
    each convolution the cheaper way (--conv-split=auto, "mixed"), with
    `sequence` with --sequence-parallel."""
    out = []
    for pr in range(1, n + 1):
        if n % pr == 0:
            out.append((pr, n // pr, None))
            if domain and pr > 1:
                out.append((pr, n // pr, "domain"))
                out.append((pr, n // pr, "auto"))
            if sequence and pr > 1:
                out.append((pr, n // pr, "sequence"))
    return out


VARIANT_FLAGS = {None: [], "domain": ["--conv-split=domain"], "auto": ["--conv-split=auto"],
                 "sequence": ["--sequence-parallel"]}


def run_grid(build, work, model, src, pr, pc, split, args, profile):
    opt = build / "bin" / "parallax-opt"
    prun = build / "bin" / "parallax-run"
    n = pr * pc
    label = f"{pr}x{pc}" + {None: "", "domain": " (domain)", "auto": " (mixed)",
                            "sequence": " (sequence)"}[split]
    tag = f"{model}-{pr}x{pc}" + (f"-{split}" if split else "")
    plan = work / f"{tag}.pxplan"
    flags = ["--np", str(n), f"--grid={pr}x{pc}", "--optimizer=adam", "--lr=0.0001",
             "--profile", str(profile)] + VARIANT_FLAGS[split]
    p = subprocess.run([str(opt), str(src), "--emit=plan", "-o", str(plan), *flags],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return {"grid": label, "error": p.stderr.strip().splitlines()[-1]}
    metrics = work / f"{tag}.jsonl"
    info = pxbench.print_plan(prun, plan)
    steps, warmup = pxbench.timed_steps(args.steps, args.warmup,
                                        info["options"]["predicted"]["step_seconds"],
                                        args.min_seconds)
    pxbench.run([prun, plan, "--np", str(n), "--synthetic", "--threads", "1", "-q",
                 "--steps", str(steps), "--metrics", metrics], f"parallax-run {tag}",
                timeout=900)
    ranks = [pxbench.read_metrics(str(metrics).replace(".jsonl", f".rank{r}.jsonl"))
             for r in range(n)]
    steady = [line for line in ranks[0] if line["step"] > warmup]
    times = [line["step_time_s"] for line in steady]
    # The plan's step without the next batch's inputs (--synthetic draws
    # them), which the prediction leaves out; on the CPU their filling adds
    # to the step.
    compute = pxbench.steps_less_data(ranks, warmup)
    predicted = info["options"]["predicted"]
    return {
        "grid": label,
        "steps": steps,
        "ms": pxbench.median(times) * 1e3,
        "data_ms": pxbench.median([line.get("data_s", 0) for line in steady]) * 1e3,
        "compute_ms": pxbench.median(compute) * 1e3,
        "predicted_ms": predicted["step_seconds"] * 1e3,
        "bytes": max(line["bytes_sent"] for r in ranks for line in r),
        # Halo exchanges: the busiest rank's own prediction.
        "predicted_bytes": max((r["sent"] for r in predicted.get("bytes_by_rank", [])),
                               default=predicted["bytes_per_step"]),
        "memory": max(line.get("memory_bytes", 0) for r in ranks for line in r),
        "predicted_memory": info["memory"]["peak"],
    }


def auto_grid(build, work, model, src, n, profile):
    opt = build / "bin" / "parallax-opt"
    p = subprocess.run([str(opt), str(src), "--emit=plan", "-o", str(work / f"{model}-auto.pxplan"),
                        "--np", str(n), "--grid=auto", "--optimizer=adam", "--lr=0.0001",
                        "--profile", str(profile)], capture_output=True, text=True)
    m = re.search(r"--grid=auto chose (\d+x\d+(?: \((?:domain|mixed|sequence)\))?)", p.stderr)
    return m.group(1) if m else None


def memory_limited(build, work, n, src, rows):
    """1 x N refused and N x 1 trained under a limit between their predictions."""
    prun = build / "bin" / "parallax-run"
    by = {r["grid"]: r for r in rows if "error" not in r}
    dp, mp = by.get(f"1x{n}"), by.get(f"{n}x1")
    if not dp or not mp or mp["predicted_memory"] >= dp["predicted_memory"]:
        return None
    limit = (dp["predicted_memory"] + mp["predicted_memory"]) // 2
    out = {"limit": limit}
    for grid in (f"1x{n}", f"{n}x1"):
        plan = work / f"wide_mlp-{grid}.pxplan"
        p = subprocess.run([str(prun), str(plan), "--np", str(n), "--synthetic", "--threads",
                            "1", "-q", "--steps", "2", "--memory-limit", str(limit)],
                           capture_output=True, text=True, timeout=600)
        msg = (p.stderr.strip().splitlines() or [""])[0]
        out[grid] = "trained" if p.returncode == 0 else "refused: " + msg
    return out


def mib(b):
    return f"{b / 2**20:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="wide_mlp,mlp,gru_classifier,dlrm,lm,cnn")
    ap.add_argument("--domain-models", default="cnn",
                    help="models whose grids are also run with --conv-split=domain")
    ap.add_argument("--sequence-models", default="lm",
                    help="models whose model-split grids are also run with --sequence-parallel")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=1.0,
                    help="run steps predicted short for longer, the steps and warm-up "
                         "scaled alike (up to 250x), so that the timed steps span this "
                         "many seconds")
    ap.add_argument("--build")
    ap.add_argument("--work", default="/tmp/parallax-bench-grid")
    ap.add_argument("--json")
    args = ap.parse_args()
    build, work = pxbench.setup(args)
    print(f"load average before: {pxbench.loadavg()}")
    profile = pxbench.calibrate(build, work, args.np)
    results = {}
    for model in args.models.split(","):
        src = make_wide_mlp(work / "wide_mlp.onnx") if model == "wide_mlp" \
            else pxbench.MODELS_DIR / f"{model}.onnx"
        domain = model in args.domain_models.split(",")
        sequence = model in args.sequence_models.split(",")
        rows = [run_grid(build, work, model, src, pr, pc, split, args, profile)
                for pr, pc, split in grids(args.np, domain, sequence)]
        chose = auto_grid(build, work, model, src, args.np, profile)
        results[model] = {"grids": rows, "auto": chose}
        dp = next((r for r in rows if r["grid"] == f"1x{args.np}" and "error" not in r), None)
        ok = [r for r in rows if "error" not in r]
        fastest = min(ok, key=lambda r: r["ms"]) if ok else None
        print(f"\n### {model} on {args.np} ranks (Adam; per rank and step)\n")
        print("| grid | ms/step | of it data | predicted | pred/meas | vs 1x%d | MiB sent | "
              "predicted | memory MiB | predicted | pred/meas |" % args.np)
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if "error" in r:
                print(f"| {r['grid']} | does not compile: {r['error']} ||||||||||")
                continue
            speed = f"{dp['ms'] / r['ms']:.2f}x" if dp else "-"
            mark = " (auto)" if r["grid"] == chose else ""
            print(f"| {r['grid']}{mark} | {r['ms']:.2f} | {r['data_ms']:.2f} | "
                  f"{r['predicted_ms']:.2f} | {r['predicted_ms'] / r['compute_ms']:.2f} | "
                  f"{speed} | {mib(r['bytes'])} | "
                  f"{mib(r['predicted_bytes'])} | {mib(r['memory'])} | "
                  f"{mib(r['predicted_memory'])} | "
                  f"{r['predicted_memory'] / max(r['memory'], 1):.2f} |")
        picked = next((r for r in ok if r["grid"] == chose), None)
        if fastest and chose and not picked:
            print(f"\n--grid=auto chose {chose}, which this run did not measure "
                  f"(--sequence-models or --domain-models would)")
        if fastest and picked:
            least = min(ok, key=lambda r: r["compute_ms"])
            print(f"\n--grid=auto chose {chose}: {picked['ms'] / fastest['ms']:.2f}x the "
                  f"fastest measured grid ({fastest['grid']}); without the data, "
                  f"{picked['compute_ms'] / least['compute_ms']:.2f}x ({least['grid']})")
        if model == "wide_mlp":
            limited = memory_limited(build, work, args.np, src, rows)
            results[model]["memory_limited"] = limited
            if limited:
                print(f"\nmemory-limited ({mib(limited['limit'])} MiB per rank): "
                      f"1x{args.np} {limited[f'1x{args.np}']}; "
                      f"{args.np}x1 {limited[f'{args.np}x1']}")
    print(f"\nload average after: {pxbench.loadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
