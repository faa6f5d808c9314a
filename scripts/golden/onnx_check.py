#!/usr/bin/env python3
"""Cross-check the runtime/onnx test goldens against peer implementations.

scripts/gen_test_models.py computes the goldens with numpy alone. This script
checks them, on a machine that has the peers (the GPU test host), against:
  - the Python onnxruntime package running the same .onnx files, and
  - HF transformers' Wav2Vec2FeatureExtractor(do_normalize=True), for the
    per-utterance normalisation the encoder op implements.
It prints one line per check and exits non-zero when a check fails.

Run from the repository root: python3 scripts/golden/onnx_check.py
"""
import os
import sys

import numpy as np

TD = os.path.join("runtime", "onnx", "testdata")
failed = []


def load(name):
    return np.load(os.path.join(TD, name))


def check(what, want, got, atol):
    d = float(np.abs(np.asarray(want, np.float64) - np.asarray(got, np.float64)).max())
    ok = d <= atol and np.asarray(want).shape == np.asarray(got).shape
    print(f"{'ok  ' if ok else 'FAIL'} {what}: max|diff| {d:.3e} (atol {atol:g})")
    if not ok:
        failed.append(what)


def with_onnxruntime():
    import onnxruntime as ort
    print("onnxruntime", ort.__version__, ort.get_available_providers())
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    nemo = ort.InferenceSession(os.path.join(TD, "nemo_ctc.onnx"), so, providers=["CPUExecutionProvider"])
    lp, ol = nemo.run(["logprobs", "encoded_lengths"],
                      {"audio_signal": load("nemo_features.npy"), "length": load("nemo_lengths.npy")})
    check("nemo log_probs vs onnxruntime", load("nemo_log_probs.npy"), lp, 1e-4)
    check("nemo lengths vs onnxruntime", load("nemo_out_lengths.npy"), ol, 0)
    w2v = ort.InferenceSession(os.path.join(TD, "w2v_ctc.onnx"), so, providers=["CPUExecutionProvider"])
    (lg,) = w2v.run(["logits"], {"input_values": load("w2v_normalized.npy")})
    check("w2v logits vs onnxruntime", load("w2v_logits.npy"), lg, 1e-4)
    w2vm = ort.InferenceSession(os.path.join(TD, "w2v_mask_ctc.onnx"), so, providers=["CPUExecutionProvider"])
    n = load("w2v_pcm.npy").shape[1]
    mask = (np.arange(n)[None, :] < load("w2v_lengths.npy")[:, None]).astype(np.int64)
    (lg,) = w2vm.run(["logits"], {"input_values": load("w2v_normalized.npy"), "attention_mask": mask})
    lg = lg.astype(np.float64)
    lg = lg - lg.max(-1, keepdims=True)
    lg = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
    check("w2v_mask log_probs vs onnxruntime", load("w2v_mask_log_probs.npy"), lg, 1e-4)


def with_transformers():
    import transformers
    from transformers import Wav2Vec2FeatureExtractor
    print("transformers", transformers.__version__)
    pcm, lengths = load("w2v_pcm.npy"), load("w2v_lengths.npy")
    fe = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                  do_normalize=True, return_attention_mask=True)
    items = [pcm[i, :n] for i, n in enumerate(lengths)]
    out = fe(items, sampling_rate=16000, padding=True, return_tensors="np")
    check("w2v per-utterance normalisation vs HF Wav2Vec2FeatureExtractor",
          load("w2v_normalized.npy"), out["input_values"], 2e-5)


def with_torch():
    import torch
    import torch.nn.functional as F
    print("torch", torch.__version__)
    lg = torch.from_numpy(load("w2v_logits.npy").astype(np.float64))
    check("w2v log_probs vs torch log_softmax", load("w2v_log_probs.npy"), F.log_softmax(lg, dim=-1).numpy(), 1e-6)


for fn in (with_onnxruntime, with_transformers, with_torch):
    try:
        fn()
    except ImportError as e:
        print(f"FAIL {fn.__name__}: {e}")
        failed.append(fn.__name__)

if failed:
    print("FAILED:", ", ".join(failed))
    sys.exit(1)
print("all checks passed")
