#!/usr/bin/python3
"""make_testclips.py OUTDIR: the end-to-end test clips of models/default/testdata.

Writes 16 kHz mono 16-bit WAV files, each with a JSON ground truth
{text, voice, words: [{word, start, end}], ...}:

  demo.wav      one natural sentence (5-8 s) spoken in one espeak-ng call; the
                JSON has the text only (word times of continuous speech are
                not known independently).
  words_N.wav   word-timed clips: every word is synthesised on its own,
                resampled to 16 kHz, and trimmed to the samples between the
                first and last 5 ms window whose RMS is within 40 dB of the
                word's loudest window; the words are joined with the listed
                pauses (digital silence) after a lead-in. So each word's start
                and end (seconds) are exact by construction: they are the
                sample positions where its trimmed audio begins and ends.

Resampling 22050 -> 16000 Hz: scipy.signal.resample_poly(x, 320, 441)
(polyphase, Kaiser window), computed in float64.
"""

import json
import os
import sys
import wave

import numpy as np
from scipy.signal import resample_poly

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth  # noqa: E402
import textnorm  # noqa: E402

SR = 16000

DEMO = ("The quick brown fox jumps over the lazy dog while seven children "
        "watch from the garden.", "en-us", "", 165, 50)

# (words, voice, variant, speed, pitch, pauses in seconds between words)
WORD_CLIPS = [
    ("please call stella and ask her to bring these things", "en-us", "m3", 170, 45,
     [0.12, 0.25, 0.18, 0.30, 0.15, 0.22, 0.16, 0.28, 0.20]),
    ("thirty one green bottles were standing on the wall", "en-gb-x-rp", "f2", 160, 60,
     [0.20, 0.15, 0.30, 0.18, 0.25, 0.14, 0.22, 0.17]),
    ("the river flows quietly through the old stone bridge", "en-us", "f4", 180, 55,
     [0.16, 0.24, 0.19, 0.27, 0.15, 0.21, 0.18, 0.26]),
    ("nobody expected the weather to change so quickly", "en-gb", "m1", 150, 40,
     [0.22, 0.14, 0.29, 0.17, 0.20, 0.25, 0.18]),
]


def to16k(pcm: np.ndarray) -> np.ndarray:
    return resample_poly(pcm.astype(np.float64) / 32768.0, 320, 441)


def trim(x: np.ndarray, win=80, db=40.0) -> np.ndarray:
    n = len(x) // win
    rms = np.sqrt((x[: n * win].reshape(n, win) ** 2).mean(1) + 1e-20)
    on = np.nonzero(20 * np.log10(rms / rms.max()) > -db)[0]
    return x[on[0] * win:(on[-1] + 1) * win]


def write_wav(path, x):
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    text, voice, variant, speed, pitch = DEMO
    norm = textnorm.normalize(text)
    x = to16k(synth.espeak(norm, voice, variant, speed, pitch))
    write_wav(os.path.join(out, "demo.wav"), x)
    with open(os.path.join(out, "demo.json"), "w") as f:
        json.dump({"text": norm, "display_text": text, "voice": f"{voice} s{speed} p{pitch}",
                   "duration": round(len(x) / SR, 4)}, f, indent=1)
        f.write("\n")
    print(f"demo.wav {len(x) / SR:.2f}s: {norm}")

    for k, (words, voice, variant, speed, pitch, pauses) in enumerate(WORD_CLIPS, 1):
        ws = words.split()
        assert len(pauses) == len(ws) - 1
        lead, tail = 0.30, 0.30
        parts = [np.zeros(int(lead * SR))]
        pos = len(parts[0])
        timing = []
        for i, w in enumerate(ws):
            seg = trim(to16k(synth.espeak(w, voice, variant, speed, pitch)))
            timing.append({"word": w, "start": round(pos / SR, 5), "end": round((pos + len(seg)) / SR, 5)})
            parts.append(seg)
            pos += len(seg)
            gap = int(round((pauses[i] if i < len(pauses) else tail) * SR))
            parts.append(np.zeros(gap))
            pos += gap
        x = np.concatenate(parts)
        name = f"words_{k}"
        write_wav(os.path.join(out, name + ".wav"), x)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"text": words, "voice": f"{voice}+{variant} s{speed} p{pitch}",
                       "duration": round(len(x) / SR, 5), "words": timing}, f, indent=1)
            f.write("\n")
        print(f"{name}.wav {len(x) / SR:.2f}s: {words}")


if __name__ == "__main__":
    main()
