#!/usr/bin/env python3
"""verify_features.py: check features.Parakeet128 against HF transformers'
ParakeetFeatureExtractor(feature_size=128) on a padded batch of clips of
different lengths (espeak-ng speech when ESPEAK_NG works, plus noise and a
tone), and print the max |diff| over all frames and the lengths check.

HF builds its mel filters with librosa.filters.mel. Where librosa is not
installed (the GPU host), a stand-in librosa module is put on sys.path whose
filters.mel calls transformers.audio_utils.mel_filter_bank with Slaney norm and
Slaney scale (the same triangles, computed in float64, cast to float32); a
stand-in soxr is added too, since neither is used on this path.
Exit status 1 when max |diff| > --tol.
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import features  # noqa: E402

STANDIN_LIBROSA = '''
import numpy as np
__version__ = "0.11.0"
class filters:
    @staticmethod
    def mel(sr, n_fft, n_mels=128, fmin=0.0, fmax=None, norm="slaney", htk=False, dtype=np.float32):
        from transformers.audio_utils import mel_filter_bank  # lazy: audio_utils imports librosa
        fmax = sr / 2 if fmax is None else fmax
        fb = mel_filter_bank(num_frequency_bins=n_fft // 2 + 1, num_mel_filters=n_mels,
                             min_frequency=fmin, max_frequency=fmax, sampling_rate=sr,
                             norm="slaney", mel_scale="htk" if htk else "slaney")
        return fb.T.astype(dtype)
'''


def install_standins():
    d = tempfile.mkdtemp(prefix="standins")
    for name, body in (("librosa", STANDIN_LIBROSA), ("soxr", '__version__ = "0.5.0"\n')):
        try:
            __import__(name)
            continue
        except ImportError:
            pass
        os.makedirs(os.path.join(d, name))
        with open(os.path.join(d, name, "__init__.py"), "w") as f:
            f.write(body)
        info = os.path.join(d, f"{name}-{'0.11.0' if name == 'librosa' else '0.5.0'}.dist-info")
        os.makedirs(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {'0.11.0' if name == 'librosa' else '0.5.0'}\n")
        print(f"stand-in {name} at {d}")
    sys.path.insert(0, d)


def clips():
    rng = np.random.default_rng(0)
    out = []
    try:
        import synth
        from scipy.signal import resample_poly
        for text, v in (("the quick brown fox jumps over the lazy dog", "en-us"),
                        ("seven hundred and twelve people came", "en-gb-x-rp")):
            pcm = synth.espeak(text, v).astype(np.float32) / 32768
            out.append(resample_poly(pcm, 320, 441).astype(np.float32))
    except Exception as e:  # noqa: BLE001
        print(f"espeak-ng unavailable ({e}); using noise only")
    out.append((0.1 * rng.standard_normal(16000 * 3 + 77)).astype(np.float32))
    t = np.arange(12345) / 16000
    out.append((0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    install_standins()
    import transformers
    from transformers.models.parakeet import feature_extraction_parakeet as fep
    if not hasattr(fep, "librosa"):
        import librosa
        fep.librosa = librosa
    hf = fep.ParakeetFeatureExtractor(feature_size=128)
    xs = clips()
    ref = hf(xs, sampling_rate=16000, return_tensors="pt", return_attention_mask=True)
    rf = ref["input_features"].float()  # [B, T, 128]
    rl = ref["attention_mask"].sum(1)
    n = max(len(x) for x in xs)
    wave = torch.zeros(len(xs), n)
    for i, x in enumerate(xs):
        wave[i, :len(x)] = torch.from_numpy(x)
    lens = torch.tensor([len(x) for x in xs])
    ours, fl = features.Parakeet128()(wave, lens)
    ours = ours.transpose(1, 2)
    mel_diff = float(np.abs(hf.mel_filters.numpy() - features.slaney_mel_filters()).max())
    diff = float((ours - rf).abs().max())
    print(f"transformers {transformers.__version__} torch {torch.__version__}: clips {[len(x) for x in xs]}")
    print(f"shapes ours {tuple(ours.shape)} hf {tuple(rf.shape)}; lengths ours {fl.tolist()} hf {rl.tolist()}")
    print(f"mel filters max |diff| {mel_diff:.3g}; features max |diff| {diff:.3g} "
          f"(mean |diff| {float((ours - rf).abs().mean()):.3g})")
    ok = tuple(ours.shape) == tuple(rf.shape) and fl.tolist() == rl.tolist() and diff <= args.tol
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
