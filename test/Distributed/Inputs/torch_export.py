"""The command line of the test-time export scripts (domain_models.py,
grouped_models.py, vocab_models.py):

    SCRIPT OUTDIR [NAME...]

writes OUTDIR/NAME.onnx for each model named (all by default), as a
PyTorch user exports it: torch.onnx.export's defaults, or, for the models
in `training`, training mode without constant folding (make_models.py's
way, which keeps batch norm and a tied weight as they are)."""

import os
import sys

import torch


def export_models(models, example_args, training=(), names=None):
    """models: name -> a no-argument constructor; example_args(name): the
    forward's arguments; names: those to export (default: those on the
    command line, or all)."""
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in names or sys.argv[2:] or list(models):
        torch.manual_seed(0)
        model = models[name]()
        path = os.path.join(out, name + ".onnx")
        if name in training:
            torch.onnx.export(model, example_args(name), path,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        else:
            torch.onnx.export(model, example_args(name), path)


def export_classifiers(models, training, batch, classes, names=None):
    """models and training: name -> (constructor, one sample's input shape);
    a batch of normal inputs and labels in [0, classes)."""
    every = {**models, **training}
    export_models({name: build for name, (build, _) in every.items()},
                  lambda name: (torch.randn(batch, *every[name][1]),
                                torch.randint(0, classes, (batch,))),
                  training=training, names=names)
