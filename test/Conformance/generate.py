#!/usr/bin/python3
"""Generates ONNX's backend node tests (python3-onnx 1.12) into a directory.

    generate.py OUTDIR

writes OUTDIR/node/<test>/{model.onnx,test_data_set_0/{input,output}_*.pb}
(and ONNX's small 'simple'/'real' model cases beside it, unused), exactly as
`python3 -m onnx.backend.test.cmd_tools generate-data -o OUTDIR` does. The
test cases of onnx 1.12 still use numpy aliases that numpy 1.24 removed
(np.float, np.int, np.bool, np.object); they are restored first.

Idempotent: OUTDIR/.generated records the onnx version of a complete
generation, and a second call with the same version does nothing.
"""

import os
import shutil
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: generate.py OUTDIR", file=sys.stderr)
        return 2
    out = os.path.abspath(sys.argv[1])
    stamp = os.path.join(out, ".generated")

    import numpy as np
    for alias, target in (("float", float), ("int", int), ("bool", bool),
                          ("object", object)):
        if alias not in np.__dict__:
            setattr(np, alias, target)
    try:
        import onnx
        from onnx.backend.test import cmd_tools
    except ImportError as e:
        print(f"generate.py: error: python3-onnx is not installed ({e}); "
              "run scripts/setup.sh", file=sys.stderr)
        return 1

    if os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == onnx.__version__:
                return 0

    # Generate into a temporary directory and move it into place, so that an
    # interrupted run never leaves a half-written suite that looks complete.
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    saved_argv = sys.argv
    sys.argv = ["cmd_tools", "generate-data", "-o", tmp]
    try:
        cmd_tools.main()
    finally:
        sys.argv = saved_argv
    with open(os.path.join(tmp, ".generated"), "w") as f:
        f.write(onnx.__version__ + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    count = len(os.listdir(os.path.join(out, "node")))
    print(f"generated {count} ONNX {onnx.__version__} node tests in {out}/node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
