#!/usr/bin/python3
"""Seeds the fuzzers' corpora (scripts/fuzz.sh runs it).

    make_corpus.py --src ROOT --opt PARALLAX_OPT --out DIR [--node-tests DIR]

DIR/onnx: every example model (examples/models/*.onnx) with the data of its
large float initializers cut to one value (the importer never reads a
trainable initializer's data, and a 200 MB seed would make every execution
slow), every ONNX text model of test/ in binary form (with
parallax.batch_size metadata when an input has a dynamic batch), and ONNX's
backend node tests when --node-tests names their directory.

DIR/plan: the plans parallax-opt compiles from the small example models (one
process and several ranks, every optimizer, every synchronization scheme,
inference) and from test/Importer/ops, each as its JSON program, a NUL byte
and its blobs: the form
test/Fuzz/FuzzTargets.cpp packs into a file with a valid checksum, so that
mutations reach the reader's checks instead of the checksum. Two plans are
also kept whole, for the header checks.

DIR/plan.dict: the plan's keys, kernel names and attribute names, as a
libFuzzer dictionary.
"""

import argparse
import glob
import hashlib
import json
import os
import re
import struct
import subprocess
import sys

import onnx
import onnx.parser

SMALL = 16 << 10  # initializers above this many bytes lose their data


def write(directory, data):
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def shrink(model):
    for t in model.graph.initializer:
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE) \
                and len(t.raw_data) > SMALL:
            t.raw_data = t.raw_data[:4 if t.data_type == onnx.TensorProto.FLOAT else 8]
    return model


def batch_metadata(model):
    if any(p.key == "parallax.batch_size" for p in model.metadata_props):
        return model
    inits = {t.name for t in model.graph.initializer}
    for i in model.graph.input:
        dims = i.type.tensor_type.shape.dim
        if i.name not in inits and dims and not dims[0].HasField("dim_value"):
            p = model.metadata_props.add()
            p.key, p.value = "parallax.batch_size", "2"
            break
    return model


def onnx_seeds(src, out, node_tests):
    n = 0
    for path in sorted(glob.glob(os.path.join(src, "examples/models/*.onnx"))):
        write(out, shrink(onnx.load(path)).SerializeToString())
        n += 1
    for path in sorted(glob.glob(os.path.join(src, "test/**/*.onnxtxt"), recursive=True)):
        try:
            model = onnx.parser.parse_model(open(path).read())
        except Exception:  # the text-syntax error tests
            continue
        write(out, batch_metadata(model).SerializeToString())
        n += 1
    if node_tests:
        for path in sorted(glob.glob(os.path.join(node_tests, "node/*/model.onnx"))):
            with open(path, "rb") as f:
                write(out, f.read())
            n += 1
    return n


PLAN_FLAGS = [
    [],
    ["--optimizer=adam"],
    ["--optimizer=momentum", "--nesterov", "--weight-decay=0.01"],
    ["--optimizer=adagrad"],
    ["--np", "2"],
    ["--np", "2", "--sync=ps"],
    ["--np", "2", "--sync=allgatherv", "--optimizer=adam"],
    ["--np", "4", "--shard-weight-update=on", "--optimizer=adam"],
    ["--np", "4", "--sync=allreduce", "--local-batchnorm"],
    ["--inference"],
]


def unpack(plan):
    program, blobs = struct.unpack_from("<QQ", plan, 16)
    return plan[32:32 + program], plan[32 + program:32 + program + blobs]


def compile_plan(opt, model, flags, work, out, keys, whole):
    plan_path = os.path.join(work, hashlib.sha1(
        (model + " ".join(flags)).encode()).hexdigest() + ".pxplan")
    r = subprocess.run([opt, model, "--emit=plan", "-o", plan_path] + flags,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        return False  # a combination the model does not allow
    plan = open(plan_path, "rb").read()
    program, blobs = unpack(plan)
    write(out, program + (b"\0" + blobs if blobs else b""))
    collect_keys(json.loads(program), keys)
    if whole:
        write(out, plan)
    return True


def plan_seeds(src, opt, out, work):
    """The small example models with every flag set, and the operator tests
    of test/Importer/ops, for one process and two ranks: the large models'
    programs (lm, nmt, torchvision: 0.3-0.5 MB of JSON each) would only
    slow every execution down, and their kernels are in these."""
    os.makedirs(work, exist_ok=True)
    n, keys = 0, set()
    for model in ("mlp", "cnn", "dlrm", "tv_squeezenet"):
        path = os.path.join(src, "examples/models", model + ".onnx")
        if not os.path.exists(path):
            continue
        for flags in PLAN_FLAGS:
            n += compile_plan(opt, path, flags, work, out, keys, whole=n < 2)
    for path in sorted(glob.glob(os.path.join(src, "test/Importer/ops/*.onnxtxt"))):
        try:
            model = batch_metadata(onnx.parser.parse_model(open(path).read()))
        except Exception:
            continue
        binary = os.path.join(work, os.path.basename(path) + ".onnx")
        onnx.save(model, binary)
        for flags in ([], ["--np", "2"], ["--inference"]):
            n += compile_plan(opt, binary, flags, work, out, keys, whole=False)
    return n, keys


def collect_keys(j, keys):
    if isinstance(j, dict):
        for k, v in j.items():
            keys.add(k)
            collect_keys(v, keys)
    elif isinstance(j, list):
        for v in j:
            collect_keys(v, keys)
    elif isinstance(j, str) and re.fullmatch(r"[a-z][a-z0-9_]*", j):
        keys.add(j)  # kernel names, element types, kinds, roles


def write_dict(path, keys):
    with open(path, "w") as f:
        for k in sorted(keys):
            if all(32 <= ord(c) < 127 and c not in '"\\' for c in k):
                f.write(f'"\\"{k}\\""\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--opt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--node-tests")
    a = ap.parse_args()
    n_onnx = onnx_seeds(a.src, os.path.join(a.out, "onnx"), a.node_tests)
    n_plan, keys = plan_seeds(a.src, a.opt, os.path.join(a.out, "plan"),
                              os.path.join(a.out, "work"))
    write_dict(os.path.join(a.out, "plan.dict"), keys)
    print(f"make_corpus: {n_onnx} ONNX seeds, {n_plan} plan seeds in {a.out}")
    return 0 if n_onnx and n_plan else 1


if __name__ == "__main__":
    sys.exit(main())
