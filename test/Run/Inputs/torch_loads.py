"""PyTorch loads a model parallax-run saved: the example module built by
examples/make_models.py takes the saved initializers as its state dict and
computes, on a batch, the loss parallax-run computed with those weights.

usage: torch_loads.py MODEL_NAME SAVED.onnx DATA_DIR METRICS.jsonl STEP
(the expected loss is the metrics' loss at that step)
"""
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
import make_models  # noqa: E402

name, saved, data = sys.argv[1], sys.argv[2], sys.argv[3]
expected = [json.loads(l)["loss"] for l in open(sys.argv[4])][int(sys.argv[5]) - 1]
module = getattr(make_models, "build_" + name)()
state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
         for t in onnx.load(saved).graph.initializer}
missing, unexpected = module.load_state_dict(state, strict=False)
assert not unexpected, unexpected
assert not [k for k in missing if not k.endswith("num_batches_tracked")], missing
model = onnx.load(saved)
inputs = [torch.from_numpy(np.load(os.path.join(data, i.name + ".npy")))
          for i in model.graph.input if i.name not in state]
module.train()
with torch.no_grad():
    loss = float(module(*inputs))
print("torch loss matches:", abs(loss - expected) <= 1e-5 * abs(expected), loss, expected)
