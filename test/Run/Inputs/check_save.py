"""Checks a model written by parallax-run --save against its source.

usage: check_save.py SOURCE.onnx SAVED.onnx
The saved model passes onnx.checker, has the source's graph and
initializers (names, types, shapes), and its trained float initializers
differ from the source's.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

src, saved = onnx.load(sys.argv[1]), onnx.load(sys.argv[2])
onnx.checker.check_model(saved, full_check=True)
assert [n.op_type for n in saved.graph.node] == [n.op_type for n in src.graph.node]
a = {t.name: numpy_helper.to_array(t) for t in src.graph.initializer}
b = {t.name: numpy_helper.to_array(t) for t in saved.graph.initializer}
assert a.keys() == b.keys(), (sorted(a), sorted(b))
changed = 0
for name in a:
    assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
    if a[name].dtype == np.float32 and not np.array_equal(a[name], b[name]):
        changed += 1
print(f"checker ok; {len(a)} initializers, {changed} trained")
