#!/usr/bin/env python3
"""Golden probabilities and segments for plugins/vad (Silero VAD v5).

Silero's published windowing, state and segmentation logic, re-implemented
from silero-vad's src/silero_vad/utils_vad.py (github.com/snakers4/silero-vad,
MIT, read at commit 806dcba, 2026-08-18):

  * OnnxWrapper.__init__ / __call__: a session with one intra-op and one
    inter-op thread; state f32 [2, 1, 128] zeros at the start; the context
    (64 samples at 16 kHz, 32 at 8 kHz) zeros at the start and then the
    last context samples of each model input; input = context ++ window;
    sr an int64 scalar.
  * get_speech_timestamps: windows of 512 (256) samples from the start of the
    clip, the last one zero-padded; the hysteresis loop over the
    probabilities; the final segment; the padding loop. speech_timestamps()
    below is that code with the model call taken out (it gets the
    probabilities), statement for statement.

Two parts, written to one JSON file:

  clips      every WAV given on the command line (16-bit mono, 8 or 16 kHz;
             int16 / 32768 as float32, exactly as runtime/audio decodes it):
             the per-window probabilities from the ONNX model (onnxruntime
             and numpy needed), and the segments (in samples) under each of
             CONFIGS.
  synthetic  seeded random probability sequences (k/256, stored as hex
             bytes in probs_u8) with random rules, and
             their segments: the segmentation alone, on inputs that reach
             every branch (max-speech splits both ways, gaps under 2 * pad,
             dropped speech). This part needs no package.

With --silero-utils PATH (a copy of Silero's utils_vad.py; it needs torch),
every result is also computed by Silero's own get_speech_timestamps (with its
OnnxWrapper for the clips, and a stand-in model that replays the
probabilities for the synthetic part) and must equal the re-implementation:
the probabilities bit for bit, the segments exactly. The JSON records whether
that check ran and what differed (the script then exits non-zero).

Usage:
  vad_golden.py --model silero_vad_v5.onnx --root REPO --out golden.json \
      [--silero-utils utils_vad.py] [--synthetic-only] CLIP.wav ...
(CLIP paths are relative to --root and recorded as given.)
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys
import types
import wave

# Rule sets the clips are segmented with, as get_speech_timestamps keywords
# (None: Silero's default for that keyword; max_speech_duration_s None = inf).
CONFIGS = {
    "default": {},
    "strict": {"threshold": 0.7, "neg_threshold": 0.4, "min_speech_duration_ms": 500},
    "split3s": {"max_speech_duration_s": 3.0},
    "split3s_legacy": {"max_speech_duration_s": 3.0, "use_max_poss_sil_at_max_speech": False},
    "split1s_legacy": {"max_speech_duration_s": 1.0, "use_max_poss_sil_at_max_speech": False},
    "wide_pad": {"min_silence_duration_ms": 40, "speech_pad_ms": 200},
    "no_pad": {"speech_pad_ms": 0, "min_silence_duration_ms": 300},
}

DEFAULTS = {
    "threshold": 0.5,
    "neg_threshold": None,
    "min_speech_duration_ms": 250,
    "max_speech_duration_s": None,
    "min_silence_duration_ms": 100,
    "speech_pad_ms": 30,
    "min_silence_at_max_speech": 98,
    "use_max_poss_sil_at_max_speech": True,
}


def window_of(sr):
    if sr == 16000:
        return 512, 64
    if sr == 8000:
        return 256, 32
    raise ValueError(f"sample rate {sr}: want 8000 or 16000")


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise ValueError(f"{path}: want 16-bit mono")
        sr, raw = w.getframerate(), w.readframes(w.getnframes())
    import numpy as np
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / np.float32(32768), sr


def speech_probs(session, pcm, sr):
    """get_speech_timestamps' window loop with OnnxWrapper.__call__ inlined."""
    import numpy as np
    win, ctx = window_of(sr)
    state = np.zeros((2, 1, 128), dtype=np.float32)
    context = np.zeros((1, ctx), dtype=np.float32)
    srt = np.array(sr, dtype=np.int64)
    probs = []
    for start in range(0, len(pcm), win):
        chunk = pcm[start:start + win]
        if len(chunk) < win:
            chunk = np.pad(chunk, (0, win - len(chunk)))
        x = np.concatenate([context, chunk[None, :]], axis=1).astype(np.float32)
        out, state = session.run(None, {"input": x, "state": state, "sr": srt})
        context = x[..., -ctx:]
        probs.append(float(out[0, 0]))  # .item(): the float32 widened exactly
    return probs


def speech_timestamps(probs, audio_length_samples, sampling_rate, threshold=0.5,
                      min_speech_duration_ms=250, max_speech_duration_s=None,
                      min_silence_duration_ms=100, speech_pad_ms=30, neg_threshold=None,
                      min_silence_at_max_speech=98, use_max_poss_sil_at_max_speech=True):
    """get_speech_timestamps after its model loop; segments in samples."""
    if max_speech_duration_s is None:
        max_speech_duration_s = float("inf")
    window_size_samples = 512 if sampling_rate == 16000 else 256
    min_speech_samples = sampling_rate * min_speech_duration_ms / 1000
    speech_pad_samples = sampling_rate * speech_pad_ms / 1000
    max_speech_samples = sampling_rate * max_speech_duration_s - window_size_samples - 2 * speech_pad_samples
    min_silence_samples = sampling_rate * min_silence_duration_ms / 1000
    min_silence_samples_at_max_speech = sampling_rate * min_silence_at_max_speech / 1000

    triggered = False
    speeches = []
    current_speech = {}
    if neg_threshold is None:
        neg_threshold = max(threshold - 0.15, 0.01)
    temp_end = 0
    prev_end = next_start = 0
    possible_ends = []

    for i, speech_prob in enumerate(probs):
        cur_sample = window_size_samples * i

        if (speech_prob >= threshold) and temp_end:
            sil_dur = cur_sample - temp_end
            if sil_dur > min_silence_samples_at_max_speech:
                possible_ends.append((temp_end, sil_dur))
            temp_end = 0
            if next_start < prev_end:
                next_start = cur_sample

        if (speech_prob >= threshold) and not triggered:
            triggered = True
            current_speech['start'] = cur_sample
            continue

        if triggered and (cur_sample - current_speech['start'] > max_speech_samples):
            if use_max_poss_sil_at_max_speech and possible_ends:
                prev_end, dur = max(possible_ends, key=lambda x: x[1])
                current_speech['end'] = prev_end
                speeches.append(current_speech)
                current_speech = {}
                next_start = prev_end + dur
                if next_start < prev_end + cur_sample:
                    current_speech['start'] = next_start
                else:
                    triggered = False
                prev_end = next_start = temp_end = 0
                possible_ends = []
            else:
                if prev_end:
                    current_speech['end'] = prev_end
                    speeches.append(current_speech)
                    current_speech = {}
                    if next_start < prev_end:
                        triggered = False
                    else:
                        current_speech['start'] = next_start
                    prev_end = next_start = temp_end = 0
                    possible_ends = []
                else:
                    current_speech['end'] = cur_sample
                    speeches.append(current_speech)
                    current_speech = {}
                    prev_end = next_start = temp_end = 0
                    triggered = False
                    possible_ends = []
                    continue

        if (speech_prob < neg_threshold) and triggered:
            if not temp_end:
                temp_end = cur_sample
            sil_dur_now = cur_sample - temp_end
            if not use_max_poss_sil_at_max_speech and sil_dur_now > min_silence_samples_at_max_speech:
                prev_end = temp_end
            if sil_dur_now < min_silence_samples:
                continue
            else:
                current_speech['end'] = temp_end
                if (current_speech['end'] - current_speech['start']) > min_speech_samples:
                    speeches.append(current_speech)
                current_speech = {}
                prev_end = next_start = temp_end = 0
                triggered = False
                possible_ends = []
                continue

    if current_speech and (audio_length_samples - current_speech['start']) > min_speech_samples:
        current_speech['end'] = audio_length_samples
        speeches.append(current_speech)

    for i, speech in enumerate(speeches):
        if i == 0:
            speech['start'] = int(max(0, speech['start'] - speech_pad_samples))
        if i != len(speeches) - 1:
            silence_duration = speeches[i + 1]['start'] - speech['end']
            if silence_duration < 2 * speech_pad_samples:
                speech['end'] += int(silence_duration // 2)
                speeches[i + 1]['start'] = int(max(0, speeches[i + 1]['start'] - silence_duration // 2))
            else:
                speech['end'] = int(min(audio_length_samples, speech['end'] + speech_pad_samples))
                speeches[i + 1]['start'] = int(max(0, speeches[i + 1]['start'] - speech_pad_samples))
        else:
            speech['end'] = int(min(audio_length_samples, speech['end'] + speech_pad_samples))
    return [[s['start'], s['end']] for s in speeches]


def synthetic_cases(n_cases, seed):
    """Random probability sequences (runs of speech, silence and in-between
    values) with random rules. Each probability is k/256 for a byte k (exact
    in float32, stored as hex; 128/256 hits the default threshold exactly)."""
    rng = random.Random(seed)
    cases = []
    for k in range(n_cases):
        sr = rng.choice([16000, 16000, 8000])
        win, _ = window_of(sr)
        q = []
        target = rng.randint(1, 600)
        while len(q) < target:
            kind = rng.choices(["speech", "silence", "between"], [4, 4, 1])[0]
            lo, hi = {"speech": (140, 255), "silence": (0, 77), "between": (77, 154)}[kind]
            for _ in range(rng.choice([1, 2, 3, rng.randint(1, 15), rng.randint(5, 120)])):
                q.append(rng.randint(lo, hi))
        q = q[:target]
        rules = {
            "threshold": rng.choice([0.5, 0.5, 0.4, 0.7]),
            "min_speech_duration_ms": rng.choice([0, 100, 250, 250, 500]),
            "min_silence_duration_ms": rng.choice([0, 30, 100, 100, 300]),
            "speech_pad_ms": rng.choice([0, 30, 30, 60, 200]),
            "min_silence_at_max_speech": rng.choice([98, 98, 30, 200]),
            "use_max_poss_sil_at_max_speech": rng.choice([True, True, False]),
        }
        if rng.random() < 0.3:
            rules["neg_threshold"] = rng.choice([0.2, 0.3, rules["threshold"]])
        if rng.random() < 0.6:
            rules["max_speech_duration_s"] = rng.choice([1.0, 1.5, 2.0, 3.0, 5.0])
        n = (len(q) - 1) * win + rng.randint(1, win)
        cases.append({"name": f"synthetic_{k:03d}", "sample_rate": sr, "samples": n,
                      "probs_u8": bytes(q).hex(), "probs": [v / 256 for v in q], "rules": rules})
    return cases


def load_silero(path):
    """Silero's utils_vad.py as a module; torchaudio (unused by the functions
    called here) is stood in for when it cannot be imported."""
    try:
        import torchaudio  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure
        sys.modules["torchaudio"] = types.ModuleType("torchaudio")
    import importlib.util
    spec = importlib.util.spec_from_file_location("silero_utils_vad", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Replay:
    """A stand-in for Silero's model that replays given probabilities."""

    def __init__(self, probs):
        self.probs, self.i = probs, 0

    def reset_states(self):
        self.i = 0

    def __call__(self, chunk, sr):
        import torch
        p = self.probs[self.i]
        self.i += 1
        return torch.tensor([[p]], dtype=torch.float32)


class Recording:
    """Silero's OnnxWrapper, recording the probabilities it returns."""

    def __init__(self, wrapper):
        self.w, self.probs = wrapper, []

    def reset_states(self):
        self.w.reset_states()

    def __call__(self, chunk, sr):
        out = self.w(chunk, sr)
        self.probs.append(out.item())
        return out


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="silero_vad_v5.onnx")
    ap.add_argument("--root", default=".", help="directory the CLIP paths are relative to")
    ap.add_argument("--out", required=True)
    ap.add_argument("--silero-utils", help="Silero's utils_vad.py, to check the re-implementation against")
    ap.add_argument("--synthetic", type=int, default=100, help="number of synthetic cases")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--synthetic-only", action="store_true", help="skip the clips (no onnxruntime needed)")
    ap.add_argument("clips", nargs="*")
    args = ap.parse_args()

    silero = load_silero(args.silero_utils) if args.silero_utils else None
    doc = {
        "generator": "scripts/golden/vad_golden.py",
        "reference": "silero-vad src/silero_vad/utils_vad.py @ 806dcba (re-implemented)",
        "silero_crosscheck": silero is not None,
        "configs": CONFIGS,
        "defaults": DEFAULTS,
        "clips": [],
        "synthetic": [],
    }
    if silero is not None:
        doc["silero_utils_sha256"] = sha256(args.silero_utils)
    checks, mismatches = 0, []

    if not args.synthetic_only:
        import numpy as np
        import onnxruntime as ort
        doc["onnxruntime"] = ort.__version__
        doc["numpy"] = np.__version__
        doc["model_sha256"] = sha256(args.model)
        opts = ort.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"], sess_options=opts)
        wrapper = silero.OnnxWrapper(args.model, force_onnx_cpu=True) if silero else None
        for rel in args.clips:
            pcm, sr = read_wav(os.path.join(args.root, rel))
            probs = speech_probs(sess, pcm, sr)
            clip = {"path": rel, "sample_rate": sr, "samples": len(pcm), "probs": probs, "segments": {}}
            for name, cfg in CONFIGS.items():
                kw = dict(DEFAULTS, **cfg)
                clip["segments"][name] = speech_timestamps(probs, len(pcm), sr, **kw)
                if silero is not None:
                    import torch
                    rec = Recording(wrapper)
                    skw = dict(kw)
                    if skw["max_speech_duration_s"] is None:
                        skw["max_speech_duration_s"] = float("inf")
                    got = silero.get_speech_timestamps(torch.from_numpy(pcm.copy()), rec, sampling_rate=sr, **skw)
                    got = [[int(s["start"]), int(s["end"])] for s in got]
                    if rec.probs != probs:
                        diff = max(abs(a - b) for a, b in zip(rec.probs, probs)) if len(rec.probs) == len(probs) else "length"
                        mismatches.append(f"{rel} {name}: Silero's probabilities differ from the re-implementation's ({diff})")
                    if got != clip["segments"][name]:
                        mismatches.append(f"{rel} {name}: Silero gives {got}, the re-implementation {clip['segments'][name]}")
                    checks += 1
            print(f"{rel}: {sr} Hz, {len(pcm)} samples, {len(probs)} windows, max p {max(probs):.4f}, "
                  f"default segments {clip['segments']['default']}", file=sys.stderr)
            doc["clips"].append(clip)

    for case in synthetic_cases(args.synthetic, args.seed):
        kw = dict(DEFAULTS, **case["rules"])
        case["segments"] = speech_timestamps(case["probs"], case["samples"], case["sample_rate"], **kw)
        if silero is not None:
            import torch
            skw = dict(kw)
            if skw["max_speech_duration_s"] is None:
                skw["max_speech_duration_s"] = float("inf")
            got = silero.get_speech_timestamps(torch.zeros(case["samples"]), Replay(case["probs"]),
                                               sampling_rate=case["sample_rate"], **skw)
            got = [[int(s["start"]), int(s["end"])] for s in got]
            if got != case["segments"]:
                mismatches.append(f"{case['name']}: Silero gives {got}, the re-implementation {case['segments']}")
            checks += 1
        del case["probs"]  # kept as probs_u8
        doc["synthetic"].append(case)
    doc["silero_checks"] = checks
    doc["silero_mismatches"] = mismatches
    doc["python"] = sys.version.split()[0]
    if silero is not None:
        import torch
        doc["torch"] = torch.__version__

    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(doc['clips'])} clips x {len(CONFIGS)} configs, "
          f"{len(doc['synthetic'])} synthetic cases; {checks} checked against Silero's own code", file=sys.stderr)
    if mismatches:
        sys.exit("the re-implementation differs from Silero's own code:\n  " + "\n  ".join(mismatches))


if __name__ == "__main__":
    main()
