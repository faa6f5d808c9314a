#!/usr/bin/python3
"""eval_everyday.py MODEL [SENTENCES]: WER/CER of the model (model.onnx or
model.pt, run in torch) on
everyday sentences written by hand for this check (data/everyday_sentences.txt:
vocabulary outside the manual-page prose of the natural training text), each
spoken by espeak-ng with a seeded random voice, speed and pitch from the
training distributions, resampled with scipy (320/441). Greedy CTC decoding.
Prints every error and the totals."""

import os
import random
import sys

import numpy as np
import torch
from scipy.signal import resample_poly

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import features  # noqa: E402
import model as M  # noqa: E402
import synth  # noqa: E402
import textnorm  # noqa: E402
import train  # noqa: E402


def main():
    ckpt = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "everyday_sentences.txt")
    refs = [textnorm.normalize(s) for s in open(path) if s.strip()]
    net = M.load_model(ckpt)
    fe = features.Parakeet128()
    rng = random.Random(7)
    hyps = []
    for ref in refs:
        voice, variant, speed, pitch, gap = synth.random_voice(rng)
        x = resample_poly(synth.espeak(ref, voice, variant, speed, pitch, gap) / 32768.0, 320, 441).astype(np.float32)
        f, fl = fe(torch.from_numpy(x)[None], torch.tensor([len(x)]))
        with torch.no_grad():
            lp, ol = net(f, fl)
        hyp = textnorm.decode(train.greedy(lp, ol)[0])
        hyps.append(hyp)
        if hyp != ref:
            print(f"{voice}+{variant} s{speed} p{pitch} g{gap}\n  REF: {ref}\n  HYP: {hyp}")
    res = train.score(refs, hyps)
    exact = sum(r == h for r, h in zip(refs, hyps))
    print(f"everyday: WER {100 * res['wer']:.2f}% CER {100 * res['cer']:.2f}% "
          f"({res['sentences']} sentences, {res['words']} words, {exact} exact)")


if __name__ == "__main__":
    main()
