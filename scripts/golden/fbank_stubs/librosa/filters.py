"""librosa.filters.mel stand-in: Slaney mel scale, Slaney area norm."""

import numpy as np


def mel(*, sr, n_fft, n_mels=128, fmin=0.0, fmax=None, htk=False, norm="slaney", dtype=np.float32):
    """Return the [n_mels, 1 + n_fft // 2] filterbank librosa would return.

    librosa computes in float64 and stores float32; so does this function.
    """
    from transformers.audio_utils import mel_filter_bank

    if htk or norm != "slaney":
        raise NotImplementedError("stand-in supports htk=False, norm='slaney' only")
    if fmax is None:
        fmax = sr / 2.0
    fb = mel_filter_bank(
        num_frequency_bins=1 + n_fft // 2,
        num_mel_filters=n_mels,
        min_frequency=fmin,
        max_frequency=fmax,
        sampling_rate=sr,
        norm="slaney",
        mel_scale="slaney",
    )
    return np.ascontiguousarray(fb.T).astype(dtype)
