#!/usr/bin/python3
"""One training step of a 2-layer nn.LSTM / nn.GRU: parallax-run versus PyTorch.

    bench/rnn.py [--kinds LSTM,GRU] [--batch 32] [--seq 35] [--hidden 256]
                 [--threads 1] [--steps 10] [--repeats 3] [--build DIR] [--work DIR]

The layer kernels (px.lstm / px.gru and their backward kernels) at a size
where they dominate the step: x [batch, seq, hidden] float input, a 2-layer
module with batch_first, loss = mean(y * y), SGD lr 0.01, exported as
examples/make_models.py exports (training mode, no constant folding, a
dynamic batch axis). Both sides are measured in CPU time (the process's
user + system time), which a loaded machine disturbs less than wall time:
PyTorch with torch.set_num_threads(T) and OPENBLAS_NUM_THREADS=T over
--steps steps after 3 warm-up steps; parallax-run --synthetic as the
difference between runs of 3 + --steps and 3 steps. Each side runs
--repeats times; the table shows the minimum per step. CPU time is the
measure only for one thread (with more, it adds the threads' times).
"""

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402

LR = 0.01


def module(torch, nn, kind, hidden):
    class Layers(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, kind)(hidden, hidden, num_layers=2, batch_first=True)

        def forward(self, x):
            y, _ = self.rnn(x)
            return (y * y).mean()
    return Layers()


def torch_worker(args):
    """Runs in a subprocess: thread settings stay clean. Prints s/step."""
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    m = module(torch, nn, args.kind, args.hidden)
    x = torch.randn(args.batch, args.seq, args.hidden)
    opt = torch.optim.SGD(m.parameters(), lr=LR)

    def step():
        opt.zero_grad()
        m(x).backward()
        opt.step()
    for _ in range(3):
        step()
    t0 = time.process_time()
    for _ in range(args.steps):
        step()
    print((time.process_time() - t0) / args.steps)


def export(kind, hidden, batch, seq, path):
    import warnings
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    m = module(torch, nn, kind, hidden)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(batch, seq, hidden),), str(path), opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["loss"],
                          dynamic_axes={"x": {0: "batch"}})


def child_cpu(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="LSTM,GRU")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=35)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--build")
    ap.add_argument("--work", default="/tmp/parallax-bench-rnn")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return torch_worker(args)

    build = pxbench.find_build(args.build)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    print("load average before: %.2f %.2f %.2f" % pxbench.loadavg())
    rows = []
    for kind in args.kinds.split(","):
        model = work / f"{kind}-h{args.hidden}.onnx"
        if not model.exists():
            export(kind, args.hidden, args.batch, args.seq, model)
        plan = work / f"{kind}-h{args.hidden}-b{args.batch}.pxplan"
        subprocess.run([str(build / "bin" / "parallax-opt"), str(model), "--emit=plan",
                        "--batch-size", str(args.batch), "--optimizer=sgd", f"--lr={LR}",
                        "-o", str(plan)], check=True)
        run = [str(build / "bin" / "parallax-run"), str(plan), "--synthetic",
               "--threads", str(args.threads), "-q"]
        pt, px = [], []
        for _ in range(args.repeats):
            out = subprocess.run([pxbench.PYTHON, __file__, "--worker", "--kind", kind,
                                  "--batch", str(args.batch), "--seq", str(args.seq),
                                  "--hidden", str(args.hidden), "--threads", str(args.threads),
                                  "--steps", str(args.steps)],
                                 check=True, capture_output=True, text=True, env=env)
            pt.append(float(out.stdout.split()[-1]))
            short = child_cpu(run + ["--steps", "3"], env)
            full = child_cpu(run + ["--steps", str(3 + args.steps)], env)
            px.append((full - short) / args.steps)
        rows.append((kind, min(pt), min(px)))
        print(f"{kind}: PyTorch {min(pt) * 1e3:.1f} ms, Parallax {min(px) * 1e3:.1f} ms "
              f"CPU time per step", flush=True)
    print("load average after: %.2f %.2f %.2f" % pxbench.loadavg())
    print()
    print("| layer | batch x seq x hidden | threads | PyTorch CPU ms/step | "
          "Parallax CPU ms/step | PyTorch / Parallax |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for kind, pt, px in rows:
        print(f"| 2-layer nn.{kind} | {args.batch} x {args.seq} x {args.hidden} | "
              f"{args.threads} | {pt * 1e3:.1f} | {px * 1e3:.1f} | {pt / px:.2f} |")


if __name__ == "__main__":
    main()
