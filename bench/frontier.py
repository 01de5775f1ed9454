#!/usr/bin/python3
"""The strategy search (TensorOpt's FT): each model's (step time, memory per rank)
frontier, points of it trained and measured against the prediction, and the plan
chosen under a memory limit against hand-picked grids and ZeRO-1, in one run.

    /usr/bin/python3 bench/frontier.py                        # wide_mlp dlrm lm, 4 ranks
    /usr/bin/python3 bench/frontier.py --models wide_mlp --points 5 --steps 20
    /usr/bin/python3 bench/frontier.py --svg-dir docs/images  # the validation figures
    /usr/bin/python3 bench/frontier.py --models none --scale  # bert_base, 8..64 ranks, predicted

1. `parallax-run --calibrate` on the N ranks (the profile every compile uses).
2. Per model: `parallax-opt MODEL --np N --optimizer=adam --profile P --frontier F.json`
   (the search's and the compiles' time, the frontier's size); --points points spread
   over the frontier compiled with `--plan-point K` and trained (`parallax-run PLAN
   --np N --synthetic --threads 1 --steps S --metrics`): the median step after
   --warmup without drawing the next batch's inputs (less its data_s, which the
   prediction leaves out) and the largest memory_bytes of the ranks against the
   point's prediction
   (targets: within 15% and 10%); with --svg-dir, the frontier drawn with the measured
   points beside it (`--frontier-measured`).
3. Memory-limited (--limited, wide_mlp and lm by default): a limit between the
   frontier's smallest point and pure data parallelism's, so that 1 x N does not fit.
   The plan `--memory-limit` chooses, trained, against the fastest measured of the
   hand-picked grids (`--grid=PrxPc`, bench/grid.py's) whose predicted peak fits, and
   against pure data parallelism with sharded updates and optimizer state
   (`--shard-weight-update=on`, ZeRO-1), whether or not it fits: ratios of step time.
4. With --scale: the search on bert_base (examples/make_models.py bert_base) at 8 to
   64 ranks of 8-rank machines, predicted only (no run): search and compile time,
   the frontier's size and ends, beside TensorOpt's reported trends.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402

OPT_FLAGS = ["--optimizer=adam", "--lr=0.0001", "--epsilon=1e-06"]


def model_path(work, name):
    if name == "wide_mlp":
        return pxbench.export_mlp(work / "wide_mlp.onnx", [1024, 4096, 4096, 1024, 10], batch=64)
    return pxbench.MODELS_DIR / f"{name}.onnx"


def mib(b):
    return b / 2**20


def search(build, src, n, flags, out_json, extra=()):
    """parallax-opt's search: the frontier file and its summary line."""
    p = subprocess.run([str(build / "bin" / "parallax-opt"), str(src), "--np", str(n),
                        "--frontier", str(out_json), *flags, *extra],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise pxbench.CommandFailed(f"parallax-opt {src} --frontier failed", p.stderr)
    return json.loads(Path(out_json).read_text()), p.stderr.strip().splitlines()[-1]


def train(build, work, plan, n, args, tag, predicted_seconds=0.0):
    """The median step after --warmup, the median of it without drawing the
    next batch's synthetic inputs (data_s: what the prediction covers), and
    the ranks' largest memory_bytes. A plan predicted to step fast runs
    longer (pxbench.timed_steps, --min-seconds)."""
    steps, warmup = pxbench.timed_steps(args.steps, args.warmup, predicted_seconds,
                                        args.min_seconds)
    metrics = work / f"{tag}.jsonl"
    pxbench.run([build / "bin" / "parallax-run", plan, "--np", str(n), "--synthetic",
                 "--threads", "1", "-q", "--steps", str(steps), "--metrics", metrics],
                f"parallax-run {tag}", timeout=1800)
    ranks = [pxbench.read_metrics(str(metrics).replace(".jsonl", f".rank{r}.jsonl"))
             for r in range(n)]
    steady = [line for line in ranks[0] if line["step"] > warmup]
    return (pxbench.median([line["step_time_s"] for line in steady]),
            # On the CPU the next batch's filling adds to the step.
            pxbench.median(pxbench.steps_less_data(ranks, warmup)),
            max(line.get("memory_bytes", 0) for r in ranks for line in r))


def compile_plan(build, src, plan, flags):
    pxbench.run([build / "bin" / "parallax-opt", src, "--emit=plan", "-o", plan, *flags],
                f"parallax-opt {src.name} {' '.join(flags)}", timeout=1800)
    info = pxbench.print_plan(build / "bin" / "parallax-run", plan)
    return info["options"]["predicted"]["step_seconds"], info["memory"]["peak"]


def zero1_text(p):
    """", ZeRO-1", ", ZeRO-1 50%" or ", ZeRO-1 on 3 layers", as parallax-opt's
    summaries."""
    f = p.get("zero1_fraction", 1)
    layers = p.get("zero1_layers", [])
    if f == 0 and layers:
        return ", ZeRO-1 on %d layer%s" % (len(layers), "" if len(layers) == 1 else "s")
    return ", ZeRO-1" if f >= 1 else f", ZeRO-1 {round(f * 100)}%"


def recompute_text(p):
    """", recompute" or ", recompute 25%", as parallax-opt's summaries."""
    f = p.get("recompute_fraction", 1)
    return ", recompute" if f >= 1 else f", recompute {round(f * 100)}%"


def layers_text(p):
    """", 3 layers recomputed", as parallax-opt's summaries."""
    n = len(p.get("recompute_layers", []))
    return f", {n} layer{'' if n == 1 else 's'} recomputed" if n else ""


def tables_text(p):
    """", 2 tables by ps", as parallax-opt's summaries (the schemes other than
    all-gatherv that the search named)."""
    text = ""
    for scheme, words in (("ps", "ps"), ("allreduce", "all-reduce")):
        n = sum(1 for s in p.get("sync_variables", {}).values() if s == scheme)
        if n:
            text += f", {n} table{'' if n == 1 else 's'} by {words}"
    return text


def spread(n, k):
    """k of n indices, evenly spread, both ends included (all n if n <= k)."""
    m = min(k, n)
    return sorted({round(i * (n - 1) / max(m - 1, 1)) for i in range(m)})


def validate(build, work, name, src, args, flags):
    frontier, line = search(build, src, args.np, flags, work / f"{name}-frontier.json")
    points = frontier["frontier"]
    if args.no_validate:
        return frontier, []
    print(f"\n### {name} on {args.np} ranks: {len(points)} frontier points "
          f"(search {frontier['search_seconds']:.2f} s, compiling "
          f"{frontier['compile_seconds']:.2f} s)\n")
    print("| point | strategy | ms/step less data | predicted | pred/meas | memory MiB | "
          "predicted | pred/meas |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    measured = []
    rows = []
    # Points spread over the frontier; where it has fewer than --points,
    # the dominated strategies that --grid compiles too (pure data
    # parallelism and the grids' pairing-rule plans), so that the
    # prediction is checked on as many strategies.
    chosen = [("point", k, ["--plan-point", str(k)]) for k in spread(len(points), args.points)]
    for r, p in enumerate(frontier["dominated_references"]):
        if len(chosen) >= args.points:
            break
        if p.get("pairing_rule") or p["grid"].startswith("1x"):
            chosen.append(("reference", r, [f"--grid={p['grid']}", "--shard-weight-update=" +
                                            ("on" if p["zero1"] else "off")] +
                           ([f"--shard-weight-update-fraction={p['zero1_fraction']}"]
                            if 0 < p.get("zero1_fraction", 1) < 1 else []) +
                           (["--recompute"] if p.get("recompute") else []) +
                           ([f"--recompute-fraction={p['recompute_fraction']}"]
                            if 0 < p.get("recompute_fraction", 1) < 1 else []) +
                           (["--sequence-parallel"] if p.get("sequence_parallel") else [])))
    for kind, k, plan_flags in chosen:
        p = (points if kind == "point" else frontier["dominated_references"])[k]
        tag = f"{name}-{kind[0]}{k}"
        plan = work / f"{tag}.pxplan"
        predicted, _ = compile_plan(build, src, plan,
                                    ["--np", str(args.np), *plan_flags, *flags])
        _, seconds, memory = train(build, work, plan, args.np, args, tag, predicted)
        measured.append({kind: k, "step_seconds": seconds, "memory_bytes": memory})
        split = sum(s != "whole" for s in p["splits"].values())
        strategy = p["grid"] + (zero1_text(p) if p["zero1"] else "") + \
            (recompute_text(p) if p.get("recompute") else "") + layers_text(p) + \
            tables_text(p) + \
            (f", {split} of {len(p['splits'])} split" if p["grid"][0] != "1" else "") + \
            (" (pairing rule)" if p.get("pairing_rule") else "") + \
            (", sequence-parallel" if p.get("sequence_parallel") else "") + \
            (" (dominated)" if kind == "reference" else "")
        t, m = p["step_seconds"] / seconds, p["memory_bytes"] / max(memory, 1)
        rows.append({kind: k, "strategy": strategy, "ms": seconds * 1e3,
                     "predicted_ms": p["step_seconds"] * 1e3, "memory": memory,
                     "predicted_memory": p["memory_bytes"]})
        print(f"| {k if kind == 'point' else '-'} | {strategy} | {seconds * 1e3:.2f} | {p['step_seconds'] * 1e3:.2f} | "
              f"{t:.2f}{'' if abs(t - 1) <= 0.15 else ' !'} | {mib(memory):.1f} | "
              f"{mib(p['memory_bytes']):.1f} | {m:.2f}{'' if abs(m - 1) <= 0.10 else ' !'} |")
    within = sum(abs(r["predicted_ms"] / r["ms"] - 1) <= 0.15 for r in rows)
    memory_within = sum(abs(r["predicted_memory"] / max(r["memory"], 1) - 1) <= 0.10 for r in rows)
    print(f"\nstep time within 15%: {within} of {len(rows)}; memory within 10%: "
          f"{memory_within} of {len(rows)} ('!' marks the others)")
    if args.svg_dir:
        m = work / f"{name}-measured.json"
        m.write_text(json.dumps(measured))
        Path(args.svg_dir).mkdir(parents=True, exist_ok=True)
        svg = Path(args.svg_dir) / f"frontier-{name}.svg"
        search(build, src, args.np, flags, work / f"{name}-frontier-measured.json",
               ["--frontier-measured", str(m), "--frontier-svg", str(svg)])
        print(f"figure: {svg}")
    return frontier, rows


def memory_limited(build, work, name, src, frontier, args, flags):
    points = frontier["frontier"]
    everything = points + frontier["dominated_references"]
    data = next((p for p in everything if p.get("label") == "pure data parallelism"), None)
    smallest = points[-1]
    if not data or smallest["memory_bytes"] >= data["memory_bytes"]:
        print(f"\n{name}: no memory limit excludes pure data parallelism here")
        return None
    limit = (smallest["memory_bytes"] + data["memory_bytes"]) // 2
    n = args.np
    print(f"\n### {name}: memory limit {mib(limit):.1f} MiB per rank (pure data parallelism "
          f"predicts {mib(data['memory_bytes']):.1f})\n")
    print("| plan | ms/step | memory MiB (predicted) | fits |")
    print("|---|---:|---:|---|")
    results = {"limit": limit}

    def run_plan(tag, plan_flags):
        plan = work / f"{name}-{tag}.pxplan"
        predicted, peak = compile_plan(build, src, plan,
                                       ["--np", str(n), *plan_flags, *flags])
        seconds, _, measured = train(build, work, plan, n, args, f"{name}-{tag}", predicted)
        return {"ms": seconds * 1e3, "predicted_memory": peak, "memory": measured,
                "fits": peak <= limit}

    chosen = run_plan("limit", ["--memory-limit", str(limit)])
    results["chosen"] = chosen
    print(f"| strategy search (--memory-limit) | {chosen['ms']:.2f} | "
          f"{mib(chosen['memory']):.1f} ({mib(chosen['predicted_memory']):.1f}) | "
          f"{'yes' if chosen['fits'] else 'NO'} |")
    hand = []
    for pr in range(1, n + 1):
        if n % pr:
            continue
        r = run_plan(f"grid{pr}x{n // pr}", [f"--grid={pr}x{n // pr}"])
        r["grid"] = f"{pr}x{n // pr}"
        hand.append(r)
        print(f"| --grid={r['grid']} | {r['ms']:.2f} | {mib(r['memory']):.1f} "
              f"({mib(r['predicted_memory']):.1f}) | {'yes' if r['fits'] else 'no'} |")
    zero = run_plan("zero1", ["--shard-weight-update=on"])
    print(f"| 1x{n} ZeRO-1 (--shard-weight-update=on) | {zero['ms']:.2f} | "
          f"{mib(zero['memory']):.1f} ({mib(zero['predicted_memory']):.1f}) | "
          f"{'yes' if zero['fits'] else 'no'} |")
    results["grids"], results["zero1"] = hand, zero
    fitting = [r for r in hand if r["fits"]]
    if fitting:
        best = min(fitting, key=lambda r: r["ms"])
        print(f"\nchosen plan: {best['ms'] / chosen['ms']:.2f}x the speed of the best "
              f"hand-picked grid that fits ({best['grid']}), "
              f"{zero['ms'] / chosen['ms']:.2f}x that of ZeRO-1 data parallelism"
              f"{'' if zero['fits'] else ' (which does not fit)'}")
    return results


CLUSTER = """{"machines": %s,
 "intra_machine": {"bandwidth_gbps": 80, "latency_us": 2},
 "inter_machine": {"bandwidth_gbps": 25, "latency_us": 10}}"""


# The devices --scale prices bert_base on: "cpu", the compiler's default
# rates (a modest core's, about this machine's) on CLUSTER's links; "gpu",
# assumed figures of a V100-class GPU (about 14 TFLOP/s of f32 products,
# 800 GB/s of memory, 5 us per kernel launch) in machines of 8 joined by
# NVLink-class links inside (100 GB/s) and 100 Gb/s InfiniBand between, as
# TensorOpt's and Megatron-LM's clusters are. Neither is measured here.
GPU_CLASS = {"format": "parallax-profile", "flops_per_second": 14e12,
             "conv_flops_per_second": 10e12, "stream_bytes_per_second": 800e9,
             "kernel_seconds": 5e-6,
             "intra_machine": {"bandwidth_bytes_per_s": 100e9, "latency_s": 5e-6},
             "inter_machine": {"bandwidth_bytes_per_s": 12.5e9, "latency_s": 10e-6}}


def scale(build, work, args):
    src = pxbench.MODELS_DIR / "bert_base.onnx"
    if not src.exists():
        print(f"\n--scale: {src} is missing: /usr/bin/python3 examples/make_models.py bert_base")
        return None
    print("\n### bert_base at paper scale (predicted; machines of 8 ranks)\n")
    print("| device | ranks | search s | compiling s | frontier (grids) | fastest (ms, MiB) | "
          "smallest (ms, MiB) | pure data parallelism (ms, MiB) |")
    print("|---|---:|---:|---:|---|---|---|---|")
    out = []
    for device in args.scale_device:
        extra = []
        if device == "gpu":
            profile = work / "gpu-class.json"
            profile.write_text(json.dumps(GPU_CLASS))
            extra = ["--profile", str(profile)]
        for n in args.scale_ranks:
            cluster = work / f"cluster{n}.json"
            machines = [{"host": f"m{i}", "ranks": 8} for i in range(max(n // 8, 1))]
            cluster.write_text(CLUSTER % json.dumps(machines))
            flags = ["--cluster", str(cluster), "--batch-size", str(args.scale_batch * n),
                     *extra, *OPT_FLAGS]
            name = work / f"bert-{device}{n}.json"
            p = subprocess.run([str(build / "bin" / "parallax-opt"), str(src), "--frontier",
                                str(name), *flags], capture_output=True, text=True,
                               timeout=1800)
            if p.returncode != 0:
                print(f"| {device} | {n} | failed: {p.stderr.strip().splitlines()[-1]} ||||||")
                continue
            d = json.loads(name.read_text())
            pts = d["frontier"]
            data = next((q for q in pts + d["dominated_references"]
                         if q.get("label") == "pure data parallelism"), None)

            def cell(q):
                return f"{q['step_seconds'] * 1e3:.0f}, {mib(q['memory_bytes']):.0f} " \
                       f"({q['grid']})" if q else "-"
            grids = ", ".join(dict.fromkeys(q["grid"] for q in pts))
            print(f"| {device} | {n} | {d['search_seconds']:.2f} | {d['compile_seconds']:.1f} | "
                  f"{len(pts)} ({grids}) | {cell(pts[0])} | {cell(pts[-1])} | {cell(data)} |")
            d["device"] = device
            out.append(d)
    print("\nTensorOpt (TPDS'21) reports that the frontier moves to less memory per device "
          "as devices are added, that the fastest point leaves pure data parallelism for "
          "hybrid splits once the weights' all-reduce dominates, and that the search "
          "stays in seconds to minutes for models of this size.")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="wide_mlp,dlrm,lm")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--limited", default="wide_mlp,lm",
                    help="models (of --models) that also run the memory-limited comparison")
    ap.add_argument("--no-validate", action="store_true",
                    help="skip training the frontier points (the comparison only)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=1.0,
                    help="run plans predicted to step fast longer, the steps and warm-up "
                         "scaled alike (up to 250x), so that the timed steps span this "
                         "many seconds")
    ap.add_argument("--svg-dir")
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--scale-ranks", type=lambda s: [int(x) for x in s.split(",")],
                    default=[8, 16, 32, 64])
    ap.add_argument("--scale-batch", type=int, default=8, help="samples per rank at --scale")
    ap.add_argument("--scale-device", type=lambda s: s.split(","), default=["cpu", "gpu"],
                    help="devices --scale prices on: cpu (default rates), gpu (GPU_CLASS)")
    ap.add_argument("--build")
    ap.add_argument("--work", default="/tmp/parallax-bench-frontier")
    ap.add_argument("--json")
    args = ap.parse_args()
    build, work = pxbench.setup(args)
    print(f"load average before: {pxbench.loadavg()}")
    results = {}
    models = [m for m in args.models.split(",") if m and m != "none"]
    if models:
        profile = pxbench.calibrate(build, work, args.np)
        flags = ["--profile", str(profile), *OPT_FLAGS]
        for i, name in enumerate(models):
            src = model_path(work, name)
            frontier, rows = validate(build, work, name, src, args, flags)
            results[name] = {"points": rows}
            if name in args.limited.split(","):
                results[name]["memory_limited"] = memory_limited(build, work, name, src,
                                                                 frontier, args, flags)
    if args.scale:
        results["scale"] = scale(build, work, args)
    print(f"\nload average after: {pxbench.loadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
