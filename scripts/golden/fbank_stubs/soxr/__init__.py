"""Stand-in for soxr: importable, but resampling is not available (the golden
clips are already at the extractor's sampling rate)."""

__version__ = "0.5.0"


def resample(*args, **kwargs):
    raise NotImplementedError("soxr stand-in: resampling is not available")
