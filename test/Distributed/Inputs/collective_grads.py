"""A training module whose forward pass is written with px collectives, and
its reference: what collective-grads.test trains on G ranks.

    collective_grads.py module --ranks G > model.mlir
    collective_grads.py data DIR --ranks G --steps S
    collective_grads.py check METRICS --ranks G --steps S --lr LR [--world P] [--tolerance T]

Each rank reads its n = G samples of x [n, D] (D = 2 G); the forward pass
mixes them over the ranks with every collective px-autodiff has a rule for
(all_reduce sum, average and max, all_gather, all_slice, reduce_scatter,
all_to_all, halo_exchange, halo_reduce). `check` runs the same SPMD program
in PyTorch, one tensor per rank with each collective written out, and
differentiates the ranks' mean loss (the objective the step trains: each
rank's loss seeded with 1/G, px-sync summing the gradients) with autograd.
Plain SGD; every loss every rank reports must match the reference's.
`--grid-axes` writes the collectives over some axes of @world (on a Pr x Pc
grid, the batch axis); `--world` is then the ranks that report.
"""
import argparse
import json
import sys

import numpy as np

W0 = [0.3, -0.2, 0.5, 0.1, -0.4, 0.25, 0.15, -0.35]


def dims(g):
    return g, 2 * g  # n, D


def module(g, axes):
    n, d = dims(g)
    on = "on @world" + (f" grid_axes = [{axes}]" if axes else "")
    w = ", ".join(f"{W0[i % len(W0)]:.2f}" for i in range(d))
    t = lambda *s: "tensor<" + "x".join(map(str, s)) + "xf32>"
    print(f"""module {{
  shard.grid @world(shape = {g})
  func.func @main() -> tensor<f32> attributes {{px.loss = 0 : i64}} {{
    %x = px.input "x" : {t(n, d)} batched
    %w = px.variable "w" trainable = dense<[{w}]> : {t(d)}
    %xw = px.mul %x, %w : {t(n, d)}, {t(d)}
    %h = px.tanh %xw : {t(n, d)}
    %cols = px.reduce_sum %h {{axes = array<i64: 0>, keepdims = false}} : {t(n, d)}
    %mean = px.all_reduce %cols {on} reduction = average : {t(d)}
    %q = px.mul %h, %mean : {t(n, d)}, {t(d)}
    %top = px.all_reduce %q {on} reduction = max : {t(n, d)}
    %q2 = px.add %q, %top : {t(n, d)}, {t(n, d)}
    %z = px.all_gather %q2 {on} gather_axis = 0 : {t(n, d)} -> {t(g * n, d)}
    %zs = px.all_slice %z {on} slice_axis = 1 : {t(g * n, d)} -> {t(g * n, d // g)}
    %u = px.mul %zs, %zs : {t(g * n, d // g)}, {t(g * n, d // g)}
    %rs = px.reduce_scatter %u {on} scatter_axis = 0 : {t(g * n, d // g)} -> {t(n, d // g)}
    %a = px.all_to_all %rs {on} split_axis = 0 concat_axis = 1 : {t(n, d // g)} -> {t(n // g, d)}
    %la = px.reduce_mean %a {{axes = array<i64: 0, 1>, keepdims = false}} : {t(n // g, d)}
    %he = px.halo_exchange %h {on} axis = 0 lo = 1 hi = 1 : {t(n, d)} -> {t(n + 2, d)}
    %he2 = px.mul %he, %he : {t(n + 2, d)}, {t(n + 2, d)}
    %hr = px.halo_reduce %he2 {on} axis = 0 lo = 1 hi = 1 : {t(n + 2, d)} -> {t(n, d)}
    %hs = px.all_reduce %hr {on} : {t(n, d)}
    %lh = px.reduce_mean %hs {{axes = array<i64: 0, 1>, keepdims = false}} : {t(n, d)}
    %loss = px.add %la, %lh : tensor<f32>, tensor<f32>
    return %loss : tensor<f32>
  }}
}}""")


def samples(g, steps):
    n, d = dims(g)
    rng = np.random.default_rng(7)
    return rng.uniform(-1, 1, size=(steps * g * n, d)).astype(np.float32)


def reference(g, steps, lr):
    import torch

    torch.set_default_dtype(torch.float64)
    n, d = dims(g)
    x_all = torch.tensor(samples(g, steps), dtype=torch.float64)
    w = torch.tensor([W0[i % len(W0)] for i in range(d)], requires_grad=True)

    def chunk(v, axis, r):
        return torch.chunk(v, g, axis)[r]

    def all_reduce(vs, kind):
        s = torch.stack(vs)
        out = {"sum": s.sum(0), "average": s.mean(0), "max": torch.amax(s, 0)}[kind]
        return [out] * g

    def halo_exchange(vs, lo, hi):
        out = []
        for r, v in enumerate(vs):
            below = vs[r - 1][-lo:] if r > 0 else torch.zeros(lo, v.shape[1])
            above = vs[r + 1][:hi] if r + 1 < g else torch.zeros(hi, v.shape[1])
            out.append(torch.cat([below, v, above], 0))
        return out

    def halo_reduce(vs, lo, hi):
        out = []
        for r, v in enumerate(vs):
            block = v[lo:v.shape[0] - hi].clone()
            s = block.shape[0]
            if r + 1 < g:  # member r+1's lo halo rows copied my last lo rows
                block = torch.cat([block[:s - lo], block[s - lo:] + vs[r + 1][:lo]], 0)
            if r > 0:  # member r-1's hi halo rows copied my first hi rows
                block = torch.cat([block[:hi] + vs[r - 1][lo + s:lo + s + hi], block[hi:]], 0)
            out.append(block)
        return out

    losses = []
    for step in range(steps):
        xs = [x_all[(step * g + r) * n:(step * g + r + 1) * n] for r in range(g)]
        h = [torch.tanh(x * w) for x in xs]
        mean = all_reduce([v.sum(0) for v in h], "average")
        q = [h[r] * mean[r] for r in range(g)]
        top = all_reduce(q, "max")
        q2 = [q[r] + top[r] for r in range(g)]
        z = [torch.cat(q2, 0)] * g
        zs = [chunk(z[r], 1, r) for r in range(g)]
        u = [v * v for v in zs]
        total = torch.stack(u).sum(0)
        rs = [chunk(total, 0, r) for r in range(g)]
        a = [torch.cat([chunk(rs[i], 0, j) for i in range(g)], 1) for j in range(g)]
        he = halo_exchange(h, 1, 1)
        hr = halo_reduce([v * v for v in he], 1, 1)
        hs = all_reduce(hr, "sum")
        loss = [a[r].mean() + hs[r].mean() for r in range(g)]
        objective = torch.stack(loss).mean()
        losses.append([float(v) for v in loss])
        (gw,) = torch.autograd.grad(objective, w)
        with torch.no_grad():
            w -= lr * gw
    return losses


def check(args):
    ref = reference(args.ranks, args.steps, args.lr)
    got = {}
    stem, dot, ext = args.metrics.rpartition(".")
    world = args.world or args.ranks
    paths = ([args.metrics] if world == 1 else
             [f"{stem}.rank{r}.{ext}" if dot else f"{ext}.rank{r}" for r in range(world)])
    for r, path in enumerate(paths):
        for line in open(path):
            m = json.loads(line)
            if "loss" in m:
                got.setdefault(r, []).append(m["loss"])
    worst = 0.0
    for r in range(world):
        seq = got.get(r, [])
        if len(seq) != args.steps:
            sys.exit(f"rank {r}: {len(seq)} losses, expected {args.steps}")
        for s in range(args.steps):
            want = sum(ref[s]) / args.ranks  # the ranks' mean, as px-sync reports it
            err = abs(seq[s] - want) / max(1.0, abs(want))
            worst = max(worst, err)
            if err > args.tolerance:
                sys.exit(f"rank {r} step {s + 1}: loss {seq[s]!r}, reference {want!r}")
    print(f"losses match the reference on {world} ranks over {args.steps} steps "
          f"(worst {'below 1e-5' if worst < 1e-5 else f'{worst:.1e}'})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["module", "data", "check", "reference"])
    ap.add_argument("path", nargs="?")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--grid-axes", default="",
                    help="the group's axes of @world (default: the whole grid)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--world", type=int, default=0,
                    help="ranks that wrote metrics (default: --ranks; more on a grid "
                         "whose model axis shares the group's samples)")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    if args.what == "module":
        module(args.ranks, args.grid_axes)
    elif args.what == "data":
        import os
        os.makedirs(args.path, exist_ok=True)
        np.save(os.path.join(args.path, "x.npy"), samples(args.ranks, args.steps))
    elif args.what == "reference":
        print(reference(args.ranks, args.steps, args.lr))
    else:
        args.metrics = args.path
        check(args)


if __name__ == "__main__":
    main()
