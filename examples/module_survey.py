#!/usr/bin/python3
"""Which torch.nn modules Parallax trains, exported as a PyTorch user does.

    /usr/bin/python3 examples/module_survey.py [--build DIR] [--work DIR]
                                               [-k REGEX] [--markdown] [--json FILE]

Each case wraps one module (or torchvision model) in a model whose forward
returns a mean loss, exports it with torch.onnx.export's defaults but in
training mode (static shapes, no dynamic_axes, the default opset), compiles
it for 2 ranks (`parallax-opt --np 2 --emit=plan`: import, batch detection,
autodiff, synchronization) and trains the 1-rank plan for 2 steps on
synthetic data (`parallax-run --synthetic --steps 2`). A case works when
all of it succeeds with a finite loss; otherwise the first error line is
the reason. --markdown prints the table docs/models.md shows.
"""

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Callable, Tuple

BATCH = 4


@dataclasses.dataclass
class Case:
    name: str
    build: Callable          # () -> nn.Module mapping the input to an output
    shape: Tuple             # input shape without the batch
    ints: int = 0            # > 0: int64 input in [0, ints)
    loss: str = "mse"        # "mse" on the output, or "ce": output are logits
    group: str = "layers"


def cases():
    import torch
    import torch.nn as nn
    import torchvision

    class Bag(nn.Module):  # EmbeddingBag with offsets: 1-D ids, one bag per sample
        def __init__(self, mode):
            super().__init__()
            self.bag = nn.EmbeddingBag(50, 8, mode=mode)

        def forward(self, ids):
            flat = ids.reshape(-1)
            offsets = torch.arange(0, flat.numel(), ids.size(1))
            return self.bag(flat, offsets)

    class Rnn(nn.Module):  # the output sequence of a recurrent layer
        def __init__(self, cls, **kw):
            super().__init__()
            self.rnn = cls(8, 12, batch_first=True, **kw)

        def forward(self, x):
            return self.rnn(x)[0]

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 4, batch_first=True)

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    def tv(name, **kw):
        return lambda: getattr(torchvision.models, name)(weights=None, num_classes=10, **kw)

    seq, img, vec = (5, 8), (3, 8, 8), (16,)
    return [
        Case("nn.Linear", lambda: nn.Linear(16, 8), vec),
        Case("nn.Conv1d", lambda: nn.Conv1d(8, 6, 3, padding=1), (8, 10)),
        Case("nn.Conv2d", lambda: nn.Conv2d(3, 6, 3, padding=1), img),
        Case("nn.Conv2d (groups, dilation)", lambda: nn.Conv2d(4, 8, 3, groups=2, dilation=2), (4, 9, 9)),
        Case("nn.Conv3d", lambda: nn.Conv3d(2, 4, 3), (2, 5, 5, 5)),
        Case("nn.ConvTranspose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2), img),
        Case("nn.MaxPool2d", lambda: nn.MaxPool2d(2), img),
        Case("nn.MaxPool1d", lambda: nn.MaxPool1d(2), (8, 10)),
        Case("nn.AvgPool2d", lambda: nn.AvgPool2d(2), img),
        Case("nn.AvgPool2d (padding)", lambda: nn.AvgPool2d(3, stride=1, padding=1), img),
        Case("nn.AdaptiveAvgPool2d(1)", lambda: nn.AdaptiveAvgPool2d(1), img),
        Case("nn.AdaptiveAvgPool2d(2)", lambda: nn.AdaptiveAvgPool2d(2), img),
        Case("nn.AdaptiveMaxPool2d(1)", lambda: nn.AdaptiveMaxPool2d(1), img),
        Case("nn.BatchNorm1d", lambda: nn.BatchNorm1d(16), vec),
        Case("nn.BatchNorm2d", lambda: nn.BatchNorm2d(3), img),
        Case("nn.LayerNorm", lambda: nn.LayerNorm(8), seq),
        Case("nn.GroupNorm", lambda: nn.GroupNorm(3, 3), img),
        Case("nn.InstanceNorm2d", lambda: nn.InstanceNorm2d(3, affine=True), img),
        Case("nn.LocalResponseNorm", lambda: nn.LocalResponseNorm(2), img),
        Case("nn.Embedding", lambda: nn.Embedding(50, 8), (6,), ints=50),
        Case("nn.EmbeddingBag (2-D input)", lambda: nn.EmbeddingBag(50, 8, mode="mean"), (6,), ints=50),
        Case("nn.EmbeddingBag (offsets, sum)", lambda: Bag("sum"), (6,), ints=50),
        Case("nn.EmbeddingBag (offsets, mean)", lambda: Bag("mean"), (6,), ints=50),
        Case("nn.LSTM", lambda: Rnn(nn.LSTM), seq),
        Case("nn.LSTM (2 layers, bidirectional)", lambda: Rnn(nn.LSTM, num_layers=2, bidirectional=True), seq),
        Case("nn.GRU", lambda: Rnn(nn.GRU), seq),
        Case("nn.GRU (bidirectional)", lambda: Rnn(nn.GRU, bidirectional=True), seq),
        Case("nn.RNN", lambda: Rnn(nn.RNN), seq),
        Case("nn.MultiheadAttention", Attention, (5, 16)),
        Case("nn.TransformerEncoderLayer",
             lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), (5, 16)),
        Case("nn.ReLU", nn.ReLU, vec, group="activations"),
        Case("nn.ReLU6", nn.ReLU6, vec, group="activations"),
        Case("nn.LeakyReLU", nn.LeakyReLU, vec, group="activations"),
        Case("nn.PReLU", nn.PReLU, vec, group="activations"),
        Case("nn.ELU", nn.ELU, vec, group="activations"),
        Case("nn.SELU", nn.SELU, vec, group="activations"),
        Case("nn.CELU", nn.CELU, vec, group="activations"),
        Case("nn.GELU", nn.GELU, vec, group="activations"),
        Case("nn.SiLU", nn.SiLU, vec, group="activations"),
        Case("nn.Mish", nn.Mish, vec, group="activations"),
        Case("nn.Softplus", nn.Softplus, vec, group="activations"),
        Case("nn.Softsign", nn.Softsign, vec, group="activations"),
        Case("nn.Hardswish", nn.Hardswish, vec, group="activations"),
        Case("nn.Hardsigmoid", nn.Hardsigmoid, vec, group="activations"),
        Case("nn.Hardtanh", nn.Hardtanh, vec, group="activations"),
        Case("nn.Tanh", nn.Tanh, vec, group="activations"),
        Case("nn.Sigmoid", nn.Sigmoid, vec, group="activations"),
        Case("nn.Softmax", lambda: nn.Softmax(dim=-1), vec, group="activations"),
        Case("nn.LogSoftmax", lambda: nn.LogSoftmax(dim=-1), vec, group="activations"),
        Case("nn.Dropout", lambda: nn.Dropout(0.3), vec, group="shape and regularisation"),
        Case("nn.Dropout2d", lambda: nn.Dropout2d(0.3), img, group="shape and regularisation"),
        Case("nn.AlphaDropout", lambda: nn.AlphaDropout(0.3), vec, group="shape and regularisation"),
        Case("nn.Flatten", nn.Flatten, img, group="shape and regularisation"),
        Case("nn.Unflatten", lambda: nn.Unflatten(1, (4, 4)), vec, group="shape and regularisation"),
        Case("nn.ZeroPad2d", lambda: nn.ZeroPad2d(1), img, group="shape and regularisation"),
        Case("nn.ConstantPad1d", lambda: nn.ConstantPad1d(2, 0.5), (8, 10), group="shape and regularisation"),
        Case("nn.ReflectionPad2d", lambda: nn.ReflectionPad2d(1), img, group="shape and regularisation"),
        Case("nn.ReplicationPad2d", lambda: nn.ReplicationPad2d(1), img, group="shape and regularisation"),
        Case("nn.Upsample (nearest)", lambda: nn.Upsample(scale_factor=2), img, group="shape and regularisation"),
        Case("nn.Upsample (bilinear)", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), img,
             group="shape and regularisation"),
        Case("nn.PixelShuffle", lambda: nn.PixelShuffle(2), (4, 4, 4), group="shape and regularisation"),
        Case("torchvision resnet18", tv("resnet18"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision mobilenet_v2", tv("mobilenet_v2"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision mobilenet_v3_small", tv("mobilenet_v3_small"), (3, 32, 32), loss="ce",
             group="torchvision"),
        Case("torchvision squeezenet1_1", tv("squeezenet1_1"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision shufflenet_v2_x0_5", tv("shufflenet_v2_x0_5"), (3, 32, 32), loss="ce",
             group="torchvision"),
        Case("torchvision densenet121", tv("densenet121"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision efficientnet_b0", tv("efficientnet_b0"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision mnasnet0_5", tv("mnasnet0_5"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision regnet_y_400mf", tv("regnet_y_400mf"), (3, 32, 32), loss="ce", group="torchvision"),
        Case("torchvision googlenet", tv("googlenet", aux_logits=False, init_weights=True), (3, 32, 32),
             loss="ce", group="torchvision"),
    ]


LOSSES = {
    "nn.CrossEntropyLoss": lambda nn: nn.CrossEntropyLoss(),
    "nn.CrossEntropyLoss (label_smoothing)": lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1),
    "nn.NLLLoss": lambda nn: nn.NLLLoss(),
    "nn.MSELoss": lambda nn: nn.MSELoss(),
    "nn.L1Loss": lambda nn: nn.L1Loss(),
    "nn.SmoothL1Loss": lambda nn: nn.SmoothL1Loss(),
    "nn.HuberLoss": lambda nn: nn.HuberLoss(),
    "nn.BCEWithLogitsLoss": lambda nn: nn.BCEWithLogitsLoss(),
    "nn.BCELoss": lambda nn: nn.BCELoss(),
    "nn.KLDivLoss": lambda nn: nn.KLDivLoss(reduction="batchmean"),
    "nn.CosineEmbeddingLoss": lambda nn: nn.CosineEmbeddingLoss(),
}


def export(case, path):
    """The case as a model (input, target) -> mean loss, exported."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    inner = case.build()
    loss_kind = case.loss

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x, t):
            out = self.inner(x)
            if loss_kind == "ce":
                return F.cross_entropy(out, t)
            # F.mse_loss does not export (torch 1.13 has no ONNX rule for it).
            return ((out - t) ** 2).mean()

    model = Model().train()
    x = (torch.randint(0, case.ints, (BATCH, *case.shape)) if case.ints
         else torch.randn(BATCH, *case.shape))
    with torch.no_grad():
        out = model.inner(x)
    t = torch.randint(0, 10, (BATCH,)) if loss_kind == "ce" else torch.randn_like(out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x, t), path, training=torch.onnx.TrainingMode.TRAINING)


def export_loss(name, make, path):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    crit = make(nn)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 6)

        def forward(self, x, t):
            out = self.fc(x)
            if name in ("nn.CrossEntropyLoss", "nn.CrossEntropyLoss (label_smoothing)"):
                return crit(out, t)
            if name == "nn.NLLLoss":
                return crit(torch.log_softmax(out, 1), t)
            if name == "nn.BCELoss":
                return crit(torch.sigmoid(out), t)
            if name == "nn.KLDivLoss":
                return crit(torch.log_softmax(out, 1), torch.softmax(t, 1))
            if name == "nn.CosineEmbeddingLoss":
                return crit(out, t, torch.ones(out.size(0)))
            return crit(out, t)

    model = Model().train()
    x = torch.randn(BATCH, 16)
    if name in ("nn.CrossEntropyLoss", "nn.CrossEntropyLoss (label_smoothing)", "nn.NLLLoss"):
        t = torch.randint(0, 6, (BATCH,))
    elif name in ("nn.BCEWithLogitsLoss", "nn.BCELoss"):
        t = torch.randint(0, 2, (BATCH, 6)).float()
    else:
        t = torch.randn(BATCH, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x, t), path, training=torch.onnx.TrainingMode.TRAINING)


def first_error(text):
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "failed"


def check(build, work, name, export_fn):
    path = os.path.join(work, re.sub(r"[^A-Za-z0-9]+", "_", name) + ".onnx")
    try:
        export_fn(path)
    except Exception as e:  # the exporter itself refuses the module
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return {"name": name, "works": False, "stage": "torch.onnx.export", "reason": msg[:300]}
    plan = path[:-5] + ".pxplan"
    for stage, cmd in (
            ("parallax-opt --np 2", [os.path.join(build, "bin", "parallax-opt"), path, "--np", "2",
                                      "--emit=plan", "-o", plan]),
            ("parallax-opt", [os.path.join(build, "bin", "parallax-opt"), path, "--emit=plan",
                              "-o", plan]),
            ("parallax-run", [os.path.join(build, "bin", "parallax-run"), plan, "--synthetic",
                              "--steps", "2", "--threads", "1", "-q"])):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return {"name": name, "works": False, "stage": stage, "reason": "timed out after 300 s"}
        if p.returncode != 0:
            return {"name": name, "works": False, "stage": stage,
                    "reason": first_error(p.stderr + p.stdout)[:300]}
    return {"name": name, "works": True, "stage": "", "reason": ""}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.environ.get("PARALLAX_BUILD_DIR",
                                                      os.path.join(here, "..", "build")))
    ap.add_argument("--work")
    ap.add_argument("-k", default="")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="px-survey-")
    os.makedirs(work, exist_ok=True)
    todo = [(c.group, c.name, (lambda p, c=c: export(c, p))) for c in cases()]
    todo += [("losses", n, (lambda p, n=n, m=m: export_loss(n, m, p))) for n, m in LOSSES.items()]
    todo = [t for t in todo if re.search(args.k, t[1])]
    results = []
    t0 = time.monotonic()
    for group, name, fn in todo:
        r = check(args.build, work, name, fn)
        r["group"] = group
        results.append(r)
        if not args.markdown:
            print(f"{'ok  ' if r['works'] else 'FAIL'} {name}"
                  + ("" if r["works"] else f"  [{r['stage']}] {r['reason']}"), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.markdown:
        group = None
        for r in results:
            if r["group"] != group:
                group = r["group"]
                print(f"\n**{group}**\n\n| module | trains | why not |\n| --- | --- | --- |")
            reason = "" if r["works"] else f"{r['stage']}: {r['reason']}".replace("|", "\\|")
            print(f"| `{r['name']}` | {'yes' if r['works'] else 'no'} | {reason} |")
    works = sum(r["works"] for r in results)
    print(f"\n{works} of {len(results)} work ({time.monotonic() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
