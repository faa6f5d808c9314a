#!/usr/bin/env python3
"""Golden outputs of torchaudio.functional.resample for runtime/audio.

Writes, for every (from, to, quality) case below:
  in_<from>.npy                       f32 [N]  the input (seeded white noise + a chirp)
  out_<from>_<to>_<quality>.npy       f32 [M]  torchaudio's result, computed in float64
and meta.json (versions, parameters). The Go test (golden_test.go) resamples
in_<from>.npy with the same Quality and compares.

Run: python3 resample.py OUTDIR   (needs torch + torchaudio; numpy)
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torchaudio
import torchaudio.functional as F

# Quality presets, identical to runtime/audio QualityBest / QualityFast.
QUALITIES = {
    "best": dict(lowpass_filter_width=64, rolloff=0.9475937167399596, beta=14.769656459379492),
    "fast": dict(lowpass_filter_width=16, rolloff=0.85, beta=8.555504641634386),
}
PAIRS = [(8000, 16000), (11025, 16000), (22050, 16000), (24000, 16000), (32000, 16000),
         (44100, 16000), (48000, 16000), (16000, 8000), (16000, 22050), (44100, 48000)]
SECONDS = 0.1


def make_input(rate: int) -> np.ndarray:
    rng = np.random.default_rng(rate)
    n = int(round(SECONDS * rate))
    t = np.arange(n) / rate
    noise = 0.3 * rng.standard_normal(n)
    # A chirp sweeping 50 Hz .. 0.95 * Nyquist over the clip.
    f0, f1 = 50.0, 0.95 * rate / 2
    phase = 2 * math.pi * (f0 * t + (f1 - f0) * t * t / (2 * SECONDS))
    return (noise + 0.5 * np.sin(phase)).astype(np.float32)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    meta = {"torch": torch.__version__, "torchaudio": torchaudio.__version__,
            "qualities": QUALITIES, "pairs": PAIRS, "seconds": SECONDS,
            "method": "sinc_interp_kaiser, float64 waveform"}
    for rate in sorted({f for f, _ in PAIRS}):
        np.save(os.path.join(out, f"in_{rate}.npy"), make_input(rate))
    for src, dst in PAIRS:
        x = torch.from_numpy(np.load(os.path.join(out, f"in_{src}.npy")).astype(np.float64))
        for name, q in QUALITIES.items():
            y = F.resample(x, src, dst, resampling_method="sinc_interp_kaiser", **q)
            want = math.ceil(len(x) * dst / src)
            assert y.shape == (want,), (src, dst, y.shape, want)
            np.save(os.path.join(out, f"out_{src}_{dst}_{name}.npy"), y.numpy().astype(np.float32))
            print(f"{src}->{dst} {name}: {len(x)} -> {len(y)}, max |y| {float(y.abs().max()):.4f}")
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
