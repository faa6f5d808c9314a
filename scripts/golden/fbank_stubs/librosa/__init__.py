"""Stand-in for librosa on hosts without it (see scripts/golden/fbank.py).

transformers' ParakeetFeatureExtractor only needs librosa.filters.mel with
norm="slaney"; this package provides exactly that, built with HF's own
transformers.audio_utils.mel_filter_bank, and nothing else.
"""

from . import filters  # noqa: F401

__version__ = "0.10.2"
