#!/usr/bin/env python3
"""ort_profile.py PROFILE.json [--skip N]: where an ONNX Runtime session's
time went, from the profile `edge ... --ort-profile PREFIX` writes (Chrome
trace JSON: one "model_run" event per Run, one "<node>_kernel_time" event
per node run, with its provider and op type).

Prints, over the runs after the first N (default 1: the first run carries
the providers' one-time set-up): runs, wall time in Run, the time inside
node kernels by provider and by op type (host-side kernel time: for the
CUDA EP a kernel's time is its launch, not its GPU time, unless the node
synchronises), and the rest of Run (the executor, memory planning,
copies between providers, synchronisation).
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile")
    ap.add_argument("--skip", type=int, default=1, help="runs to leave out at the start")
    ap.add_argument("--top", type=int, default=12, help="op types to list")
    a = ap.parse_args()
    with open(a.profile, encoding="utf-8") as f:
        events = json.load(f)
    runs = sorted((e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"), key=lambda e: e["ts"])
    if len(runs) <= a.skip:
        raise SystemExit(f"{a.profile}: {len(runs)} runs, none after the first {a.skip}")
    kept = runs[a.skip:]
    spans = [(r["ts"], r["ts"] + r["dur"]) for r in kept]

    def in_kept(e):
        return any(lo <= e["ts"] <= hi for lo, hi in spans)

    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and in_kept(e)]
    wall = sum(r["dur"] for r in kept)
    by_provider = collections.Counter()
    by_op = collections.Counter()
    count_op = collections.Counter()
    for e in nodes:
        p = e["args"].get("provider", "?").replace("ExecutionProvider", "")
        op = e["args"].get("op_name", "?")
        by_provider[p] += e["dur"]
        by_op[(op, p)] += e["dur"]
        count_op[(op, p)] += 1
    inside = sum(by_provider.values())
    n = len(kept)
    print(f"{a.profile}: {n} runs after the first {a.skip}; {wall / n / 1e3:.2f} ms a run in Run, "
          f"{len(nodes) / n:.0f} node runs a run")
    print(f"  node kernels {inside / n / 1e3:.2f} ms a run ({100 * inside / wall:.0f} %), "
          f"the rest of Run {(wall - inside) / n / 1e3:.2f} ms ({100 * (wall - inside) / wall:.0f} %)")
    for p, d in by_provider.most_common():
        print(f"  provider {p:>6}: {d / n / 1e3:8.3f} ms a run ({100 * d / wall:4.1f} % of Run)")
    for (op, p), d in by_op.most_common(a.top):
        print(f"    {op:>22} {p:>6}: {d / n / 1e3:8.3f} ms a run, {count_op[(op, p)] / n:5.1f} nodes")


if __name__ == "__main__":
    main()
