#!/usr/bin/python3
"""Check a strategy frontier written by parallax-opt --frontier (and --frontier-svg).

    check_frontier.py FRONTIER.json [--svg FRONTIER.svg]

Checks that the points are a frontier (ascending in predicted step time,
strictly descending in memory per rank), that exactly one is chosen, that
every point of a model-split grid names each operator's split, and that
the dominated references are dominated by some point (no slower, at most
1% more memory); with --svg, that the
figure draws every point, marks the chosen one and labels both pure
strategies. Prints one line per check, or the first failure (exit status 1).
"""

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("frontier")
    ap.add_argument("--svg")
    a = ap.parse_args()
    with open(a.frontier) as f:
        d = json.load(f)
    points = d["frontier"]
    if not points:
        print("no points")
        return 1
    for p, q in zip(points, points[1:]):
        if not (p["step_seconds"] <= q["step_seconds"] and p["memory_bytes"] > q["memory_bytes"]):
            print(f"points {p['point']} and {q['point']} are not a frontier: {p} {q}")
            return 1
    chosen = [p for p in points if p["chosen"]]
    if len(chosen) != 1:
        print(f"{len(chosen)} points chosen")
        return 1
    names = None
    for p in points:
        if p["grid"].split("x")[0] != "1":
            if names is None:
                names = set(p["splits"])
            if set(p["splits"]) != names or any(
                    s not in ("whole", "out", "in", "rows") for s in p["splits"].values()):
                print(f"point {p['point']} names other operators or splits: {p['splits']}")
                return 1
    # A table's scheme is one of px-sync's; one split by vocabulary keeps
    # its rows (all-gathered or served, never densified).
    for p in points:
        schemes = p.get("sync_variables", {})
        split = {t: p["splits"].get(t, "whole") for t in schemes}
        if any(split[t] not in ("whole", "rows") or (split[t] == "rows" and s == "allreduce")
               for t, s in schemes.items()) or any(
                s not in ("allgatherv", "ps", "allreduce") for s in schemes.values()):
            print(f"point {p['point']} names table schemes it cannot: {schemes}")
            return 1
    # A slower point stays only where it saves more than 1% of memory.
    for r in d["dominated_references"]:
        if not any(p["step_seconds"] <= r["step_seconds"] and
                   p["memory_bytes"] <= r["memory_bytes"] * 1.01 for p in points):
            print(f"reference {r.get('label')} is not dominated")
            return 1
    labels = sorted({p["label"] for p in points + d["dominated_references"] if "label" in p})
    print(f"{len(points)} points, ascending in step time and descending in memory")
    c = chosen[0]
    print(f"chosen: point {c['point']} ({c['grid']}{', ZeRO-1' if c['zero1'] else ''})")
    print(f"labelled: {', '.join(labels)}")
    schemes = c.get("sync_variables", {})
    print("chosen tables: " + (", ".join(f"{k}={v}" for k, v in sorted(schemes.items()))
                               or "(none named)"))
    if a.svg:
        with open(a.svg) as f:
            svg = f.read()
        try:
            ET.fromstring(svg)
        except ET.ParseError as e:
            print(f"svg is not well-formed XML: {e}")
            return 1
        circles = len(re.findall(r'<circle cx="[0-9.]+" cy="[0-9.]+" r="4" fill="(?:steelblue|lightgray)"><title>', svg))
        total = len(points) + len(d["dominated_references"])
        if circles != total:
            print(f"svg draws {circles} points, the file has {total}")
            return 1
        if svg.count('stroke="crimson"') != 1:
            print("svg does not mark one chosen point")
            return 1
        missing = [l for l in labels if f">{l}</text>" not in svg]
        if missing:
            print(f"svg lacks the labels {missing}")
            return 1
        print(f"svg: {total} points, the chosen one marked, {len(labels)} labelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
