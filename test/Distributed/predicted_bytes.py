#!/usr/bin/python3
"""Check that every rank sent, in every step, the bytes the compiler predicted.

    predicted_bytes.py PLAN.json METRICS --np N

PLAN.json is `parallax-run PLAN --print-plan`; its options.predicted
.bytes_per_step is what `parallax-opt --report` predicts for one rank and
step, and .bytes_by_rank, where ranks differ (halo exchanges: the ranks of
the edge blocks have one neighbour), each rank's sent and received bytes. METRICS.rankR.jsonl are the run's --metrics. Prints "measured bytes
equal the prediction: B B per rank and step (N ranks x S steps)" or the
first rank and step that differ (exit status 1). Where the plan names
variables whose bytes it only estimates (.estimated_bytes: a parameter
server's rows per step are bounded, not known, and its servers send more
than its clients), the rest is held exact: every rank's bytes less those
variables' (its metrics' per-variable bytes) against the prediction less
their estimate, "measured bytes equal the prediction outside the parameter
servers: B B per rank and step ...".
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("metrics")
    ap.add_argument("--np", type=int, required=True)
    a = ap.parse_args()
    with open(a.plan) as f:
        prediction = json.load(f)["options"]["predicted"]
    estimated = prediction.get("estimated_bytes", {})
    predicted = prediction["bytes_per_step"] - sum(estimated.values())
    by_rank = prediction.get("bytes_by_rank")
    steps = 0
    for rank in range(a.np):
        with open(f"{a.metrics}.rank{rank}.jsonl") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if not lines:
            print(f"rank {rank}: no metrics")
            return 1
        for line in lines:
            for key in ("bytes_sent", "bytes_received"):
                want = (by_rank[rank][key[6:]] - sum(estimated.values())
                        if by_rank else predicted)
                got = line[key] - sum(line.get("bytes", {}).get(v, {}).get(key[6:], 0)
                                      for v in estimated)
                if got != want:
                    print(f"rank {rank} step {line['step']}: {key} {got}, "
                          f"predicted {want}: {json.dumps(line['bytes'])}")
                    return 1
        steps = len(lines)
    if by_rank:
        sent = " ".join(str(r["sent"]) for r in by_rank)
        print(f"measured bytes equal the prediction: {sent} B sent by ranks 0..{a.np - 1} "
              f"per step ({steps} steps)")
    elif not estimated:
        print(f"measured bytes equal the prediction: {predicted} B per rank and step "
              f"({a.np} ranks x {steps} steps)")
    else:
        print(f"measured bytes equal the prediction outside the parameter servers: {predicted} "
              f"B per rank and step ({a.np} ranks x {steps} steps; "
              f"{', '.join(sorted(estimated))} estimated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
