#!/usr/bin/env python3
"""Golden log-mel features for plugins/fbank, from HF transformers.

Run on a host with transformers (5.x), torch and numpy:

    python3 scripts/golden/fbank.py --clips plugins/fbank/testdata --out OUTDIR

It writes, for every 16 kHz mono 16-bit WAV clip in --clips:

  whisper-{80,128}__CLIP.npy       WhisperFeatureExtractor, padding="longest" (the
                                   unpadded form), default (torch) path, [n_mels, T]
  whisper-{80,128}__CLIP__np.npy   the same through the extractor's numpy path
  whisper-128-pad30__CLIP.npy      default call (padded to 30 s), first K frames;
  whisper-128-pad30__CLIP__tail.npy  the one column every frame >= K equals (checked here)
  parakeet-{80,128}__CLIP.npy      ParakeetFeatureExtractor, [T, n_mels]
  parakeet-128__batch.npy          one batched call on (speech_a, speech_b), [2, T, n_mels]
  nemo-legacy-{80,128}__CLIP.npy   torch float64 reference of NeMo < 2.5 (fbank_ref.py), [T, n_mels]
  melfb__{whisper,parakeet}-128.npy  the extractors' own filterbanks, [n_mels, n_freq] float32
  manifest.json                    shapes, valid frame counts, versions, and the
                                   max |HF - fbank_ref| per golden (a cross-check)

ParakeetFeatureExtractor imports librosa (and transformers may look for soxr);
where they are missing, the stand-ins in scripts/golden/fbank_stubs are put on
sys.path: their librosa.filters.mel builds the Slaney filterbank with HF's own
transformers.audio_utils.mel_filter_bank.
"""

import argparse
import importlib.util
import inspect
import json
import os
import sys
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
STUBS = os.path.join(HERE, "fbank_stubs")
if importlib.util.find_spec("librosa") is None or importlib.util.find_spec("soxr") is None:
    sys.path.insert(0, STUBS)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import ParakeetFeatureExtractor, WhisperFeatureExtractor  # noqa: E402

import fbank_ref  # noqa: E402

SR = 16000


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != SR or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit(f"{path}: want 16 kHz mono 16-bit PCM")
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


def whisper_np_path(fe, x):
    """The numpy path of WhisperFeatureExtractor on one clip -> [n_mels, T]."""
    fn = fe._np_extract_fbank_features
    params = inspect.signature(fn).parameters
    batch = np.asarray([x], dtype=np.float32)
    out = fn(batch, "cpu") if "device" in params else fn(batch)
    return np.asarray(out[0], dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", default=os.path.join(HERE, "..", "..", "plugins", "fbank", "testdata"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    clips = {}
    for name in sorted(os.listdir(args.clips)):
        if name.endswith(".wav"):
            clips[name[:-4]] = read_wav(os.path.join(args.clips, name))
    manifest = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "librosa_stub": STUBS in sys.path,
        "clips": {k: len(v) for k, v in clips.items()},
        "goldens": {},
    }

    def save(name, arr, **meta):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        np.save(os.path.join(args.out, name + ".npy"), arr)
        manifest["goldens"][name] = dict(shape=list(arr.shape), **meta)
        print(f"{name}: {arr.shape} {meta}", flush=True)

    def ref_diff(preset, x, got, time_major):
        ref, valid = fbank_ref.fbank(x, fbank_ref.preset(preset))
        if time_major:
            ref = ref.T
        return float(np.abs(ref - got).max()), valid

    for mels in (80, 128):
        preset = f"whisper-{mels}"
        fe = WhisperFeatureExtractor(feature_size=mels)
        if mels == 128:
            save("melfb__" + preset, np.asarray(fe.mel_filters).T)
        for clip, x in clips.items():
            feats = fe(x, sampling_rate=SR, padding="longest", return_tensors="np").input_features[0]
            d, valid = ref_diff(preset, x, feats, False)
            assert feats.shape == (mels, len(x) // 160), feats.shape
            save(f"{preset}__{clip}", feats, frames=int(feats.shape[1]), max_diff_ref=d)
            npf = whisper_np_path(fe, x)
            save(f"{preset}__{clip}__np", npf, frames=int(npf.shape[1]),
                 max_diff_torch_path=float(np.abs(npf - feats).max()))
        if mels == 128:
            for clip in ("speech_a", "speech_b"):
                x = clips[clip]
                full = fe(x, sampling_rate=SR, return_tensors="np").input_features[0]
                assert full.shape == (mels, 3000), full.shape
                k = len(x) // 160 + 3
                tail = full[:, k:]
                assert np.array_equal(tail, np.repeat(tail[:, :1], tail.shape[1], axis=1)), "tail not constant"
                padded = np.zeros(30 * SR, dtype=np.float32)
                padded[: len(x)] = x
                d, _ = ref_diff(preset, padded, full, False)
                save(f"{preset}-pad30__{clip}", full[:, :k], frames=3000, head=k, max_diff_ref=d)
                save(f"{preset}-pad30__{clip}__tail", tail[:, 0])

    for mels in (80, 128):
        preset = f"parakeet-{mels}"
        fe = ParakeetFeatureExtractor(feature_size=mels)
        if mels == 128:
            save("melfb__" + preset, np.asarray(fe.mel_filters))
        for clip, x in clips.items():
            out = fe(x, sampling_rate=SR, return_tensors="np", return_attention_mask=True)
            feats = out.input_features[0]
            valid = int(np.asarray(out.attention_mask[0]).sum())
            d, ref_valid = ref_diff(preset, x, feats, True)
            assert valid == ref_valid, (valid, ref_valid)
            save(f"{preset}__{clip}", feats, frames=int(feats.shape[0]), valid=valid, max_diff_ref=d)
        if mels == 128:
            xa, xb = clips["speech_a"], clips["speech_b"]
            out = fe([xa, xb], sampling_rate=SR, return_tensors="np", return_attention_mask=True)
            lengths = [int(v) for v in np.asarray(out.attention_mask).sum(axis=1)]
            save(f"{preset}__batch", out.input_features, valid=lengths, samples=[len(xa), len(xb)])

    for mels in (80, 128):
        preset = f"nemo-legacy-{mels}"
        for clip, x in clips.items():
            if len(x) <= 256:
                continue  # reflect pad needs more samples than n_fft/2
            feats, valid = fbank_ref.fbank(x, fbank_ref.preset(preset))
            save(f"{preset}__{clip}", feats.T, frames=int(feats.shape[1]), valid=valid)

    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
