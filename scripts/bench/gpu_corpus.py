#!/usr/bin/env python3
"""gpu_corpus.py: the PyTorch peer of `edge batch transcribe` on a GPU, and
the corpus both transcribe (run by scripts/bench/gpu_corpus.sh).

  gpu_corpus.py corpus OUT_DIR [--hours 1] [--seed 1]
      OUT_DIR/wav/NNNNN.wav: 1 to 4 bundled clips (models/default/testdata)
      joined by 0.3 s pauses, distinct files, about HOURS of audio in all;
      OUT_DIR/manifest.jsonl (NeMo: audio_filepath, duration, text).
  gpu_corpus.py peer --model DIR --manifest M --out JSON [--batch 32]
      [--arch d,ff,heads,layers] [--device cuda]
      The model's own torch code (models/scripts/model.py, weights loaded
      from DIR/model.onnx) on batches of the manifest's items, sorted by
      length: WAV read (stdlib wave + numpy), upload, parakeet-128 features
      in torch on the GPU (models/scripts/features.py, HF
      ParakeetFeatureExtractor's definition), the encoder, greedy CTC and
      torchaudio.functional.forced_align of the greedy tokens per item, words
      with times. Before timing it checks its log-probs against ONNX
      Runtime (CPU) on one clip: max abs diff within 1e-4 (TF32 off for the
      check). Writes per-stage seconds, hours of audio per second and WER.
  gpu_corpus.py report --peer JSON --edge-dir DIR --edge-summary FILE
      [--edge-stats FILE] --manifest M --name NAME
      One markdown row: hours of audio per second of both, their ratio,
      per-stage times, WER of both.

Needs numpy; peer needs torch, torchaudio, onnx, onnxruntime.
"""

import argparse
import json
import math
import os
import random
import sys
import time
import wave

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "models", "default", "testdata")
CLIPS = ["demo", "words_1", "words_2", "words_3", "words_4"]
SR = 16000


def log(*a):
    print("gpu_corpus:", *a, file=sys.stderr, flush=True)


def read_wav(path):
    """Mono 16-bit PCM WAV as float32 in [-1, 1)."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise ValueError(f"{path}: want mono 16-bit PCM, have {w.getnchannels()} channels of {8 * w.getsampwidth()} bits")
        if w.getframerate() != SR:
            raise ValueError(f"{path}: {w.getframerate()} Hz, want {SR}")
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return x.astype(np.float32) / 32768.0


def write_wav(path, x):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.clip(np.round(x * 32768.0), -32768, 32767).astype("<i2").tobytes())


def clip_text(name):
    with open(os.path.join(TESTDATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)["text"]


def cmd_corpus(a):
    rng = random.Random(a.seed)
    clips = {n: (read_wav(os.path.join(TESTDATA, n + ".wav")), clip_text(n)) for n in CLIPS}
    pause = np.zeros(int(0.3 * SR), np.float32)
    os.makedirs(os.path.join(a.out, "wav"), exist_ok=True)
    total, i = 0.0, 0
    with open(os.path.join(a.out, "manifest.jsonl"), "w", encoding="utf-8") as m:
        while total < a.hours * 3600:
            names = [rng.choice(CLIPS) for _ in range(rng.randint(1, 4))]
            parts = []
            for n in names:
                parts += [clips[n][0], pause]
            x = np.concatenate(parts[:-1])
            path = os.path.join(a.out, "wav", f"{i:05d}.wav")
            write_wav(path, x)
            dur = len(x) / SR
            m.write(json.dumps({"audio_filepath": path, "duration": round(dur, 3),
                                "text": " ".join(clips[n][1] for n in names)}) + "\n")
            total += dur
            i += 1
    log(f"corpus: {i} files, {total / 3600:.3f} h in {a.out}")


def read_manifest(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def wer_counts(refs, hyps):
    """Word edit distance summed over pairs, and the reference word count."""
    errs = words = 0
    for r, h in zip(refs, hyps):
        r, h = r.split(), h.split()
        prev = list(range(len(h) + 1))
        for i, rw in enumerate(r):
            cur = [i + 1] + [0] * len(h)
            for j, hw in enumerate(h):
                cur[j + 1] = min(prev[j] + (rw != hw), prev[j + 1] + 1, cur[j] + 1)
            prev = cur
        errs += prev[len(h)]
        words += len(r)
    return errs, words


def load_tokens(model_dir):
    toks = []
    with open(os.path.join(model_dir, "tokens.txt"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                p, i = line.rstrip("\n").rsplit(" ", 1)
                if int(i) != len(toks):
                    raise ValueError(f"{model_dir}/tokens.txt: id {i} out of order")
                toks.append(p)
    return toks


def words_from_spans(spans, pieces, stride):
    """Words from torchaudio token spans; "▁" is the word delimiter token."""
    words, cur = [], None
    for s in spans:
        p = pieces[int(s.token)]
        if p == "\u2581":
            if cur:
                words.append(cur)
            cur = None
            continue
        if cur is None:
            cur = {"word": "", "start": s.start * stride}
        cur["word"] += p
        cur["end"] = s.end * stride
    if cur:
        words.append(cur)
    return words


def cmd_peer(a):
    import torch
    import torchaudio.functional as TAF

    sys.path.insert(0, os.path.join(ROOT, "models", "scripts"))
    import features as FE  # noqa: E402
    import model as M  # noqa: E402

    dev = torch.device(a.device)
    onnx_path = os.path.join(a.model, "model.onnx")
    kw = {}
    if a.arch:
        d, ff, heads, layers = (int(v) for v in a.arch.split(","))
        kw = dict(d=d, ff=ff, heads=heads, layers=layers)
    net = M.CharCTC(**kw)
    t0 = time.perf_counter()
    M.load_onnx_weights(net, onnx_path)
    net = net.eval().to(dev)
    log(f"{a.model}: {M.count_params(net) / 1e6:.1f} M parameters loaded from {onnx_path} in {time.perf_counter() - t0:.1f} s")
    fe = FE.Parakeet128().to(dev)
    pieces = load_tokens(a.model)
    blank = pieces.index("<blk>") if "<blk>" in pieces else 0
    stride = 0.02

    # The check: torch (fp32, TF32 off) against ONNX Runtime CPU on one clip.
    import onnxruntime as ort

    x = read_wav(os.path.join(TESTDATA, "demo.wav"))
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    with torch.inference_mode():
        w = torch.from_numpy(x)[None].to(dev)
        feats, flen = fe(w, torch.tensor([len(x)], device=dev))
        lp_t, _ = net(feats, flen)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    so = ort.SessionOptions()
    so.intra_op_num_threads = 4
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    lp_o = sess.run(None, {"audio_signal": feats.cpu().numpy(), "length": flen.cpu().numpy()})[0]
    diff = float(np.abs(lp_t.cpu().numpy() - lp_o).max())
    check = {"max_abs_diff_vs_onnxruntime": diff, "tolerance": 1e-4, "ok": diff <= 1e-4}
    log(f"check: torch vs ONNX Runtime log-probs max abs diff {diff:.2e} ({'ok' if check['ok'] else 'FAIL'})")
    del sess

    items = read_manifest(a.manifest)
    order = sorted(range(len(items)), key=lambda i: items[i]["duration"])
    batches = [order[i:i + a.batch] for i in range(0, len(order), a.batch)]
    stages = {"read": 0.0, "upload": 0.0, "features": 0.0, "encoder": 0.0, "decode+align": 0.0}
    hyps = [""] * len(items)
    nwords = 0

    def run(measure):
        nonlocal nwords
        for b in batches:
            t = time.perf_counter()
            waves = [read_wav(items[i]["audio_filepath"]) for i in b]
            lens = np.array([len(w) for w in waves], np.int64)
            pad = np.zeros((len(b), int(lens.max())), np.float32)
            for k, w in enumerate(waves):
                pad[k, :len(w)] = w
            t1 = time.perf_counter()
            wt = torch.from_numpy(pad).to(dev, non_blocking=True)
            lt = torch.from_numpy(lens).to(dev)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            with torch.inference_mode():
                feats, flen = fe(wt, lt)
                torch.cuda.synchronize()
                t3 = time.perf_counter()
                lp, olen = net(feats, flen)
                torch.cuda.synchronize()
                t4 = time.perf_counter()
                best = lp.argmax(-1)
                olen_h = olen.tolist()
                for k, i in enumerate(b):
                    ids = torch.unique_consecutive(best[k, :olen_h[k]])
                    ids = ids[ids != blank]
                    words = []
                    if ids.numel() > 0:
                        ali, scores = TAF.forced_align(lp[k:k + 1, :olen_h[k]], ids[None].to(torch.int32), blank=blank)
                        spans = TAF.merge_tokens(ali[0], scores[0].exp(), blank=blank)
                        words = words_from_spans(spans, pieces, stride)
                    hyps[i] = " ".join(w["word"] for w in words)
                    if measure:
                        nwords += len(words)
                torch.cuda.synchronize()
            t5 = time.perf_counter()
            if measure:
                for key, v in zip(stages, (t1 - t, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                    stages[key] += v

    # Warm-up on the first batches (cuDNN autotuning, allocator), then the run.
    warm = batches
    batches = warm[:2]
    run(False)
    batches = warm
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run(True)
    wall = time.perf_counter() - t0
    audio = sum(it["duration"] for it in items)
    errs, words = wer_counts([it["text"] for it in items], hyps)
    res = {"model": a.model, "params": M.count_params(net), "items": len(items), "batch": a.batch,
           "audio_s": audio, "wall_s": wall, "hours_per_s": audio / 3600 / wall,
           "stages_s": stages, "wer": errs / max(words, 1), "words_out": nwords, "check": check,
           "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
           "torch": torch.__version__}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    log(f"peer: {audio / 3600:.3f} h in {wall:.2f} s = {res['hours_per_s']:.3f} h/s; WER {100 * res['wer']:.2f} %; "
        + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()))


def cmd_report(a):
    peer = json.load(open(a.peer))
    summary = None
    with open(a.edge_summary, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{") and '"wall_ns"' in line:
                summary = json.loads(line)
    if summary is None:
        sys.exit(f"{a.edge_summary}: no summary line with wall_ns (did edge batch fail?)")
    wall = summary["wall_ns"] / 1e9
    audio = summary["audio_ns"] / 1e9
    hyps = {}
    for n in sorted(os.listdir(a.edge_dir)):
        if n.startswith("transcribe.shard-") and n.endswith(".jsonl"):
            for r in read_manifest(os.path.join(a.edge_dir, n)):
                hyps[r["audio_filepath"]] = r.get("pred_text", "")
    items = read_manifest(a.manifest)
    errs, words = wer_counts([it["text"] for it in items], [hyps.get(os.path.abspath(it["audio_filepath"]), "") for it in items])
    stages = {}
    if a.edge_stats and os.path.exists(a.edge_stats):
        n = 0
        with open(a.edge_stats, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("{") and '"stages_ns"' in line:
                    st = json.loads(line)
                    n += 1
                    for k, v in (st.get("stages_ns") or {}).items():
                        stages[k] = stages.get(k, 0) + v / 1e9
        stages = {k: round(v, 3) for k, v in stages.items()}
        stages["files"] = n
    edge_hps = audio / 3600 / wall
    row = {"name": a.name, "params_m": round(peer["params"] / 1e6, 1), "audio_h": round(audio / 3600, 3),
           "edge_wall_s": round(wall, 2), "edge_h_per_s": round(edge_hps, 3),
           "torch_wall_s": round(peer["wall_s"], 2), "torch_h_per_s": round(peer["hours_per_s"], 3),
           "edge_over_torch": round(edge_hps / peer["hours_per_s"], 2),
           "edge_wer": round(100 * errs / max(words, 1), 2), "torch_wer": round(100 * peer["wer"], 2),
           "edge_failed": summary.get("failed"), "torch_stages_s": {k: round(v, 2) for k, v in peer["stages_s"].items()},
           "edge_stages_s (edge transcribe --stats, sequential subset)": stages, "check": peer["check"]}
    print(json.dumps(row))
    print(f"| {a.name} ({row['params_m']} M) | {row['audio_h']} h | {row['edge_h_per_s']} h/s ({row['edge_wall_s']} s) | "
          f"{row['torch_h_per_s']} h/s ({row['torch_wall_s']} s) | {row['edge_over_torch']}x | "
          f"{row['edge_wer']} % | {row['torch_wer']} % |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("out")
    c.add_argument("--hours", type=float, default=1.0)
    c.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("peer")
    p.add_argument("--model", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--arch", default="", help="d,ff,heads,layers of a larger export (export_large.py's flags)")
    p.add_argument("--device", default="cuda")
    r = sub.add_parser("report")
    r.add_argument("--peer", required=True)
    r.add_argument("--edge-dir", required=True)
    r.add_argument("--edge-summary", required=True)
    r.add_argument("--edge-stats", default="")
    r.add_argument("--manifest", required=True)
    r.add_argument("--name", required=True)
    a = ap.parse_args()
    if a.cmd == "peer" and a.batch < 1:
        sys.exit("--batch must be at least 1")
    {"corpus": cmd_corpus, "peer": cmd_peer, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
