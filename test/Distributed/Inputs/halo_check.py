"""Checks halo.test's run (Inputs/halo_module.py's module) against NumPy.

    halo_check.py DIR --grid 3 --axis 0 --lo 1 --hi 1 [--edge -inf] [--trace TRACE]

`halo_check.py DIR --grid ... --data` writes DIR/data/{x,e}.npy (integers,
so every sum is exact) instead. Otherwise DIR/out/output0.npy must be, for
each member m of rank 0's group, rows [m*S - lo, (m+1)*S + hi) of x along H,
--edge outside x (the padding: zeros by default), and output1.npy, block by
block, the sum of every member's extended rows into the rows of x they
copied (the adjoint), rows outside x dropped. With --trace, every rank's
halo_exchange and halo_reduce jobs sent and received exactly the rows a
member of its group moves: the exchange sends its first hi rows to m-1 and
its last lo rows to m+1, the reduce its lo halo to m-1 and its hi halo to
m+1, and receives what they send it.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from halo_module import C, N, ROWS, W  # noqa: E402


def fail(message):
    print(f"halo_check.py: error: {message}")
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--grid", required=True)
    ap.add_argument("--axis", type=int, default=0)
    ap.add_argument("--lo", type=int, required=True)
    ap.add_argument("--hi", type=int, required=True)
    ap.add_argument("--edge", type=float, default=0.0)
    ap.add_argument("--data", action="store_true")
    ap.add_argument("--trace")
    a = ap.parse_args()
    shape = [int(d) for d in a.grid.split("x")]
    g, lo, hi, s = shape[a.axis], a.lo, a.hi, ROWS
    e = lo + s + hi
    if a.data:
        os.makedirs(os.path.join(a.dir, "data"), exist_ok=True)
        x = np.arange(N * C * g * s * W, dtype=np.float32).reshape(N, C, g * s, W) + 1
        ext = (np.arange(N * C * g * e * W) * 37 % 1009).astype(np.float32)
        np.save(os.path.join(a.dir, "data", "x.npy"), x)
        np.save(os.path.join(a.dir, "data", "e.npy"), ext.reshape(N, C, g * e, W))
        return
    x = np.load(os.path.join(a.dir, "data", "x.npy"))
    ext = np.load(os.path.join(a.dir, "data", "e.npy"))
    y = np.load(os.path.join(a.dir, "out", "output0.npy"))
    z = np.load(os.path.join(a.dir, "out", "output1.npy"))

    padded = np.pad(x, ((0, 0), (0, 0), (lo, hi), (0, 0)), constant_values=a.edge)
    want = np.concatenate([padded[:, :, m * s:m * s + e] for m in range(g)], axis=2)
    if y.shape != want.shape or not np.array_equal(y, want):
        bad = np.argwhere(y != want) if y.shape == want.shape else "shape " + str(y.shape)
        fail(f"halo_exchange: the extended blocks differ from x's rows (first at {bad[:1]})")
    total = np.zeros((N, C, g * s + lo + hi, W), np.float32)
    for m in range(g):
        total[:, :, m * s:m * s + e] += ext[:, :, m * e:(m + 1) * e]
    want = total[:, :, lo:lo + g * s]
    if z.shape != want.shape or not np.array_equal(z, want):
        bad = np.argwhere(z != want) if z.shape == want.shape else "shape " + str(z.shape)
        fail(f"halo_reduce: the blocks differ from the summed halos (first at {bad[:1]})")

    checked = 0
    if a.trace:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
        row = N * C * W * 4  # one row of H over every (n, c), in bytes
        jobs = {}
        for ev in events:
            if ev.get("cat") == "collective" and ev["name"] in ("halo_exchange", "halo_reduce"):
                jobs.setdefault((ev["pid"], ev["name"]), []).append(ev["args"])
        for rank in range(math.prod(shape)):
            m = np.unravel_index(rank, shape)[a.axis]
            prev, nxt = m > 0, m + 1 < g
            exchange = (row * (hi * prev + lo * nxt), row * (lo * prev + hi * nxt))
            for op, (sent, received) in (("halo_exchange", exchange),
                                          ("halo_reduce", exchange[::-1])):
                got = jobs.get((rank, op), [])
                if len(got) != 1:
                    fail(f"rank {rank}: {len(got)} {op} jobs in the trace, expected 1")
                b = (got[0]["bytes_sent"], got[0]["bytes_received"])
                if b != (sent, received):
                    fail(f"rank {rank} (member {m} of {g}): {op} sent and received {b} "
                         f"bytes, expected {(sent, received)}")
                checked += 1
    print(f"halo exchange and reduce match x on {g} members (lo {lo}, hi {hi}"
          + (f", edge {a.edge:g})" if a.edge else ")")
          + (f", bytes of {checked} jobs exact" if a.trace else ""))


if __name__ == "__main__":
    main()
