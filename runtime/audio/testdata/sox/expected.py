#!/usr/bin/env python3
"""Writes <name>.npy next to each <name>.wav: the samples scipy.io.wavfile
reads, scaled the way runtime/audio documents (integer PCM over 2^(bits-1),
8-bit unsigned around 128, float as stored), float32, shape [frames, channels],
plus <name>.json with the sample rate."""
import json
import sys

import numpy as np
from scipy.io import wavfile

for path in sys.argv[1:]:
    rate, data = wavfile.read(path)
    if data.ndim == 1:
        data = data[:, None]
    if data.dtype == np.uint8:
        x = (data.astype(np.float64) - 128) / 128
    elif data.dtype.kind == "i":  # scipy left-justifies 24-bit data in int32
        x = data.astype(np.float64) / 2.0 ** (8 * data.dtype.itemsize - 1)
    else:
        x = data.astype(np.float64)
    stem = path[: -len(".wav")]
    np.save(stem + ".npy", x.astype(np.float32))
    with open(stem + ".json", "w") as f:
        json.dump({"sample_rate": rate}, f)
    print(path, rate, data.dtype, data.shape)
