#!/usr/bin/python3
"""Generate the tiny CTC test models of runtime/onnx and their golden values.

Writes into runtime/onnx/testdata/ (run from the repository root):

  nemo_ctc.onnx  NeMo/sherpa-onnx CTC signature:
                 audio_signal f32 [B, 128, T] + length i64 [B]
                 -> logprobs f32 [B, T', 29] (log-softmax applied) + encoded_lengths i64 [B]
                 Conv1d(128->32, k3, s2, p1) ReLU, Conv1d(32->32, k3, s2, p1) ReLU,
                 Linear(32->29), LogSoftmax; T' = floor((T-1)/2)+1 applied twice.
  w2v_ctc.onnx   wav2vec2 signature: input_values f32 [B, N] -> logits f32 [B, T', 32]
                 Conv1d(1->16, k400, s320) GELU(tanh), Linear(16->32); T' = floor((N-400)/320)+1.
  w2v_mask_ctc.onnx  w2v_ctc.onnx with an attention_mask i64 [B, N] input
                 that shifts the masked samples by +5 before the conv.
  f64_ctc.onnx   the NeMo names with the wrong dtype (audio_signal f64), for the
                 I/O validation tests.
  nemo_*.npy, w2v_*.npy  inputs and the outputs numpy computes for them
                 (independently of ONNX Runtime, cross-checked against torch).
  tokens29.txt, tokens32.txt  vocabularies of the two widths.
  nemo/model.yaml, w2v/model.yaml  manifests of the two models.

Weights are deterministic (numpy RandomState seeds), so re-running the
script reproduces the committed files byte for byte.

Run: /usr/bin/python3 scripts/gen_test_models.py
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join("runtime", "onnx", "testdata")
OPSET = 13
N_MELS, HID, V_NEMO = 128, 32, 29
W2V_K, W2V_S, W2V_C, V_W2V = 400, 320, 16, 32


def init(name, arr):
    return numpy_helper.from_array(np.ascontiguousarray(arr), name)


def save_model(graph, name, metadata):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="edge/scripts/gen_test_models.py")
    model.ir_version = 7  # readable by every ONNX Runtime >= 1.8
    for k, v in metadata.items():
        e = model.metadata_props.add()
        e.key, e.value = k, v
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(OUT, name))


# ---------------------------------------------------------------- numpy reference

def conv1d(x, w, b, stride, pad):
    """x [B, Cin, T], w [Cout, Cin, K] -> [B, Cout, T'] (cross-correlation, like torch)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad)))
    k = w.shape[2]
    win = np.lib.stride_tricks.sliding_window_view(x, k, axis=2)[:, :, ::stride, :]  # [B,Cin,T',K]
    return np.einsum("bctk,ock->bot", win, w.astype(np.float64)) + b.astype(np.float64)[None, :, None]


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def nemo_ref(w, feats, lengths):
    h = np.maximum(conv1d(feats, w["w1"], w["b1"], 2, 1), 0)
    h = np.maximum(conv1d(h, w["w2"], w["b2"], 2, 1), 0)
    logits = h.transpose(0, 2, 1) @ w["w3"].astype(np.float64) + w["b3"]
    out_len = lengths.copy()
    for _ in range(2):
        out_len = (out_len - 1) // 2 + 1
    return log_softmax(logits).astype(np.float32), out_len.astype(np.int64)


def w2v_ref(w, x):
    h = gelu_tanh(conv1d(x[:, None, :], w["w1"], w["b1"], W2V_S, 0))
    return (h.transpose(0, 2, 1) @ w["w2"].astype(np.float64) + w["b2"]).astype(np.float32)


def per_utterance(x, lengths):
    """HF Wav2Vec2FeatureExtractor.zero_mean_unit_var_norm with padding_value 0."""
    out = np.zeros_like(x)
    for i, n in enumerate(lengths):
        v = x[i, :n].astype(np.float64)
        out[i, :n] = ((v - v.mean()) / np.sqrt(v.var() + 1e-7)).astype(np.float32)
    return out


def torch_check(nemo_w, w2v_w, feats, pcm):
    """Cross-check the numpy reference against torch's conv1d (when torch is there)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch not available: skipping the torch cross-check", file=sys.stderr)
        return
    t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))
    h = F.relu(F.conv1d(t(feats), t(nemo_w["w1"]), t(nemo_w["b1"]), stride=2, padding=1))
    h = F.relu(F.conv1d(h, t(nemo_w["w2"]), t(nemo_w["b2"]), stride=2, padding=1))
    lp = F.log_softmax(h.transpose(1, 2) @ t(nemo_w["w3"]) + t(nemo_w["b3"]), dim=-1).numpy()
    ref, _ = nemo_ref(nemo_w, feats, np.array([feats.shape[2]] * feats.shape[0]))
    d1 = np.abs(lp - ref).max()
    h = F.gelu(F.conv1d(t(pcm)[:, None], t(w2v_w["w1"]), t(w2v_w["b1"]), stride=W2V_S), approximate="tanh")
    lg = (h.transpose(1, 2) @ t(w2v_w["w2"]) + t(w2v_w["b2"])).numpy()
    d2 = np.abs(lg - w2v_ref(w2v_w, pcm)).max()
    print(f"torch cross-check: nemo max|diff| {d1:.2e}, w2v max|diff| {d2:.2e}")
    assert d1 < 1e-5 and d2 < 1e-5, (d1, d2)


# ---------------------------------------------------------------- models

def nemo_weights():
    r = np.random.RandomState(1234)
    return {
        "w1": (r.randn(HID, N_MELS, 3) / np.sqrt(N_MELS * 3)).astype(np.float32),
        "b1": (r.randn(HID) * 0.1).astype(np.float32),
        "w2": (r.randn(HID, HID, 3) / np.sqrt(HID * 3)).astype(np.float32),
        "b2": (r.randn(HID) * 0.1).astype(np.float32),
        "w3": (r.randn(HID, V_NEMO) * 0.5).astype(np.float32),
        "b3": (r.randn(V_NEMO) * 0.1).astype(np.float32),
    }


def nemo_graph(w):
    one = init("one", np.array(1, np.int64))
    two = init("two", np.array(2, np.int64))
    nodes = [
        helper.make_node("Conv", ["audio_signal", "w1", "b1"], ["c1"], strides=[2], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Transpose", ["r2"], ["tr"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["tr", "w3"], ["mm"]),
        helper.make_node("Add", ["mm", "b3"], ["lin"]),
        helper.make_node("LogSoftmax", ["lin"], ["logprobs"], axis=-1),
    ]
    prev = "length"
    for i in range(2):  # floor((L - 1) / 2) + 1 per stride-2 conv (L >= 1)
        nodes += [
            helper.make_node("Sub", [prev, "one"], [f"ls{i}"]),
            helper.make_node("Div", [f"ls{i}", "two"], [f"ld{i}"]),
            helper.make_node("Add", [f"ld{i}", "one"], [f"la{i}" if i == 0 else "encoded_lengths"]),
        ]
        prev = f"la{i}"
    return helper.make_graph(
        nodes, "tiny_nemo_ctc",
        [helper.make_tensor_value_info("audio_signal", TensorProto.FLOAT, ["batch", N_MELS, "time"]),
         helper.make_tensor_value_info("length", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("logprobs", TensorProto.FLOAT, ["batch", "frames", V_NEMO]),
         helper.make_tensor_value_info("encoded_lengths", TensorProto.INT64, ["batch"])],
        [init(k, v) for k, v in w.items()] + [one, two])


def w2v_weights():
    r = np.random.RandomState(5678)
    return {
        "w1": (r.randn(W2V_C, 1, W2V_K) / np.sqrt(W2V_K)).astype(np.float32),
        "b1": (r.randn(W2V_C) * 0.1).astype(np.float32),
        "w2": (r.randn(W2V_C, V_W2V) * 0.7).astype(np.float32),
        "b2": (r.randn(V_W2V) * 0.1).astype(np.float32),
    }


def w2v_graph(w):
    consts = {
        "axes1": np.array([1], np.int64),
        "half": np.array(0.5, np.float32), "onef": np.array(1.0, np.float32),
        "cubic": np.array(0.044715, np.float32), "three": np.array(3.0, np.float32),
        "sqrt2pi": np.array(np.sqrt(2 / np.pi), np.float32),
    }
    mk = helper.make_node
    nodes = [
        mk("Unsqueeze", ["input_values", "axes1"], ["x3"]),
        mk("Conv", ["x3", "w1", "b1"], ["c1"], strides=[W2V_S], kernel_shape=[W2V_K]),
        # GELU, tanh approximation (Gelu is not an opset-13 op).
        mk("Pow", ["c1", "three"], ["cube"]), mk("Mul", ["cube", "cubic"], ["cm"]),
        mk("Add", ["c1", "cm"], ["inner"]), mk("Mul", ["inner", "sqrt2pi"], ["scaled"]),
        mk("Tanh", ["scaled"], ["th"]), mk("Add", ["th", "onef"], ["th1"]),
        mk("Mul", ["c1", "th1"], ["xm"]), mk("Mul", ["xm", "half"], ["g"]),
        mk("Transpose", ["g"], ["tr"], perm=[0, 2, 1]),
        mk("MatMul", ["tr", "w2"], ["mm"]),
        mk("Add", ["mm", "b2"], ["logits"]),
    ]
    return helper.make_graph(
        nodes, "tiny_wav2vec2_ctc",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "frames", V_W2V])],
        [init(k, v) for k, v in w.items()] + [init(k, v) for k, v in consts.items()])


def w2v_mask_graph(w):
    """w2v_graph behind input_values + 5 * (1 - attention_mask): the padding
    the mask marks is shifted, so a wrong mask changes the output."""
    g = w2v_graph(w)
    g.name = "tiny_wav2vec2_ctc_mask"
    for n in g.node:
        for i, x in enumerate(n.input):
            if x == "input_values":
                n.input[i] = "masked"
    pre = [
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["onef", "maskf"], ["inv"]),
        helper.make_node("Mul", ["inv", "five"], ["shift"]),
        helper.make_node("Add", ["input_values", "shift"], ["masked"]),
    ]
    nodes = pre + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.append(init("five", np.array(5.0, np.float32)))
    g.input.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "samples"]))
    return g


def f64_graph():
    nodes = [
        helper.make_node("Cast", ["audio_signal"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["f"], ["tr"], perm=[0, 2, 1]),
        helper.make_node("LogSoftmax", ["tr"], ["logprobs"], axis=-1),
        helper.make_node("Identity", ["length"], ["encoded_lengths"]),
    ]
    return helper.make_graph(
        nodes, "f64_input",
        [helper.make_tensor_value_info("audio_signal", TensorProto.DOUBLE, ["batch", N_MELS, "time"]),
         helper.make_tensor_value_info("length", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("logprobs", TensorProto.FLOAT, ["batch", "time", N_MELS]),
         helper.make_tensor_value_info("encoded_lengths", TensorProto.INT64, ["batch"])], [])


def write_tokens(name, n):
    letters = ["▁"] + [chr(ord("a") + i) for i in range(26)] + ["'"]
    syms = ["<blk>"] + letters + [f"<x{i}>" for i in range(n)]
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        for i, s in enumerate(syms[:n]):
            f.write(f"{s} {i}\n")


MANIFESTS = {
    "nemo": """name: tiny-nemo-ctc
sample_rate: 16000
frontend: {preset: parakeet-128, layout: mel_time}
normalize: none
encoder:
  file: ../nemo_ctc.onnx
  inputs:  {features: audio_signal, lengths: length}
  outputs: {log_probs: logprobs, lengths: encoded_lengths}
vocabulary: ../tokens29.txt
blank_id: 0
frame_stride: 0.04
word_delimiter: "▁"
""",
    "w2v_mask": """name: tiny-wav2vec2-ctc-mask
sample_rate: 16000
normalize: per_utterance
encoder:
  file: ../w2v_mask_ctc.onnx
  inputs:  {pcm: input_values, attention_mask: attention_mask}
  outputs: {logits: logits}
vocabulary: ../tokens32.txt
frame_stride: 0.02
word_delimiter: "\u2581"
""",
    "w2v": """name: tiny-wav2vec2-ctc
sample_rate: 16000
normalize: per_utterance
encoder:
  file: ../w2v_ctc.onnx
  inputs:  {pcm: input_values}
  outputs: {logits: logits}
vocabulary: ../tokens32.txt
blank_id: 0
frame_stride: 0.02
word_delimiter: "▁"
""",
}


def write_manifests():
    for name, text in MANIFESTS.items():
        os.makedirs(os.path.join(OUT, name), exist_ok=True)
        with open(os.path.join(OUT, name, "model.yaml"), "w", encoding="utf-8") as f:
            f.write(text)


def main():
    os.makedirs(OUT, exist_ok=True)
    nw, ww = nemo_weights(), w2v_weights()
    save_model(nemo_graph(nw), "nemo_ctc.onnx",
               {"model_type": "EncDecCTCModel", "vocab_size": str(V_NEMO), "subsampling_factor": "4"})
    save_model(w2v_graph(ww), "w2v_ctc.onnx", {"model_type": "wav2vec2"})
    save_model(w2v_mask_graph(ww), "w2v_mask_ctc.onnx", {"model_type": "wav2vec2"})
    save_model(f64_graph(), "f64_ctc.onnx", {})
    write_tokens("tokens29.txt", V_NEMO)
    write_tokens("tokens32.txt", V_W2V)
    write_manifests()

    r = np.random.RandomState(42)
    # NeMo batch: two items, the second padded with zeros (as fbank pads).
    feats = r.randn(2, N_MELS, 50).astype(np.float32)
    flen = np.array([50, 37], np.int64)
    feats[1, :, 37:] = 0
    lp, olen = nemo_ref(nw, feats, flen)
    np.save(os.path.join(OUT, "nemo_features.npy"), feats)
    np.save(os.path.join(OUT, "nemo_lengths.npy"), flen)
    np.save(os.path.join(OUT, "nemo_log_probs.npy"), lp)
    np.save(os.path.join(OUT, "nemo_out_lengths.npy"), olen)

    # wav2vec2 batch: 1 s and 0.6875 s of a 16 kHz chirp + noise with an offset
    # and gain, so per-utterance normalisation matters; the second item padded.
    n = 16000
    tt = np.arange(n) / 16000.0
    pcm = np.stack([0.3 * np.sin(2 * np.pi * (200 + 400 * tt) * tt) + 0.05 * r.randn(n) + 0.1,
                    0.02 * np.sin(2 * np.pi * 330 * tt) + 0.01 * r.randn(n) - 0.03]).astype(np.float32)
    plen = np.array([16000, 11000], np.int64)
    pcm[1, 11000:] = 0
    norm = per_utterance(pcm, plen)
    logits = w2v_ref(ww, norm)
    np.save(os.path.join(OUT, "w2v_pcm.npy"), pcm)
    np.save(os.path.join(OUT, "w2v_lengths.npy"), plen)
    np.save(os.path.join(OUT, "w2v_normalized.npy"), norm)
    np.save(os.path.join(OUT, "w2v_logits.npy"), logits)
    np.save(os.path.join(OUT, "w2v_log_probs.npy"), log_softmax(logits.astype(np.float64)).astype(np.float32))
    mask = (np.arange(n)[None, :] < plen[:, None]).astype(np.float32)
    masked = w2v_ref(ww, norm + 5 * (1 - mask))
    np.save(os.path.join(OUT, "w2v_mask_log_probs.npy"), log_softmax(masked.astype(np.float64)).astype(np.float32))

    torch_check(nw, ww, feats, norm)
    print("wrote", ", ".join(sorted(os.listdir(OUT))))


if __name__ == "__main__":
    main()
