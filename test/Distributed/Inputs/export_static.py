#!/usr/bin/python3
"""Export two small models the way a PyTorch user does, with
torch.onnx.export's defaults (static shapes, no dynamic_axes), and write
[N, ...] sample arrays for their inputs.

    export_static.py OUTDIR

OUTDIR/convnet.onnx: conv -> relu -> x.view(x.size(0), -1) -> dropout ->
linear -> cross entropy (exported in training mode, so that dropout stays);
its batch of 8 is a number in every shape and in the view's target.
OUTDIR/tagger.onnx: embedding + learned positions taken with
torch.arange(T).expand(B, T) (a constant repeated for every sample) ->
linear -> per-token cross entropy over [B*T] rows; default (eval) export.
OUTDIR/reader.onnx: embedding -> nn.LSTM(batch_first=True) -> last step ->
linear -> cross entropy; default export (the LSTM holds the samples in its
dimension 1, its zero initial states are constants of the batch's size).
OUTDIR/<model>-data/<input>.npy: 40 samples for each graph input, named as
the export named the inputs.
"""

import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, SAMPLES = 8, 40


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x, y):
        h = F.relu(self.conv(x))
        h = self.drop(h.view(x.size(0), -1))
        return F.cross_entropy(self.fc(h), y)


class Tagger(nn.Module):
    def __init__(self, vocab=30, length=6, dim=8, tags=4):
        super().__init__()
        self.length = length
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens, tags):
        positions = torch.arange(self.length).expand(tokens.size(0), self.length)
        h = torch.tanh(self.embed(tokens) + self.pos(positions))
        logits = self.out(h)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tags.view(-1))


class Reader(nn.Module):
    def __init__(self, vocab=30, dim=8, hidden=12, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, tokens, label):
        h, _ = self.lstm(self.embed(tokens))
        return F.cross_entropy(self.out(h[:, -1]), label)


def write_data(path, model_file, arrays):
    os.makedirs(path, exist_ok=True)
    names = [i.name for i in onnx.load(model_file).graph.input]
    inits = {i.name for i in onnx.load(model_file).graph.initializer}
    names = [n for n in names if n not in inits]
    assert len(names) == len(arrays), names
    for name, a in zip(names, arrays):
        np.save(os.path.join(path, name + ".npy"), a)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    conv = ConvNet().train()
    x = torch.randn(BATCH, 1, 6, 6)
    y = torch.randint(0, 5, (BATCH,))
    path = os.path.join(out, "convnet.onnx")
    torch.onnx.export(conv, (x, y), path, training=torch.onnx.TrainingMode.TRAINING)
    write_data(os.path.join(out, "convnet-data"), path,
               [rng.standard_normal((SAMPLES, 1, 6, 6)).astype(np.float32),
                rng.integers(0, 5, SAMPLES).astype(np.int64)])

    tagger = Tagger()
    tokens = torch.randint(0, 30, (BATCH, 6))
    tags = torch.randint(0, 4, (BATCH, 6))
    path = os.path.join(out, "tagger.onnx")
    torch.onnx.export(tagger, (tokens, tags), path)
    write_data(os.path.join(out, "tagger-data"), path,
               [rng.integers(0, 30, (SAMPLES, 6)).astype(np.int64),
                rng.integers(0, 4, (SAMPLES, 6)).astype(np.int64)])

    reader = Reader()
    path = os.path.join(out, "reader.onnx")
    torch.onnx.export(reader, (torch.randint(0, 30, (BATCH, 5)), torch.randint(0, 3, (BATCH,))), path)
    write_data(os.path.join(out, "reader-data"), path,
               [rng.integers(0, 30, (SAMPLES, 5)).astype(np.int64),
                rng.integers(0, 3, SAMPLES).astype(np.int64)])


if __name__ == "__main__":
    main()
