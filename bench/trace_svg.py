#!/usr/bin/python3
"""Draws a parallax-run --trace file as an SVG timeline.

    bench/trace_svg.py TRACE.json -o timeline.svg [--steps 3:4] [--width 1600]
                       [--title TEXT] [--png timeline.png]

One lane per rank and thread (the compute thread, and the communication
thread when the rank had one), time left to right: kernels as boxes
coloured by kind (matrix products, optimizer updates, the "wait" kernels
where the compute thread waits for a collective, the rest), collectives
coloured by operation and labelled with their bytes; dashed lines mark
where each step of rank 0 begins. Hovering a box in a browser shows its
name, kernel, step, duration and bytes. --steps picks the steps drawn
(A:B, inclusive; default: all). --png also renders the SVG to a PNG with
headless Chromium (Debian's `chromium`), offline.

For browsers that cannot load the trace offline: Perfetto's UI
(ui.perfetto.dev) and chrome://tracing open the JSON itself. Only the
standard library (Debian's /usr/bin/python3).
"""
import argparse
import html
import json
import os
import shutil
import subprocess
import sys

COLLECTIVE_COLOURS = {
    "all_reduce": "#e8710a",
    "all_gather_variables": "#b0522b",
    "ps_pull": "#12939a",
    "ps_push": "#7b3fa0",
    "all_gatherv": "#d7263d",
    "all_gather": "#c2185b",
    "all_to_all": "#5d4037",
    "reduce_scatter": "#f4a259",
}
OTHER_COLLECTIVE = "#8d6e00"
KERNEL_COLOURS = [
    ("matrix products", ("gemm", "matmul", "conv", "conv_grad_input", "conv_grad_filter"), "#4a78c2"),
    ("optimizer updates", ("sgd", "adam", "momentum", "adagrad"), "#3f9b4a"),
    ("wait for a collective", ("wait",), "#f2b8b5"),
]
OTHER_KERNEL = "#b9c0ca"

LANE_H, LANE_GAP, LEFT, TOP, RIGHT = 26, 6, 150, 46, 20


def kernel_colour(name):
    for _, ops, colour in KERNEL_COLOURS:
        if name in ops or any(name.startswith(o + "_") for o in ops if o != "wait"):
            return colour
    return OTHER_KERNEL


def human_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--steps", help="A:B, the steps to draw (inclusive)")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--title", default=None)
    ap.add_argument("--png", help="also render the SVG to this PNG with headless Chromium")
    a = ap.parse_args()

    with open(a.trace) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    steps = [e for e in spans if e.get("cat") == "step"]
    if not steps:
        sys.exit("trace_svg.py: error: no steps in " + a.trace)
    first, last = min(e["args"]["step"] for e in steps), max(e["args"]["step"] for e in steps)
    if a.steps:
        lo, _, hi = a.steps.partition(":")
        first, last = int(lo), int(hi or lo)
    chosen = [e for e in steps if first <= e["args"]["step"] <= last]
    if not chosen:
        sys.exit(f"trace_svg.py: error: no step in {first}:{last}")
    t0 = min(e["ts"] for e in chosen)
    t1 = max(e["ts"] + e["dur"] for e in chosen)
    # Collectives started in the window may end after its last step.
    for e in spans:
        if e.get("cat") == "collective" and t0 <= e["ts"] <= t1:
            t1 = max(t1, e["ts"] + e["dur"])

    names = {}
    for e in events:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    lanes = sorted({(e["pid"], e["tid"]) for e in spans})
    row = {lane: i for i, lane in enumerate(lanes)}
    plot_w = a.width - LEFT - RIGHT
    scale = plot_w / max(t1 - t0, 1e-9)
    legend_y = TOP + len(lanes) * (LANE_H + LANE_GAP) + 24
    height = legend_y + 60

    out = []
    add = out.append
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" height="{height}" '
        f'viewBox="0 0 {a.width} {height}" font-family="DejaVu Sans, sans-serif" font-size="11">')
    add('<rect width="100%" height="100%" fill="white"/>')
    title = a.title or f"parallax-run --trace: steps {first} to {last}"
    add(f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>')

    # Time axis: about ten ticks at round milliseconds.
    span_ms = (t1 - t0) / 1e3
    tick = next(t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
                if span_ms / t <= 12)
    axis_y = TOP - 8
    add(f'<line x1="{LEFT}" y1="{axis_y}" x2="{LEFT + plot_w}" y2="{axis_y}" stroke="#444"/>')
    k = 0
    while k * tick <= span_ms + 1e-9:
        x = LEFT + k * tick * 1e3 * scale
        add(f'<line x1="{x:.1f}" y1="{axis_y - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#444"/>')
        add(f'<text x="{x:.1f}" y="{axis_y - 7}" text-anchor="middle" fill="#444">{k * tick:g} ms</text>')
        k += 1

    for (pid, tid), i in row.items():
        y = TOP + i * (LANE_H + LANE_GAP)
        shade = "#f4f6f8" if pid % 2 == 0 else "#eceff3"
        add(f'<rect x="{LEFT}" y="{y}" width="{plot_w}" height="{LANE_H}" fill="{shade}"/>')
        label = f"rank {pid} {names.get((pid, tid), f'thread {tid}')}"
        add(f'<text x="{LEFT - 8}" y="{y + LANE_H / 2 + 4}" text-anchor="end">{html.escape(label)}</text>')

    def box(e, y, h, colour, label):
        x0 = LEFT + max(e["ts"] - t0, 0) * scale
        x1 = LEFT + min(e["ts"] + e["dur"] - t0, t1 - t0) * scale
        w = max(x1 - x0, 0.6)
        args = e.get("args", {})
        tip = [e["name"]] + [f"{k}: {v}" for k, v in args.items()] + [f"{e['dur'] / 1e3:.3f} ms"]
        add(f'<rect x="{x0:.2f}" y="{y:.1f}" width="{w:.2f}" height="{h:.1f}" fill="{colour}" '
            f'stroke="white" stroke-width="0.3"><title>{html.escape(chr(10).join(tip))}</title></rect>')
        if label and w > 7 * len(label):
            add(f'<text x="{x0 + w / 2:.1f}" y="{y + h / 2 + 4:.1f}" text-anchor="middle" '
                f'fill="white" pointer-events="none">{html.escape(label)}</text>')

    for e in spans:
        if e["ts"] + e["dur"] < t0 or e["ts"] > t1 or e.get("cat") == "step":
            continue
        y = TOP + row[(e["pid"], e["tid"])] * (LANE_H + LANE_GAP)
        if e.get("cat") == "collective":
            colour = COLLECTIVE_COLOURS.get(e["name"], OTHER_COLLECTIVE)
            moved = e["args"].get("bytes_sent", 0) + e["args"].get("bytes_received", 0)
            label = f"{e['name']} {human_bytes(moved)}"
            if e["tid"] == 0:  # inline, inside its kernel: the lower half
                box(e, y + LANE_H / 2, LANE_H / 2, colour, None)
            else:
                box(e, y, LANE_H, colour, label)
        else:
            box(e, y, LANE_H, kernel_colour(e["name"]), e["name"])

    lanes_bottom = TOP + len(lanes) * (LANE_H + LANE_GAP) - LANE_GAP
    for e in chosen:
        if e["pid"] != 0:
            continue
        x = LEFT + (e["ts"] - t0) * scale
        add(f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{lanes_bottom + 4}" '
            f'stroke="#222" stroke-dasharray="4 3"/>')
        add(f'<text x="{x + 3:.1f}" y="{lanes_bottom + 16}" fill="#222">step {e["args"]["step"]}</text>')

    # Legend: the kernel kinds, then the collectives that occur.
    x = LEFT
    items = [(label, colour) for label, _, colour in KERNEL_COLOURS] + [("other kernels", OTHER_KERNEL)]
    seen = sorted({e["name"] for e in spans if e.get("cat") == "collective"})
    items += [(n, COLLECTIVE_COLOURS.get(n, OTHER_COLLECTIVE)) for n in seen]
    y = legend_y
    for label, colour in items:
        width = 22 + 7 * len(label)
        if x + width > a.width - RIGHT:
            x, y = LEFT, y + 20
        add(f'<rect x="{x}" y="{y}" width="14" height="12" fill="{colour}"/>')
        add(f'<text x="{x + 18}" y="{y + 10}">{html.escape(label)}</text>')
        x += width + 12
    add("</svg>")

    with open(a.output, "w") as f:
        f.write("\n".join(out) + "\n")
    if a.png:
        render_png(a.output, a.png, a.width, height)


def render_png(svg, png, width, height):
    """Screenshots the SVG at its own size with headless Chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("trace_svg.py: error: --png needs Chromium (apt-get install chromium)")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--no-first-run", "--hide-scrollbars",
           f"--screenshot={os.path.abspath(png)}", f"--window-size={width},{height}",
           "file://" + os.path.abspath(svg)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)
    if done.returncode != 0 or not os.path.exists(png):
        sys.exit(f"trace_svg.py: error: {' '.join(cmd)} failed:\n{done.stdout}")


if __name__ == "__main__":
    main()
