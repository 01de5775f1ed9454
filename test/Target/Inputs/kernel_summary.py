#!/usr/bin/python3
"""One line per kernel of the given ops in a plan (parallax-run --print-plan):

    kernel_summary.py PLAN.json OP...

    OP attrs {...}: in KIND SHAPE, ... -> out KIND SHAPE, ...

with each tensor's storage kind (arena, variable, constant, input, alias) and
shape, so a test can check what plan emission made of an op.
"""
import json
import sys


def tensor(plan, i):
    if i < 0:
        return "absent"
    t = plan["tensors"][i]
    return f"{t['kind']} {'x'.join(map(str, t['shape'])) or 'scalar'}"


def main(argv):
    plan = json.load(open(argv[1]))
    for k in plan["kernels"]:
        if k["op"] in argv[2:]:
            attrs = json.dumps(k.get("attrs", {}), sort_keys=True)
            ins = ", ".join(tensor(plan, i) for i in k["in"])
            outs = ", ".join(tensor(plan, i) for i in k["out"])
            print(f"{k['op']} attrs {attrs}: in {ins} -> out {outs}")


if __name__ == "__main__":
    main(sys.argv)
