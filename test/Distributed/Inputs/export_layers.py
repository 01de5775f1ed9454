#!/usr/bin/python3
"""Export two small models built from the structured layers the way a
PyTorch user does (torch.onnx.export's defaults: static shapes, no
dynamic_axes), write [N, ...] sample arrays for their inputs, and train
them in PyTorch for the reference losses.

    export_layers.py OUTDIR

OUTDIR/unet.onnx: Conv2d -> GroupNorm -> ReLU -> InstanceNorm2d(affine) ->
strided Conv2d -> ConvTranspose2d(output_padding) -> PixelShuffle ->
Upsample(bilinear, 0.5) -> Upsample(nearest, 2) -> Linear -> cross entropy.
OUTDIR/rnn.onnx: Embedding -> nn.RNN(batch_first, bidirectional,
nonlinearity='relu') -> last step -> Linear -> cross entropy.
OUTDIR/<model>-data/<input>.npy: 40 samples for each graph input.
OUTDIR/<model>-reference.json: {"losses": [...]}, the losses of STEPS plain
SGD steps (lr LR) in PyTorch over global batches of BATCH consecutive
samples, as parallax-run --data takes them.
"""

import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SAMPLES, STEPS, LR = 8, 40, 5, 0.05


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.shrink = nn.Upsample(scale_factor=0.5, mode="bilinear")
        self.grow = nn.Upsample(scale_factor=2)
        self.fc = nn.Linear(12 * 12, 5)

    def forward(self, x, y):
        h = self.inorm(F.relu(self.gn(self.conv(x))))
        h = self.shuffle(self.up(self.down(h)))  # [N, 1, 12, 12]
        h = self.grow(self.shrink(h))
        return F.cross_entropy(self.fc(h.view(x.size(0), -1)), y)


class Rnn(nn.Module):
    def __init__(self, vocab=30, dim=8, hidden=12, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.RNN(dim, hidden, batch_first=True, bidirectional=True,
                          nonlinearity="relu")
        self.out = nn.Linear(2 * hidden, classes)

    def forward(self, tokens, label):
        h, _ = self.rnn(self.embed(tokens))
        return F.cross_entropy(self.out(h[:, -1]), label)


def write_data(path, model_file, arrays):
    os.makedirs(path, exist_ok=True)
    graph = onnx.load(model_file).graph
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    assert len(names) == len(arrays), names
    for name, a in zip(names, arrays):
        np.save(os.path.join(path, name + ".npy"), a)


def reference(model, arrays, path):
    """STEPS SGD steps over global batches of BATCH samples, wrapping."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        idx = [(step * BATCH + j) % SAMPLES for j in range(BATCH)]
        args = [torch.from_numpy(a[idx]) for a in arrays]
        opt.zero_grad()
        loss = model(*args)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    with open(path, "w") as f:
        json.dump({"losses": losses, "lr": LR, "steps": STEPS}, f)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    unet = UNet()
    path = os.path.join(out, "unet.onnx")
    torch.onnx.export(unet, (torch.randn(BATCH, 3, 6, 6), torch.randint(0, 5, (BATCH,))), path)
    data = [rng.standard_normal((SAMPLES, 3, 6, 6)).astype(np.float32),
            rng.integers(0, 5, SAMPLES).astype(np.int64)]
    write_data(os.path.join(out, "unet-data"), path, data)
    reference(unet, data, os.path.join(out, "unet-reference.json"))

    rnn = Rnn()
    path = os.path.join(out, "rnn.onnx")
    torch.onnx.export(rnn, (torch.randint(0, 30, (BATCH, 5)), torch.randint(0, 3, (BATCH,))), path)
    data = [rng.integers(0, 30, (SAMPLES, 5)).astype(np.int64),
            rng.integers(0, 3, SAMPLES).astype(np.int64)]
    write_data(os.path.join(out, "rnn-data"), path, data)
    reference(rnn, data, os.path.join(out, "rnn-reference.json"))


if __name__ == "__main__":
    main()
