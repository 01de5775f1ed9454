"""Prints a plan's kernels and tensors one per line (parallax-run
--print-plan's JSON on stdin), for FileCheck."""
import json
import sys

plan = json.load(sys.stdin)
for k in plan["kernels"]:
    attrs = " ".join(f"{a}={json.dumps(v)}" for a, v in sorted(k["attrs"].items()))
    print(f"kernel {k['op']} in={k['in']} out={k['out']} {attrs}")
for i, t in enumerate(plan["tensors"]):
    print(f"tensor {i} {t['kind']} ref={t['ref']} offset={t['offset']} "
          f"{t['dtype']}{t['shape']} {t['name']}")
for v in plan["variables"]:
    if "block" in v:
        print(f"variable {v['name']} block={v['block']} offset={v['block_offset']}")
if plan.get("variable_blocks"):
    print(f"variable blocks {plan['variable_blocks']}")
for v in plan["variables"]:
    if v["role"] == "optimizer_state":
        print(f"optimizer state {v['name']} {v['dtype']}{v['shape']}")
