#!/usr/bin/python3
"""Export small CNNs whose layers are edge cases of domain parallelism
(--conv-split=domain: convolutions' input rows split over the model axis,
halos exchanged), the way a PyTorch user does (torch.onnx.export's
defaults: static shapes, no dynamic_axes), batch 8, a scalar loss.

    domain_models.py OUTDIR

OUTDIR/conv1d.onnx: Conv1d stack on [N, C, L] (rows are L): kernel 5
padding 2 (halos of 2 both ways), kernel 3 stride 2 padding 1 (a halo
above only), kernel 4 stride 2 padding 1 (an even kernel: one row each
way), then a Linear head.
OUTDIR/dilated.onnx: Conv2d(dilation 2, padding 2) with bias (halos of 2),
ReLU, AvgPool2d(2) (tiles the rows: no halo), Linear.
OUTDIR/stem.onnx: a ResNet stem on 64 x 64: Conv2d 7x7 stride 2 padding 3
(halos of 3 above, 2 below), BatchNorm2d, ReLU, MaxPool2d(3, 2, padding 1),
a 3x3 residual block, AdaptiveAvgPool2d(1), Linear; rows divide by 4 at
every stage. The default (eval) export folds the batch norms into the
convolutions; OUTDIR/stem_bn.onnx is the same model exported in training
mode (as make_models.py exports), batch norms kept; OUTDIR/stem_pooled.onnx
ends in F.avg_pool2d(h, 16) (an AveragePool over the whole image) instead.
OUTDIR/avgpool.onnx: 3x3 convolutions with AvgPool2d(3, stride 1,
padding 1) between them, counting the padding (count_include_pad=True)
and not (False), then Linear.
OUTDIR/segment.onnx: two 3x3 convolutions scoring every pixel, the
cross entropy over [N, C, H, W] scores and [N, H, W] labels, class 0
ignored (the loss's mean counts the other pixels of every row block).
"""


import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_export import export_classifiers, export_models

BATCH, CLASSES = 8, 5


class Conv1dStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 5, padding=2)
        self.c2 = nn.Conv1d(8, 8, 3, stride=2, padding=1)
        self.c3 = nn.Conv1d(8, 8, 4, stride=2, padding=1)
        self.fc = nn.Linear(8 * 8, CLASSES)

    def forward(self, x, y):  # x: [N, 4, 32]
        h = F.relu(self.c1(x))
        h = F.relu(self.c2(h))
        h = F.relu(self.c3(h))
        return F.cross_entropy(self.fc(h.flatten(1)), y)


class Dilated(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=2, dilation=2, bias=True)
        self.pool = nn.AvgPool2d(2)
        self.fc = nn.Linear(8 * 8 * 8, CLASSES)

    def forward(self, x, y):  # x: [N, 3, 16, 16]
        h = self.pool(F.relu(self.conv(x)))
        return F.cross_entropy(self.fc(h.flatten(1)), y)


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, CLASSES)

    def forward(self, x, y):  # x: [N, 3, 64, 64]
        h = self.pool(F.relu(self.bn(self.conv(x))))  # [N, 8, 16, 16]
        r = F.relu(self.bn1(self.conv1(h)))
        h = F.relu(h + self.bn2(self.conv2(r)))
        return F.cross_entropy(self.fc(torch.flatten(self.avgpool(h), 1)), y)


class StemPooled(Stem):
    """The stem with a CIFAR-style head: F.avg_pool2d(h, 16), an
    AveragePool whose window is the whole image, not a GlobalAveragePool."""

    def forward(self, x, y):
        h = self.pool(F.relu(self.bn(self.conv(x))))
        r = F.relu(self.bn1(self.conv1(h)))
        h = F.relu(h + self.bn2(self.conv2(r)))
        return F.cross_entropy(self.fc(torch.flatten(F.avg_pool2d(h, 16), 1)), y)


class AvgPools(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.p1 = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=True)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.p2 = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.c3 = nn.Conv2d(8, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 16 * 16, CLASSES)

    def forward(self, x, y):  # x: [N, 3, 16, 16]
        h = self.p1(F.relu(self.c1(x)))
        h = self.p2(F.relu(self.c2(h)))
        h = F.relu(self.c3(h))
        return F.cross_entropy(self.fc(h.flatten(1)), y)


class Segment(nn.Module):
    """A per-pixel classifier: the loss's scores are [N, C, H, W]."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, CLASSES, 3, padding=1)

    def forward(self, x, y):  # x: [N, 3, 16, 16], y: [N, 16, 16]
        return F.cross_entropy(self.c2(F.relu(self.c1(x))), y, ignore_index=0)


MODELS = {
    "conv1d": (Conv1dStack, (4, 32)),
    "dilated": (Dilated, (3, 16, 16)),
    "stem": (Stem, (3, 64, 64)),
    "stem_pooled": (StemPooled, (3, 64, 64)),
    "avgpool": (AvgPools, (3, 16, 16)),
}
# Exported in training mode (make_models.py's way): an eval-mode export
# folds batch norm into the convolution before it.
TRAINING = {"stem_bn": (Stem, (3, 64, 64))}


def main():
    names = sys.argv[2:]
    if not names or "segment" in names:
        export_models({"segment": Segment},
                      lambda _: (torch.randn(BATCH, 3, 16, 16),
                                 torch.randint(0, CLASSES, (BATCH, 16, 16))),
                      names=["segment"])
    if names != ["segment"]:
        export_classifiers(MODELS, TRAINING, BATCH, CLASSES,
                           names=[n for n in names if n != "segment"])


if __name__ == "__main__":
    main()
