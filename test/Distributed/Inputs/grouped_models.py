#!/usr/bin/python3
"""Export small CNNs with grouped convolutions (nn.Conv2d(groups=G), as
ResNeXt and RegNet use them) the way a PyTorch user does, batch 8, a scalar
loss:

    grouped_models.py OUTDIR [NAME...]

OUTDIR/resnext.onnx: a stem, then two ResNeXt bottlenecks (1x1 expansion
to 32 channels, a 3x3 convolution of 8 and then 4 groups, 1x1 projection,
each with BatchNorm2d; the input added back), global average pool, Linear;
exported in training mode (make_models.py's way), batch norms kept.
OUTDIR/groups2.onnx: 3x3 convolutions with a bias, the second of 2 groups
(4 channels each), ReLU, a 1x1 convolution, Linear; torch.onnx.export's
defaults.
"""


import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_export import export_classifiers

BATCH, CLASSES = 8, 5


class Bottleneck(nn.Module):
    def __init__(self, channels, width, groups):
        super().__init__()
        self.expand = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.grouped = nn.Conv2d(width, width, 3, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.project = nn.Conv2d(width, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        h = F.relu(self.bn1(self.expand(x)))
        h = F.relu(self.bn2(self.grouped(h)))
        return F.relu(x + self.bn3(self.project(h)))


class ResNeXt(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.blocks = nn.Sequential(Bottleneck(16, 32, 8), Bottleneck(16, 32, 4))
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x, y):  # x: [N, 3, 16, 16]
        h = self.blocks(F.relu(self.bn(self.stem(x))))
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        return F.cross_entropy(self.fc(h), y)


class Groups2(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.c3 = nn.Conv2d(8, 4, 1)
        self.fc = nn.Linear(4 * 8 * 8, CLASSES)

    def forward(self, x, y):  # x: [N, 3, 8, 8]
        h = F.relu(self.c1(x))
        h = F.relu(self.c2(h))
        h = F.relu(self.c3(h))
        return F.cross_entropy(self.fc(h.flatten(1)), y)


MODELS = {"groups2": (Groups2, (3, 8, 8))}
# Exported in training mode: an eval-mode export folds batch norm into the
# convolution before it.
TRAINING = {"resnext": (ResNeXt, (3, 16, 16))}


def main():
    export_classifiers(MODELS, TRAINING, BATCH, CLASSES)


if __name__ == "__main__":
    main()
