#!/usr/bin/python3
"""Check the bytes every rank measured against px-sync's prediction.

    check_bytes.py DIR/manifest.json [--schemes a,b] [--np 2,3] [--exact-ps]
                   [--batchnorm-traffic]

For the runs of DIR/manifest.json (train_matrix.py) with N > 1 ranks (all,
or those of --schemes and --np), compiles the same model with the same
flags to px IR (parallax-opt --train --np N --sync=SCHEME ...) and reads
each trainable px.variable's px.sync, px.bytes_per_step and px.bytes_exact.
Then, for every rank's metrics line of every step:

  * exact predictions (all-reduce: 2 * bytes * (N-1) / N, integer division;
    all-gatherv: rows * (8 + row bytes) * (N-1)): the bytes the rank sent
    and received for the variable equal the prediction;
  * the global loss average, "(loss)": an all-reduce of one float;
  * "bytes_sent" and "bytes_received" are the sums over the entries, and
    no variable the IR does not synchronize has traffic (traffic that is no
    variable's is named in parentheses); with --batchnorm-traffic, a model
    with synchronized batch norms has such traffic on every rank and step
    (their statistics are all-reduced);
  * parameter-server variables (an estimate: u = px.rows_per_step rows, or
    every row for a dense variable, each pulled and pushed once with 8 bytes
    of index, owned by another rank with probability (N-1)/N:
    2 u (8 + row bytes) (N-1)/N, rounded):
      - what all ranks sent equals what they received, each step;
      - a dense variable on servers (every row pulled, the whole gradient
        pushed) moves exactly what its partitions imply, on every rank
        (and the prediction is the mean over the ranks);
      - a sparse one stays within the bound the estimate is made of: the
        mean over the ranks is at most 2 u (8 + row bytes) (every touched
        row owned by another rank);
      - with --exact-ps (the run trained on --data, whose ids the script
        reads), every rank's bytes equal what the ids, the partitions and
        the placement imply: each pull requests each distinct row it needs
        from its owner (8 bytes) and gets the row back, and the push sends
        the distinct rows of the gradient (8 + row bytes each) to their
        owners (one machine: no aggregation hop).
      - with --profile-data (px-sync then predicts each rank's bytes over the
        profiled steps exactly, px.bytes_profiled) and a run on that data,
        each rank's bytes sent over those steps equal the prediction.
    Prints how close the estimate is (measured mean / predicted).

Prints one line per run, then "MODEL bytes: OK", or every mismatch and
"MODEL bytes: FAILED" (exit status 1).  parallax-opt is found on PATH.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

VAR_RE = re.compile(r'^\s*(%[\w.#]+) = px\.variable "([^"]+)" trainable = .*?'
                    r': tensor<([^>]*)>\s*\{(.*)\}\s*$')
INPUT_RE = re.compile(r'^\s*(%[\w.#]+) = px\.input "([^"]+)" : tensor<([^>]*)>( batched)?')
RESHAPE_RE = re.compile(r'^\s*(%[\w.#]+) = px\.reshape (%[\w.#]+) ')
CONCAT_RE = re.compile(r'^\s*(%[\w.#]+) = px\.concat ([^{]*) \{axis = 0 : i64\}')
PULL_RE = re.compile(r'px\.ps_pull (%[\w.#]+)\[(%[\w.#]+)\]')
GRID_RE = re.compile(r'shard\.grid @world\(shape = ([0-9x]+)\)')
DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2}


class Failure(Exception):
    pass


def attr(attrs, name):
    m = re.search(re.escape(name) + r' = ("([^"]*)"|array<i64: ([0-9, ]*)>|'
                  r'(true|false)|(-?[0-9.e+-]+))', attrs)
    if not m:
        return None
    if m.group(2) is not None:
        return m.group(2)
    if m.group(3) is not None:
        return [int(x) for x in m.group(3).split(",")]
    if m.group(4) is not None:
        return m.group(4) == "true"
    text = m.group(5)
    return float(text) if any(c in text for c in ".e") else int(text)


def tensor_type(text):
    parts = text.split("x")
    return [int(d) for d in parts[:-1]], parts[-1]


def parse_ir(text):
    """Trainable variables (name -> facts), inputs (name -> (shape,
    batched)), the grid's shape."""
    variables, ssa_var, inputs, reshapes, concats, pulls = {}, {}, {}, {}, {}, []
    input_facts = {}
    grid = None
    for line in text.splitlines():
        g = GRID_RE.search(line)
        if g:
            grid = [int(d) for d in g.group(1).split("x")]
        m = VAR_RE.match(line)
        if m:
            ssa, name, ty, attrs = m.groups()
            shape, dtype = tensor_type(ty)
            ssa_var[ssa] = name
            if attr(attrs, "px.sync") is None:
                continue
            rows = shape[0] if shape else 1
            elems = int(np.prod(shape)) if shape else 1
            variables[name] = {
                "shape": shape, "rows": rows,
                "row_bytes": elems * DTYPE_BYTES[dtype] // max(rows, 1),
                "bytes": elems * DTYPE_BYTES[dtype],
                "sync": attr(attrs, "px.sync"), "access": attr(attrs, "px.access"),
                "predicted": attr(attrs, "px.bytes_per_step"),
                "exact": attr(attrs, "px.bytes_exact"),
                "rows_per_step": attr(attrs, "px.rows_per_step"),
                "partitions": attr(attrs, "px.partitions"),
                "placement": attr(attrs, "px.placement"),
                "profiled": attr(attrs, "px.bytes_profiled"),
                "pull_inputs": [],
            }
            continue
        m = INPUT_RE.match(line)
        if m:
            inputs[m.group(1)] = m.group(2)
            input_facts[m.group(2)] = (tensor_type(m.group(3))[0], bool(m.group(4)))
            continue
        m = RESHAPE_RE.match(line)
        if m:
            reshapes[m.group(1)] = m.group(2)
        m = CONCAT_RE.match(line)
        if m:
            concats[m.group(1)] = [v.strip() for v in m.group(2).split(",")]
        for p in PULL_RE.finditer(line):
            pulls.append(p.groups())
    def sources(ids):
        # The graph inputs a pull's ids are, in order: px-sync's fused pulls
        # read a concatenation of (flattened) inputs. None: not an input.
        while ids in reshapes:
            ids = reshapes[ids]
        if ids in concats:
            return [i for v in concats[ids] for i in sources(v)]
        return [inputs.get(ids)]

    for table, ids in pulls:
        name = ssa_var.get(table)
        if name not in variables:
            continue
        variables[name]["pull_inputs"].append(sources(ids))
    return variables, input_facts, grid


def load_metrics(path, steps):
    with open(path) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    if len(lines) != steps:
        raise Failure(f"{path}: {len(lines)} metrics lines, expected {steps}")
    for rec in lines:
        if "bytes" not in rec:
            raise Failure(f"{path}: step {rec.get('step')}: no per-variable bytes")
    return lines


class PsExact:
    """The exact parameter-server traffic of a run on --data."""

    def __init__(self, data_dir, batch, n, input_facts):
        self.data, self.batch, self.n = data_dir, batch, n
        self.inputs = input_facts
        self.arrays = {}

    def ids(self, input_name, step, rank):
        """The ids `rank` reads from an input at `step` (as parallax-run's
        --data does: rank r takes samples [r B/N, (r+1) B/N) of global batch
        `step`, wrapping; an input with no batch dimension is one array, or
        one per step)."""
        if input_name not in self.arrays:
            self.arrays[input_name] = np.load(os.path.join(self.data, input_name + ".npy"))
        a = self.arrays[input_name]
        shape, batched = self.inputs[input_name]
        if not batched:
            return (a if a.ndim == len(shape) else a[step % a.shape[0]]).reshape(-1)
        local = self.batch // self.n
        first = step * self.batch + rank * local
        return a[(first + np.arange(local)) % a.shape[0]].reshape(-1)

    def traffic(self, var, step):
        """[(sent, received)] per rank of one step."""
        n, rows, rb = self.n, var["rows"], var["row_bytes"]
        parts = var["partitions"] or 1
        per = max(1, -(-rows // parts))
        placement = np.array(var["placement"] or [0])

        def owner(r):
            return placement[np.asarray(r) // per]

        if var["access"] == "dense":
            pulls = [[np.arange(rows) for _ in range(n)]]
        else:
            if not var["pull_inputs"] or any(None in p for p in var["pull_inputs"]):
                raise Failure(f"{var['name']}: a pull whose ids are not a graph input")
            pulls = [[np.unique(np.concatenate([self.ids(i, step, r) for i in p]))
                      for r in range(n)]
                     for p in var["pull_inputs"]]
        pulls = [[np.unique(u) for u in p] for p in pulls]
        pushed = [np.unique(np.concatenate([p[r] for p in pulls])) for r in range(n)]
        out = []
        for r in range(n):
            sent = received = 0
            for p in pulls:
                mine_elsewhere = int(np.count_nonzero(owner(p[r]) != r))
                asked_of_me = sum(int(np.count_nonzero(owner(p[q]) == r))
                                  for q in range(n) if q != r)
                sent += 8 * mine_elsewhere + rb * asked_of_me
                received += rb * mine_elsewhere + 8 * asked_of_me
            sent += (8 + rb) * int(np.count_nonzero(owner(pushed[r]) != r))
            received += (8 + rb) * sum(int(np.count_nonzero(owner(pushed[q]) == r))
                                       for q in range(n) if q != r)
            out.append((sent, received))
        return out


def dense_ps_traffic(var, n):
    """[(sent, received)] per rank for a dense variable on servers."""
    rows, rb = var["rows"], var["row_bytes"]
    parts = var["partitions"] or 1
    per = max(1, -(-rows // parts))
    owned = [0] * n
    for p, r in enumerate(var["placement"]):
        owned[r] += max(0, min(rows, (p + 1) * per) - p * per)
    return [(8 * (rows - o) + rb * (n - 1) * o + (8 + rb) * (rows - o),
             rb * (rows - o) + 8 * (n - 1) * o + (8 + rb) * (n - 1) * o) for o in owned]


def check_run(m, run, args, out_dir):
    n, scheme, model = run["np"], run["scheme"], m["model"]
    where = f"{model} {scheme} np={n}"
    ir_path = os.path.join(out_dir, f"{scheme}-n{n}.mlir")
    cmd = ["parallax-opt", m["model_path"], "--train", f"--np={n}", f"--sync={scheme}",
           f"--batch-size={m['batch']}", *m["flags"], "-o", ir_path]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise Failure(f"{where}: {' '.join(cmd)} failed:\n{p.stdout}")
    with open(ir_path) as f:
        text = f.read()
    variables, input_facts, grid = parse_ir(text)
    sync_bn = len(re.findall(r"px\.batch_norm .*grid = @world", text))
    profile_steps = re.search(r"px\.profile_steps = ([0-9]+)", text)
    profile_data = re.search(r'px\.profile_data = "([^"]*)"', text)
    profiled_here = bool(profile_steps and profile_data and m["data"] and
                         os.path.realpath(profile_data.group(1)) ==
                         os.path.realpath(m["data"]))
    if grid != [n]:
        raise Failure(f"{where}: the IR's grid is {grid}, expected one machine of {n}")
    for name, v in variables.items():
        v["name"] = name
    src = next(r for r in m["runs"] if r["np"] == n and
               r["scheme"] == (run["same_as"] or run["scheme"]))
    per_rank = [load_metrics(os.path.join(out_dir, path), m["steps"])
                for path in src["metrics"]]
    errors, closeness = [], {}
    counts = {"exact": 0, "ps-dense": 0, "ps-sparse": 0}
    exact_ps = PsExact(m["data"], m["batch"], n, input_facts) if args.exact_ps else None
    if args.exact_ps and not m["data"]:
        raise Failure(f"{where}: --exact-ps needs a run on --data")
    loss_bytes = 2 * 4 * (n - 1) // n

    def expect(what, got, want):
        if got != want:
            errors.append(f"{where}: {what}: measured {got}, predicted {want}")

    for name, v in sorted(variables.items()):
        if v["predicted"] is None or v["exact"] is None:
            errors.append(f"{where}: {name}: no px.bytes_per_step / px.bytes_exact")
            continue
        if v["exact"]:
            counts["exact"] += 1
        elif v["sync"] == "ps":
            counts["ps-dense" if v["access"] == "dense" else "ps-sparse"] += 1
        else:
            errors.append(f"{where}: {name}: px.sync = {v['sync']} with an inexact prediction")
            continue
    for step in range(m["steps"]):
        recs = [lines[step] for lines in per_rank]
        for r, rec in enumerate(recs):
            at = f"step {step + 1} rank {r}"
            b = rec["bytes"]
            expect(f"{at}: bytes_sent", rec["bytes_sent"], sum(c["sent"] for c in b.values()))
            expect(f"{at}: bytes_received", rec["bytes_received"],
                   sum(c["received"] for c in b.values()))
            # Traffic that is no variable's is named in parentheses.
            for name in sorted(set(b) - set(variables) - {"(loss)"}):
                if not name.startswith("("):
                    errors.append(f"{where}: {at}: traffic for {name!r}, which the IR "
                                  f"does not synchronize: {b[name]}")
            if args.batchnorm_traffic and sync_bn:
                other = sum(c["sent"] for k, c in b.items()
                            if k not in variables and k != "(loss)")
                if other <= 0:
                    errors.append(f"{where}: {at}: {sync_bn} synchronized batch norms, "
                                  f"but no traffic besides the variables' and the "
                                  f"loss's: their statistics are not counted")
            loss = b.get("(loss)", {"sent": 0, "received": 0})
            expect(f"{at}: (loss) sent", loss["sent"], loss_bytes)
            expect(f"{at}: (loss) received", loss["received"], loss_bytes)
        for name, v in sorted(variables.items()):
            got = [r["bytes"].get(name, {"sent": 0, "received": 0}) for r in recs]
            if v["exact"]:
                for r, c in enumerate(got):
                    expect(f"step {step + 1} rank {r}: {name} ({v['sync']}) sent",
                           c["sent"], v["predicted"])
                    expect(f"step {step + 1} rank {r}: {name} ({v['sync']}) received",
                           c["received"], v["predicted"])
                continue
            if v["sync"] != "ps":
                continue
            sent = sum(c["sent"] for c in got)
            received = sum(c["received"] for c in got)
            expect(f"step {step + 1}: {name}: all ranks' received bytes "
                   f"(the sent bytes are {sent})", received, sent)
            closeness.setdefault(name, []).append(sent / n / max(v["predicted"], 1))
            if v["access"] == "dense":
                want = dense_ps_traffic(v, n)
            elif exact_ps:
                want = exact_ps.traffic(v, step)
            else:
                want = None
                u = v["rows_per_step"] if v["rows_per_step"] is not None else v["rows"]
                bound = 2 * u * (8 + v["row_bytes"])
                if sent / n > bound:
                    errors.append(f"{where}: step {step + 1}: {name}: mean bytes sent "
                                  f"{sent / n:.0f} > 2 u (8 + row bytes) = {bound} "
                                  f"(u = {u})")
            if want is not None:
                for r, (c, (ws, wr)) in enumerate(zip(got, want)):
                    expect(f"step {step + 1} rank {r}: {name} (ps) sent", c["sent"], ws)
                    expect(f"step {step + 1} rank {r}: {name} (ps) received",
                           c["received"], wr)
    # px-sync's exact prediction from --profile-data: each rank's bytes sent
    # over the first px.profile_steps steps, on the data trained on here.
    profiled = sorted(name for name, v in variables.items() if v["profiled"])
    if profiled and profiled_here:
        k = int(profile_steps.group(1))
        if k > m["steps"]:
            raise Failure(f"{where}: profiled {k} steps, trained {m['steps']}")
        for name in profiled:
            want = variables[name]["profiled"]
            got = [sum(lines[s]["bytes"].get(name, {"sent": 0})["sent"] for s in range(k))
                   for lines in per_rank]
            expect(f"{name}: bytes sent in the {k} profiled steps, per rank "
                   f"(px.bytes_profiled)", got, want)
    same = f" (plan of {run['same_as']})" if run["same_as"] else ""
    summary = (f"{where}{same}: {len(variables)} variables: {counts['exact']} exact "
               f"(all-reduce {sum(v['exact'] and v['sync'] == 'allreduce' for v in variables.values())}, "
               f"all-gatherv {sum(v['exact'] and v['sync'] == 'allgatherv' for v in variables.values())})")
    if counts["ps-dense"] or counts["ps-sparse"]:
        summary += (f", parameter server {counts['ps-dense']} dense (exact per rank) + "
                    f"{counts['ps-sparse']} sparse ("
                    + ("exact per rank from the data" if exact_ps else "bound") + ")")
    summary += f"; {m['steps']} steps x {n} ranks"
    print(summary)
    if profiled:
        print(f"  px.bytes_profiled ({len(profiled)} variables): "
              + ("equal to the bytes sent by every rank" if profiled_here and not errors
                 else "checked" if profiled_here else "not checked (other data)"))
    dense = [c for name in closeness if variables[name]["access"] == "dense"
             for c in closeness[name]]
    if dense:
        print(f"  dense variables on servers: measured mean sent / predicted "
              f"{min(dense):.3f}..{max(dense):.3f}")
    for name in sorted(closeness):
        v = variables[name]
        c = closeness[name]
        if v["access"] == "dense":
            continue
        print(f"  {name} ({v['access']}, ps): measured mean sent / predicted "
              f"{v['predicted']}: {min(c):.3f}..{max(c):.3f}")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("manifest")
    ap.add_argument("--schemes")
    ap.add_argument("--np")
    ap.add_argument("--exact-ps", action="store_true")
    ap.add_argument("--batchnorm-traffic", action="store_true",
                    help="require traffic besides the variables' and the loss's "
                    "when the IR has synchronized batch norms")
    args = ap.parse_args()
    with open(args.manifest) as f:
        m = json.load(f)
    out_dir = os.path.dirname(os.path.abspath(args.manifest))
    schemes = args.schemes.split(",") if args.schemes else None
    nps = [int(x) for x in args.np.split(",")] if args.np else None
    errors = []
    try:
        runs = [r for r in m["runs"] if r["np"] > 1 and
                (schemes is None or r["scheme"] in schemes) and
                (nps is None or r["np"] in nps)]
        if not runs:
            raise Failure("no run with more than one rank to check")
        for run in runs:
            errors += check_run(m, run, args, out_dir)
    except Failure as e:
        print(f"check_bytes.py: error: {e}")
        return 1
    for e in errors[:20]:
        print(f"FAIL: {e}")
    if len(errors) > 20:
        print(f"FAIL: ... and {len(errors) - 20} more")
    print(f"{m['model']} bytes: {len(runs)} runs checked")
    print(f"{m['model']} bytes: {'FAILED' if errors else 'OK'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
