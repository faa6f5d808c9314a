#!/usr/bin/env python3
"""Side-by-side: plugins/dpx (Go test binary) vs torchaudio.functional.forced_align (CPU).

Runs both on the same machine in one command and prints ratios. The Go side
is the compiled test binary of plugins/dpx (go test -c), benchmarks
BenchmarkAlign (single goroutine, GOMAXPROCS=1), BenchmarkAlignBatch (all
cores) and BenchmarkAlignHour; torchaudio runs single-threaded on random
log-softmax emissions of the same shapes (C = 32).

Usage: bench_torchaudio.py GO_TEST_BINARY [--json OUT.json]
"""
import argparse
import json
import os
import re
import subprocess
import time

import numpy as np
import torch
import torchaudio
import torchaudio.functional as taf

SHAPES = [(1500, 300), (15000, 3000)]
C = 32


def emissions(T, L, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, (1, T, C)).astype(np.float32)
    x = x - x.max(-1, keepdims=True)
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    tg = rng.integers(1, C, (1, L))
    return torch.from_numpy(lp.astype(np.float32)), torch.from_numpy(tg)


def time_torchaudio(T, L, reps):
    lp, tg = emissions(T, L, T)
    taf.forced_align(lp, tg, blank=0)  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        taf.forced_align(lp, tg, blank=0)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def run_go(binary, bench, benchtime, cpu):
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", benchtime,
                          "-test.cpu", str(cpu)], check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(.*)$", line)
        if m:
            metrics = {"ns/op": float(m.group(2))}
            for v, k in re.findall(r"([\d.]+) (\S+)", m.group(3)):
                metrics[k] = float(v)
            res[m.group(1)] = metrics
    print(out.strip())
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ncpu = os.cpu_count()
    print(f"torch {torch.__version__} torchaudio {torchaudio.__version__}; {ncpu} CPUs")
    try:
        print(open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "))
    except Exception:  # noqa: BLE001
        pass
    report = {"cpus": ncpu, "single": [], "batch": {}, "hour": {}}
    go = run_go(a.binary, "^BenchmarkAlign$", "20x", 1)
    print(f"\n{'shape':>16} {'torchaudio ms':>14} {'edge f32 ms':>12} {'ratio':>7} {'edge i32 ms':>12} {'ratio':>7}")
    for T, L in SHAPES:
        ta = time_torchaudio(T, L, reps=30 if T < 10000 else 5)
        f = go[f"BenchmarkAlign/T={T}/L={L}/f32"]["ns/op"] / 1e9
        q = go[f"BenchmarkAlign/T={T}/L={L}/i32"]["ns/op"] / 1e9
        print(f"{f'T={T},L={L}':>16} {ta*1e3:14.2f} {f*1e3:12.3f} {ta/f:6.1f}x {q*1e3:12.3f} {ta/q:6.1f}x")
        report["single"].append(dict(T=T, L=L, torchaudio_s=ta, edge_f32_s=f, edge_i32_s=q))
    gb = run_go(a.binary, "^BenchmarkAlignBatch$", "10x", ncpu)["BenchmarkAlignBatch"]
    ta = time_torchaudio(1500, 300, reps=32)
    print(f"\nbatch of 32 x (T=1500, L=300): edge {gb['items/s']:.0f} items/s on {ncpu} cores; "
          f"torchaudio {1/ta:.0f} items/s (one call per item); ratio {gb['items/s']*ta:.1f}x")
    report["batch"] = dict(edge_items_per_s=gb["items/s"], torchaudio_items_per_s=1 / ta)
    h = run_go(a.binary, "^BenchmarkAlignHour$", "1x", 1)["BenchmarkAlignHour"]
    print(f"\none hour (T=180000, L=50000): edge {h['ns/op']/1e9:.2f} s, working memory "
          f"{h['work-MiB']:.1f} MiB, peak RSS {h['peak-rss-MiB']:.1f} MiB")
    report["hour"] = h
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
