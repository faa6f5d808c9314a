#!/usr/bin/env python3
"""What the FFT step alone costs on this GPU: cuFFT (torch.fft.rfft) on frames
that are already framed and windowed, for the fbank batch's frame count.

Two numbers per n_fft (400: Whisper, 512: Parakeet), float32:
- L2-resident: rfft of F = --frames frames (input and output together a few
  MB, so they stay in L2 and the time is cuFFT's arithmetic, not DRAM),
  the CUDA kernels' own durations from the profiler (no launch gaps),
  median over --reps calls, scaled to the batch's frames (64 x 3001).
- whole batch: rfft of all 64 x 3001 frames with CUDA events (the input
  materialised in DRAM, as a cuFFT pipeline would have it).
It bounds the fbank goal from below: 10x torch leaves ~178 us (Whisper) and
~244 us (Parakeet) for the whole op, of which the FFT is one step.

  python3 scripts/bench/fft_floor.py [--frames 8192] [--reps 50]
"""
import argparse
import statistics
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

from fbank_gpu import time_cuda  # CUDA events, median of reps (one copy)

BATCH_FRAMES = 64 * 3001


def kernel_us(fn, reps):
    """Median over reps calls of the summed CUDA kernel durations of one call."""
    time_cuda(lambda _: fn(), None, 1)  # warm-up (cuFFT's plan)
    per_call = []
    for _ in range(reps):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        total = 0.0
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                total += getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
        per_call.append(total)
    return statistics.median(per_call)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=8192, help="frames of the L2-resident case")
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    print(f"GPU: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}")
    print("| n_fft | frames | rfft kernels, L2-resident (us) | scaled to 64 x 3001 frames (us) | rfft of 64 x 3001 frames from DRAM (us) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for n_fft in (400, 512):
        small = torch.randn(args.frames, n_fft, device=dev, generator=g)
        small_out = torch.fft.rfft(small)
        us = kernel_us(lambda: torch.fft.rfft(small, out=small_out), args.reps)
        big = torch.randn(BATCH_FRAMES, n_fft, device=dev, generator=g)
        big_out = torch.fft.rfft(big)
        big_us = 1e3 * time_cuda(lambda _: torch.fft.rfft(big, out=big_out), None, args.reps)
        print(f"| {n_fft} | {args.frames} | {us:.2f} | {us * BATCH_FRAMES / args.frames:.1f} | {big_us:.1f} |")


if __name__ == "__main__":
    main()
