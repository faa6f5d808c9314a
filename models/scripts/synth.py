"""Speech synthesis with espeak-ng for training and evaluation data.

espeak-ng is run as a program (one process per utterance, --stdout), so a
bundle extracted with make_espeak_bundle.sh works without installing it: set
ESPEAK_NG to the binary (default "espeak-ng" on PATH) and, for a bundle,
LD_LIBRARY_PATH and ESPEAK_DATA_PATH. Output is 16-bit mono at espeak-ng's
native 22050 Hz; callers resample.
"""

import os
import random
import struct
import subprocess

import numpy as np

import textnorm

ESPEAK = os.environ.get("ESPEAK_NG", "espeak-ng")
NATIVE_RATE = 22050

# Accents and voice variants (espeak-ng 1.51). The odd novelty variants
# (whisper, croak, robosoft, Demonic, ...) are left out.
VOICES = ["en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan",
          "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
VARIANTS = (["", "f1", "f2", "f3", "f4", "f5", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8",
             "klatt", "klatt2", "klatt3", "klatt4", "klatt6", "Alex", "Andy", "adam", "anika",
             "aunty", "belinda", "benjamin", "boris", "caleb", "david", "ed", "edward", "iven",
             "john", "linda", "max", "michel", "norbert", "paul", "quincy", "rob", "robert",
             "shelby", "steph", "travis", "victor", "zac"])


def parse_wav(data: bytes):
    """(int16 samples, sample rate) of a mono 16-bit PCM WAV byte string;
    tolerates the unknown (0 or 0xFFFFFFFF) sizes espeak-ng writes to a pipe."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("espeak-ng output is not a RIFF/WAVE stream")
    pos, rate = 12, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = pos + 8
        if cid == b"fmt ":
            fmt, ch, rate, _, _, bits = struct.unpack("<HHIIHH", data[body:body + 16])
            if fmt != 1 or ch != 1 or bits != 16:
                raise ValueError(f"unexpected WAV format {fmt}/{ch}ch/{bits}bit")
        elif cid == b"data":
            end = len(data) if size in (0, 0xFFFFFFFF) or body + size > len(data) else body + size
            pcm = data[body:end]
            return np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").copy(), rate
        pos = body + size + (size & 1)
    raise ValueError("no data chunk in espeak-ng output")


def espeak(text, voice="en-us", variant="", speed=175, pitch=50, gap=0):
    """int16 samples at 22050 Hz of text spoken by espeak-ng."""
    v = voice + ("+" + variant if variant else "")
    cmd = [ESPEAK, "-v", v, "-s", str(int(speed)), "-p", str(int(pitch)), "-g", str(int(gap)),
           "--stdout", text]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True).stdout
    pcm, rate = parse_wav(out)
    if rate != NATIVE_RATE:
        raise ValueError(f"espeak-ng wrote {rate} Hz, expected {NATIVE_RATE}")
    return pcm


def random_voice(rng: random.Random):
    """(voice, variant, speed wpm, pitch 0-99, word gap in 10 ms units)."""
    return (rng.choice(VOICES), rng.choice(VARIANTS), rng.randint(120, 240), rng.randint(20, 80),
            rng.choice([0, 0, 0, 0, 1, 2]))


def random_words(rng, words, lo=3, hi=14):
    return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))


def random_number_phrase(rng):
    n = rng.choice([rng.randint(0, 99), rng.randint(100, 9999), rng.randint(10_000, 10**9)])
    return textnorm.number_words(n)


def training_text(rng, natural, words):
    """A normalised training sentence: natural (50%), random words (35%),
    random words with spelled-out numbers (10%), or two natural sentences (5%)."""
    r = rng.random()
    if r < 0.50:
        return rng.choice(natural)
    if r < 0.85:
        return random_words(rng, words)
    if r < 0.95:
        parts = [random_words(rng, words, 1, 5), random_number_phrase(rng), random_words(rng, words, 0, 5)]
        return " ".join(p for p in parts if p)
    return rng.choice(natural) + " " + rng.choice(natural)


def job(args):
    """Pool worker: (seed, text) -> (text, voice string, int16 samples) or
    (text, voice, None) when espeak-ng failed."""
    seed, text = args
    rng = random.Random(seed)
    voice, variant, speed, pitch, gap = random_voice(rng)
    tag = f"{voice}+{variant or 'default'} s{speed} p{pitch} g{gap}"
    try:
        return text, tag, espeak(text, voice, variant, speed, pitch, gap)
    except (subprocess.CalledProcessError, ValueError, OSError):
        return text, tag, None
