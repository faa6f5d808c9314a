#!/usr/bin/env python3
"""Tiny random-weight CTC models of each family edge detects, exported the way
each ecosystem exports them, with the framework's own log-probs as goldens.

Run on the GPU host (torch, transformers >= 5, sentencepiece, tokenizers,
onnx, onnxruntime; no NeMo, no network), from a folder holding this script,
the fbank_stubs folder, the test clips (*.wav, 16 kHz mono 16-bit) and a
training text (text.txt):

    python3 models.py --in DIR --out OUT

It writes OUT/ laid out as models/testdata/ in the repository:

  w2v/        HF Wav2Vec2ForCTC as optimum exports it: config.json,
              preprocessor_config.json (do_normalize), tokenizer_config.json,
              vocab.json, special_tokens_map.json, model.onnx
              (input_values [B, N] -> logits [B, T', V])
  parakeet/   HF ParakeetForCTC as onnx-community exports it: config.json,
              preprocessor_config.json (feature_size 80), tokenizer.json,
              tokenizer_config.json, onnx/model.onnx + onnx/model.onnx_data
              (external data; input_features [B, T, 80] + attention_mask -> logits)
  nemo/       a NeMo-style export: model.onnx (audio_signal [B, 128, T] + length
              -> logprobs, no lengths output), model_config.yaml (preprocessor,
              encoder, decoder, tokenizer sections as NeMo writes them) and the
              .nemo archive's tokenizer files (<hash>_tokenizer.model,
              <hash>_vocab.txt, <hash>_tokenizer.vocab)
  sherpa_fp16/ the same model exported in float16 (f16 in, f16 out), sherpa-style
  sherpa/     the nemo model re-packed the sherpa-onnx way: model.onnx with the
              custom metadata sherpa-onnx's export script writes, tokens.txt
  sherpa_int8/ model.int8.onnx (onnxruntime dynamic int8 quantisation) + tokens.txt
  spm/        unigram.model: a SentencePiece unigram model (identity normaliser) for tokenizer tests
  golden/     FAMILY__CLIP.npy: the framework's log-probs [T', V] float32 on each clip
              (torch fp32 on the CPU from the HF feature extractor's input; for
              fp16/int8, onnxruntime on the same input), FAMILY__CLIP__ort.npy:
              python onnxruntime on the same input (the export's own parity),
              parakeet__CLIP__features.npy / nemo__CLIP__features.npy: HF features,
              golden.json: greedy texts and token ids, word times from
              torchaudio-style forced alignment, versions, max diffs;
              tokenizers.json: sentencepiece / tokenizers ids of sample texts
  log.txt

Every family runs in its own try block: one that fails is logged and the rest
still come back. Weights are seeded (torch.manual_seed).
"""

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import traceback
import wave

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--in", dest="inp", required=True)
ap.add_argument("--out", required=True)
args = ap.parse_args()
IN, OUT = args.inp, args.out
os.makedirs(OUT, exist_ok=True)
STUBS = os.path.join(IN, "fbank_stubs")
if importlib.util.find_spec("librosa") is None or importlib.util.find_spec("soxr") is None:
    sys.path.insert(0, STUBS)

import torch  # noqa: E402
import transformers  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import sentencepiece as spm  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
SR = 16000
GOLD = os.path.join(OUT, "golden")
os.makedirs(GOLD, exist_ok=True)
golden = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "onnx": onnx.__version__, "onnxruntime": ort.__version__,
                       "sentencepiece": spm.__version__ if hasattr(spm, "__version__") else "?"},
          "families": {}, "errors": {}}


def log(*a):
    print(*a, flush=True)


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == SR and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


CLIPS = {n[:-4]: read_wav(os.path.join(IN, n)) for n in sorted(os.listdir(IN)) if n.endswith(".wav")}
log("clips", {k: len(v) for k, v in CLIPS.items()})


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return np.ascontiguousarray(x - m - np.log(np.exp(x - m).sum(-1, keepdims=True)), dtype=np.float32)


def save(name, arr):
    np.save(os.path.join(GOLD, name + ".npy"), np.ascontiguousarray(arr, dtype=np.float32))


def maxdiff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def export(model, inputs, path, input_names, output_names, dynamic_axes, opset=17):
    """torch.onnx.export, the TorchScript exporter first, then dynamo."""
    errs = []
    for dynamo in (False, True):
        try:
            kw = dict(input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes,
                      opset_version=opset, do_constant_folding=True)
            if dynamo:
                kw["dynamo"] = True
                kw["external_data"] = False
            else:
                kw["dynamo"] = False
            torch.onnx.export(model, inputs, path, **kw)
            m = onnx.load(path)
            onnx.checker.check_model(m)
            log(f"exported {path} (dynamo={dynamo}): inputs",
                [(i.name, i.type.tensor_type.elem_type) for i in m.graph.input],
                "outputs", [(o.name, o.type.tensor_type.elem_type) for o in m.graph.output])
            return dynamo
        except Exception as e:  # noqa: BLE001
            errs.append(f"dynamo={dynamo}: {e!r}")
            log(f"export {path} dynamo={dynamo} failed: {e!r}")
    raise RuntimeError("; ".join(errs))


def ort_session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ctc_greedy(lp, blank):
    ids = lp.argmax(-1)
    out, prev = [], -1
    for t in ids:
        t = int(t)
        if t != prev and t != blank:
            out.append(t)
        prev = t
    return out


def forced_align_spans(lp, tokens, blank):
    """torchaudio.functional.forced_align + merge_tokens: (token, start, end) frames."""
    import torchaudio.functional as F
    if not tokens:
        return []
    ali, scores = F.forced_align(torch.from_numpy(np.ascontiguousarray(lp))[None], torch.tensor([tokens], dtype=torch.int32), blank=blank)
    spans = F.merge_tokens(ali[0], scores[0].exp(), blank=blank)
    return [(int(s.token), int(s.start), int(s.end)) for s in spans]


def word_times(spans, pieces, stride, mode):
    """Words from token spans the way each framework groups them: mode "delim"
    (a word delimiter token, wav2vec2's "|"), "spm" (▁ starts a word)."""
    words, cur = [], None
    for tok, s, e in spans:
        p = pieces[tok]
        if mode == "delim" and p == "|":
            if cur:
                words.append(cur)
            cur = None
            continue
        if mode == "spm" and p.startswith("\u2581"):
            if cur:
                words.append(cur)
            cur = None
            p = p[1:]
            if not p:
                continue
        if cur is None:
            cur = {"word": "", "start": s * stride, "end": e * stride}
        cur["word"] += p
        cur["end"] = e * stride
    if cur:
        words.append(cur)
    return words


def family(name):
    def deco(fn):
        try:
            log(f"=== {name}")
            fn()
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            log(tb)
            golden["errors"][name] = tb[-4000:]
        return fn
    return deco


TEXT = open(os.path.join(IN, "text.txt"), encoding="utf-8").read().split("\n")
TEXT = [t.strip().lower() for t in TEXT if t.strip()][:3000]
SPM_DIR = os.path.join(OUT, "spm")
os.makedirs(SPM_DIR, exist_ok=True)
with open("/tmp/spm_text.txt", "w", encoding="utf-8") as f:
    f.write("\n".join(TEXT) + "\n")


def train_spm(prefix, model_type, vocab, norm="nmt_nfkc"):
    spm.SentencePieceTrainer.train(normalization_rule_name=norm,
        input="/tmp/spm_text.txt", model_prefix=prefix, vocab_size=vocab, model_type=model_type,
        character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, hard_vocab_limit=False,
        num_threads=4, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


SAMPLE_TEXTS = ["the quick brown fox jumps over the lazy dog", "hello world", "a", "don't stop",
                "zebras quietly vex jumpy wizards", "caf\u00e9 na\u00efve r\u00e9sum\u00e9",
                "  leading and   trailing   spaces  ", "x y z", "abcdefghijklmnopqrstuvwxyz",
                "nine hundred ninety nine", "q"]
tok_golden = {"texts": SAMPLE_TEXTS}

# ------------------------------------------------------------------ SentencePiece models
HASH = "a1b2c3d4e5f64789abcdef0123456789_"
BPE_PREFIX = "/tmp/bpe64"
sp_bpe = train_spm(BPE_PREFIX, "bpe", 64)
sp_uni = train_spm("/tmp/uni64", "unigram", 64, "identity")
shutil.copy("/tmp/uni64.model", os.path.join(SPM_DIR, "unigram.model"))
for key, sp in (("bpe", sp_bpe), ("unigram", sp_uni)):
    tok_golden[key] = {"ids": [sp.encode(t) for t in SAMPLE_TEXTS],
                       "pieces": [sp.encode(t, out_type=str) for t in SAMPLE_TEXTS],
                       "vocab": [sp.id_to_piece(i) for i in range(sp.get_piece_size())]}
log("bpe vocab", sp_bpe.get_piece_size(), [sp_bpe.id_to_piece(i) for i in range(sp_bpe.get_piece_size())])
SPM_V = sp_bpe.get_piece_size()
PIECES = [sp_bpe.id_to_piece(i) for i in range(SPM_V)]


def parakeet_model(mels, vocab, blank):
    from transformers import ParakeetCTCConfig, ParakeetForCTC
    torch.manual_seed(1234 + mels)
    enc = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               conv_kernel_size=9, subsampling_factor=8, subsampling_conv_channels=16, num_mel_bins=mels,
               dropout=0.0, dropout_positions=0.0, layerdrop=0.0, activation_dropout=0.0, attention_dropout=0.0)
    cfg = ParakeetCTCConfig(vocab_size=vocab, pad_token_id=blank, encoder_config=enc)
    try:
        cfg._attn_implementation = "eager"
    except Exception:  # noqa: BLE001
        pass
    m = ParakeetForCTC(cfg).eval()
    with torch.no_grad():
        m.ctc_head.weight.mul_(12.0)
        m.ctc_head.bias[blank] += 0.3
    return m


def hf_parakeet_features(fe, x):
    out = fe(x, sampling_rate=SR, return_tensors="pt", return_attention_mask=True)
    return out.input_features, out.attention_mask


# ------------------------------------------------------------------ wav2vec2
@family("w2v")
def _w2v():
    from transformers import (Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor,
                              Wav2Vec2ForCTC, Wav2Vec2Processor)
    d = os.path.join(OUT, "w2v")
    os.makedirs(d, exist_ok=True)
    letters = list("ETAONIHSRDLUMWCFGYPBVK'XJQZ")
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4}
    for c in letters:
        vocab[c] = len(vocab)
    with open("/tmp/w2v_vocab.json", "w") as f:
        json.dump(vocab, f)
    tok = Wav2Vec2CTCTokenizer("/tmp/w2v_vocab.json", unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|")
    fe = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SR, padding_value=0.0, do_normalize=True,
                                  return_attention_mask=False)
    Wav2Vec2Processor(feature_extractor=fe, tokenizer=tok).save_pretrained(d)
    torch.manual_seed(42)
    cfg = Wav2Vec2Config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, conv_dim=(16,) * 7, num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=2, feat_extract_norm="group", do_stable_layer_norm=False,
                         hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
                         layerdrop=0.0, final_dropout=0.0, pad_token_id=0, ctc_loss_reduction="mean")
    model = Wav2Vec2ForCTC(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(4.0)
        model.lm_head.bias[0] += 1.0
        model.lm_head.bias[4] += 0.6  # "|": some word breaks
    model.config.save_pretrained(d)
    x0 = torch.from_numpy(fe(CLIPS[sorted(CLIPS)[0]], sampling_rate=SR, return_tensors="np").input_values)
    export(model, (x0,), os.path.join(d, "model.onnx"), ["input_values"], ["logits"],
           {"input_values": {0: "batch_size", 1: "sequence_length"}, "logits": {0: "batch_size", 1: "sequence_length"}})
    sess = ort_session(os.path.join(d, "model.onnx"))
    fam = {"clips": {}, "stride_samples": int(np.prod(cfg.conv_stride)), "blank": 0}
    pieces = [None] * len(vocab)
    for k, v in vocab.items():
        pieces[v] = k
    for clip, x in CLIPS.items():
        iv = fe(x, sampling_rate=SR, return_tensors="np").input_values
        with torch.no_grad():
            logits = model(torch.from_numpy(iv)).logits[0].numpy()
        lp = log_softmax(logits)
        lo = log_softmax(sess.run(["logits"], {"input_values": iv})[0][0])
        save(f"w2v__{clip}", lp)
        save(f"w2v__{clip}__ort", lo)
        ids = lp.argmax(-1)
        text = tok.decode(ids.tolist())
        toks = ctc_greedy(lp, 0)
        spans = forced_align_spans(lp, toks, 0)
        stride = cfg.inputs_to_logits_ratio / SR
        fam["clips"][clip] = {"frames": int(lp.shape[0]), "text": text, "tokens": toks,
                              "words": word_times(spans, pieces, stride, "delim"),
                              "max_diff_ort_torch": maxdiff(lp, lo)}
        log("w2v", clip, lp.shape, repr(text), "ort-torch", maxdiff(lp, lo))
    golden["families"]["w2v"] = fam


# ------------------------------------------------------------------ HF Parakeet
@family("parakeet")
def _parakeet():
    from transformers import ParakeetFeatureExtractor
    from transformers.convert_slow_tokenizer import ParakeetConverter
    try:
        from transformers import ParakeetTokenizerFast as PTok
    except ImportError:
        from transformers import ParakeetTokenizer as PTok
    from tokenizers import AddedToken
    d = os.path.join(OUT, "parakeet")
    os.makedirs(os.path.join(d, "onnx"), exist_ok=True)
    blank = SPM_V
    conv = ParakeetConverter(BPE_PREFIX + ".model").converted()
    tok = PTok(tokenizer_object=conv, clean_up_tokenization_spaces=False)
    tok.add_tokens([AddedToken("<unk>", normalized=False, special=True), AddedToken("<pad>", normalized=False, special=True)])
    tok.add_special_tokens({"pad_token": AddedToken("<pad>", normalized=False, special=True),
                            "unk_token": AddedToken("<unk>", normalized=False, special=True)})
    fe = ParakeetFeatureExtractor(feature_size=80)
    try:
        from transformers import ParakeetProcessor
        ParakeetProcessor(feature_extractor=fe, tokenizer=tok).save_pretrained(d)
    except Exception as e:  # noqa: BLE001
        log("ParakeetProcessor.save_pretrained failed, saving parts:", repr(e))
        fe.save_pretrained(d)
        tok.save_pretrained(d)
    log("parakeet files", sorted(os.listdir(d)), "pad", tok.pad_token_id, "len", len(tok))
    tok_golden["tokenizer_json"] = {"ids": [tok.encode(t, add_special_tokens=False) for t in SAMPLE_TEXTS]}
    model = parakeet_model(80, SPM_V + 1, blank)
    model.config.save_pretrained(d)
    f0, m0 = hf_parakeet_features(fe, CLIPS[sorted(CLIPS)[0]])
    raw = os.path.join("/tmp", "parakeet_raw.onnx")
    export(model, (f0, m0.long()), raw, ["input_features", "attention_mask"], ["logits"],
           {"input_features": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}})
    m = onnx.load(raw)
    onnx.save_model(m, os.path.join(d, "onnx", "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.onnx_data", size_threshold=0)
    sess = ort_session(os.path.join(d, "onnx", "model.onnx"))
    in_types = {i.name: i.type for i in sess.get_inputs()}
    log("parakeet ort inputs", in_types)
    fam = {"clips": {}, "blank": blank, "stride_samples": 160 * 8}
    pieces = [tok.convert_ids_to_tokens(i) for i in range(SPM_V + 1)]
    for clip, x in CLIPS.items():
        feats, mask = hf_parakeet_features(fe, x)
        with torch.no_grad():
            logits = model(input_features=feats, attention_mask=mask).logits[0].numpy()
        lp = log_softmax(logits)
        mk = mask.numpy().astype(np.int64 if "int64" in in_types["attention_mask"] else np.bool_)
        lo = log_softmax(sess.run(["logits"], {"input_features": feats.numpy(), "attention_mask": mk})[0][0])
        save(f"parakeet__{clip}", lp)
        save(f"parakeet__{clip}__ort", lo)
        save(f"parakeet__{clip}__features", feats[0].numpy())
        toks = ctc_greedy(lp, blank)
        text = tok.decode(lp.argmax(-1).tolist(), skip_special_tokens=True)
        spans = forced_align_spans(lp, toks, blank)
        fam["clips"][clip] = {"frames": int(lp.shape[0]), "valid_features": int(mask.sum()), "text": text,
                              "tokens": toks, "words": word_times(spans, pieces, 0.08, "spm"),
                              "max_diff_ort_torch": maxdiff(lp, lo)}
        log("parakeet", clip, lp.shape, repr(text), "ort-torch", maxdiff(lp, lo))
    golden["families"]["parakeet"] = fam


# ------------------------------------------------------------------ NeMo-style export + sherpa re-pack
class NemoStyle(torch.nn.Module):
    """NeMo's EncDecCTCModel export signature around a Parakeet encoder:
    audio_signal [B, n_mels, T] + length [B] -> logprobs [B, T', V]."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, audio_signal, length):
        T = audio_signal.shape[2]
        mask = (torch.arange(T, device=audio_signal.device)[None, :] < length[:, None]).long()
        logits = self.inner(input_features=audio_signal.transpose(1, 2), attention_mask=mask).logits
        return torch.log_softmax(logits.float(), dim=-1).to(logits.dtype)


NEMO = {}


@family("nemo")
def _nemo():
    import yaml
    from transformers import ParakeetFeatureExtractor
    d = os.path.join(OUT, "nemo")
    os.makedirs(d, exist_ok=True)
    blank = SPM_V
    inner = parakeet_model(128, SPM_V + 1, blank)
    model = NemoStyle(inner).eval()
    fe = ParakeetFeatureExtractor(feature_size=128)
    NEMO.update(model=model, fe=fe, blank=blank)
    f0, m0 = hf_parakeet_features(fe, CLIPS[sorted(CLIPS)[0]])
    a0, l0 = f0.transpose(1, 2).contiguous(), m0.sum(-1).long()
    export(model, (a0, l0), os.path.join(d, "model.onnx"), ["audio_signal", "length"], ["logprobs"],
           {"audio_signal": {0: "B", 2: "T"}, "length": {0: "B"}, "logprobs": {0: "B", 1: "T_out"}})
    shutil.copy(BPE_PREFIX + ".model", os.path.join(d, HASH + "tokenizer.model"))
    shutil.copy(BPE_PREFIX + ".vocab", os.path.join(d, HASH + "tokenizer.vocab"))
    with open(os.path.join(d, HASH + "vocab.txt"), "w", encoding="utf-8") as f:
        for p in PIECES:  # NeMo's SentencePiece vocab.txt: ▁x -> x, x -> ##x
            f.write((p[1:] if p.startswith("\u2581") else "##" + p) + "\n")
    cfg = {
        "sample_rate": SR,
        "log_prediction": True,
        "tokenizer": {"dir": None, "type": "bpe", "model_path": "nemo:" + HASH + "tokenizer.model",
                      "vocab_path": "nemo:" + HASH + "vocab.txt", "spe_tokenizer_vocab": "nemo:" + HASH + "tokenizer.vocab"},
        "preprocessor": {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
                         "sample_rate": SR, "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01,
                         "window": "hann", "features": 128, "n_fft": 512, "log": True, "frame_splicing": 1,
                         "dither": 1.0e-05, "pad_to": 0, "pad_value": 0.0},
        "encoder": {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": 128, "feat_out": -1,
                    "n_layers": 2, "d_model": 32, "subsampling": "dw_striding", "subsampling_factor": 8,
                    "subsampling_conv_channels": 16, "causal_downsampling": False, "ff_expansion_factor": 2,
                    "self_attention_model": "rel_pos", "n_heads": 2, "conv_kernel_size": 9},
        "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": 32,
                    "num_classes": SPM_V, "vocabulary": PIECES},
        "target": "nemo.collections.asr.models.ctc_bpe_models.EncDecCTCModelBPE",
        "nemo_version": "2.5.0",
    }
    with open(os.path.join(d, "model_config.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, sort_keys=False, allow_unicode=True)
    sess = ort_session(os.path.join(d, "model.onnx"))
    fam = {"clips": {}, "blank": blank, "stride_samples": 160 * 8}
    pieces = PIECES + ["<blk>"]
    for clip, x in CLIPS.items():
        feats, mask = hf_parakeet_features(fe, x)
        a, L = feats.transpose(1, 2).contiguous(), mask.sum(-1).long()
        with torch.no_grad():
            lp = model(a, L)[0].numpy()
        lo = sess.run(["logprobs"], {"audio_signal": a.numpy(), "length": L.numpy()})[0][0]
        save(f"nemo__{clip}", lp)
        save(f"nemo__{clip}__ort", lo)
        save(f"nemo__{clip}__features", a[0].numpy())
        toks = ctc_greedy(lp, blank)
        text = sp_bpe.decode(toks)
        spans = forced_align_spans(lp, toks, blank)
        fam["clips"][clip] = {"frames": int(lp.shape[0]), "valid_features": int(L[0]), "text": text, "tokens": toks,
                              "words": word_times(spans, pieces, 0.08, "spm"), "max_diff_ort_torch": maxdiff(lp, lo)}
        log("nemo", clip, lp.shape, repr(text), "ort-torch", maxdiff(lp, lo))
    golden["families"]["nemo"] = fam


@family("sherpa")
def _sherpa():
    d = os.path.join(OUT, "sherpa")
    os.makedirs(d, exist_ok=True)
    m = onnx.load(os.path.join(OUT, "nemo", "model.onnx"))
    meta = {"vocab_size": str(SPM_V + 1), "normalize_type": "per_feature", "subsampling_factor": "8",
            "model_type": "EncDecCTCModelBPE", "version": "1", "model_author": "NeMo", "feat_dim": "128",
            "comment": "edge scripts/golden/models.py: a tiny random model re-packed like sherpa-onnx's export"}
    del m.metadata_props[:]
    for k, v in meta.items():
        e = m.metadata_props.add()
        e.key, e.value = k, v
    onnx.save(m, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "tokens.txt"), "w", encoding="utf-8") as f:
        for i, p in enumerate(PIECES):
            f.write(f"{p} {i}\n")
        f.write(f"<blk> {SPM_V}\n")
    # int8: onnxruntime's dynamic quantisation, as sherpa-onnx makes model.int8.onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    d8 = os.path.join(OUT, "sherpa_int8")
    os.makedirs(d8, exist_ok=True)
    quantize_dynamic(os.path.join(d, "model.onnx"), os.path.join(d8, "model.int8.onnx"), weight_type=QuantType.QUInt8)
    shutil.copy(os.path.join(d, "tokens.txt"), os.path.join(d8, "tokens.txt"))
    m8 = onnx.load(os.path.join(d8, "model.int8.onnx"))
    log("int8 metadata", {p.key: p.value for p in m8.metadata_props})
    sess = ort_session(os.path.join(d8, "model.int8.onnx"))
    fam = {"clips": {}, "blank": SPM_V}
    for clip, x in CLIPS.items():
        feats, mask = hf_parakeet_features(NEMO["fe"], x)
        a, L = feats.transpose(1, 2).contiguous(), mask.sum(-1).long()
        lo = sess.run(["logprobs"], {"audio_signal": a.numpy(), "length": L.numpy()})[0][0]
        save(f"sherpa_int8__{clip}", lo)
        ref = np.load(os.path.join(GOLD, f"nemo__{clip}.npy"))
        toks = ctc_greedy(lo, SPM_V)
        fam["clips"][clip] = {"frames": int(lo.shape[0]), "text": sp_bpe.decode(toks), "tokens": toks,
                              "max_diff_int8_fp32": maxdiff(lo, ref)}
        log("sherpa_int8", clip, repr(sp_bpe.decode(toks)), "int8-fp32", maxdiff(lo, ref))
    golden["families"]["sherpa_int8"] = fam


@family("sherpa_fp16")
def _nemo_fp16():
    d = os.path.join(OUT, "sherpa_fp16")
    os.makedirs(d, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = NemoStyle(parakeet_model(128, SPM_V + 1, SPM_V)).eval().to(dev).half()
    f0, m0 = hf_parakeet_features(NEMO["fe"], CLIPS[sorted(CLIPS)[0]])
    a0, l0 = f0.transpose(1, 2).contiguous().to(dev).half(), m0.sum(-1).long().to(dev)
    export(model, (a0, l0), os.path.join(d, "model.onnx"), ["audio_signal", "length"], ["logprobs"],
           {"audio_signal": {0: "B", 2: "T"}, "length": {0: "B"}, "logprobs": {0: "B", 1: "T_out"}})
    shutil.copy(os.path.join(OUT, "sherpa", "tokens.txt"), os.path.join(d, "tokens.txt"))
    m = onnx.load(os.path.join(d, "model.onnx"))
    for k, v in {"vocab_size": str(SPM_V + 1), "normalize_type": "per_feature", "subsampling_factor": "8",
                 "model_type": "EncDecCTCModelBPE"}.items():
        e = m.metadata_props.add()
        e.key, e.value = k, v
    onnx.save(m, os.path.join(d, "model.onnx"))
    sess = ort_session(os.path.join(d, "model.onnx"))
    log("fp16 ort io", [(i.name, i.type) for i in sess.get_inputs()], [(o.name, o.type) for o in sess.get_outputs()])
    fam = {"clips": {}, "blank": SPM_V}
    for clip, x in CLIPS.items():
        feats, mask = hf_parakeet_features(NEMO["fe"], x)
        a, L = feats.transpose(1, 2).contiguous(), mask.sum(-1).long()
        lo = sess.run(["logprobs"], {"audio_signal": a.numpy().astype(np.float16), "length": L.numpy()})[0][0]
        lo = np.asarray(lo, np.float32)
        save(f"sherpa_fp16__{clip}", lo)
        ref = np.load(os.path.join(GOLD, f"nemo__{clip}.npy"))
        toks = ctc_greedy(lo, SPM_V)
        fam["clips"][clip] = {"frames": int(lo.shape[0]), "text": sp_bpe.decode(toks), "tokens": toks,
                              "max_diff_fp16_fp32": maxdiff(lo, ref)}
        log("sherpa_fp16", clip, repr(sp_bpe.decode(toks)), "fp16-fp32", maxdiff(lo, ref))
    golden["families"]["sherpa_fp16"] = fam


with open(os.path.join(GOLD, "golden.json"), "w", encoding="utf-8") as f:
    json.dump(golden, f, indent=1, ensure_ascii=False)
with open(os.path.join(GOLD, "tokenizers.json"), "w", encoding="utf-8") as f:
    json.dump(tok_golden, f, indent=1, ensure_ascii=False)
for root, _, files in os.walk(OUT):
    for n in sorted(files):
        p = os.path.join(root, n)
        log(f"{os.path.getsize(p):9d} {os.path.relpath(p, OUT)} {hashlib.sha256(open(p, 'rb').read()).hexdigest()[:12]}")
log("errors:", list(golden["errors"]))
