#!/usr/bin/env python3
"""How close the seed's inputs come to the CUDA rvq kernel's near-tie guard.

For inputs from seed 001's generator (scripts/bench/rvq_gpu.py make_inputs),
runs the fp32 reference chain and, per row and stage, compares the gap
between the best and the second-best score (||C_e||^2/2 - r.C_e) with the
bound below which kernels/rvq.cu re-scores a row exactly:

    |r| cmax (2^-7 + Dp 2^-20) + slack (|best| + |second|)

(slack 2^-22, or 2^-9 + 2^-22 for the packed running minimum). Prints the
rows that would be re-scored and the smallest gap / bound ratio.

Usage: rvq_guard_margin.py [--device cpu|cuda] [--shapes B,T,Q,K,D ...]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from rvq_gpu import make_inputs  # noqa: E402

SHAPES = ["2,2048,8,1024,128", "1,2048,16,1024,128", "1,3000,8,1024,256", "1,2048,8,2048,128",
          "2,301,8,1024,128", "3,128,4,256,64", "5,65,2,129,96"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shapes", nargs="*", default=SHAPES)
    a = ap.parse_args()
    print("| B,T,Q,K,D | row-stages | re-scored (exact min) | re-scored (packed min) | smallest gap / bound (packed) |")
    print("|---|---|---|---|---|")
    for spec in a.shapes:
        B, T, Q, K, D = (int(v) for v in spec.split(","))
        x, cb = make_inputs(B, T, Q, K, D, a.seed, a.device)
        r = x.reshape(-1, D).clone()
        dp = (D + 63) // 64 * 64
        total = flagged = flagged_packed = 0
        ratio = float("inf")
        for q in range(Q):
            C = cb[q].float()
            s = (C * C).sum(-1)[None, :] / 2 - r @ C.t()
            v, i = s.topk(2, largest=False)
            b1, b2 = v[:, 0], v[:, 1]
            base = r.norm(dim=1) * (C * C).sum(-1).sqrt().max() * (2 ** -7 + dp * 2 ** -20)
            mag = b1.abs() + b2.abs()
            bound, bound_packed = base + 2 ** -22 * mag, base + (2 ** -9 + 2 ** -22) * mag
            flagged += int((b2 - b1 <= bound).sum())
            flagged_packed += int((b2 - b1 <= bound_packed).sum())
            ratio = min(ratio, ((b2 - b1) / bound_packed).min().item())
            total += r.shape[0]
            r = r - C[i[:, 0]]
        print(f"| {spec} | {total} | {flagged} | {flagged_packed} | {ratio:.1f} |")


if __name__ == "__main__":
    main()
