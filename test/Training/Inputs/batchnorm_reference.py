#!/usr/bin/python3
"""BatchNormalization's running statistics against PyTorch's.

    batchnorm_reference.py export DIR    # DIR/bn.onnx, DIR/data/*.npy, DIR/reference.json
    batchnorm_reference.py compare DIR TRAINED.onnx [--tol 1e-5]

`export` builds conv -> BatchNorm2d -> ReLU -> global pool -> Linear ->
BatchNorm1d -> Linear -> cross entropy, exports it as a PyTorch user does
(torch.onnx.export in training mode, so the producer is "pytorch"), writes
40 samples of data, and trains the module in PyTorch for STEPS SGD steps
(lr LR, batches taken in order as parallax-run takes them) from the
exported initial values, recording its losses and every running mean and
variance. `compare` checks that the model parallax-run --save wrote holds
the same running statistics (|a - b| <= tol * max(1, |b|)), printing the
worst difference, or names the first that differs and exits 1.
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

BATCH, SAMPLES, STEPS, LR = 8, 40, 5, 0.1


def export(out):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn2d = nn.BatchNorm2d(4)
            self.fc1 = nn.Linear(4, 6)
            self.bn1d = nn.BatchNorm1d(6)  # 8 values per channel: n/(n-1) = 8/7
            self.fc2 = nn.Linear(6, 3)

        def forward(self, x, y):
            h = F.relu(self.bn2d(self.conv(x)))
            h = F.adaptive_avg_pool2d(h, 1).flatten(1)
            return F.cross_entropy(self.fc2(F.relu(self.bn1d(self.fc1(h)))), y)

    torch.manual_seed(0)
    net = Net().train()
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((SAMPLES, 3, 5, 5)).astype(np.float32)
    ys = rng.integers(0, 3, SAMPLES).astype(np.int64)
    path = os.path.join(out, "bn.onnx")
    torch.onnx.export(net, (torch.from_numpy(xs[:BATCH]), torch.from_numpy(ys[:BATCH])),
                      path, training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["x", "y"])
    # The export ran the module once (updating its running statistics):
    # start from the values in the file, as parallax-run does.
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    with torch.no_grad():
        for name, v in net.state_dict().items():
            if name in inits:
                v.copy_(torch.from_numpy(inits[name].copy()))
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    np.save(os.path.join(out, "data", "x.npy"), xs)
    np.save(os.path.join(out, "data", "y.npy"), ys)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        first = step * BATCH % SAMPLES
        loss = net(torch.from_numpy(xs[first:first + BATCH]),
                   torch.from_numpy(ys[first:first + BATCH]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    stats = {k: v.numpy().tolist() for k, v in net.state_dict().items()
             if k.endswith("running_mean") or k.endswith("running_var")}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"losses": losses, "stats": stats, "steps": STEPS, "lr": LR}, f)


def compare(out, trained, tol):
    ref = json.load(open(os.path.join(out, "reference.json")))
    got = {t.name: numpy_helper.to_array(t) for t in onnx.load(trained).graph.initializer}
    worst = 0.0
    for name, values in sorted(ref["stats"].items()):
        if name not in got:
            print(f"{name}: not in {trained}")
            return 1
        b = np.asarray(values, dtype=np.float64)
        a = got[name].astype(np.float64)
        err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
        i = int(np.argmax(err))
        if err[i] > tol:
            print(f"{name}[{i}]: Parallax {a[i]!r}, PyTorch {b[i]!r} "
                  f"(ratio {a[i] / b[i]:.6f})")
            return 1
        worst = max(worst, float(err[i]))
    print(f"{len(ref['stats'])} running statistics match PyTorch's after "
          f"{ref['steps']} steps: worst relative difference {worst:.2e}")
    return 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "export":
        os.makedirs(sys.argv[2], exist_ok=True)
        export(sys.argv[2])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        tol = float(sys.argv[sys.argv.index("--tol") + 1]) if "--tol" in sys.argv else 1e-5
        return compare(sys.argv[2], sys.argv[3], tol)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
