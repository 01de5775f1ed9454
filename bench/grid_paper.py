#!/usr/bin/python3
"""The SPAA'18 paper's worked example, through parallax-opt --grid-costs, as a figure.

    /usr/bin/python3 bench/grid_paper.py [--svg docs/images/grid-alexnet.svg]

Exports AlexNet's fully connected stack (9216 -> 4096 -> 4096 -> 1000, batch
256) with torch as users export it, compiles it with `parallax-opt --np 512
--grid-costs` under a bandwidth-only link (a profile with no latency), and
prints and draws the words each rank moves per step on every Pr x Pc grid of
512 ranks, beside the paper's statement that the best integrated grid moves
about 50x fewer words than pure data parallelism (1 x 512).
"""

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pxbench  # noqa: E402


def make_alexnet_fc(path):
    return pxbench.export_mlp(path, [9216, 4096, 4096, 1000], batch=256)


def grid_words(build, model, work):
    """{grid: words per rank and step} from --grid-costs (4-byte words)."""
    profile = work / "bandwidth-only.json"
    profile.write_text(json.dumps({
        "format": "parallax-profile", "version": 1, "world_size": 512,
        "ranks_per_machine": 512,
        "intra_machine": {"latency_s": 0.0, "bandwidth_bytes_per_s": 1e9}}))
    out = pxbench.run([build / "bin" / "parallax-opt", model, "--np", "512", "--grid-costs",
                       "--profile", profile], "parallax-opt --grid-costs")
    words = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\d+x\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", line)
        if m:
            mib = sum(float(m.group(i)) for i in (2, 3, 4))
            words[m.group(1)] = mib * 2**20 / 4
    return words


def svg(words, path):
    grids = list(words)
    w, h, left, bottom, top = 640, 360, 70, 60, 40
    import math
    lo, hi = 1e6, 2e8
    def y(v):
        return top + (h - top - bottom) * (1 - (math.log10(v) - math.log10(lo)) /
                                           (math.log10(hi) - math.log10(lo)))
    bw = (w - left - 20) / len(grids)
    best = min(words, key=words.get)
    dp = words[grids[0]]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="13">AlexNet FC stack, '
             f'B = 256, 512 ranks: words per rank and step (bandwidth term)</text>']
    for v in (1e6, 1e7, 1e8):
        parts.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                     f'stroke="#ddd"/><text x="{left - 6}" y="{y(v) + 4:.1f}" '
                     f'text-anchor="end">1e{int(math.log10(v))}</text>')
    for i, g in enumerate(grids):
        x = left + i * bw + 4
        v = words[g]
        color = "#d62728" if g == best else "#1f77b4"
        parts.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bw - 8:.1f}" '
                     f'height="{h - bottom - y(v):.1f}" fill="{color}"/>')
        parts.append(f'<text x="{x + (bw - 8) / 2:.1f}" y="{h - bottom + 14}" '
                     f'text-anchor="middle">{g}</text>')
        parts.append(f'<text x="{x + (bw - 8) / 2:.1f}" y="{y(v) - 4:.1f}" '
                     f'text-anchor="middle">{dp / v:.1f}x</text>')
    paper = dp / 50
    parts.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(paper):.1f}" y2="{y(paper):.1f}" '
                 f'stroke="#2ca02c" stroke-dasharray="6,4"/>')
    parts.append(f'<text x="{w - 22}" y="{y(paper) - 5:.1f}" text-anchor="end" fill="#2ca02c">'
                 f'paper: best grid ~50x fewer than 1x512</text>')
    parts.append(f'<text x="{w / 2}" y="{h - 18}" text-anchor="middle">Pr x Pc (Pr splits the '
                 f'model, Pc the batch); red: the cheapest; labels: fewer words than 1x512</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--work", default="/tmp/parallax-bench-grid-paper")
    ap.add_argument("--svg")
    args = ap.parse_args()
    build, work = pxbench.setup(args)
    words = grid_words(build, make_alexnet_fc(work / "alexnet_fc.onnx"), work)
    dp = words["1x512"]
    print("| Pr x Pc | words per rank | fewer than 1 x 512 |\n|---|---:|---:|")
    for g, v in words.items():
        print(f"| {g} | {v:.3g} | {dp / v:.1f}x |")
    best = min(words, key=words.get)
    print(f"\ncheapest: {best}, {dp / words[best]:.1f}x fewer words than 1x512 "
          f"(the paper: about 50x)")
    if args.svg:
        svg(words, Path(args.svg))


if __name__ == "__main__":
    main()
