#!/usr/bin/python3
"""make_testclips.py OUTDIR: the end-to-end test clips of models/default/testdata.

Writes 16 kHz mono 16-bit WAV files, each with a JSON ground truth
{text, voice, words: [{word, start, end}], ...}:

  demo.wav      one natural sentence (5-8 s) spoken in one espeak-ng call; the
                JSON has the text only (word times of continuous speech are
                not known independently).
  words_N.wav   word-timed clips of connected speech: the sentence is spoken in
                one call of libespeak-ng (ctypes, synchronous mode), whose
                word events give the sample position where each word begins
                (the synthesiser's own timing). A word spans from its event to
                the next word's event, narrowed to the samples that are within
                40 dB of the clip's peak (so a pause or a stop closure at a word
                edge is not counted as part of the word); the last word ends at
                its last such sample. 0.3 s of silence is added before and after.

Resampling 22050 -> 16000 Hz: scipy.signal.resample_poly(x, 320, 441)
(polyphase, Kaiser window), computed in float64.
"""

import ctypes
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

# (words, voice, variant, speed wpm, pitch). Sentences of the held-out natural
# test split (never trained on), chosen among the first 40 of 7-11 words as
# those whose espeak-ng word events match their word count (19) and that the
# bundled model transcribes exactly (13 of those 19), spread over voices.
WORD_CLIPS = [
    ("add split points to a spanner database", "en-us", "m3", 165, 45),
    ("alias ranges will be allocated from this secondary range", "en", "m1", 155, 40),
    ("at runtime this throws an exception when called", "en-gb-x-rp", "m2", 165, 50),
    ("consult your compiler documentation for more details", "en-gb-x-rp", "f2", 160, 60),
]
LEVEL_DB = 40.0  # word edges: samples within this many dB of the clip's peak


class _Event(ctypes.Structure):
    """espeak_EVENT of espeak-ng 1.51 (speak_lib.h)."""
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
                ("text_position", ctypes.c_int), ("length", ctypes.c_int),
                ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", ctypes.c_char * 8)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))
_LIB = None
_EVENT_WORD, _OUTPUT_SYNCHRONOUS, _RATE, _PITCH, _POS_CHARACTER = 1, 2, 1, 3, 1


def espeak_words(text, voice, variant, speed, pitch):
    """int16 samples at 22050 Hz and [(text position, start ms)] of each word,
    from libespeak-ng's word events."""
    global _LIB
    if _LIB is None:  # initialise once: espeak-ng does not survive Terminate + Initialize
        _LIB = ctypes.CDLL("libespeak-ng.so.1")
        if _LIB.espeak_Initialize(_OUTPUT_SYNCHRONOUS, 0, None, 0) != synth.NATIVE_RATE:
            raise RuntimeError("espeak_Initialize failed")
    lib = _LIB
    chunks, words = [], []

    def cb(wav, n, ev):
        if n > 0:
            chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        i = 0
        while ev[i].type != 0:
            if ev[i].type == _EVENT_WORD and ev[i].text_position > 0:  # 0: not a word of the text
                words.append((ev[i].text_position, ev[i].audio_position))
            i += 1
        return 0

    keep = _CALLBACK(cb)
    lib.espeak_SetSynthCallback(keep)
    if lib.espeak_SetVoiceByName(f"{voice}+{variant}".encode()) != 0:
        raise RuntimeError(f"no espeak-ng voice {voice}+{variant}")
    lib.espeak_SetParameter(_RATE, speed, 0)
    lib.espeak_SetParameter(_PITCH, pitch, 0)
    b = text.encode()
    lib.espeak_Synth(b, len(b) + 1, 0, _POS_CHARACTER, 0, 0, None, None)
    lib.espeak_Synchronize()
    return np.concatenate(chunks), words


def to16k(pcm: np.ndarray) -> np.ndarray:
    return resample_poly(pcm.astype(np.float64) / 32768.0, 320, 441)


def word_spans(x: np.ndarray, starts_s, win=80):
    """[(start, end)] sample ranges of words that begin at starts_s seconds."""
    n = len(x) // win
    rms = np.sqrt((x[: n * win].reshape(n, win) ** 2).mean(1) + 1e-20)
    level = rms.max() * 10 ** (-LEVEL_DB / 20)
    loud = np.abs(x) > level
    bounds = [int(round(s * SR)) for s in starts_s] + [len(x)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        idx = np.nonzero(loud[a:b])[0]
        if len(idx) == 0:
            raise ValueError(f"no sound between {a / SR:.3f}s and {b / SR:.3f}s")
        out.append((a + idx[0], a + idx[-1] + 1))
    return out


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

    for k, (words, voice, variant, speed, pitch) in enumerate(WORD_CLIPS, 1):
        ws = words.split()
        pcm, events = espeak_words(words, voice, variant, speed, pitch)
        if [p for p, _ in events] != [words.index(w, sum(len(v) + 1 for v in ws[:i])) + 1 for i, w in enumerate(ws)]:
            raise SystemExit(f"clip {k}: word events {events} do not match the words of {words!r}")
        speech = to16k(pcm)
        spans = word_spans(speech, [ms / 1000 for _, ms in events])
        lead = int(0.3 * SR)
        x = np.concatenate([np.zeros(lead), speech, np.zeros(lead)])
        timing = [{"word": w, "start": round((lead + a) / SR, 5), "end": round((lead + b) / SR, 5)}
                  for w, (a, b) in zip(ws, spans)]
        name = f"words_{k}"
        write_wav(os.path.join(out, name + ".wav"), x)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"text": words, "voice": f"{voice}+{variant} s{speed} p{pitch}",
                       "duration": round(len(x) / SR, 5), "words": timing}, f, indent=1)
            f.write("\n")
        print(f"{name}.wav {len(x) / SR:.2f}s: {words}")


if __name__ == "__main__":
    main()
