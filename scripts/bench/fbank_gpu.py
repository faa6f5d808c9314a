#!/usr/bin/env python3
"""GPU fbank benchmark: edge's CUDA kernels next to the torch peer, in one run.

The torch peer is what a Python pipeline does on the GPU (float32 throughout,
like our kernels): torch.stft + mel matmul + log + normalisation, batched,
for Whisper-128 (HF WhisperFeatureExtractor's torch path: periodic Hann 400,
reflect pad, |X|^2 without the last frame, Slaney mel, log10 floor 1e-10,
max-8 clamp, (x+4)/4) and Parakeet-128 (HF ParakeetFeatureExtractor:
preemphasis 0.97, symmetric Hann 400 in n_fft 512, zero pad, ln(x + 2^-24),
per-feature mean/unbiased std over the valid frames, masked tail, [T, M]).
Each is timed with CUDA events: warm-up, then the median of --reps runs.

Ours comes from the Go benchmark BenchmarkCUDAFbank in the -tags cuda test
binary of plugins/fbank (run from that package's directory for its testdata):
dev-us/op (device time of the queued work, the median of the iterations)
and ns/op (Instance.Run, wall, including its synchronising error check).
Shapes: batch 64 x 30 s and one 30 s clip, 16 kHz.

  python3 scripts/bench/fbank_gpu.py --test-binary PATH [--out DIR]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import torch

SR, SECONDS = 16000, 30


def hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    lin = 3.0 * f / 200.0
    log = 15.0 + np.log(np.maximum(f, 1e-9) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log, lin)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), 200.0 * m / 3.0)


def slaney_filterbank(n_fft, n_mels, sr=SR, fmin=0.0, fmax=8000.0):
    """[n_mels, n_fft/2+1] Slaney-normalised triangles (librosa/HF default)."""
    freqs = np.arange(n_fft // 2 + 1) * sr / n_fft
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fb = np.zeros((n_mels, len(freqs)))
    for i in range(n_mels):
        lo, c, hi = edges[i], edges[i + 1], edges[i + 2]
        w = np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c))
        fb[i] = np.maximum(w, 0) * 2.0 / (hi - lo)
    return fb


def whisper_peer(dev, n_mels=128):
    window = torch.hann_window(400, periodic=True, device=dev)
    fb = torch.tensor(slaney_filterbank(400, n_mels), dtype=torch.float32, device=dev)

    def run(x):
        st = torch.stft(x, 400, 160, window=window, center=True, pad_mode="reflect", return_complex=True)
        power = st[..., :-1].abs() ** 2
        mel = fb @ power
        log = torch.clamp(mel, min=1e-10).log10()
        mx = log.amax(dim=(-2, -1), keepdim=True)
        return (torch.maximum(log, mx - 8.0) + 4.0) / 4.0

    return run


def parakeet_peer(dev, n_mels=128):
    window = torch.hann_window(400, periodic=False, device=dev)
    fb = torch.tensor(slaney_filterbank(512, n_mels), dtype=torch.float32, device=dev)

    def run(x):
        n = x.shape[-1]
        x = torch.cat([x[:, :1], x[:, 1:] - 0.97 * x[:, :-1]], dim=1)
        st = torch.stft(x, 512, 160, win_length=400, window=window, center=True, pad_mode="constant",
                        return_complex=True)
        mel = fb @ (st.abs() ** 2)
        log = torch.log(mel + 2.0 ** -24)
        valid = n // 160
        mask = (torch.arange(log.shape[-1], device=dev) < valid).to(log.dtype)
        mean = (log * mask).sum(-1, keepdim=True) / valid
        var = (((log - mean) * mask) ** 2).sum(-1, keepdim=True) / (valid - 1)
        out = (log - mean) / (var.sqrt() + 1e-5) * mask
        return out.transpose(1, 2)

    return run


def time_cuda(fn, x, reps, warmup=5):
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def copy_bandwidth(dev, gib=2):
    src = torch.empty(gib << 28, dtype=torch.float32, device=dev).uniform_()
    dst = torch.empty_like(src)
    ms = time_cuda(lambda s: dst.copy_(s), src, 10)
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e12


def run_ours(binary, benchtime):
    pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "fbank")
    cmd = [os.path.abspath(binary), "-test.run", "^$", "-test.bench", "CUDAFbank$", "-test.benchtime", benchtime]
    res = subprocess.run(cmd, cwd=pkg, capture_output=True, text=True)
    sys.stderr.write(res.stdout + res.stderr)
    if res.returncode != 0:
        raise SystemExit(f"benchmark binary failed: exit {res.returncode}")
    ours = {}
    name = re.compile(r"^BenchmarkCUDAFbank/(\S+?)/B(\d+)(?:-\d+)?\s+\d+\s+(.*)$")
    for line in res.stdout.splitlines():
        m = name.match(line.strip())
        if not m:
            continue
        metrics = {unit: float(v) for v, unit in re.findall(r"([\d.e+-]+) (\S+)", m[3])}
        ours[(m[1], int(m[2]))] = {"wall_ms": metrics["ns/op"] / 1e6, "dev_ms": metrics["dev-us/op"] / 1e3,
                                   "gbs": metrics["GB/s"]}
    return ours


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--test-binary", required=True, help="-tags cuda test binary of plugins/fbank")
    ap.add_argument("--out", default=None, help="directory for bench.json and bench.md")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--benchtime", default="200x")
    args = ap.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    copy_tbs = copy_bandwidth(dev)

    speech = torch.randn(SR * SECONDS, generator=torch.Generator().manual_seed(0)) * 0.1
    peers = {"whisper-128": whisper_peer(dev), "parakeet-128": parakeet_peer(dev)}
    torch_ms = {}
    for preset, fn in peers.items():
        for batch in (64, 1):
            gains = torch.linspace(1.0, 0.5, batch).unsqueeze(1)
            x = (gains * speech.unsqueeze(0)).to(dev).contiguous()
            torch_ms[(preset, batch)] = time_cuda(fn, x, args.reps)
    ours = run_ours(args.test_binary, args.benchtime)

    rows = []
    for key, tms in torch_ms.items():
        preset, batch = key
        o = ours.get(key)
        if o is None:
            raise SystemExit(f"no result for {key} from the Go benchmark")
        n_bytes = batch * SR * SECONDS * 4 + batch * 128 * 3000 * 4 + (batch * 128 * 4 if preset.startswith("parakeet") else 0)
        rows.append({
            "preset": preset, "batch": batch, "torch_ms": tms, "ours_dev_ms": o["dev_ms"], "ours_run_ms": o["wall_ms"],
            "speedup_dev": tms / o["dev_ms"], "speedup_run": tms / o["wall_ms"],
            "bytes": n_bytes, "ours_tbs": n_bytes / (o["dev_ms"] * 1e-3) / 1e12,
        })
    head = (f"GPU: {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}; "
            f"measured copy bandwidth {copy_tbs:.2f} TB/s (read + write)")
    lines = [head, "",
             "| preset | batch | torch (ms) | ours, device (ms) | ours, Run (ms) | speed-up (device) | speed-up (Run) | ours TB/s | % of copy BW |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['batch']} x 30 s | {r['torch_ms']:.3f} | {r['ours_dev_ms']:.4f} | "
                     f"{r['ours_run_ms']:.4f} | {r['speedup_dev']:.1f}x | {r['speedup_run']:.1f}x | "
                     f"{r['ours_tbs']:.2f} | {100 * r['ours_tbs'] / copy_tbs:.0f}% |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump({"gpu": props.name, "copy_tbs": copy_tbs, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
