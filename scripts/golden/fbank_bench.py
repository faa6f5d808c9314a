#!/usr/bin/env python3
"""Side-by-side CPU benchmark: edge's fbank op vs HF WhisperFeatureExtractor.

One command runs both on the same 30 s clip (plugins/fbank/testdata/speech_a.wav
repeated, exactly what BenchmarkFbank30s uses) and prints the ratios:

    python3 scripts/golden/fbank_bench.py --go-test simd=PATH/fbank-simd.test --go-test scalar=PATH/fbank.test

--go-test is a Go test binary (`go test -c -o fbank.test ./plugins/fbank`;
`GOEXPERIMENT=simd go test -c ...` for the AVX2 path), optionally labelled;
each is run from plugins/fbank so that it finds its testdata. The HF peers:

  numpy path   WhisperFeatureExtractor._np_extract_fbank_features, run in a
               child process with OMP/MKL/OPENBLAS threads = 1 (single thread)
               and with the library defaults (all cores)
  torch path   WhisperFeatureExtractor._torch_extract_fbank_features on CPU,
               torch.set_num_threads(1) and torch's default (all cores)

Each peer is timed as the median of --repeats calls after one warm-up call.
Goals (issue 3): Go 1 thread >= 5x the numpy path on 1 thread; Go on all
cores faster than the torch path on all cores.
"""

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import time
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CLIP = os.path.join(ROOT, "plugins", "fbank", "testdata", "speech_a.wav")
SR = 16000


def clip30s():
    with wave.open(CLIP, "rb") as w:
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    reps = -(-30 * SR // len(x))
    return np.tile(x, reps)[: 30 * SR].copy()


def peer(path, mels, threads, repeats):
    """Time one HF path in this process; returns seconds per call (median)."""
    import torch
    from transformers import WhisperFeatureExtractor

    if threads > 0:
        torch.set_num_threads(threads)
    fe = WhisperFeatureExtractor(feature_size=mels)
    x = clip30s()
    batch = x[None]
    if path == "numpy":
        fn = fe._np_extract_fbank_features
        takes_device = "device" in inspect.signature(fn).parameters

        def call():
            return fn(batch, "cpu") if takes_device else fn(batch)
    else:
        def call():
            return fe._torch_extract_fbank_features(batch, "cpu")
    out = np.asarray(call())
    assert out.shape[-2:] == (mels, 3000), out.shape
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), torch.get_num_threads()


def run_peer_child(path, mels, threads, repeats):
    env = dict(os.environ)
    if threads > 0:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
            env[k] = str(threads)
    cmd = [sys.executable, __file__, "--peer", path, "--mels", str(mels), "--threads", str(threads),
           "--repeats", str(repeats)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stdout + res.stderr, file=sys.stderr)
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_go(go_test, benchtime):
    cmd = [os.path.abspath(go_test), "-test.run", "^$", "-test.bench", "Fbank30s", "-test.benchtime", benchtime,
           "-test.benchmem"]
    res = subprocess.run(cmd, cwd=os.path.join(ROOT, "plugins", "fbank"), capture_output=True, text=True)
    print(res.stdout)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise SystemExit("go benchmark failed")
    out = {}
    for line in res.stdout.splitlines():
        m = re.match(r"BenchmarkFbank30s/(\S+)/threads=(\d+)-\d+\s+\d+\s+([\d.]+) ns/op", line)
        if m:
            out[(m.group(1), int(m.group(2)))] = float(m.group(3)) * 1e-9
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go-test", action="append", default=[],
                    help="Go test binary, optionally LABEL=PATH (repeatable: e.g. simd=... scalar=...)")
    ap.add_argument("--benchtime", default="3s")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--peer", choices=["numpy", "torch"])
    ap.add_argument("--mels", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.peer:
        sec, torch_threads = peer(args.peer, args.mels, args.threads, args.repeats)
        print(json.dumps({"seconds": sec, "torch_threads": torch_threads}))
        return

    cores = os.cpu_count()
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"host: {cpu}, {cores} logical cores")
    gos = []
    for spec in args.go_test:
        label, _, path = spec.rpartition("=")
        gos.append((label or "go", run_go(path, args.benchtime)))
    peers = {}
    for mels in (80, 128):
        for path in ("numpy", "torch"):
            for threads in (1, 0):
                r = run_peer_child(path, mels, threads, args.repeats)
                peers[(mels, path, threads)] = r and r["seconds"]

    def fmt(v):
        return f"{v * 1e3:9.2f}ms" if v else f"{'n/a':>10}"

    print(f"\n30 s clip, seconds per call (HF: median of {args.repeats}; Go: testing.B mean)")
    ok = True
    for label, go in gos:
        go_all = max(t for _, t in go)
        print(f"\n[{label}]")
        print(f"{'preset':12} {'Go 1 thr':>10} {'Go ' + str(go_all) + ' thr':>10} {'HF np 1':>10} {'HF np all':>10} "
              f"{'HF pt 1':>10} {'HF pt all':>10}  {'np1/Go1':>8} {'pt-all/Go-all':>13}")
        for mels in (80, 128):
            name = f"whisper-{mels}"
            g1, gall = go.get((name, 1)), go.get((name, go_all))
            np1, npall = peers[(mels, "numpy", 1)], peers[(mels, "numpy", 0)]
            pt1, ptall = peers[(mels, "torch", 1)], peers[(mels, "torch", 0)]
            r1 = np1 / g1 if np1 and g1 else float("nan")
            r2 = ptall / gall if ptall and gall else float("nan")
            if label == gos[0][0]:
                ok = ok and r1 >= 5 and r2 > 1
            print(f"{name:12} {fmt(g1)} {fmt(gall)} {fmt(np1)} {fmt(npall)} {fmt(pt1)} {fmt(ptall)}  "
                  f"{r1:7.1f}x {r2:12.1f}x")
    print(f"\ngoals for [{gos[0][0]}] (Go 1 thread >= 5x HF numpy 1 thread; Go all cores > HF torch all cores):",
          "MET" if ok else "NOT MET")


if __name__ == "__main__":
    main()
