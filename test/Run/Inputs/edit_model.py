#!/usr/bin/python3
"""Edit one initializer of an ONNX model file, as a user's mistake would.

    edit_model.py IN OUT nan NAME INDEX   element INDEX (flat) of NAME := NaN
    edit_model.py IN OUT nudge NAME       flip the lowest bit of NAME's first
                                          element in place: the file keeps
                                          its size, only its bytes change
"""

import sys

import numpy as np
import onnx
from onnx import numpy_helper

src, dst, how, name = sys.argv[1:5]
if how == "nan":
    model = onnx.load(src)
    t = next(t for t in model.graph.initializer if t.name == name)
    a = numpy_helper.to_array(t).copy()
    a.reshape(-1)[int(sys.argv[5])] = np.nan
    t.CopyFrom(numpy_helper.from_array(a, name))
    onnx.save(model, dst)
elif how == "nudge":
    data = bytearray(open(src, "rb").read())
    model = onnx.load_from_string(bytes(data))
    raw = next(t for t in model.graph.initializer if t.name == name).raw_data
    at = bytes(data).find(raw)
    assert raw and at >= 0 and bytes(data).find(raw, at + 1) < 0, "not unique"
    data[at] ^= 1
    open(dst, "wb").write(bytes(data))
else:
    sys.exit(f"unknown edit '{how}'")
