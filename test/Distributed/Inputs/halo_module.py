"""Writes the inference module of halo.test: an NCHW tensor x, which every
rank reads whole, split along H over a group (px.all_slice), each block
extended with its neighbours' rows (px.halo_exchange) and the extended
blocks gathered back (output0); and an extended tensor e split the same
way, each extended block reduced to its block (px.halo_reduce) and the
blocks gathered (output1).

    halo_module.py --grid 3 --axis 0 --lo 1 --hi 1 > halo.mlir

--grid is the grid's shape (its product: the world size), --axis the grid
axis the group spans. Each block has ROWS rows of H.
"""
import argparse
import math

ROWS = 4
N, C, W = 2, 3, 5


def t(h):
    return f"tensor<{N}x{C}x{h}x{W}xf32>"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", required=True, help="the grid shape, e.g. 3 or 2x2")
    ap.add_argument("--axis", type=int, default=0)
    ap.add_argument("--lo", type=int, required=True)
    ap.add_argument("--hi", type=int, required=True)
    a = ap.parse_args()
    shape = [int(d) for d in a.grid.split("x")]
    g = shape[a.axis]
    lo, hi, s = a.lo, a.hi, ROWS
    e = lo + s + hi
    on = f"on @grid grid_axes = [{a.axis}]"
    print(f"""module attributes {{px.world_size = {math.prod(shape)} : i64}} {{
  shard.grid @grid(shape = {"x".join(map(str, shape))})
  func.func @main() -> ({t(g * e)}, {t(g * s)}) {{
    %x = px.input "x" : {t(g * s)}
    %e = px.input "e" : {t(g * e)}
    %xb = px.all_slice %x {on} slice_axis = 2 : {t(g * s)} -> {t(s)}
    %xe = px.halo_exchange %xb {on} axis = 2 lo = {lo} hi = {hi} : {t(s)} -> {t(e)}
    %y = px.all_gather %xe {on} gather_axis = 2 : {t(e)} -> {t(g * e)}
    %eb = px.all_slice %e {on} slice_axis = 2 : {t(g * e)} -> {t(e)}
    %r = px.halo_reduce %eb {on} axis = 2 lo = {lo} hi = {hi} : {t(e)} -> {t(s)}
    %z = px.all_gather %r {on} gather_axis = 2 : {t(s)} -> {t(g * s)}
    return %y, %z : {t(g * e)}, {t(g * s)}
  }}
}}""")


if __name__ == "__main__":
    main()
