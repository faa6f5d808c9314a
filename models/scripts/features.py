"""parakeet-128 log-mel features in torch: the front end of edge-char-ctc.

Exactly HF transformers' ParakeetFeatureExtractor (= NeMo >= 2.5), the
definition this project's fbank op implements as preset parakeet-128:

  x'[0] = x[0], x'[n] = x[n] - 0.97 x[n-1]           pre-emphasis (zero past N)
  STFT: n_fft 512, hop 160, symmetric Hann of 400 zero-padded centred in 512,
        centred frames with n_fft//2 zeros padded on both sides (not reflect)
  power |X|^2 (computed as (sqrt(re^2+im^2))^2, as HF does)
  mel: 128 Slaney-normalised Slaney-scale triangles over 0..8000 Hz (librosa's
       filters.mel(sr=16000, n_fft=512, n_mels=128, norm="slaney"), float32)
  ln(mel + 2^-24)
  per-feature mean and unbiased std over the L = floor(N/160) valid frames,
  (x - mean) / (std + 1e-5); frames >= L (the last of the floor(N/160)+1
  frames, and batch padding) set to 0.

Output: features f32 [B, 128, T] (mel_time layout), T = floor(max N/160) + 1,
and lengths i64 [B] = floor(N/160).
"""

import numpy as np
import torch

SAMPLE_RATE = 16000
N_FFT = 512
HOP = 160
WIN = 400
N_MELS = 128
PREEMPH = 0.97
LOG_GUARD = 2.0**-24
EPS = 1e-5


def _hz_to_mel(f):
    """Slaney mel scale (librosa htk=False): linear below 1 kHz, log above."""
    f = np.asarray(f, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = f / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, mels)


def _mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    f_sp = 200.0 / 3
    freqs = f_sp * m
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


def slaney_mel_filters(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=N_MELS, fmin=0.0, fmax=None):
    """[n_mels, n_fft//2+1] float32 filters, as librosa.filters.mel(norm="slaney")."""
    fmax = sr / 2 if fmax is None else fmax
    fftfreqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(fmin), _hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
    return (weights * enorm[:, None]).astype(np.float32)


class Parakeet128(torch.nn.Module):
    """Batch feature extractor; forward(wave f32 [B, N], lengths i64 [B])."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mel", torch.from_numpy(slaney_mel_filters()), persistent=False)
        self.register_buffer("window", torch.hann_window(WIN, periodic=False), persistent=False)

    @torch.no_grad()
    def forward(self, wave: torch.Tensor, lengths: torch.Tensor):
        wave = wave.float()
        n = wave.shape[1]
        t = torch.arange(n, device=wave.device)[None, :] < lengths[:, None]
        x = torch.cat([wave[:, :1], wave[:, 1:] - PREEMPH * wave[:, :-1]], dim=1).masked_fill(~t, 0.0)
        spec = torch.stft(x, N_FFT, hop_length=HOP, win_length=WIN, window=self.window,
                          center=True, pad_mode="constant", return_complex=True)
        mag = torch.view_as_real(spec)
        power = torch.sqrt(mag.pow(2).sum(-1)).pow(2)  # [B, F, T]
        mel = torch.log(torch.matmul(self.mel, power) + LOG_GUARD)  # [B, M, T]
        flen = torch.div(lengths, HOP, rounding_mode="floor")
        valid = (torch.arange(mel.shape[2], device=mel.device)[None, :] < flen[:, None]).unsqueeze(1)
        masked = mel * valid
        cnt = flen.clamp(min=1).to(mel.dtype)[:, None, None]
        mean = masked.sum(2, keepdim=True) / cnt
        var = ((masked - mean) ** 2 * valid).sum(2, keepdim=True) / (cnt - 1).clamp(min=1)
        feats = (mel - mean) / (var.sqrt() + EPS)
        return feats * valid, flen
