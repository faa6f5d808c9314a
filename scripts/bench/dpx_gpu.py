#!/usr/bin/env python3
"""Side by side on one GPU host, in one run: the CUDA dpx ops (Go test binary
of plugins/dpx built with -tags cuda, BenchmarkCUDA) against their peers:

- ctc_align vs torchaudio.functional.forced_align on CPU and on CUDA
  (T=1500,L=300 and T=15000,L=3000 single; 64 x T=1500,L=300, which
  torchaudio can only loop, batch size 1 per call), C = 32;
- viterbi (B=64, T=2000, S=1024) vs a torch max-plus Viterbi on CUDA
  (per frame: (delta[:, :, None] + trans).max(1), argmax kept, backtrace by
  gather);
- dtw (B=32, N=M=2048) vs a torch anti-diagonal DTW on CUDA (forward pass
  only: the peer gets its backtrace for free).

Prints a table (median wall ms, ratios, cell updates per second) and writes
JSON. Inputs are random log-softmax emissions / scores of the same
shapes as the Go benchmark's (same distributions, not the same numbers).

Usage: dpx_gpu.py GO_TEST_BINARY [--json OUT.json] [--benchtime 10x] [--go-output SAVED.txt]
Run from plugins/dpx (the Go binary reads testdata/ there) or anywhere.
"""
import argparse
import json
import re
import subprocess
import time

import numpy as np
import torch

C = 32
DEV = "cuda"  # the peers' device (tests may switch it)
CTC_SHAPES = [(1, 1500, 300), (1, 15000, 3000), (64, 1500, 300)]


def emissions(B, T, L, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, generator=g) * 2
    lp = torch.log_softmax(x, -1)
    tg = torch.randint(1, C, (B, L), generator=g)
    return lp, tg


def sync_device():
    if DEV == "cuda":
        torch.cuda.synchronize()


def timed(fn, reps, sync):
    fn()  # warm-up
    if sync:
        sync_device()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync_device()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def torchaudio_align(B, T, L, device, reps):
    import torchaudio.functional as taf

    lp, tg = emissions(B, T, L, T + B)
    lp, tg = lp.to(device), tg.to(device)

    def run():
        for b in range(B):
            taf.forced_align(lp[b : b + 1], tg[b : b + 1], blank=0)

    return timed(run, reps, device == "cuda")


def torch_viterbi(B, T, S, reps):
    g = torch.Generator().manual_seed(1)
    em = (-3 * torch.rand(B, T, S, generator=g)).to(DEV)
    tr = (-4 * torch.rand(S, S, generator=g)).to(DEV)
    pr = (-2 * torch.rand(S, generator=g)).to(DEV)

    def run():
        delta = pr + em[:, 0]
        bps = torch.empty(T - 1, B, S, dtype=torch.int64, device=DEV)
        for t in range(1, T):
            v, i = (delta[:, :, None] + tr[None]).max(1)
            bps[t - 1] = i
            delta = v + em[:, t]
        j = delta.argmax(1, keepdim=True)
        path = torch.empty(B, T, dtype=torch.int64, device=DEV)
        path[:, T - 1] = j[:, 0]
        for t in range(T - 1, 0, -1):
            j = bps[t - 1].gather(1, j)
            path[:, t - 1] = j[:, 0]
        return path

    return timed(run, reps, True)


def torch_dtw(B, N, M, reps):
    g = torch.Generator().manual_seed(2)
    cost = (4 * torch.rand(B, N, M, generator=g)).to(DEV)

    def run():
        D = torch.full((B, N + 1, M + 1), float("inf"), device=DEV)
        D[:, 0, 0] = 0
        for d in range(N + M - 1):
            i0, i1 = max(0, d - M + 1), min(N - 1, d)
            i = torch.arange(i0, i1 + 1, device=DEV)
            j = d - i
            best = torch.minimum(torch.minimum(D[:, i, j], D[:, i, j + 1]), D[:, i + 1, j])
            D[:, i + 1, j + 1] = cost[:, i, j] + best
        return D[:, N, M]

    return timed(run, reps, True)


BENCH_RE = re.compile(r"^BenchmarkCUDA/(\w+)/(\S+)/(f32|i32)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op\s+([\d.e+]+) cells/s"
                      r"(?:\s+([\d.e+]+) dev-ns/op)?")


def run_go(binary, benchtime, saved):
    if saved:
        with open(saved) as f:
            text = f.read()
    else:
        p = subprocess.run([binary, "-test.run", "^$", "-test.bench", "^BenchmarkCUDA$", "-test.benchtime", benchtime],
                           capture_output=True, text=True, timeout=120)
        text = p.stdout + p.stderr
    print(text, flush=True)
    out = {}
    for line in text.splitlines():
        m = BENCH_RE.match(line.strip())
        if m:
            op, shape, pr, _, ns, cells, dev = m.groups()
            out[(op, shape, pr)] = {"ms": float(ns) / 1e6, "cells_per_s": float(cells)}
            if dev:
                out[(op, shape, pr)]["device_ms"] = float(dev) / 1e6
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--json")
    ap.add_argument("--benchtime", default="10x")
    ap.add_argument("--skip-go", action="store_true", help="peers only (local debugging)")
    ap.add_argument("--go-output", help="parse this saved output of the Go benchmark instead of running it")
    a = ap.parse_args()

    import torchaudio

    res = {"torch": torch.__version__, "torchaudio": torchaudio.__version__,
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "ctc": [], "viterbi": {}, "dtw": {}}
    go = {} if a.skip_go else run_go(a.binary, a.benchtime, a.go_output)
    cuda = torch.cuda.is_available()
    torch.set_num_threads(1)  # torchaudio's CPU forced_align is single-threaded anyway

    print(f"device: {res['device']}  torch {torch.__version__}  torchaudio {torchaudio.__version__}")
    print("ours = wall ms of one op Run (device ms of its launch: upload, check, kernel)")
    print(f"{'ctc_align shape':28s} {'ta CPU ms':>10s} {'ta CUDA ms':>10s} {'ours f32':>16s} {'ours i32':>16s} {'vs ta CUDA':>10s} {'vs ta CPU':>9s}")
    for B, T, L in CTC_SHAPES:
        reps = 3 if T * B >= 15000 else 5
        cpu_s = torchaudio_align(B, T, L, "cpu", reps)
        cuda_s = torchaudio_align(B, T, L, "cuda", reps) if cuda else float("nan")
        key = f"B={B},T={T},L={L},C={C}"
        g32, gi = go.get(("ctc_align", key, "f32"), {}), go.get(("ctc_align", key, "i32"), {})
        f32, i32 = g32.get("ms", float("nan")) / 1e3, gi.get("ms", float("nan")) / 1e3
        d32, di = g32.get("device_ms", float("nan")), gi.get("device_ms", float("nan"))
        best = min(f32, i32)
        row = {"shape": key, "torchaudio_cpu_ms": cpu_s * 1e3, "torchaudio_cuda_ms": cuda_s * 1e3,
               "ours_f32_ms": f32 * 1e3, "ours_i32_ms": i32 * 1e3, "ours_f32_device_ms": d32, "ours_i32_device_ms": di,
               "speedup_vs_cuda": cuda_s / best, "speedup_vs_cpu": cpu_s / best}
        res["ctc"].append(row)
        print(f"{key:28s} {cpu_s*1e3:10.2f} {cuda_s*1e3:10.2f} {f32*1e3:7.3f} ({d32:6.3f}) {i32*1e3:7.3f} ({di:6.3f}) "
              f"{cuda_s/best:9.1f}x {cpu_s/best:8.1f}x", flush=True)

    if cuda:
        B, T, S = 64, 2000, 1024
        s = torch_viterbi(B, T, S, 2)
        cells = B * (T - 1) * S * S
        res["viterbi"] = {"shape": f"B={B},T={T},S={S}", "torch_ms": s * 1e3, "torch_cells_per_s": cells / s}
        for pr in ("f32", "i32"):
            g = go.get(("viterbi", f"B={B},T={T},S={S}", pr))
            if g:
                res["viterbi"][pr] = g
        print(f"viterbi B={B},T={T},S={S}: torch {s*1e3:.1f} ms ({cells/s:.3g} cells/s); ours " +
              ", ".join(f"{pr} {g['ms']:.2f} ms ({g['cells_per_s']:.3g} cells/s, {s*1e3/g['ms']:.1f}x)" for pr, g in res["viterbi"].items() if isinstance(g, dict)), flush=True)
        B, N = 32, 2048
        s = torch_dtw(B, N, N, 1)
        cells = B * N * N
        res["dtw"] = {"shape": f"B={B},N={N},M={N}", "torch_forward_ms": s * 1e3, "torch_cells_per_s": cells / s}
        for pr in ("f32", "i32"):
            g = go.get(("dtw", f"B={B},N={N},M={N}", pr))
            if g:
                res["dtw"][pr] = g
        print(f"dtw B={B},N=M={N}: torch (forward only) {s*1e3:.1f} ms ({cells/s:.3g} cells/s); ours " +
              ", ".join(f"{pr} {g['ms']:.2f} ms ({g['cells_per_s']:.3g} cells/s, {s*1e3/g['ms']:.1f}x)" for pr, g in res["dtw"].items() if isinstance(g, dict)), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
