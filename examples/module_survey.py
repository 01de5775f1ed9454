#!/usr/bin/python3
"""Which torch.nn modules and functions train under Parallax, checked.

    /usr/bin/python3 examples/module_survey.py [--bin BUILD/bin] [--static] [NAME-SUBSTRING ...]

For every case below, a small model `loss = mean(f(x * scale) ** 2)` (with
`scale` a trainable parameter, so that a gradient flows through f) is
exported as PyTorch users export (opset 17, training mode, a dynamic batch
axis), compiled with `parallax-opt --emit=plan --optimizer=sgd --lr=1`, run
for one step with `parallax-run`, and compared with PyTorch: the step's loss
and d loss / d scale (from the trained `scale`). One line per case:

    ok: loss rel 7.2e-08, dscale rel 1.6e-08     both agree with PyTorch
    EXPORT: ...                                   torch.onnx.export refuses it
    COMPILE: ... / RUN: ...                       Parallax refuses it (message)
    SPLIT: ...                                    (--static) no batch for 2 ranks

--static exports with torch.onnx.export's defaults instead (static shapes, no
dynamic_axes, constant folding, the default opset and input names) and first
compiles the model for 2 ranks, which needs the batch analysis to find the
batch of the static graph.

docs/models.md ("PyTorch modules") has the results. Like make_models.py this
is a developer's tool that needs torch; no test runs it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np


def cases(torch, nn, F):
    """name -> (module factory, example input factory)."""
    def fn(f):
        class Fn(nn.Module):
            def forward(self, x):
                return f(x)
        return Fn

    def fn_first(module):  # a recurrent layer's output sequence
        class First(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = module

            def forward(self, x):
                return self.m(x)[0]
        return First

    def tv(name, **kw):
        import torchvision
        return lambda: getattr(torchvision.models, name)(weights=None, num_classes=10, **kw)

    img = lambda c=3, s=8: (lambda: torch.randn(4, c, s, s))
    seq = lambda: torch.randn(4, 3, 8)
    vec = lambda: torch.randn(4, 6)
    return {
        # Padding (ONNX Pad).
        "nn.ZeroPad2d": (lambda: nn.ZeroPad2d((1, 2, 0, 1)), img()),
        "nn.ConstantPad1d": (lambda: nn.ConstantPad1d(2, 0.5), seq),
        "nn.ConstantPad3d": (lambda: nn.ConstantPad3d(1, 0.0), lambda: torch.randn(4, 2, 3, 4, 4)),
        "nn.ReflectionPad1d": (lambda: nn.ReflectionPad1d(2), seq),
        "nn.ReflectionPad2d": (lambda: nn.ReflectionPad2d((1, 2, 2, 1)), img()),
        "nn.ReplicationPad1d": (lambda: nn.ReplicationPad1d(3), seq),
        "nn.ReplicationPad2d": (lambda: nn.ReplicationPad2d(2), img()),
        "nn.ReplicationPad3d": (lambda: nn.ReplicationPad3d(1), lambda: torch.randn(4, 2, 3, 4, 4)),
        "nn.AvgPool2d(padding=1)": (lambda: nn.AvgPool2d(3, 2, padding=1), img()),
        "nn.AvgPool2d(padding=1, count_include_pad=False)":
            (lambda: nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), img()),
        "nn.AvgPool1d(padding=1)": (lambda: nn.AvgPool1d(3, 2, padding=1), seq),
        # Upsampling and layout.
        "nn.ConvTranspose2d": (lambda: nn.ConvTranspose2d(3, 4, 3, 2, 1, output_padding=1), img()),
        "nn.ConvTranspose1d(groups=3)": (lambda: nn.ConvTranspose1d(3, 6, 4, 2, groups=3), seq),
        "nn.Upsample(nearest)": (lambda: nn.Upsample(scale_factor=2), img()),
        "nn.Upsample(bilinear)": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), img()),
        "nn.Upsample(bilinear, align_corners)":
            (lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), img()),
        "nn.Upsample(bicubic)": (lambda: nn.Upsample(size=(11, 5), mode="bicubic"), img()),
        "nn.PixelShuffle": (lambda: nn.PixelShuffle(2), img(8)),
        "nn.PixelUnshuffle": (lambda: nn.PixelUnshuffle(2), img()),
        "F.grid_sample": (fn(lambda x: F.grid_sample(
            x, torch.tanh(x[:, :2].permute(0, 2, 3, 1)), align_corners=False)), img()),
        # Activations.
        "nn.GELU(approximate='tanh')": (lambda: nn.GELU(approximate="tanh"), img()),
        "nn.SiLU": (lambda: nn.SiLU(), img()),
        "nn.Mish": (lambda: nn.Mish(), img()),
        "nn.Hardswish": (lambda: nn.Hardswish(), img()),
        "nn.Hardsigmoid": (lambda: nn.Hardsigmoid(), img()),
        "nn.ELU": (lambda: nn.ELU(0.7), img()),
        "nn.SELU": (lambda: nn.SELU(), img()),
        "nn.CELU": (lambda: nn.CELU(0.5), img()),
        "nn.Softplus": (lambda: nn.Softplus(), img()),
        "nn.Softsign": (lambda: nn.Softsign(), img()),
        "nn.PReLU": (lambda: nn.PReLU(3), img()),
        "nn.LogSigmoid": (lambda: nn.LogSigmoid(), img()),
        "nn.Hardtanh": (lambda: nn.Hardtanh(), img()),
        "nn.Softshrink": (lambda: nn.Softshrink(0.3), img()),
        "nn.Hardshrink": (lambda: nn.Hardshrink(0.3), img()),
        "nn.Tanhshrink": (lambda: nn.Tanhshrink(), img()),
        "nn.Threshold": (lambda: nn.Threshold(0.1, 20.0), img()),
        # Normalisation and pooling.
        "nn.InstanceNorm2d(affine=True)": (lambda: nn.InstanceNorm2d(3, affine=True), img()),
        "nn.GroupNorm": (lambda: nn.GroupNorm(2, 4), img(4)),
        "nn.LocalResponseNorm": (lambda: nn.LocalResponseNorm(3), img()),
        "nn.AdaptiveMaxPool2d(1)": (lambda: nn.AdaptiveMaxPool2d(1), img()),
        "nn.AdaptiveAvgPool2d(2)": (lambda: nn.AdaptiveAvgPool2d(2), img()),
        "nn.MaxUnpool2d": (fn(lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)),
                           img()),
        "F.normalize": (fn(lambda x: F.normalize(x, dim=1)), vec),
        "nn.CosineSimilarity": (fn(lambda x: F.cosine_similarity(x, x.flip(0), dim=1)), vec),
        # Tensor functions.
        "F.one_hot(argmax)": (fn(lambda x: F.one_hot(x.argmax(1), 6).float() * x), vec),
        "torch.cumsum": (fn(lambda x: torch.cumsum(x, 1)), vec),
        "torch.topk": (fn(lambda x: torch.topk(x, 3, dim=1).values), vec),
        "torch.einsum": (fn(lambda x: torch.einsum("bi,bj->bij", x, x)), vec),
        "torch.triu": (fn(lambda x: torch.triu(x.reshape(4, 2, 3), 1)), vec),
        "x.numel()": (fn(lambda x: x * (1.0 / x.numel())), vec),
        "torch.remainder": (fn(lambda x: torch.remainder(x, 0.7)), vec),
        "torch.round, sign, floor": (fn(lambda x: x + torch.round(x) + torch.sign(x) + torch.floor(x)),
                                     vec),
        "torch.sin, cos, atan": (fn(lambda x: torch.sin(x) * torch.cos(x) + torch.atan(x)), vec),
        "torch.nonzero": (fn(lambda x: x[torch.nonzero(x > 0, as_tuple=True)]), vec),
        "torch.unique": (fn(lambda x: torch.unique(x)), vec),
        # Layers.
        "nn.Linear": (lambda: nn.Linear(6, 5), vec),
        "nn.Conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1), seq),
        "nn.Conv2d": (lambda: nn.Conv2d(3, 4, 3, padding=1), img()),
        "nn.Conv2d(groups, dilation)": (lambda: nn.Conv2d(4, 8, 3, groups=2, dilation=2), img(4, 9)),
        "nn.Conv3d": (lambda: nn.Conv3d(2, 3, 3), lambda: torch.randn(4, 2, 5, 5, 5)),
        "nn.MaxPool2d": (lambda: nn.MaxPool2d(2), img()),
        "nn.AdaptiveAvgPool2d(1)": (lambda: nn.AdaptiveAvgPool2d(1), img()),
        "nn.BatchNorm1d": (lambda: nn.BatchNorm1d(6), vec),
        "nn.BatchNorm2d": (lambda: nn.BatchNorm2d(3), img()),
        "nn.LayerNorm": (lambda: nn.LayerNorm(8), seq),
        "nn.Dropout": (lambda: nn.Dropout(0.0), vec),
        "nn.Flatten": (lambda: nn.Flatten(), img()),
        "nn.LSTM(batch_first)": (fn_first(nn.LSTM(8, 5, batch_first=True)), seq),
        "nn.LSTM(2 layers, bidirectional)": (fn_first(nn.LSTM(8, 5, 2, bidirectional=True)), seq),
        "nn.GRU(batch_first)": (fn_first(nn.GRU(8, 5, batch_first=True)), seq),
        "nn.RNN": (fn_first(nn.RNN(8, 5, batch_first=True)), seq),
        "nn.MultiheadAttention": (fn(lambda x, a=nn.MultiheadAttention(8, 2, batch_first=True):
                                     a(x, x, x, need_weights=False)[0]), seq),
        "nn.TransformerEncoderLayer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                                          batch_first=True), seq),
        # Losses (targets baked in as constants).
        "F.cross_entropy": (fn(lambda x: F.cross_entropy(x, torch.arange(4) % 6)), vec),
        "F.nll_loss": (fn(lambda x: F.nll_loss(F.log_softmax(x, 1), torch.arange(4) % 6)), vec),
        "F.binary_cross_entropy_with_logits": (fn(lambda x: F.binary_cross_entropy_with_logits(
            x, torch.ones(4, 6) * 0.5)), vec),
        "F.kl_div(batchmean)": (fn(lambda x: F.kl_div(F.log_softmax(x, 1), torch.full((4, 6), 1 / 6),
                                                       reduction="batchmean")), vec),
        "F.mse_loss": (fn(lambda x: F.mse_loss(x, torch.zeros(4, 6))), vec),
        "F.l1_loss": (fn(lambda x: F.l1_loss(x, torch.zeros(4, 6))), vec),
        "F.smooth_l1_loss": (fn(lambda x: F.smooth_l1_loss(x, torch.zeros(4, 6))), vec),
        "F.cross_entropy(label_smoothing)": (fn(lambda x: F.cross_entropy(
            x, torch.arange(4) % 6, label_smoothing=0.1)), vec),
        # torchvision classifiers (32x32, random weights).
        **{f"torchvision {m}": (tv(m), img(3, 32)) for m in (
            "resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1",
            "shufflenet_v2_x0_5", "densenet121", "efficientnet_b0", "mnasnet0_5",
            "regnet_y_400mf")},
        "torchvision googlenet": (tv("googlenet", aux_logits=False, init_weights=True), img(3, 32)),
    }


def run_case(torch, nn, name, make, data, bindir, work, static=False):
    inner = make()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.full((1,), 1.1))
            self.inner = inner

        def forward(self, x):
            return (self.inner(x * self.scale) ** 2).mean()

    model = Model()
    model.train()
    x = data()
    path = os.path.join(work, "model.onnx")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if static:  # torch.onnx.export's defaults, but training
                torch.onnx.export(model, (x,), path,
                                  training=torch.onnx.TrainingMode.TRAINING)
            else:
                torch.onnx.export(model, (x,), path, opset_version=17,
                                  training=torch.onnx.TrainingMode.TRAINING,
                                  do_constant_folding=False, input_names=["x"],
                                  output_names=["loss"], dynamic_axes={"x": {0: "batch"}})
    except Exception as e:  # torch's own refusal, reported as such
        return "EXPORT: " + str(e).strip().splitlines()[0][:160]
    import onnx
    input_name = onnx.load(path).graph.input[0].name
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    for f in os.listdir(os.path.join(work, "data")):
        os.remove(os.path.join(work, "data", f))
    np.save(os.path.join(work, "data", input_name + ".npy"), x.numpy())
    plan = os.path.join(work, "p.pxplan")
    if static:
        r = subprocess.run([os.path.join(bindir, "parallax-opt"), path, "--np", "2",
                            "--emit=plan", "-o", plan], capture_output=True, text=True)
        if r.returncode:
            return "SPLIT: " + r.stderr.strip().splitlines()[-1]
    batch = [] if static else ["--batch-size", str(x.shape[0])]
    r = subprocess.run([os.path.join(bindir, "parallax-opt"), path, *batch,
                        "--emit=plan", "--optimizer=sgd", "--lr=1", "-o", plan],
                       capture_output=True, text=True)
    if r.returncode:
        return "COMPILE: " + r.stderr.strip().splitlines()[-1]
    metrics, trained = os.path.join(work, "m.jsonl"), os.path.join(work, "t.onnx")
    r = subprocess.run([os.path.join(bindir, "parallax-run"), plan, "--data",
                        os.path.join(work, "data"), "--steps", "1", "--metrics", metrics,
                        "--save", trained, "-q"], capture_output=True, text=True)
    if r.returncode:
        return "RUN: " + r.stderr.strip().splitlines()[-1]
    from onnx import numpy_helper
    loss = json.loads(open(metrics).read().splitlines()[-1])["loss"]
    ref = model(x)
    ref.backward()
    grad = float(model.scale.grad)
    values = {t.name: numpy_helper.to_array(t) for t in onnx.load(trained).graph.initializer}
    ours = 1.1 - float(values["scale"][0])  # lr 1: the step is the gradient
    rel = lambda a, b: abs(a - b) / max(abs(b), 1e-12)
    return (f"ok: loss rel {rel(loss, float(ref)):.1e}, dscale rel {rel(ours, grad):.1e} "
            f"(dscale {grad:.3g})")


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(here, "..", "build", "bin"))
    ap.add_argument("--static", action="store_true",
                    help="export with torch.onnx.export's defaults (static shapes) and "
                         "compile for 2 ranks first")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as work:
        for name, (make, data) in cases(torch, nn, F).items():
            if args.names and not any(n in name for n in args.names):
                continue
            print(f"{name}: {run_case(torch, nn, name, make, data, args.bin, work, args.static)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
