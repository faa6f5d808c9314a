#!/usr/bin/python3
"""make_goldens.py MODEL.onnx WAV OUTDIR: reference tensors of one clip for the
Go end-to-end tests (input: the WAV's 16-bit samples / 32768), computed in torch (features.py, and model.py with the
weights of MODEL.onnx):

  features.npy         f32 [1, 128, T]   parakeet-128, mel_time (T = N//160 + 1)
  lengths.npy          i64 [1]           valid frames, N // 160
  logprobs.npy         f32 [1, T', 29]   the encoder's output on those features
  encoded_lengths.npy  i64 [1]
  greedy.txt           the greedy CTC transcript

ONNX Runtime matched torch within 3.5e-5 on the log-probs (GPU host), so the Go
encoder op should match logprobs.npy to ~1e-4 on these features; the Go fbank
op matched features.npy within 4.4e-5 on demo.wav."""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_testclips  # noqa: E402
import features  # noqa: E402
import model as M  # noqa: E402
import textnorm  # noqa: E402
import train  # noqa: E402


def main():
    onnx_path, wav, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    x = torch.from_numpy(check_testclips.read_wav(wav))[None]
    f, fl = features.Parakeet128()(x, torch.tensor([x.shape[1]]))
    with torch.no_grad():
        lp, ol = M.load_model(onnx_path)(f, fl)
    np.save(os.path.join(out, "features.npy"), f.numpy())
    np.save(os.path.join(out, "lengths.npy"), fl.numpy().astype(np.int64))
    np.save(os.path.join(out, "logprobs.npy"), lp.numpy())
    np.save(os.path.join(out, "encoded_lengths.npy"), ol.numpy().astype(np.int64))
    text = textnorm.decode(train.greedy(lp, ol)[0])
    with open(os.path.join(out, "greedy.txt"), "w") as fo:
        fo.write(text + "\n")
    print(f"{wav}: features {tuple(f.shape)}, logprobs {tuple(lp.shape)}: {text}")


if __name__ == "__main__":
    main()
