#!/usr/bin/python3
"""ONNX backend node tests through parallax-opt --inference and parallax-run.

    run_conformance.py --opt BUILD/bin/parallax-opt --run BUILD/bin/parallax-run \
        [--data DIR] [--work DIR] [-j 2] [-k REGEX] [-v]

For every node test of python3-onnx 1.12 (generated into --data by
generate.py when missing):

* a test is *in scope* when every node of its model is an operator the
  importer accepts (read from lib/Importer: each `op == "X"` of
  lib/Importer/*.cpp) in the default domain, and the
  model's default-domain opset is within the importer's 13..17, or below 13
  with every operator unchanged since (ONNX stamps Conv and the pools with
  opset 11/12): such a model is restamped to opset 13, the same model. Other
  tests are counted, never run.
* an in-scope test is compiled with `parallax-opt model.onnx --inference
  --emit=plan`, run with `parallax-run --infer --data DIR --out OUT`, and each
  output is compared with the expected one as ONNX's backend runner does
  (same dtype, same shape, numpy.testing.assert_allclose with rtol=1e-3,
  atol=1e-7, NaNs equal).
* shape operands: when the importer says an input 'NAME' "must be computable
  at compile time" (or a Range/ConstantOfShape "inputs depend on runtime
  data") and NAME is a graph input of the test, that input becomes an
  initializer holding the test's data (kept constant with --freeze), and the
  model is compiled again. Only inputs the importer asks for are folded.
  An input declared with a dynamic dimension is bound to its data's shape
  (--input-shape).
* an in-scope test must pass unless exceptions.txt lists it (with a reason);
  a listed test that passes, or a listed name that is not an in-scope test,
  is a failure too, so the list cannot rot.

Exit status 0 when every in-scope test passed or failed as listed.

For a machine without parallax-opt (a lent GPU machine has no MLIR), the
plans are compiled here and carried there:

    run_conformance.py --opt ... --target cuda --export DIR     # here
    run_conformance.py --replay DIR --run parallax-run [--device cuda]  # there

--export compiles every in-scope test not in exceptions.txt and writes, per
data set, DIR/<test>/<data_set>/{t.pxplan, data/*.npy, expected/*.npy,
outputs.txt} and DIR/MANIFEST.txt instead of running it. --replay needs only
numpy: it runs each manifest entry with parallax-run and compares its outputs
as above. See docs/conformance.md.
"""

import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(os.path.dirname(HERE))

OPSET_MIN, OPSET_MAX = 13, 17
RTOL, ATOL = 1e-3, 1e-7   # onnx/backend/test/case/node: every node test's
STEP_TIMEOUT = 120        # seconds per parallax-opt / parallax-run call
MANIFEST = "MANIFEST.txt"  # an --export directory's list of test/data_set

# The importer's messages that name an operand it needs at compile time.
NEEDS_CONST_INPUT = re.compile(
    r"input '[^']*' \('(?P<name>[^']+)'\) must be computable at compile time")
NEEDS_CONST_NODE = re.compile(
    r"node '(?P<node>[^']*)' \((?P<op>Range|ConstantOfShape), opset \d+\): "
    r"its inputs depend on runtime data")


def accepted_ops(src_root):
    """The ONNX operators the importer accepts, read from its sources."""
    ops = set()
    importer = os.path.join(src_root, "lib", "Importer")
    for name in sorted(os.listdir(importer)):
        if not name.endswith(".cpp"):
            continue
        with open(os.path.join(importer, name)) as f:
            ops.update(re.findall(r'\bop == "(\w+)"', f.read()))
    if len(ops) < 40 or not {"Add", "Constant", "Shape", "Conv"} <= ops:
        sys.exit("run_conformance.py: cannot read the importer's operator "
                 f"list from {src_root}/lib/Importer (found {sorted(ops)})")
    return ops


def read_exceptions(path):
    """exceptions.txt: `test_name  reason...` per line; # starts a comment."""
    exceptions = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                sys.exit(f"{path}:{lineno}: expected 'test_name reason'")
            if parts[0] in exceptions:
                sys.exit(f"{path}:{lineno}: {parts[0]} is listed twice")
            exceptions[parts[0]] = parts[1].strip()
    return exceptions


def default_opset(model):
    versions = [o.version for o in model.opset_import
                if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else None


def unchanged_since(op_type, opset):
    """Whether `op_type` at `opset` is the same operator version as at
    OPSET_MIN (ONNX node tests are stamped with the version that introduced
    the operator's current schema: Conv and the pools with 11 or 12)."""
    import onnx.defs
    try:
        return (onnx.defs.get_schema(op_type, opset, "").since_version ==
                onnx.defs.get_schema(op_type, OPSET_MIN, "").since_version)
    except Exception:
        return False


def all_nodes(graph):
    """The graph's nodes and those of its subgraphs (Loop bodies, If
    branches), which the importer imports too."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.HasField("g"):
                yield from all_nodes(a.g)
            for sub in a.graphs:
                yield from all_nodes(sub)


def scope_of(model, ops):
    """(None, restamp) when in scope, else (why not, False). `restamp`: the
    model's opset is below OPSET_MIN but none of its operators changed since,
    so it is the same model at opset OPSET_MIN."""
    others = sorted({n.op_type if n.domain in ("", "ai.onnx")
                     else f"{n.domain}.{n.op_type}"
                     for n in all_nodes(model.graph)
                     if n.domain not in ("", "ai.onnx") or n.op_type not in ops})
    if others:
        return "operator " + ",".join(others), False
    opset = default_opset(model)
    if opset is not None and OPSET_MIN <= opset <= OPSET_MAX:
        return None, False
    if (opset is not None and opset < OPSET_MIN and
            all(unchanged_since(n.op_type, opset) for n in all_nodes(model.graph))):
        return None, True
    return f"opset {opset}", False


class Failure(Exception):
    pass


def first_lines(tool, text, n=3):
    """The start of a tool's output, prefixed with the tool's name once."""
    lines = [l for l in text.strip().splitlines() if l.strip()]
    text = "\n".join(lines[:n]) if lines else "(no output)"
    return text if text.startswith(tool + ":") else f"{tool}: {text}"


def call(cmd, what):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure(f"{what}: timed out after {STEP_TIMEOUT} s")
    return p.returncode, p.stdout


def compare(expected, actual, name):
    import numpy as np
    if actual.dtype != expected.dtype:
        raise Failure(f"output '{name}': dtype {actual.dtype}, expected "
                      f"{expected.dtype}")
    if actual.shape != expected.shape:
        raise Failure(f"output '{name}': shape {actual.shape}, expected "
                      f"{expected.shape}")
    try:
        if expected.dtype == object:
            np.testing.assert_array_equal(actual, expected)
        else:
            np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)
    except AssertionError as e:
        raise Failure(f"output '{name}': " + " ".join(str(e).split())[:600])


def run_plan(args, plan, data, out):
    """parallax-run --infer of `plan` on the inputs in `data`, into `out`."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    # Some tests feed NaN and infinity on purpose (IsNaN, IsInf, Max, ...).
    cmd = [args.run, plan, "--infer", "--data", data, "--out", out,
           "--threads", "1", "--allow-non-finite", "-q"]
    if args.device:
        cmd.append("--device=" + args.device)
    rc, text = call(cmd, "parallax-run")
    if rc != 0:
        raise Failure(first_lines("parallax-run", text))


def check_outputs(expected, out):
    """Compares each (name, array) of `expected` with `out`/name.npy."""
    import numpy as np
    for name, want in expected:
        if want is None:
            raise Failure(f"output '{name}' is not a tensor")
        path = os.path.join(out, name + ".npy")
        if not os.path.exists(path):
            raise Failure(f"parallax-run wrote no output '{name}'")
        compare(want, np.load(path), name)


def upstream_inputs(graph, node):
    """The names `node`'s operands are computed from, transitively, in
    graph order: graph inputs among them are what folding can make
    constant."""
    producer = {out: n for n in graph.node for out in n.output}
    seen, order, stack = set(), [], list(node.input)
    while stack:
        name = stack.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        order.append(name)
        if name in producer:
            stack.extend(producer[name].input)
    return order


def run_data_set(args, model, restamp, test_dir, data_set, work):
    """Compiles (folding the shape operands the importer asks for), runs and
    compares one test_data_set, or with --export writes it for --replay;
    raises Failure."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph_inputs = [i.name for i in model.graph.input]
    initializer_names = {t.name for t in model.graph.initializer}
    runtime_inputs = [n for n in graph_inputs if n not in initializer_names]
    # Sequence and optional values are not tensors: they are left for the
    # importer to refuse.
    inputs = {}
    for j, value in enumerate(model.graph.input):
        path = os.path.join(test_dir, data_set, f"input_{j}.pb")
        if value.type.HasField("tensor_type") and os.path.exists(path):
            inputs[value.name] = numpy_helper.to_array(onnx.load_tensor(path))
    expected = []
    for j, out in enumerate(model.graph.output):
        if not out.type.HasField("tensor_type"):
            expected.append((out.name, None))
            continue
        t = onnx.load_tensor(os.path.join(test_dir, data_set, f"output_{j}.pb"))
        expected.append((out.name, numpy_helper.to_array(t)))
    # Inputs declared with a dynamic dimension are bound to the data's shape.
    dynamic = [i.name for i in model.graph.input
               if i.name in inputs and i.type.tensor_type.HasField("shape") and
               any(not d.HasField("dim_value")
                   for d in i.type.tensor_type.shape.dim)]

    folded = []
    plan = os.path.join(work, "t.pxplan")
    for _ in range(len(runtime_inputs) + 1):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        if restamp:
            for o in m.opset_import:
                if o.domain in ("", "ai.onnx"):
                    o.version = OPSET_MIN
        if folded:
            keep = [i for i in m.graph.input if i.name not in folded]
            del m.graph.input[:]
            m.graph.input.extend(keep)
            for name in folded:
                m.graph.initializer.append(
                    numpy_helper.from_array(inputs[name], name))
        model_path = os.path.join(work, "model.onnx")
        onnx.save(m, model_path)
        cmd = [args.opt, model_path, "--inference", "--emit=plan",
               "--target=" + args.target, "-o", plan]
        if folded:
            cmd.append("--freeze=" + ",".join(folded))
        for name in dynamic:
            if name not in folded:
                cmd.append(f"--input-shape={name}=" +
                           ",".join(str(d) for d in inputs[name].shape))
        rc, out = call(cmd, "parallax-opt")
        if rc == 0:
            break
        more = []
        hit = NEEDS_CONST_INPUT.search(out)
        if hit and hit["name"] in inputs and hit["name"] not in folded:
            more = [hit["name"]]
        hit = NEEDS_CONST_NODE.search(out)
        if hit:
            node = next((n for n in model.graph.node if n.name == hit["node"]), None)
            index = re.fullmatch(r"\w+#(\d+)", hit["node"])
            if node is None and index and int(index[1]) < len(model.graph.node):
                node = model.graph.node[int(index[1])]
            if node is not None:
                # The graph inputs the node's operands are computed from
                # (a window function's size reaches its Range through a
                # Cast and a Sub).
                more = [i for i in upstream_inputs(model.graph, node)
                        if i in inputs and i not in folded]
        if not more:
            raise Failure(first_lines("parallax-opt", out))
        folded += more
    else:
        raise Failure(first_lines("parallax-opt", out))

    if args.export:
        work = os.path.join(args.export, os.path.basename(test_dir), data_set)
        os.makedirs(work)
        shutil.copy(plan, os.path.join(work, "t.pxplan"))
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    for name in runtime_inputs:
        if name in folded:
            continue
        if name not in inputs:
            raise Failure(f"the test has no data for input '{name}'")
        np.save(os.path.join(data, name + ".npy"), inputs[name])
    if args.export:
        write_expected(work, expected)
    else:
        result = os.path.join(work, "out")
        run_plan(args, plan, data, result)
        check_outputs(expected, result)
    return folded


def write_expected(entry, expected):
    """An --export entry's expected/<output>.npy and outputs.txt (the
    outputs in graph order)."""
    import numpy as np
    os.makedirs(os.path.join(entry, "expected"))
    for name, want in expected:
        if want is None:
            raise Failure(f"output '{name}' is not a tensor")
        np.save(os.path.join(entry, "expected", name + ".npy"), want,
                allow_pickle=False)
    with open(os.path.join(entry, "outputs.txt"), "w") as f:
        f.writelines(name + "\n" for name, _ in expected)


def run_test(args, name, restamp, test_dir):
    """Returns (name, error or None, folded inputs, seconds)."""
    import onnx
    start = time.monotonic()
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    folded = []
    try:
        data_sets = sorted(d for d in os.listdir(test_dir)
                           if d.startswith("test_data_set_"))
        if not data_sets:
            raise Failure("the test has no test_data_set")
        for data_set in data_sets:
            folded = run_data_set(args, model, restamp, test_dir, data_set, work)
        error = None
    except Failure as e:
        error = str(e)
    except Exception as e:  # a bug in this script: report it as a failure
        error = f"runner error: {type(e).__name__}: {e}"
    if error is not None and args.export:
        # No half-exported test: the manifest lists whole tests only.
        shutil.rmtree(os.path.join(args.export, name), ignore_errors=True)
    if error is None and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return name, error, folded, time.monotonic() - start


def prepare_export(directory, target):
    """Empties `directory` for --export: it must be absent, empty or an
    earlier export (never anything else, which would be deleted)."""
    if os.path.exists(directory):
        if (os.listdir(directory) and
                not os.path.exists(os.path.join(directory, MANIFEST))):
            sys.exit(f"run_conformance.py: --export {directory}: not empty and "
                     f"not an earlier export (no {MANIFEST}); not replacing it")
        shutil.rmtree(directory)
    os.makedirs(directory)
    write_manifest(directory, target, [])


def write_manifest(directory, target, entries):
    """MANIFEST.txt: a header naming the target, then one test/data_set a
    line."""
    with open(os.path.join(directory, MANIFEST), "w") as f:
        f.write(f"# run_conformance.py --export --target={target}: "
                f"{len(entries)} entries; replay with --replay\n")
        f.writelines(e + "\n" for e in entries)


def tree_size(directory):
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(directory) for f in files)


def replay_entry(args, work, entry):
    """Runs one exported test/data_set and compares its outputs; returns
    (entry, error or None, seconds)."""
    import numpy as np
    start = time.monotonic()
    src = os.path.join(args.replay, entry)
    scratch = os.path.join(work, entry)
    try:
        listing = os.path.join(src, "outputs.txt")
        if not os.path.exists(listing):
            raise Failure(f"{listing}: missing (an incomplete export)")
        with open(listing) as f:
            names = [l.rstrip("\n") for l in f if l.strip()]
        expected = []
        for name in names:
            path = os.path.join(src, "expected", name + ".npy")
            if not os.path.exists(path):
                raise Failure(f"{path}: missing (an incomplete export)")
            expected.append((name, np.load(path, allow_pickle=False)))
        data = os.path.join(src, "data")
        if not os.path.isdir(data):  # no runtime input: an empty folder
            data = os.path.join(scratch, "data")   # may not have travelled
            os.makedirs(data, exist_ok=True)
        out = os.path.join(scratch, "out")
        run_plan(args, os.path.join(src, "t.pxplan"), data, out)
        check_outputs(expected, out)
        error = None
    except Failure as e:
        error = str(e)
    except Exception as e:  # a bug in this script: report it as a failure
        error = f"runner error: {type(e).__name__}: {e}"
    if error is None and not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return entry, error, time.monotonic() - start


def replay(args):
    """--replay DIR: runs an --export's plans with parallax-run and compares
    the outputs. Needs numpy only (no parallax-opt, no onnx)."""
    manifest = os.path.join(args.replay, MANIFEST)
    if not os.path.isfile(manifest):
        sys.exit(f"run_conformance.py: {manifest}: no such file "
                 "(make the directory with --export)")
    target, entries = None, []
    with open(manifest) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                hit = re.search(r"--target=(\w+)", line)
                target = hit[1] if hit else target
            elif line:
                entries.append(line)
    if args.filter:
        entries = [e for e in entries if re.search(args.filter, e)]
    device = args.device or target or "the plans' target"
    temporary = args.work is None
    work = (tempfile.mkdtemp(prefix="px-conf-replay-") if temporary
            else os.path.abspath(args.work))

    started = time.monotonic()
    failures = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(replay_entry, args, work, e) for e in entries]
        for f in concurrent.futures.as_completed(futures):
            entry, error, seconds = f.result()
            if error is not None:
                failures[entry] = error
            if args.verbose:
                print(f"{'PASS' if error is None else 'FAIL':4} {entry} "
                      f"{seconds:.2f}s", flush=True)
    if failures:
        print(f"\n{len(failures)} failure(s):")
        for entry in sorted(failures):
            print(f"  FAIL {entry}: " + failures[entry].replace("\n", "\n    "))
    if failures or args.keep:
        print(f"(outputs of the {'failing ' if not args.keep else ''}entries "
              f"are in {work})")
    elif temporary:
        shutil.rmtree(work, ignore_errors=True)
    print(f"[{time.monotonic() - started:.1f} s]")
    print(f"conformance replay: {len(entries) - len(failures)} passed, "
          f"{len(failures)} failed of {len(entries)} (device {device})")
    return 1 if failures or not entries else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--opt", help="parallax-opt (not with --replay)")
    parser.add_argument("--run", help="parallax-run (not with --export)")
    parser.add_argument("--data", default=os.path.join(os.getcwd(), "onnx-backend-data"),
                        help="the generated suite (generate.py OUT); made when missing")
    parser.add_argument("--work", default=None,
                        help="scratch directory (one folder per test; default "
                             "./work, with --replay a temporary one)")
    parser.add_argument("--exceptions", default=os.path.join(HERE, "exceptions.txt"))
    parser.add_argument("--src-root", default=SRC_ROOT,
                        help="the Parallax source tree (for the importer's op list)")
    parser.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                        help="parallax-opt --target: the device kind the plans are for")
    parser.add_argument("--device", default=None,
                        help="parallax-run --device (default: the plan's target)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--export", metavar="DIR",
                      help="compile every in-scope test not in exceptions.txt and "
                           "write its plan, inputs and expected outputs into DIR "
                           "for --replay, instead of running it")
    mode.add_argument("--replay", metavar="DIR",
                      help="run and check an --export DIR with --run only "
                           "(no parallax-opt, no onnx)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("-k", "--filter", default=None,
                        help="only tests whose name matches this regex")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="one line per test, and the out-of-scope reasons")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder of passing tests too")
    parser.add_argument("--write-failures", metavar="FILE",
                        help="write every failing in-scope test with its error "
                             "(a draft for exceptions.txt)")
    args = parser.parse_args()
    needed = {"opt": not args.replay, "run": not args.export}
    for option, tool in (("opt", args.opt), ("run", args.run)):
        if not needed[option]:
            continue
        if tool is None:
            parser.error(f"--{option} is required" +
                         (" (the replay runs parallax-run)" if args.replay else ""))
        tool = os.path.abspath(tool)
        if not os.access(tool, os.X_OK):
            sys.exit(f"run_conformance.py: {tool} is not an executable (build it first)")
        setattr(args, option, tool)
    if args.replay:
        args.replay = os.path.abspath(args.replay)
        return replay(args)
    args.work = os.path.abspath(args.work or os.path.join(os.getcwd(), "work"))
    if args.export:
        args.export = os.path.abspath(args.export)
        prepare_export(args.export, args.target)

    started = time.monotonic()
    gen = subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), args.data])
    if gen.returncode != 0:
        sys.exit("run_conformance.py: generating the ONNX node tests failed")
    import onnx

    ops = accepted_ops(args.src_root)
    exceptions = read_exceptions(args.exceptions)
    node_dir = os.path.join(args.data, "node")
    names = sorted(os.listdir(node_dir))
    if args.filter:
        names = [n for n in names if re.search(args.filter, n)]
        exceptions = {k: v for k, v in exceptions.items() if re.search(args.filter, k)}

    in_scope, out_of_scope, restamped = [], {}, set()
    for name in names:
        why, restamp = scope_of(onnx.load(os.path.join(node_dir, name, "model.onnx")), ops)
        if why is None:
            in_scope.append(name)
            if restamp:
                restamped.add(name)
        else:
            out_of_scope[name] = why
    # An export carries what passes on the CPU: the listed exceptions stay.
    to_run = [n for n in in_scope if not (args.export and n in exceptions)]

    results = {}
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_test, args, n, n in restamped,
                               os.path.join(node_dir, n))
                   for n in to_run]
        for f in concurrent.futures.as_completed(futures):
            name, error, folded, seconds = f.result()
            results[name] = (error, folded)
            if args.verbose:
                state = ("EXPORT" if args.export else "PASS") if error is None else (
                    "XFAIL" if name in exceptions else "FAIL")
                note = f" (folded {','.join(folded)})" if folded else ""
                print(f"{state:5} {name} {seconds:.2f}s{note}", flush=True)

    problems = []
    passed = expected_failures = 0
    by_reason = collections.Counter()
    for name in to_run:
        error, _ = results[name]
        if error is None:
            if name in exceptions:
                problems.append(f"UNEXPECTED PASS {name}: listed in exceptions.txt "
                                f"({exceptions[name]}); remove it from the list")
            else:
                passed += 1
        elif name in exceptions:
            expected_failures += 1
            by_reason[exceptions[name]] += 1
            if args.verbose:
                print(f"  expected: {name}: {error.splitlines()[0]}")
        else:
            problems.append(f"FAIL {name}: {error}")
    for name in sorted(exceptions):
        if name not in in_scope:
            why = out_of_scope.get(name, "no such node test")
            problems.append(f"STALE EXCEPTION {name}: not an in-scope test ({why}); "
                            "remove it from exceptions.txt")

    if args.write_failures:
        with open(args.write_failures, "w") as f:
            for name in to_run:
                error = results[name][0]
                if error is not None:
                    f.write(f"{name}  {' '.join(error.split())}\n")

    if args.verbose and out_of_scope:
        print("\nout of scope:")
        for name, why in sorted(out_of_scope.items()):
            print(f"  {name}: {why}")
    if by_reason:
        print("\nexpected exceptions by reason:")
        for reason, count in by_reason.most_common():
            print(f"  {count:4}  {reason}")
    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print("  " + p.replace("\n", "\n    "))
    reasons = collections.Counter(w.split()[0] for w in out_of_scope.values())
    print(f"\nin scope: {len(in_scope) - len(restamped)} at opset {OPSET_MIN}..{OPSET_MAX}, "
          f"{len(restamped)} restamped to opset {OPSET_MIN} (operators unchanged since "
          f"their opset); out of scope: {reasons['operator']} with an operator the "
          f"importer does not accept, {reasons['opset']} with another opset "
          "(-v lists them)")
    seconds = time.monotonic() - started
    if args.export:
        entries = [f"{name}/{data_set}" for name in to_run
                   if results[name][0] is None
                   for data_set in sorted(os.listdir(os.path.join(args.export, name)))]
        write_manifest(args.export, args.target, entries)
        print(f"{len(names)} node tests: {len(in_scope)} in scope ({passed} exported "
              f"for --target={args.target}, {len(to_run) - passed} failed, "
              f"{len(in_scope) - len(to_run)} exceptions left out), "
              f"{len(out_of_scope)} out of scope [{seconds:.1f} s]")
        print(f"conformance export: {len(entries)} entries in {args.export}, "
              f"{tree_size(args.export) / 2**20:.1f} MiB")
    else:
        print(f"{len(names)} node tests: {len(in_scope)} in scope ({passed} passed, "
              f"{expected_failures} expected exceptions), {len(out_of_scope)} out of "
              f"scope [{seconds:.1f} s]")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
