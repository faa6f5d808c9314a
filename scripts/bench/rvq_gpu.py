#!/usr/bin/env python3
"""Side by side on one GPU host, in one run: the CUDA rvq_encode kernel (Go test
binary of plugins/rvq built with -tags cuda, BenchmarkCUDAEncode) against its
peers at seed 001's five measure shapes (B, T, Q, K, D):

- "reference": the seed's torch reference (fp32, materialises the (B*T, K)
  distance matrix per stage), verbatim;
- "torch bf16": per stage one bf16 GEMM (residual rounded to bf16, fp32
  output) + ||C||^2 (precomputed) + argmin, the gather-subtract in fp32;
- ours: BenchmarkCUDAEncode's dev-us/op (CUDA events around
  DeviceCodebooks.Encode: input check + fused kernel + 8-byte status read,
  the median of the --benchtime iterations after a warm-up call), every
  fused variant and the default choice (auto).

The peers are timed the same way (CUDA events, median of --reps after a
warm-up) on
inputs from the seed's make_inputs generator; ours runs on inputs of the
same distribution (plugins/rvq synth). FLOPs = 2*Q*B*T*K*D (the seed's
canonical count). Prints a table with TFLOP/s, ms, the fraction of the
790 TFLOP/s dense bf16 peak and the ratios, writes JSON and a markdown table.

Usage: rvq_gpu.py GO_TEST_BINARY [--json OUT.json] [--md OUT.md] [--benchtime 20x]
       [--variants REGEXP] [--go-output SAVED.txt] [--skip-go] [--shapes N]

Run it from plugins/rvq on the GPU host, e.g.

    cd plugins/rvq && python3 ../../scripts/bench/rvq_gpu.py /tmp/rvq.test --md out.md
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from rvq import make_inputs, seed_reference  # noqa: E402  (the seed's generator and reference, one copy)

PEAK = 790.0  # TFLOP/s, dense bf16, measured on the H200
MEASURE = [(40, 2048, 8, 1024, 128), (24, 2048, 16, 1024, 128), (48, 1024, 8, 2048, 128),
           (20, 3000, 8, 1024, 256), (80, 1024, 8, 1024, 128)]


def rvq_torch_bf16(x, codebooks, cnorm):
    # bf16 GEMM (fp32 accumulate) + argmin per stage; residual and sums fp32
    B, T, D = x.shape
    Q, K, _ = codebooks.shape
    r = x.reshape(B * T, D).clone()
    out = torch.zeros_like(r)
    codes = torch.empty(B * T, Q, dtype=torch.int32, device=x.device)
    for q in range(Q):
        dot = torch.matmul(r.to(torch.bfloat16), codebooks[q].t()).float()
        j = (cnorm[q].view(1, K) - 2.0 * dot).argmin(dim=-1)
        codes[:, q] = j.to(torch.int32)
        sel = codebooks[q][j].float()
        r = r - sel
        out = out + sel
    return codes.view(B, T, Q), out.view(B, T, D)


def timed(fn, reps):
    fn()
    if not torch.cuda.is_available():  # local debugging only
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


BENCH_RE = re.compile(r"^BenchmarkCUDAEncode/B(\d+)_T(\d+)_Q(\d+)_K(\d+)_D(\d+)/v=(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) TFLOP/s\s+([\d.]+) dev-us/op(?:\s+([\d.]+) kern-us/op)?")
BENCH_RE2 = re.compile(r"^BenchmarkCUDAEncode/B(\d+)_T(\d+)_Q(\d+)_K(\d+)_D(\d+)/v=(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) dev-us/op\s+([\d.]+) TFLOP/s")


def run_go(binary, benchtime, saved, timeout, variants):
    if saved:
        with open(saved) as f:
            text = f.read()
    else:
        try:
            pattern = "^BenchmarkCUDAEncode$" + (f"/.*/v=(auto|{variants})$" if variants else "")
            p = subprocess.run([binary, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime],
                               capture_output=True, text=True, timeout=timeout)
            text = p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:  # keep what finished
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            text = out + f"\n(go benchmark timed out after {timeout} s)\n"

    print(text, flush=True)
    out = {}
    for line in text.splitlines():
        line = line.strip()
        m = BENCH_RE2.match(line)
        if m:
            *shape, v, ns, us, tf = m.groups()
        else:
            m = BENCH_RE.match(line)
            if not m:
                continue
            *shape, v, ns, tf, us, kern = m.groups()
        rec = {"ms": float(us) / 1e3, "wall_ms": float(ns) / 1e6, "tflops": float(tf)}
        if m.re is BENCH_RE and kern:
            rec["kernel_ms"] = float(kern) / 1e3
        out.setdefault(tuple(int(s) for s in shape[:5]), {})[v] = rec
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--benchtime", default="20x")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shapes", type=int, default=len(MEASURE))
    ap.add_argument("--skip-go", action="store_true")
    ap.add_argument("--go-output")
    ap.add_argument("--go-timeout", type=int, default=60)
    ap.add_argument("--variants", help="regexp of the fused variants to time (with auto), default all")
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = MEASURE[: a.shapes] if a.shapes > 0 else [(2, 64, 4, 256, 64)]  # --shapes 0: a tiny local check
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "shapes": []}
    go = {} if a.skip_go else run_go(a.binary, a.benchtime, a.go_output, a.go_timeout, a.variants)
    for i, (B, T, Q, K, D) in enumerate(shapes):
        t0 = time.time()
        x, cb = make_inputs(B, T, Q, K, D, 1000 + i, dev)
        flop = 2 * Q * B * T * K * D
        cnorm = (cb.float() ** 2).sum(-1)
        ref_codes, _ = seed_reference(x, cb)
        bf_codes, _ = rvq_torch_bf16(x, cb, cnorm)
        ms_ref = timed(lambda: seed_reference(x, cb), a.reps)
        ms_bf = timed(lambda: rvq_torch_bf16(x, cb, cnorm), a.reps)
        row = {"shape": [B, T, Q, K, D], "gflop": flop / 1e9,
               "reference": {"ms": ms_ref, "tflops": flop / ms_ref / 1e9},
               "torch_bf16": {"ms": ms_bf, "tflops": flop / ms_bf / 1e9,
                              "codes_mismatch_vs_reference": int((bf_codes != ref_codes).sum())},
               "ours": go.get((B, T, Q, K, D), {})}
        res["shapes"].append(row)
        print(f"peers {B},{T},{Q},{K},{D}: reference {ms_ref:.2f} ms, torch bf16 {ms_bf:.2f} ms "
              f"({time.time() - t0:.1f} s)", flush=True)
        del x, cb
        torch.cuda.empty_cache()

    lines = ["| B,T,Q,K,D | GFLOP | reference ms (TFLOP/s) | torch bf16 ms (TFLOP/s) | ours ms | ours TFLOP/s | % of 790 peak | vs reference | vs torch bf16 | variant |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in res["shapes"]:
        ours = row["ours"]
        best = min(ours.items(), key=lambda kv: kv[1]["ms"]) if ours else None
        auto = ours.get("auto")
        pick = auto or (best[1] if best else None)
        s = ",".join(str(v) for v in row["shape"])
        if pick:
            lines.append(f"| {s} | {row['gflop']:.0f} | {row['reference']['ms']:.2f} ({row['reference']['tflops']:.0f}) | "
                         f"{row['torch_bf16']['ms']:.2f} ({row['torch_bf16']['tflops']:.0f}) | {pick['ms']:.3f} | "
                         f"{pick['tflops']:.0f} | {100 * pick['tflops'] / PEAK:.0f}% | "
                         f"{row['reference']['ms'] / pick['ms']:.1f}x | {row['torch_bf16']['ms'] / pick['ms']:.1f}x | "
                         f"{'auto' if auto else best[0]} |")
        else:
            lines.append(f"| {s} | {row['gflop']:.0f} | {row['reference']['ms']:.2f} ({row['reference']['tflops']:.0f}) | "
                         f"{row['torch_bf16']['ms']:.2f} ({row['torch_bf16']['tflops']:.0f}) | - | - | - | - | - | - |")
    lines.append("")
    lines.append("Variant sweep (ours: Encode ms / TFLOP/s, fused kernel alone ms):")
    lines.append("")
    for row in res["shapes"]:
        s = ",".join(str(v) for v in row["shape"])
        cells = ", ".join(f"{v}: {o['ms']:.3f} / {o['tflops']:.0f}" + (f" (kernel {o['kernel_ms']:.3f})" if "kernel_ms" in o else "")
                          for v, o in sorted(row["ours"].items()))
        lines.append(f"- {s}: {cells or '-'}")
    table = "\n".join(lines)
    print(table)
    if a.md:
        with open(a.md, "w") as f:
            f.write(f"device: {res['device']}, torch {res['torch']}\n\n" + table + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
