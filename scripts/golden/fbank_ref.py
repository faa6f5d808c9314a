"""Independent torch (float64) log-mel reference for plugins/fbank.

Used by scripts/golden/fbank.py for the nemo-legacy presets (no HF class
implements them) and, for every preset, as a second opinion next to the HF
extractors. It follows the same parameter names as the Go op.

nemo-legacy: NeMo's FilterbankFeatures before 2.5, as exported in the
nemo128.onnx preprocessors (onnx-asr / sherpa-onnx Parakeet exports):
preemphasis 0.97, torch.stft(center=True, pad_mode="reflect") with a
symmetric 400-point Hann centred in 512, |X|^2, Slaney mel, ln(x + 2^-24),
per-feature mean and unbiased std over seq_len = N // hop + 1 frames (every
STFT frame), (x - mean) / (std + 1e-5). The STFT runs in float64, as the
exports do.
"""

import math

import numpy as np
import torch

LOG_GUARD = 2.0**-24
STD_EPS = 1e-5


def hz_to_mel(f):
    """Slaney mel scale (linear below 1 kHz, logarithmic above)."""
    f = np.asarray(f, dtype=np.float64)
    mel = 3.0 * f / 200.0
    log_t = f >= 1000.0
    mel = np.where(log_t, 15.0 + np.log(np.maximum(f, 1e-30) / 1000.0) / (np.log(6.4) / 27.0), mel)
    return mel


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    f = 200.0 * m / 3.0
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), f)


def slaney_filterbank(sr, n_fft, n_mels, fmin, fmax):
    """[n_mels, n_fft//2+1] float64, Slaney scale and area norm (librosa/HF)."""
    n_freq = n_fft // 2 + 1
    fft_freqs = np.arange(n_freq, dtype=np.float64) * sr / n_fft
    mels = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    f = mel_to_hz(mels)
    fdiff = np.diff(f)
    ramps = f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0.0, np.minimum(lower, upper))
    return w * (2.0 / (f[2:] - f[:-2]))[:, None]


PRESETS = {
    "whisper": dict(n_fft=400, win_length=400, hop_length=160, pre_emphasis=0.0, pad_mode="reflect",
                    window_type="hann_periodic", normalize="per_utterance", valid_frames="stft"),
    "parakeet": dict(n_fft=512, win_length=400, hop_length=160, pre_emphasis=0.97, pad_mode="constant",
                     window_type="hann_symmetric", normalize="per_feature", valid_frames="floor"),
    "nemo-legacy": dict(n_fft=512, win_length=400, hop_length=160, pre_emphasis=0.97, pad_mode="reflect",
                        window_type="hann_symmetric", normalize="per_feature", valid_frames="stft"),
}


def preset(name):
    """Config for a preset name such as "parakeet-128"."""
    family, mels = name.rsplit("-", 1)
    cfg = dict(PRESETS[family])
    cfg.update(sample_rate=16000, num_mels=int(mels), f_min=0.0, f_max=8000.0)
    return cfg


def fbank(x, cfg):
    """Features of one clip (float32 numpy [N]) -> (features [n_mels, T] float64, valid frames)."""
    n = len(x)
    n_fft, win, hop = cfg["n_fft"], cfg["win_length"], cfg["hop_length"]
    xt = torch.from_numpy(np.asarray(x, dtype=np.float32)).to(torch.float64)
    if cfg["pre_emphasis"]:
        xt = torch.cat([xt[:1], xt[1:] - cfg["pre_emphasis"] * xt[:-1]])
    window = torch.hann_window(win, periodic=cfg["window_type"] == "hann_periodic", dtype=torch.float64)
    spec = torch.stft(xt, n_fft, hop_length=hop, win_length=win, window=window, center=True,
                      pad_mode=cfg["pad_mode"], return_complex=True)
    power = spec.real**2 + spec.imag**2  # [n_freq, F]
    fb = torch.from_numpy(slaney_filterbank(cfg["sample_rate"], n_fft, cfg["num_mels"], cfg["f_min"], cfg["f_max"]))
    mel = fb @ power  # [n_mels, F]
    frames = mel.shape[1]
    if cfg["normalize"] == "per_utterance":
        logm = torch.log10(torch.clamp(mel[:, : frames - 1], min=1e-10))
        logm = torch.maximum(logm, logm.max() - 8.0)
        return ((logm + 4.0) / 4.0).numpy(), frames - 1
    valid = {"stft": frames, "floor": (n + 2 * (n_fft // 2) - n_fft) // hop, "ceil": math.ceil(n / hop)}[cfg["valid_frames"]]
    logm = torch.log(mel + LOG_GUARD)
    v = logm[:, :valid]
    mean = v.mean(dim=1, keepdim=True)
    std = torch.sqrt(((v - mean) ** 2).sum(dim=1, keepdim=True) / (valid - 1))
    out = (logm - mean) / (std + STD_EPS)
    out[:, valid:] = 0.0
    return out.numpy(), valid
