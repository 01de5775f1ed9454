"""Helpers shared by the benchmarks in bench/.

Finds the build, compiles plans, runs parallax-run, reads its metrics, makes
PyTorch inputs with the same distributions parallax-run --synthetic draws
(read from the plan: normal floats, Zipf(s = 1) ids, uniform labels), and
times PyTorch training steps.
"""

import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "examples" / "models"
PYTHON = "/usr/bin/python3"  # Debian's: python3-torch 1.13, numpy, onnx


def find_build(explicit=None):
    """The build directory holding bin/parallax-opt and bin/parallax-run."""
    candidates = [explicit] if explicit else [
        os.environ.get("PARALLAX_BUILD"), ROOT / "build-bench", ROOT / "build"]
    for c in candidates:
        if c and (Path(c) / "bin" / "parallax-run").exists():
            return Path(c).resolve()
    sys.exit("no build with bin/parallax-run found (tried %s); build with: cmake -G Ninja "
             "-S . -B build-bench -DCMAKE_BUILD_TYPE=Release && ninja -C build-bench "
             "parallax-opt parallax-run" % ", ".join(str(c) for c in candidates if c))


def setup(args):
    """The build directory (args.build or the default ones) and the work
    directory args.work, created."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    return find_build(args.build), work


def loadavg():
    with open("/proc/loadavg") as f:
        return tuple(float(x) for x in f.read().split()[:3])


class CommandFailed(SystemExit):
    """run()'s failure: exits like sys.exit(message) unless caught (bench/gpu.py
    reports it in the model's row and goes on); output is the command's."""

    def __init__(self, message, output):
        super().__init__(message)
        self.output = output or ""


def run(cmd, what, env=None, timeout=None, capture=True):
    """Runs cmd; on failure prints its output and exits naming it."""
    p = subprocess.run([str(c) for c in cmd], env=env, timeout=timeout, text=True,
                       stdout=subprocess.PIPE if capture else None,
                       stderr=subprocess.STDOUT if capture else None)
    if p.returncode != 0:
        if capture:
            sys.stdout.write(p.stdout[-4000:])
        raise CommandFailed("%s failed (exit status %d): %s" % (
            what, p.returncode, " ".join(shlex.quote(str(c)) for c in cmd)), p.stdout)
    return p.stdout


def calibrate(build, work, ranks):
    """`parallax-run --calibrate` on `ranks` ranks of one thread each: the
    profile (links, kernel rates) the compiler's predictions take through
    --profile. Returns its path."""
    profile = Path(work) / "profile.json"
    run([build / "bin" / "parallax-run", "--calibrate", profile, "--np", str(ranks),
         "--threads", "1"], "parallax-run --calibrate", timeout=600)
    return profile


def compile_plan(build, model, out, flags):
    """parallax-opt MODEL --emit=plan FLAGS -o OUT (skipped when OUT is newer
    than the model, the compiler and the flags file next to it)."""
    out = Path(out)
    stamp = out.with_suffix(".flags")
    src = MODELS_DIR / (model + ".onnx")
    opt = build / "bin" / "parallax-opt"
    key = " ".join(flags)
    if (out.exists() and stamp.exists() and stamp.read_text() == key
            and out.stat().st_mtime > max(src.stat().st_mtime, opt.stat().st_mtime)):
        return out
    run([opt, src, "--emit=plan", *flags, "-o", out], "parallax-opt %s %s" % (model, key))
    stamp.write_text(key)
    return out


def plan_json(build, plan):
    return print_plan(build / "bin" / "parallax-run", plan)


def print_plan(parallax_run, plan):
    """The plan's program: parallax-run PLAN --print-plan."""
    return json.loads(run([parallax_run, plan, "--print-plan"], "parallax-run --print-plan"))


def timed_steps(steps, warmup, predicted_seconds, min_seconds):
    """(steps, warm-up) scaled alike (up to 250x) so that the timed steps of
    a plan predicted to step in `predicted_seconds` span `min_seconds`: 15
    steps of a fifth of a millisecond are mostly start-up and noise on
    ranks that share cores."""
    timed = (steps - warmup) * predicted_seconds
    if predicted_seconds <= 0 or timed >= min_seconds:
        return steps, warmup
    scale = min(min_seconds / timed, 250.0)
    return int(steps * scale), int(warmup * scale)


def steps_less_data(ranks, warmup):
    """Rank 0's step times after `warmup`, each less the time its cores spent
    drawing the next batch's synthetic inputs (what the prediction leaves
    out): its own `data_s` where every rank has a core of its own; where the
    ranks share this machine's cores, the ranks' drawing together spread
    over the cores, which the others' drawing takes from this rank's step
    too (4 ranks on 2 cores: an all-reduce after W us of work on each rank
    takes an iteration of 2 W plus the all-reduce, measured with a bare MPI
    program)."""
    cores = os.cpu_count() or 1
    by_step = [{line["step"]: line.get("data_s", 0) for line in r} for r in ranks]
    out = []
    for line in ranks[0]:
        if line["step"] <= warmup:
            continue
        own = line.get("data_s", 0)
        shared = sum(r.get(line["step"], 0) for r in by_step) / cores
        out.append(line["step_time_s"] - (max(own, shared) if len(ranks) > cores else own))
    return out


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def export_mlp(path, widths, batch):
    """An MLP classifier (Linear layers of `widths`, ReLU between, then
    CrossEntropyLoss on labels y), exported as users export it
    (torch.onnx.export's defaults, inputs x and y, output loss); kept if
    `path` exists."""
    if path.exists():
        return path
    import torch

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layers = []
            for i, (a, b) in enumerate(zip(widths, widths[1:])):
                layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if i < len(widths) - 2 else [])
            self.net = torch.nn.Sequential(*layers)
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x, y):
            return self.loss(self.net(x), y)

    torch.manual_seed(0)
    x = torch.randn(batch, widths[0])
    y = torch.randint(0, widths[-1], (batch,))
    torch.onnx.export(Mlp(), (x, y), str(path), input_names=["x", "y"], output_names=["loss"])
    return path


# ---------------------------------------------------------------------------
# Synthetic inputs with parallax-run --synthetic's distributions
# ---------------------------------------------------------------------------

class Synthetic:
    """Draws the plan's inputs as parallax-run --synthetic does (same
    distributions, not the same numbers): 'normal' N(0,1) floats, 'ids'
    Zipf(s = 1) over [0, range), 'labels'/'index' uniform in [0, range),
    'binary' 0.0 or 1.0.  Batched inputs are drawn for the global batch and
    cut by rank; unbatched ones (lm's `sampled`) are shared by all ranks."""

    def __init__(self, plan_inputs, seed=0):
        import numpy as np
        self.np = np
        self.inputs = plan_inputs
        self.rng = np.random.default_rng(seed)
        self.cdfs = {}
        for i in plan_inputs:
            if i["synthetic"] == "ids":
                n = i["range"]
                if n not in self.cdfs:
                    c = np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))
                    self.cdfs[n] = c / c[-1]

    def draw(self, inp, shape):
        np = self.np
        kind, n = inp["synthetic"], inp["range"]
        if kind == "normal":
            a = self.rng.standard_normal(shape)
        elif kind == "ids":
            u = self.rng.random(shape)
            a = np.minimum(np.searchsorted(self.cdfs[n], u), n - 1)
        elif kind == "binary":
            a = (self.rng.random(shape) >= 0.5).astype(np.float64)
        else:  # labels, index
            a = self.rng.integers(0, n, shape)
        return a.astype(np.float32 if inp["dtype"] == "f32" else np.int64)

    def batches(self, steps, global_scale=1, rank=0, world=1):
        """`steps` lists of arrays in the plan's input order.  The plan's
        batched inputs have dim 0 = the local batch; with global_scale =
        world the global batch is drawn and this rank's slice returned."""
        out = []
        for _ in range(steps):
            step = []
            for inp in self.inputs:
                shape = list(inp["shape"])
                if inp["batch_axis"] == 0:
                    local = shape[0]
                    shape[0] = local * global_scale
                    a = self.draw(inp, shape)[rank * local:(rank + 1) * local]
                else:
                    a = self.draw(inp, shape)
                step.append(a)
            out.append(step)
        return out


def build_module(name):
    """The example model's nn.Module, from examples/make_models.py."""
    sys.path.insert(0, str(ROOT / "examples"))
    import make_models
    import torch
    spec = make_models.MODELS[name]
    torch.manual_seed(spec.seed)
    module = spec.build()
    module.train()
    return module, spec


def check_input_order(spec, plan_inputs):
    names = [i.name for i in spec.inputs]
    got = [i["name"] for i in plan_inputs]
    if names != got:
        sys.exit("the plan's inputs %s are not the module's forward arguments %s" % (got, names))


# ---------------------------------------------------------------------------
# PyTorch training steps
# ---------------------------------------------------------------------------

# Where PyTorch, running a module as written, does more work than Parallax.
DENSE_GRAD_NOTES = {"nmt": "embeddings: dense grads in PyTorch",
                    "lm": "embed, w_out, b_out: dense grads in PyTorch (sparse=True reaches embed only)",
                    "dlrm": "4 tables: dense grads in PyTorch"}


def torch_optimizer(module, name, lr):
    """PyTorch's twin of the plan's optimizer (--optimizer=sgd or adam)."""
    import torch
    if name == "sgd":
        return torch.optim.SGD(module.parameters(), lr=lr)
    if name == "adam":
        return torch.optim.Adam(module.parameters(), lr=lr)
    sys.exit("no PyTorch optimizer for the plan's %r" % name)


def torch_batches(plan_inputs, steps, device=None):
    """`steps` fresh batches of the plan's inputs as tensors (Synthetic, seed
    1: drawn up front, so that drawing is not timed), moved to device when
    one is given."""
    import torch
    batches = [[torch.from_numpy(a) for a in step]
               for step in Synthetic(plan_inputs, seed=1).batches(steps)]
    if device is not None:
        batches = [[t.to(device) for t in step] for step in batches]
    return batches


def time_torch_steps(module, opt, batches, sync=None):
    """One training step per batch: opt.zero_grad(), loss = module(*batch),
    loss.backward(), opt.step(), each timed with perf_counter. sync (e.g.
    torch.cuda.synchronize) is called before each clock read: CUDA launches
    return before the work is done. Returns the step times and the last
    loss."""
    times, loss = [], None
    for batch in batches:
        if sync:
            sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = module(*batch)
        loss.backward()
        opt.step()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return times, loss
