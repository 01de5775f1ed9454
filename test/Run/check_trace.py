#!/usr/bin/python3
"""Checks a parallax-run --trace file against the plan it ran.

    check_trace.py TRACE PLAN_JSON --ranks N --steps S [--comm-thread on|off]

PLAN_JSON is `parallax-run PLAN --print-plan`. Checks, for every rank:
metadata names the process and its threads; one "step" event per step on
the compute thread (tid 0); every kernel of the plan exactly once per step,
named after its op, inside its step; every collective kernel's job exactly
once per step, with the bytes it sent and received (more than 0 with
several ranks; a halo exchange's at a group's edge, one way at least), on
the communication thread (tid 1) with --comm-thread on, else nested in its
kernel on the compute thread; events of each thread in
time order, durations non-negative, the communication thread's jobs one
after another. Prints a summary line; exits 1 with the first problem found.
"""
import argparse
import collections
import json
import sys

# Kernels that run one communication job per step.
COLLECTIVES = {"all_reduce", "all_gather", "all_gather_variables", "reduce_scatter",
               "all_to_all", "all_gatherv", "ps_pull", "ps_push", "halo_exchange",
               "halo_reduce"}
# Collectives whose bytes may be 0 one way on some ranks.
ONE_WAY = {"halo_exchange", "halo_reduce"}


def fail(message):
    print(f"check_trace.py: error: {message}")
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("plan")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--comm-thread", choices=["on", "off"], default="off")
    a = ap.parse_args()

    with open(a.trace) as f:
        trace = json.load(f)
    with open(a.plan) as f:
        plan = json.load(f)
    kernels = plan["kernels"]
    ops = [k["op"] for k in kernels]
    collective = [i for i, op in enumerate(ops) if op in COLLECTIVES]
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents array")
    threaded = a.comm_thread == "on" and a.ranks > 1

    for e in events:
        for key in ("name", "ph", "pid"):
            if key not in e:
                fail(f"an event without '{key}': {e}")
    pids = sorted({e["pid"] for e in events})
    if pids != list(range(a.ranks)):
        fail(f"processes {pids}, expected ranks 0..{a.ranks - 1}")

    for rank in range(a.ranks):
        mine = [e for e in events if e["pid"] == rank]
        meta = {(e["name"], e.get("tid")): e["args"] for e in mine if e["ph"] == "M"}
        if meta.get(("process_name", None), {}).get("name") != f"rank {rank}":
            fail(f"rank {rank}: no process_name 'rank {rank}'")
        if meta.get(("thread_name", 0), {}).get("name") != "compute":
            fail(f"rank {rank}: no thread_name for the compute thread (tid 0)")
        if threaded and meta.get(("thread_name", 1), {}).get("name") != "communication":
            fail(f"rank {rank}: no thread_name for the communication thread (tid 1)")

        spans = [e for e in mine if e["ph"] == "X"]
        for e in spans:
            if e["dur"] < 0:
                fail(f"rank {rank}: negative duration: {e}")
        # Time order per thread, in the file.
        last = collections.defaultdict(lambda: float("-inf"))
        for e in spans:
            if e["ts"] < last[e["tid"]]:
                fail(f"rank {rank}, thread {e['tid']}: {e['name']} at {e['ts']} us comes "
                     f"after an event at {last[e['tid']]} us")
            last[e["tid"]] = e["ts"]

        steps = {e["args"]["step"]: e for e in spans if e.get("cat") == "step"}
        if sorted(steps) != list(range(1, a.steps + 1)):
            fail(f"rank {rank}: step events {sorted(steps)}, expected 1..{a.steps}")
        for s, e in steps.items():
            if e["tid"] != 0 or e["name"] != f"step {s}":
                fail(f"rank {rank}: step {s} is '{e['name']}' on thread {e['tid']}")

        seen = collections.Counter()
        for e in spans:
            if e.get("cat") != "kernel":
                continue
            k, s = e["args"]["kernel"], e["args"]["step"]
            if e["tid"] != 0:
                fail(f"rank {rank}: kernel {k} on thread {e['tid']}")
            if not 0 <= k < len(ops) or e["name"] != ops[k]:
                fail(f"rank {rank}: kernel {k} named '{e['name']}', the plan says "
                     f"'{ops[k] if 0 <= k < len(ops) else '?'}'")
            st = steps.get(s)
            if st is None or e["ts"] < st["ts"] or e["ts"] + e["dur"] > st["ts"] + st["dur"] + 1e-3:
                fail(f"rank {rank}: kernel {k} of step {s} lies outside its step")
            seen[(s, k)] += 1
        for s in range(1, a.steps + 1):
            for k in range(len(ops)):
                if seen[(s, k)] != 1:
                    fail(f"rank {rank}, step {s}: kernel {k} ({ops[k]}) appears "
                         f"{seen[(s, k)]} times")

        jobs = [e for e in spans if e.get("cat") == "collective"]
        kernel = {(e["args"]["step"], e["args"]["kernel"]): e for e in spans
                  if e.get("cat") == "kernel"}
        count = collections.Counter()
        for e in jobs:
            k, s = e["args"]["kernel"], e["args"]["step"]
            count[(s, k)] += 1
            if e["tid"] != (1 if threaded else 0):
                fail(f"rank {rank}: the job of kernel {k} ran on thread {e['tid']}")
            for b in ("bytes_sent", "bytes_received"):
                if not isinstance(e["args"].get(b), int) or e["args"][b] < 0:
                    fail(f"rank {rank}: the job of kernel {k} has no {b}")
                # A halo at the group's edge may go one way only (lo = 0:
                # the first member sends nothing).
                one_way = ops[k] in ONE_WAY and e["args"]["bytes_sent"] + \
                    e["args"]["bytes_received"] > 0
                if a.ranks > 1 and e["args"][b] == 0 and not one_way:
                    fail(f"rank {rank}: the job of kernel {k} in step {s} has {b} 0")
            if not threaded:
                # Inline: inside the kernel that ran it.
                outer = kernel.get((s, k))
                if outer is None or e["ts"] < outer["ts"] or \
                        e["ts"] + e["dur"] > outer["ts"] + outer["dur"] + 1e-3:
                    fail(f"rank {rank}: the inline job of kernel {k} lies outside it")
        for s in range(1, a.steps + 1):
            for k in collective:
                if count[(s, k)] != 1:
                    fail(f"rank {rank}, step {s}: the collective of kernel {k} ({ops[k]}) "
                         f"appears {count[(s, k)]} times")
        if threaded:
            comm = sorted((e for e in jobs), key=lambda e: e["ts"])
            for x, y in zip(comm, comm[1:]):
                if y["ts"] < x["ts"] + x["dur"] - 1e-3:
                    fail(f"rank {rank}: jobs of kernels {x['args']['kernel']} and "
                         f"{y['args']['kernel']} overlap on the communication thread")

    where = "on the communication thread" if threaded else "inline"
    print(f"trace: {a.ranks} rank(s) x {a.steps} steps, {len(ops)} kernels and "
          f"{len(collective)} collectives per step ({where}), bytes on every collective")


if __name__ == "__main__":
    main()
