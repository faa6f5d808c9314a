#!/usr/bin/python3
"""check_testclips.py MODEL TESTDATA_DIR: transcribe and align the test clips
with the trained model run in torch (MODEL: model.onnx, whose weights are
loaded into model.CharCTC, or train.py's model.pt); a reference for the Go
end-to-end tests.

For every *.wav with a *.json ground truth: parakeet-128 features, the model,
greedy CTC decoding, then CTC forced alignment (Viterbi over the blank-
interleaved reference, as torchaudio.functional.forced_align) of the reference
text. A word spans from the first frame of its first letter to the end of the
last frame of its last letter (frame = 20 ms). Prints the hypothesis and, for
word-timed clips, each word's start/end error against the synthesiser's
timing. Exit status 1 if a transcript differs from the reference.
"""

import glob
import json
import os
import sys
import wave

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import features  # noqa: E402
import model as M  # noqa: E402
import textnorm  # noqa: E402

STRIDE = 0.02


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0


def forced_align(lp: np.ndarray, targets):
    """Frame labels [T] (token ids, 0 = blank) of the best CTC path."""
    t_len = lp.shape[0]
    ext = [0]
    for c in targets:
        ext += [c, 0]
    s_len = len(ext)
    neg = -1e30
    alpha = np.full((t_len, s_len), neg)
    back = np.zeros((t_len, s_len), np.int8)
    alpha[0, 0] = lp[0, ext[0]]
    alpha[0, 1] = lp[0, ext[1]]
    for t in range(1, t_len):
        for s in range(s_len):
            best, arg = alpha[t - 1, s], 0
            if s >= 1 and alpha[t - 1, s - 1] > best:
                best, arg = alpha[t - 1, s - 1], 1
            if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2] and alpha[t - 1, s - 2] > best:
                best, arg = alpha[t - 1, s - 2], 2
            alpha[t, s] = best + lp[t, ext[s]]
            back[t, s] = arg
    s = s_len - 1 if alpha[-1, s_len - 1] >= alpha[-1, s_len - 2] else s_len - 2
    path = []
    for t in range(t_len - 1, -1, -1):
        path.append(s)
        s -= back[t, s]
    return [ext[s] for s in reversed(path)], list(reversed(path))


def word_spans(states, n_chars_per_word):
    """(start, end) seconds of each word from the state path over ext."""
    # ext index of character k (0-based over the whole target) is 2k+1
    frames_of = {}
    for t, s in enumerate(states):
        if s % 2 == 1:
            frames_of.setdefault((s - 1) // 2, []).append(t)
    spans, k = [], 0
    for n in n_chars_per_word:
        first, last = frames_of[k][0], frames_of[k + n - 1][-1]
        spans.append((first * STRIDE, (last + 1) * STRIDE))
        k += n + 1  # skip the delimiter
    return spans


def main():
    ckpt, data = sys.argv[1], sys.argv[2]
    net = M.load_model(ckpt)
    fe = features.Parakeet128()
    bad, errs, starts, ends = 0, [], [], []
    for wav in sorted(glob.glob(os.path.join(data, "*.wav"))):
        truth = json.load(open(wav[:-4] + ".json"))
        x = torch.from_numpy(read_wav(wav))[None]
        f, fl = fe(x, torch.tensor([x.shape[1]]))
        with torch.no_grad():
            lp, ol = net(f, fl)
        lp = lp[0, :int(ol[0])].numpy()
        best = lp.argmax(-1)
        seq = [int(c) for i, c in enumerate(best) if c != 0 and (i == 0 or c != best[i - 1])]
        hyp = textnorm.decode(seq)
        ok = hyp == truth["text"]
        bad += not ok
        print(f"{os.path.basename(wav)}: {'OK ' if ok else 'BAD'} {hyp!r}")
        if "words" in truth:
            words = truth["text"].split()
            _, states = forced_align(lp, textnorm.encode(truth["text"]))
            for w, (s, e) in zip(truth["words"], word_spans(states, [len(x) for x in words])):
                ds, de = s - w["start"], e - w["end"]
                errs += [abs(ds), abs(de)]
                starts.append(ds)
                ends.append(de)
                print(f"   {w['word']:>12} truth {w['start']:6.3f}-{w['end']:6.3f} aligned {s:6.3f}-{e:6.3f} "
                      f"err {1000 * ds:+5.0f}/{1000 * de:+5.0f} ms")
    if errs:
        print(f"boundary |error|: mean {1000 * np.mean(errs):.0f} ms, max {1000 * np.max(errs):.0f} ms "
              f"over {len(errs)} boundaries; {sum(e <= 0.06 for e in errs)} within 60 ms; mean signed error "
              f"start {1000 * np.mean(starts):+.0f} ms, end {1000 * np.mean(ends):+.0f} ms")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
