#!/usr/bin/env python3
"""Converts a model in the ONNX text syntax to a binary .onnx file.

    to_binary.py IN.onnxtxt OUT.onnx [INDEX=NAME ...]

Each INDEX=NAME names the graph's node number INDEX, which the text syntax
of ONNX 1.12 cannot do, so that lit tests can check messages that quote
node names as an exporter such as PyTorch writes them.
"""
import sys

import onnx
import onnx.parser


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    with open(argv[1]) as f:
        model = onnx.parser.parse_model(f.read())
    for spec in argv[3:]:
        index, name = spec.split("=", 1)
        model.graph.node[int(index)].name = name
    onnx.save(model, argv[2])


if __name__ == "__main__":
    main(sys.argv)
