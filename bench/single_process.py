#!/usr/bin/python3
"""One training step of each example model: parallax-run versus PyTorch eager.

    bench/single_process.py [--models mlp,cnn,nmt,lm,dlrm] [--threads 1,2]
                            [--optimizers sgd,adam] [--steps 50] [--warmup 10]
                            [--repeats 3] [--build DIR] [--work DIR] [--json F]

For every model, optimizer and thread count T, in one run on this machine:

* PyTorch: the nn.Module of examples/make_models.py (the exported model
  itself), model.train(), torch.set_num_threads(T), the model's default
  batch, and per step optimizer.zero_grad(), loss = model(*batch),
  loss.backward(), optimizer.step(), timed with perf_counter.  Embeddings
  are as written: nn.Embedding's default dense gradients (and lm's w_out,
  b_out read through F.embedding / index_select: dense gradients too).
  Batches are drawn up front (a fresh batch per step) with the distributions
  parallax-run --synthetic uses (normal floats, Zipf ids, uniform labels).
* Parallax: parallax-opt MODEL --emit=plan --optimizer=O --lr=LR, then
  parallax-run PLAN --synthetic --threads T --steps W+N --metrics F; the
  step times are its step_time_s, which include drawing the synthetic
  batch (e.g. cnn's 49,152 Box-Muller normals).  A second Parallax column
  runs the same plan on --data DIR: the very batches the PyTorch side
  trains on, written as .npy (parallax-run copies each batch in).

The first W steps of each side are warm-up and dropped; each run gives the
median of its N remaining steps; the run is repeated R times, alternating
which side goes first, and the table shows the median over the repeats (and
the minimum).  SGD lr 0.01; Adam lr 0.001 (torch.optim.Adam over every
parameter with its dense gradients, against Parallax's Adam, which is lazy
(SparseAdam) on the sparse variables: the same optimizer as each system
applies it to the model as written).

Prints a markdown table of ms/step and the ratio PyTorch / Parallax (> 1:
Parallax is faster).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402

LR = {"sgd": 0.01, "adam": 0.001}


# ---------------------------------------------------------------------------
# PyTorch side (a subprocess per run, so that thread settings stay clean)
# ---------------------------------------------------------------------------

def torch_worker(args):
    import torch
    torch.set_num_threads(args.threads)
    module, spec = pxbench.build_module(args.model)
    with open(args.inputs) as f:
        inputs = json.load(f)
    pxbench.check_input_order(spec, inputs)
    batches = pxbench.torch_batches(inputs, args.warmup + args.steps)
    opt = pxbench.torch_optimizer(module, args.optimizer, LR[args.optimizer])
    times, loss = pxbench.time_torch_steps(module, opt, batches)
    print(json.dumps({"times": times[args.warmup:], "loss": float(loss),
                      "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))


def run_torch(model, threads, optimizer, steps, warmup, inputs_file):
    # torch.set_num_threads(T) sets the OpenMP pool only: Debian's torch
    # calls the system OpenBLAS, which would still start one thread per core
    # for every matrix product. OPENBLAS_NUM_THREADS=T makes T the thread
    # count of the whole step, as --threads T is for parallax-run.
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    out = pxbench.run([pxbench.PYTHON, __file__, "--torch-worker", model,
                       "--threads", str(threads), "--optimizer", optimizer,
                       "--steps", str(steps), "--warmup", str(warmup),
                       "--inputs", inputs_file],
                      "PyTorch %s T=%d %s" % (model, threads, optimizer), env=env)
    return json.loads(out.strip().splitlines()[-1])["times"]


def run_parallax(build, plan, threads, steps, warmup, metrics, data=None):
    source = ["--data", str(data)] if data else ["--synthetic"]
    pxbench.run([build / "bin" / "parallax-run", plan, *source,
                 "--threads", str(threads), "--steps", str(warmup + steps),
                 "--metrics", metrics, "-q"],
                "parallax-run %s T=%d" % (plan, threads))
    return [m["step_time_s"] for m in pxbench.read_metrics(metrics)][warmup:]


def write_data(inputs, steps, out_dir):
    """The batches the PyTorch side trains on (Synthetic seed 1), in
    parallax-run --data format: batched inputs [steps * B, ...], unbatched
    ones [steps, ...] (one row per step)."""
    import numpy as np
    out_dir.mkdir(parents=True, exist_ok=True)
    batches = pxbench.Synthetic(inputs, seed=1).batches(steps)
    for k, inp in enumerate(inputs):
        parts = [b[k] for b in batches]
        a = np.concatenate(parts) if inp["batch_axis"] == 0 else np.stack(parts)
        np.save(out_dir / (inp["name"] + ".npy"), a)
    return out_dir


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--models", default="mlp,cnn,nmt,lm,dlrm")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--optimizers", default="sgd")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build")
    ap.add_argument("--work", default="/tmp/parallax-bench-single")
    ap.add_argument("--json", help="also write the results as JSON here")
    # internal: one PyTorch run
    ap.add_argument("--torch-worker", metavar="MODEL", dest="model")
    ap.add_argument("--optimizer")
    ap.add_argument("--inputs")
    args = ap.parse_args()
    if args.model:
        args.threads = int(args.threads)
        return torch_worker(args)

    build, work = pxbench.setup(args)
    models = args.models.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    optimizers = args.optimizers.split(",")
    load0 = pxbench.loadavg()
    print("# build %s; %d steps after %d warm-up, %d repeats; load average %.2f %.2f %.2f"
          % (build, args.steps, args.warmup, args.repeats, *load0), flush=True)

    results = []
    for model in models:
        for optimizer in optimizers:
            plan = pxbench.compile_plan(build, model, work / ("%s-%s.pxplan" % (model, optimizer)),
                                        ["--optimizer=" + optimizer, "--lr=%g" % LR[optimizer]])
            pj = pxbench.plan_json(build, plan)
            inputs_file = work / ("%s.inputs.json" % model)
            inputs_file.write_text(json.dumps(pj["inputs"]))
            data_dir = write_data(pj["inputs"], args.warmup + args.steps,
                                  work / ("%s-data" % model))
            batch = next((i["shape"][0] for i in pj["inputs"] if i["batch_axis"] == 0), 1)
            for t in threads:
                pt_runs, px_runs, pxd_runs = [], [], []
                for rep in range(args.repeats):
                    sides = ["pt", "px", "pxd"] if rep % 2 == 0 else ["pxd", "px", "pt"]
                    for side in sides:
                        if side == "pt":
                            pt_runs.append(pxbench.median(run_torch(
                                model, t, optimizer, args.steps, args.warmup, str(inputs_file))))
                        elif side == "px":
                            px_runs.append(pxbench.median(run_parallax(
                                build, plan, t, args.steps, args.warmup,
                                work / ("%s-%s-t%d.jsonl" % (model, optimizer, t)))))
                        else:
                            pxd_runs.append(pxbench.median(run_parallax(
                                build, plan, t, args.steps, args.warmup,
                                work / ("%s-%s-t%d-data.jsonl" % (model, optimizer, t)),
                                data=data_dir)))
                r = {"model": model, "batch": batch, "threads": t, "optimizer": optimizer,
                     "pytorch_s": pxbench.median(pt_runs), "parallax_s": pxbench.median(px_runs),
                     "pytorch_min_s": min(pt_runs), "parallax_min_s": min(px_runs),
                     "parallax_data_s": pxbench.median(pxd_runs),
                     "pytorch_runs": pt_runs, "parallax_runs": px_runs,
                     "parallax_data_runs": pxd_runs, "load": pxbench.loadavg()}
                r["ratio"] = r["pytorch_s"] / r["parallax_s"]
                r["ratio_data"] = r["pytorch_s"] / r["parallax_data_s"]
                results.append(r)
                print("  %-5s T=%d %-4s  PyTorch %9.3f ms  Parallax %9.3f ms (ratio %6.2f), "
                      "with --data %9.3f ms (ratio %6.2f)  (load %.2f)"
                      % (model, t, optimizer, 1e3 * r["pytorch_s"], 1e3 * r["parallax_s"],
                         r["ratio"], 1e3 * r["parallax_data_s"], r["ratio_data"],
                         r["load"][0]), flush=True)

    notes = pxbench.DENSE_GRAD_NOTES
    print()
    print("| model | batch | threads | optimizer | PyTorch ms/step | Parallax ms/step "
          "(--synthetic) | PyTorch / Parallax | min / min | Parallax ms/step (--data) "
          "| PyTorch / Parallax (--data) | note |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        print("| %s | %d | %d | %s | %.3f | %.3f | **%.2f** | %.2f | %.3f | %.2f | %s |" % (
            r["model"], r["batch"], r["threads"], r["optimizer"], 1e3 * r["pytorch_s"],
            1e3 * r["parallax_s"], r["ratio"], r["pytorch_min_s"] / r["parallax_min_s"],
            1e3 * r["parallax_data_s"], r["ratio_data"], notes.get(r["model"], "")))
    load1 = pxbench.loadavg()
    print("\nload average before %.2f %.2f %.2f, after %.2f %.2f %.2f" % (*load0, *load1))
    slower = [r for r in results if r["ratio"] < 1]
    print("target (Parallax at least as fast on every model): %s" % (
        "met" if not slower else "NOT met for " + ", ".join(
            "%s T=%d %s (%.2f)" % (r["model"], r["threads"], r["optimizer"], r["ratio"])
            for r in slower)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": load0, "load_after": load1, "results": results,
                       "steps": args.steps, "warmup": args.warmup,
                       "repeats": args.repeats}, f, indent=1)


if __name__ == "__main__":
    main()
