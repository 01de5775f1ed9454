#!/usr/bin/python3
"""Check that two runs of one plan on N ranks wrote the same metrics.

    same_run.py A.jsonl B.jsonl --np N

Compares A.rankR.jsonl with B.rankR.jsonl for every rank R (A.jsonl with
B.jsonl for one rank): every field of every line but the timings
(step_time_s, data_s, samples_per_s, checkpoint_s) and the resident memory
(memory_bytes) must be equal, losses bit for bit. Prints "same metrics: N ranks x S steps" or the first
difference (exit status 1).
"""

import argparse
import json
import sys

TIMINGS = {"step_time_s", "data_s", "samples_per_s", "checkpoint_s", "memory_bytes"}


def lines(path):
    with open(path) as f:
        return [{k: v for k, v in json.loads(l).items() if k not in TIMINGS}
                for l in f if l.strip()]


def rank_pairs(a, b, np):
    """(rank, A.rankR.jsonl, B.rankR.jsonl, A's lines, B's lines) for every
    rank; None (after printing why) when a pair differs in length or is
    empty."""
    pairs = []
    for r in range(np):
        pa, pb = ((p.replace(".jsonl", f".rank{r}.jsonl") if np > 1 else p)
                  for p in (a, b))
        la, lb = lines(pa), lines(pb)
        if len(la) != len(lb) or not la:
            print(f"different: {pa} has {len(la)} lines, {pb} {len(lb)}")
            return None
        pairs.append((r, pa, pb, la, lb))
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--np", type=int, required=True)
    args = ap.parse_args()
    steps = None
    pairs = rank_pairs(args.a, args.b, args.np)
    if pairs is None:
        return 1
    for r, pa, pb, la, lb in pairs:
        for x, y in zip(la, lb):
            if x != y:
                key = next(k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k))
                print(f"different: rank {r} step {x.get('step')}: {key}: "
                      f"{x.get(key)!r} vs {y.get(key)!r}")
                return 1
        steps = len(la)
    print(f"same metrics: {args.np} ranks x {steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
