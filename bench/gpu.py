#!/usr/bin/env python3
"""One training step of each example model on one GPU: parallax-run versus PyTorch eager.

    python3 bench/gpu.py --run build-gpu/bin/parallax-run --plans .gpu-check/plans
                         [--models mlp,cnn,nmt,lm,dlrm] [--steps 50] [--warmup 10]
                         [--json F] [--parallax-args "--deterministic=off"]

Runs on the GPU machine, which has no parallax-opt (no MLIR): the plans are
compiled elsewhere for --target=cuda and carried (scripts/gpu-check-prepare.sh
writes PLANS/MODEL.cuda.pxplan); nothing is recompiled. The inputs' shapes,
dtypes and distributions, the optimizer and the learning rate are read from
each plan (parallax-run PLAN --print-plan). For every model, on the same GPU:

* Parallax: parallax-run PLAN --device=cuda --synthetic --seed 1 --weights
  random --steps W+N --metrics F; its step_time_s (which includes drawing the
  synthetic batch on the host and uploading it). --parallax-args adds
  options to its command line (--deterministic=off: cuDNN's convolution
  algorithms timed at load and the fastest taken, atomics allowed, as
  PyTorch's defaults and cudnn.benchmark).
* PyTorch: the nn.Module of examples/make_models.py (the exported model
  itself) moved to the GPU, model.train(), the plan's optimizer (SGD lr 0.01
  for the carried plans), TF32 off for matmuls and cuDNN (as parallax-run
  without --tf32), a fresh batch per step drawn up front on the GPU with the
  plan's shapes and parallax-run --synthetic's distributions, and per step
  zero_grad(), forward, backward(), step(), timed with perf_counter between
  torch.cuda.synchronize() calls. Embeddings are as written (dense
  gradients); a model with nn.Embedding / nn.EmbeddingBag modules and SGD
  runs a second time with sparse=True on each ("PyTorch sparse": row-sparse
  gradients, as Parallax's; an embedding read through F.embedding, like the
  LM's output table, stays dense).
* Peak GPU memory: PyTorch's torch.cuda.max_memory_allocated() over the
  dense run, less the batches drawn up front but one, and parallax-run's
  device_memory_bytes (the most its allocations held at once). Neither
  counts the CUDA context or the libraries' own memory.

--plans may hold plans compiled at a larger batch (gpu-check-prepare.sh
writes PLANS/bench/ at batches that fill the GPU better, the LM at 128 x
20): the batch is read from each plan.

The first W steps of each side are dropped; each side gives the median of
the other N. Prints a markdown table of ms/step and the ratio PyTorch /
Parallax (> 1: Parallax is faster). A model whose plan is missing, whose
module cannot be built here (torchvision missing) or whose run fails gets a
row saying why.
"""

import argparse
import contextlib
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402

PARALLAX_TIMEOUT_S = 60


def why(e):
    """A failure in one line, for a table cell."""
    if isinstance(e, subprocess.TimeoutExpired):
        return "timed out after %g s" % e.timeout
    text = getattr(e, "output", None) or str(e)
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(e).__name__).replace("|", "/")[:200]


def run_parallax(parallax_run, plan, device, steps, warmup, metrics, extra=()):
    pxbench.run([parallax_run, plan, "--device=" + device, "--synthetic", "--seed", "1",
                 "--weights", "random", "--steps", str(warmup + steps),
                 "--metrics", metrics, "-q", *extra],
                "parallax-run %s" % plan, timeout=PARALLAX_TIMEOUT_S)
    lines = pxbench.read_metrics(metrics)
    peak = max((m.get("device_memory_bytes", 0) for m in lines), default=0)
    return [m["step_time_s"] for m in lines][warmup:], peak


def sparse_embeddings(torch, module):
    """Turns every embedding module's gradient row-sparse; how many."""
    n = 0
    for m in module.modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            m.sparse = True
            n += 1
    return n


def run_torch(torch, model, pj, device, steps, warmup, sparse=False):
    """Step times, the last loss and the peak of allocated GPU memory (0 on
    the CPU); None when sparse and the module has no embedding to make
    sparse or an optimizer that takes no sparse gradients."""
    module, spec = pxbench.build_module(model)
    pxbench.check_input_order(spec, pj["inputs"])
    options = pj.get("options", {})
    if sparse and (options.get("optimizer", "sgd") != "sgd" or not sparse_embeddings(torch, module)):
        return None
    module.to(device)
    opt = pxbench.torch_optimizer(module, options.get("optimizer", "sgd"),
                                  options.get("lr", 0.01))
    batches = pxbench.torch_batches(pj["inputs"], warmup + steps, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    # Tensors a forward makes without a device (lm's sampled-softmax
    # labels) must land on the model's, as the module was written for one.
    # (torch < 2.0, here, has no such context: there the device is the CPU.)
    scope = device if hasattr(device, "__enter__") else contextlib.nullcontext()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    with scope:
        times, loss = pxbench.time_torch_steps(module, opt, batches, sync)
    # The batches were drawn up front onto the GPU; Parallax holds one (and
    # the next, staged): count one.
    drawn = sum(t.numel() * t.element_size() for t in batches[0]) * (len(batches) - 1)
    peak = torch.cuda.max_memory_allocated(device) - drawn if cuda else 0
    return times[warmup:], float(loss), peak


def bench_model(torch, args, model, device, work):
    """One row: the model's median step time on each side, or why a side
    has none ("parallax_error", "pytorch_error")."""
    # --torch-device cpu checks this script without a GPU: the plans' CPU
    # twins (MODEL.cpu.pxplan) on the CPU.
    target = "cuda" if device.type == "cuda" else "cpu"
    plan = Path(args.plans) / ("%s.%s.pxplan" % (model, target))
    r = {"model": model, "plan": str(plan)}
    if not plan.exists():
        r["parallax_error"] = r["pytorch_error"] = "no plan %s" % plan
        return r
    # pxbench's helpers exit on errors (CommandFailed, SystemExit): here they
    # end the row, not the run.
    try:
        pj = pxbench.print_plan(args.run, plan)
    except SystemExit as e:
        r["parallax_error"] = r["pytorch_error"] = "unreadable plan: " + why(e)
        return r
    r["batch"] = next((i["shape"][0] for i in pj["inputs"] if i["batch_axis"] == 0), 1)
    try:
        r["parallax_times"], peak = run_parallax(args.run, plan, target, args.steps,
                                                 args.warmup, work / ("%s.jsonl" % model),
                                                 args.parallax_args.split())
        r["parallax_s"] = pxbench.median(r["parallax_times"])
        if peak:
            r["parallax_peak_bytes"] = peak
    except (SystemExit, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
        r["parallax_error"] = "Parallax: " + why(e)
    try:
        r["pytorch_times"], r["pytorch_loss"], peak = run_torch(torch, model, pj, device,
                                                                args.steps, args.warmup)
        r["pytorch_s"] = pxbench.median(r["pytorch_times"])
        if peak:
            r["pytorch_peak_bytes"] = peak
    except ImportError as e:  # torchvision missing
        r["pytorch_error"] = "PyTorch module not built: " + why(e)
    except (SystemExit, Exception) as e:  # a module this torch cannot run, out of memory
        r["pytorch_error"] = "PyTorch: %s: %s" % (type(e).__name__, why(e))
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if "pytorch_s" in r:
        try:
            sparse = run_torch(torch, model, pj, device, args.steps, args.warmup, sparse=True)
            if sparse:
                r["pytorch_sparse_times"] = sparse[0]
                r["pytorch_sparse_s"] = pxbench.median(sparse[0])
        except Exception as e:  # noqa: BLE001 - the dense row stands
            r["pytorch_error"] = "PyTorch sparse=True: %s: %s" % (type(e).__name__, why(e))
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if "parallax_s" in r:
        for side, key in (("pytorch_s", "ratio"), ("pytorch_sparse_s", "ratio_sparse")):
            if side in r:
                r[key] = r[side] / r["parallax_s"]
    return r


def cells(r):
    """ms/step of PyTorch (dense, sparse) and Parallax, the ratios, the peak
    GPU memory of each side in MiB, and the note."""
    ms = ["%.3f" % (1e3 * r[side]) if side in r else "-"
          for side in ("pytorch_s", "pytorch_sparse_s", "parallax_s")]
    ratios = ["%.2f" % r[k] if k in r else "-" for k in ("ratio", "ratio_sparse")]
    mib = ["%.0f" % (r[k] / 2**20) if k in r else "-"
           for k in ("pytorch_peak_bytes", "parallax_peak_bytes")]
    errors = list(dict.fromkeys(r[k] for k in ("pytorch_error", "parallax_error") if k in r))
    note = "; ".join(errors) or pxbench.DENSE_GRAD_NOTES.get(r["model"], "")
    return ms + ratios + mib + [note]


def print_table(results, gpu):
    print()
    print("# %s; ms/step medians; ratio: PyTorch / Parallax (> 1: Parallax is faster); "
          "peak MiB: allocated GPU memory" % gpu)
    print("| model | batch | PyTorch ms | PyTorch sparse ms | Parallax ms | ratio | ratio sparse "
          "| PyTorch peak MiB | Parallax peak MiB | note |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        pt, pts, px, ratio, ratio_sparse, ptm, pxm, note = cells(r)
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r.get("batch", "-"), pt, pts, px,
            "**%s**" % ratio if ratio != "-" else ratio, ratio_sparse, ptm, pxm, note))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default=str(pxbench.ROOT / "build-gpu" / "bin" / "parallax-run"),
                    help="the parallax-run built for CUDA (default: build-gpu/bin/parallax-run)")
    ap.add_argument("--plans", default=str(pxbench.ROOT / ".gpu-check" / "plans"),
                    help="directory of MODEL.cuda.pxplan (default: .gpu-check/plans)")
    ap.add_argument("--models", default="mlp,cnn,nmt,lm,dlrm",
                    help="comma-separated, from examples/make_models.py (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=50, help="timed steps (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed steps before them (default: %(default)s)")
    ap.add_argument("--work", default="/tmp/parallax-bench-gpu",
                    help="metrics files go here (default: %(default)s)")
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--parallax-args", default="",
                    help="more parallax-run options, space-separated (e.g. --deterministic=off)")
    ap.add_argument("--torch-device", default="cuda", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0:
        sys.exit("gpu.py: --steps must be >= 1 and --warmup >= 0")
    if not Path(args.run).is_file():
        sys.exit("gpu.py: %s: no parallax-run there (give the CUDA build's with --run)" % args.run)
    if not Path(args.plans).is_dir():
        sys.exit("gpu.py: %s: no plans directory (scripts/gpu-check-prepare.sh writes "
                 ".gpu-check/plans; give it with --plans)" % args.plans)

    t0 = time.perf_counter()
    import torch
    device = torch.device(args.torch_device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("gpu.py: no CUDA device visible to PyTorch %s; run it on the GPU machine"
                     % torch.__version__)
        gpu = torch.cuda.get_device_name(device)
        # parallax-run keeps f32 products in f32 unless --tf32; the peer does too.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # newer torch prefers fp32_precision
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    else:
        gpu = "none (%s)" % device
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print("# GPU %s; torch %s; %s %s; %d steps after %d warm-up" % (
        gpu, torch.__version__, args.run, args.parallax_args, args.steps, args.warmup),
        flush=True)

    results = []
    for model in args.models.split(","):
        r = bench_model(torch, args, model, device, work)
        results.append(r)
        print("  %-15s ms/step: PyTorch %9s (sparse %s)  Parallax %9s  ratio %5s (%s)  "
              "peak MiB %s / %s  %s" % (model, *cells(r)), flush=True)

    print_table(results, gpu)
    elapsed = time.perf_counter() - t0
    print("\n%.0f s in all" % elapsed)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "steps": args.steps,
                       "parallax_args": args.parallax_args,
                       "warmup": args.warmup, "seconds": elapsed, "results": results},
                      f, indent=1)
    failed = [r["model"] for r in results if "parallax_error" in r]
    if failed:
        sys.exit("gpu.py: no Parallax time for " + ", ".join(failed))


if __name__ == "__main__":
    main()
