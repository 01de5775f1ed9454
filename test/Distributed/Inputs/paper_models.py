#!/usr/bin/python3
"""Export the network of SPAA'18's worked example as a user does, a scalar
loss after it:

    paper_models.py OUTDIR [NAME...]

OUTDIR/alexnet.onnx: torchvision's AlexNet as it comes (10 classes), at
the 224 x 224 its adaptive pool needs, batch 4, cross entropy; exported in
training mode (torch_export.py), so that its two dropouts stay in the
graph. Its fully connected stack (9216 -> 4096 -> 4096 -> 10) holds 54 of
its 57 M parameters.
"""

import torch
import torch.nn as nn
import torchvision

from torch_export import export_models

BATCH, CLASSES = 4, 10


class AlexNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.alexnet(weights=None, num_classes=CLASSES)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        return self.loss(self.net(x), y)


MODELS = {"alexnet": AlexNet}


def example_args(name):
    return torch.randn(BATCH, 3, 224, 224), torch.randint(0, CLASSES, (BATCH,))


if __name__ == "__main__":
    export_models(MODELS, example_args, training=("alexnet",))
