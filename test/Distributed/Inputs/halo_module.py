"""Writes the inference module of halo.test: an NCHW tensor x, which every
rank reads whole, split along H over a group (px.all_slice), each block
extended with its neighbours' rows (px.halo_exchange) and the extended
blocks gathered back (output0); and an extended tensor e split the same
way, each extended block reduced to its block (px.halo_reduce) and the
blocks gathered (output1).

    halo_module.py --grid 3 --axis 0 --lo 1 --hi 1 [--edge -inf] > halo.mlir

--grid is the grid's shape (its product: the world size), --axis the grid
axis the group spans, --edge the exchange's value past the group's ends
(0: a convolution's padding; -inf: a max pool's). Each block has ROWS rows
of H.
"""
import argparse
import math
import struct

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
    ap.add_argument("--edge", type=float, default=0.0)
    a = ap.parse_args()
    shape = [int(d) for d in a.grid.split("x")]
    g = shape[a.axis]
    lo, hi, s = a.lo, a.hi, ROWS
    e = lo + s + hi
    on = f"on @grid grid_axes = [{a.axis}]"
    # MLIR writes a non-finite f64 by its bits.
    bits = struct.unpack("<Q", struct.pack("<d", a.edge))[0]
    edge = "" if a.edge == 0 else f" edge = 0x{bits:016X}"
    print(f"""module attributes {{px.world_size = {math.prod(shape)} : i64}} {{
  shard.grid @grid(shape = {"x".join(map(str, shape))})
  func.func @main() -> ({t(g * e)}, {t(g * s)}) {{
    %x = px.input "x" : {t(g * s)}
    %e = px.input "e" : {t(g * e)}
    %xb = px.all_slice %x {on} slice_axis = 2 : {t(g * s)} -> {t(s)}
    %xe = px.halo_exchange %xb {on} axis = 2 lo = {lo} hi = {hi}{edge} : {t(s)} -> {t(e)}
    %y = px.all_gather %xe {on} gather_axis = 2 : {t(e)} -> {t(g * e)}
    %eb = px.all_slice %e {on} slice_axis = 2 : {t(g * e)} -> {t(e)}
    %r = px.halo_reduce %eb {on} axis = 2 lo = {lo} hi = {hi} : {t(e)} -> {t(s)}
    %z = px.all_gather %r {on} gather_axis = 2 : {t(s)} -> {t(g * s)}
    return %y, %z : {t(g * e)}, {t(g * s)}
  }}
}}""")


if __name__ == "__main__":
    main()
