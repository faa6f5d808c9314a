#!/usr/bin/env python3
"""train.py: synthesise speech with espeak-ng, train edge-char-ctc, export it
to ONNX and evaluate it on held-out synthesised sentences. One run does all.

  python3 train.py --data TEXT_DIR --out OUT_DIR [--train-seconds 420] ...

TEXT_DIR is what build_corpus.py wrote. A process pool first synthesises the
training utterances (until --synth-utts or --synth-seconds), they are
resampled and kept on the device as fp16, then training runs for
--train-seconds of wall time with a learning-rate schedule that follows
elapsed time (5% warm-up, cosine to 2%). Every batch gets fresh noise and
SpecAugment masks. Writes to OUT_DIR: model.pt (state dict), model.onnx
(opset 17, dynamic batch and time), tokens.txt, eval.json (WER/CER per
held-out set from torch and, when installed, ONNX Runtime), decodes.txt
(reference and hypothesis of every evaluated sentence).

Audio: espeak-ng speaks at 22050 Hz; it is resampled to 16 kHz with
torchaudio.functional.resample (windowed sinc, Hann, 6 zero crossings) where
torchaudio is installed, else scipy.signal.resample_poly (local smoke runs).
"""

import argparse
import contextlib
import json
import math
import os
import random
import sys
import time
from multiprocessing import Pool

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import features  # noqa: E402
import model as M  # noqa: E402
import synth  # noqa: E402
import textnorm  # noqa: E402

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def read_lines(path):
    with open(path) as f:
        return [s.strip() for s in f if s.strip()]


class Resampler:
    """22050 Hz int16 clips -> 16 kHz tensors on device (views into padded
    batches of similar lengths)."""

    def __init__(self, device):
        self.device = device
        try:
            import torchaudio.functional as AF
            self.af = AF
        except ImportError:
            self.af = None

    def __call__(self, clips, dtype=torch.float32):
        if self.af is None:
            from scipy.signal import resample_poly
            return [torch.from_numpy(resample_poly(c.astype(np.float32) / 32768.0, 320, 441).astype(np.float32)).to(self.device, dtype)
                    for c in clips]
        order = sorted(range(len(clips)), key=lambda i: len(clips[i]))
        out = [None] * len(clips)
        for g in range(0, len(order), 512):
            idx = order[g:g + 512]
            buf = np.zeros((len(idx), len(clips[idx[-1]])), np.int16)
            for j, i in enumerate(idx):
                buf[j, :len(clips[i])] = clips[i]
            x = torch.from_numpy(buf).to(self.device).float() / 32768.0
            y = self.af.resample(x, synth.NATIVE_RATE, features.SAMPLE_RATE).to(dtype)
            for j, i in enumerate(idx):
                out[i] = y[j, :math.ceil(len(clips[i]) * features.SAMPLE_RATE / synth.NATIVE_RATE)]
        return out


class Store:
    """Training utterances on the device: fp16 waveforms, token ids, lengths."""

    def __init__(self):
        self.wave, self.ids, self.n = [], [], []
        self.order = []

    def add(self, texts, waves):
        for t, w in zip(texts, waves):
            ids = textnorm.encode(t)
            # CTC needs at least len + repeats output frames (50 per second)
            frames = (len(w) // features.HOP - 1) // 2 + 1
            reps = sum(1 for a, b in zip(ids, ids[1:]) if a == b)
            if not ids or frames < len(ids) + reps:
                continue
            self.wave.append(w.half())
            self.ids.append(ids)
            self.n.append(len(w))
        self.order = sorted(range(len(self.n)), key=lambda i: -self.n[i])

    def batch(self, rng, max_samples):
        p = rng.randrange(len(self.order))
        bs = max(1, max_samples // self.n[self.order[p]])
        idx = self.order[p:p + bs]
        return idx


def pad_batch(waves, device):
    n = max(len(w) for w in waves)
    x = torch.zeros(len(waves), n, device=device)
    for i, w in enumerate(waves):
        x[i, :len(w)] = w.float()
    return x, torch.tensor([len(w) for w in waves], device=device)


def add_noise(x, lens, gen, p=0.6, snr_lo=10.0, snr_hi=40.0):
    """White or brown-ish noise at a random SNR on a random subset of rows."""
    b, n = x.shape
    valid = torch.arange(n, device=x.device)[None, :] < lens[:, None]
    noise = torch.randn(b, n, device=x.device, generator=gen)
    brown = torch.rand(b, 1, device=x.device, generator=gen) < 0.3
    if brown.any():
        lp = torch.cumsum(noise, 1)
        lp = lp - F.avg_pool1d(lp[:, None], 401, 1, 200, count_include_pad=False)[:, 0]
        noise = torch.where(brown, lp, noise)
    sig = ((x * valid) ** 2).sum(1) / lens.clamp(min=1)
    nz = ((noise * valid) ** 2).sum(1) / lens.clamp(min=1)
    snr = snr_lo + (snr_hi - snr_lo) * torch.rand(b, device=x.device, generator=gen)
    scale = torch.sqrt(sig / (nz + 1e-12) / 10 ** (snr / 10))
    on = (torch.rand(b, device=x.device, generator=gen) < p).float()
    return x + (noise * (scale * on)[:, None]) * valid


def spec_augment(f, flen, gen):
    b, m, t = f.shape
    for _ in range(2):
        w = torch.randint(0, 16, (b, 1), device=f.device, generator=gen)
        s = (torch.rand(b, 1, device=f.device, generator=gen) * (m - w)).long()
        r = torch.arange(m, device=f.device)[None, :]
        f = f.masked_fill(((r >= s) & (r < s + w))[:, :, None], 0.0)
    for _ in range(3):
        w = torch.randint(0, 9, (b, 1), device=f.device, generator=gen)
        s = (torch.rand(b, 1, device=f.device, generator=gen) * (flen[:, None] - w).clamp(min=1)).long()
        r = torch.arange(t, device=f.device)[None, :]
        f = f.masked_fill(((r >= s) & (r < s + w))[:, None, :], 0.0)
    return f


def greedy(logprobs, lens):
    """Collapsed, blank-free id sequences of [B, T, V] log-probs."""
    best = logprobs.argmax(-1)
    out = []
    for b in range(best.shape[0]):
        seq, prev = [], -1
        for i in best[b, :int(lens[b])].tolist():
            if i != prev and i != 0:
                seq.append(i)
            prev = i
        out.append(seq)
    return out


def score(refs, hyps):
    we = sum(textnorm.edit_distance(r.split(), h.split()) for r, h in zip(refs, hyps))
    wn = sum(len(r.split()) for r in refs)
    ce = sum(textnorm.edit_distance(r, h) for r, h in zip(refs, hyps))
    cn = sum(len(r) for r in refs)
    return {"wer": we / max(wn, 1), "cer": ce / max(cn, 1), "sentences": len(refs), "words": wn, "chars": cn}


def run_eval(name, texts, waves, fe, forward, device, bs=32):
    """Greedy-decode a held-out set; forward(feats np/tensor, flen) -> (logprobs, lens)."""
    order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
    hyps = [None] * len(waves)
    for i in range(0, len(order), bs):
        idx = order[i:i + bs]
        x, l = pad_batch([waves[j] for j in idx], device)
        f, fl = fe(x, l)
        lp, ol = forward(f, fl)
        for j, seq in zip(idx, greedy(lp, ol)):
            hyps[j] = textnorm.decode(seq)
    res = score(texts, hyps)
    log(f"eval {name}: WER {100 * res['wer']:.2f}% CER {100 * res['cer']:.2f}% ({res['sentences']} sentences, {res['words']} words)")
    return res, hyps


def export_onnx(net, path):
    """ONNX opset 17, NeMo CTC signature, dynamic batch and time."""
    net = net.eval().cpu().float()
    x = torch.randn(2, 128, 301)
    l = torch.tensor([301, 187])
    kw = dict(input_names=["audio_signal", "length"], output_names=["logprobs", "encoded_lengths"],
              dynamic_axes={"audio_signal": {0: "batch", 2: "time"}, "length": {0: "batch"},
                            "logprobs": {0: "batch", 1: "frames"}, "encoded_lengths": {0: "batch"}},
              opset_version=17)
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 5):
        torch.onnx.export(net, (x, l), path, **kw)  # TorchScript exporter
    else:
        try:  # the TorchScript exporter, as in older torch
            torch.onnx.export(net, (x, l), path, dynamo=False, **kw)
        except Exception as e:  # noqa: BLE001
            log(f"TorchScript ONNX export failed ({e!r}); trying the dynamo exporter")
            torch.onnx.export(net, (x, l), path, dynamo=True, external_data=False, **kw)
    import onnx
    from chunk_split import rewrite
    m = onnx.load(path)
    rewrite(m)  # torch.chunk as one Split: ORT 1.29's CUDA EP crashes on its Slices (chunk_split.py)
    onnx.checker.check_model(m)
    for k, v in {"model_type": "edge-char-ctc", "vocab_size": "29", "subsampling_factor": "2",
                 "frame_stride": "0.02", "feature": "parakeet-128 mel_time"}.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.save(m, path)
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train-seconds", type=float, default=420)
    ap.add_argument("--synth-utts", type=int, default=120000)
    ap.add_argument("--synth-seconds", type=float, default=100)
    ap.add_argument("--eval-per-set", type=int, default=400)
    ap.add_argument("--batch-seconds", type=float, default=600)
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--d", type=int, default=176)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # the synthesis pool forks before CUDA is initialised
    pool = Pool(args.workers)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    log(f"torch {torch.__version__} device {device} {torch.cuda.get_device_name() if device == 'cuda' else ''}, "
        f"{os.cpu_count()} cpus, {args.workers} synth workers")
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    text_rng = random.Random(args.seed + 1)  # used by the pool's task-feeder thread only

    natural = read_lines(os.path.join(args.data, "natural_train.txt"))
    natural_test = read_lines(os.path.join(args.data, "natural_test.txt"))
    words = read_lines(os.path.join(args.data, "words_train.txt"))
    heldout = read_lines(os.path.join(args.data, "words_heldout.txt"))
    erng = random.Random(12345)
    n = args.eval_per_set
    natural_set = set(natural)
    eval_sets = {
        "natural": erng.sample(natural_test, min(n, len(natural_test))),
        "random_words": [synth.random_words(erng, words) for _ in range(n)],
        "random_unseen_words": [synth.random_words(erng, heldout, 3, 10) for _ in range(n)],
    }
    assert not natural_set.intersection(eval_sets["natural"])

    t = time.time()
    eval_jobs = [(10**9 + k * 100003 + i, s) for k, (_, ss) in enumerate(eval_sets.items()) for i, s in enumerate(ss)]
    eval_out = pool.map(synth.job, eval_jobs, chunksize=16)
    resample = Resampler(device)
    eval_waves = resample([o[2] for o in eval_out], torch.float32)
    log(f"synthesised {len(eval_out)} eval utterances in {time.time() - t:.1f}s "
        f"({sum(len(o[2]) for o in eval_out) / synth.NATIVE_RATE:.0f} s of speech)")

    def train_jobs():
        for i in range(args.synth_utts):
            yield (args.seed * 10**8 + i, synth.training_text(text_rng, natural, words))

    # training utterances: synthesised up front (CPU pool), until --synth-utts
    # or --synth-seconds, then resampled on the device
    t = time.time()
    texts, pcms, failed, last = [], [], 0, t
    for text, tag, pcm in pool.imap_unordered(synth.job, train_jobs(), chunksize=64):
        if pcm is None:
            failed += 1
            continue
        texts.append(text)
        pcms.append(pcm)
        if time.time() - last > 15:
            last = time.time()
            log(f"synthesised {len(pcms)} utterances ({failed} failed)")
        if time.time() - t > args.synth_seconds:
            break
    pool.terminate()
    synth_time = time.time() - t
    speech = sum(len(p) for p in pcms) / synth.NATIVE_RATE
    log(f"synthesised {len(pcms)} training utterances ({speech / 3600:.1f} h, {failed} failed) in {synth_time:.1f}s "
        f"with {args.workers} processes: {speech / synth_time:.0f}x real time")
    t = time.time()
    store = Store()
    for i in range(0, len(pcms), 20000):
        store.add(texts[i:i + 20000], resample(pcms[i:i + 20000], torch.float16))
    del pcms
    log(f"resampled and stored {len(store.n)} utterances in {time.time() - t:.1f}s")

    fe = features.Parakeet128().to(device)
    net = M.CharCTC(d=args.d, layers=args.layers).to(device)
    log(f"model parameters: {M.count_params(net)}")
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    amp = device == "cuda"
    max_samples = int(args.batch_seconds * features.SAMPLE_RATE)
    t_start = time.time()
    step, seen_sec, ema = 0, 0.0, None
    last_log = t_start
    while True:
        el = time.time() - t_start
        if el >= args.train_seconds:
            break
        frac = el / args.train_seconds
        warm = 0.05
        lr = args.lr * (frac / warm if frac < warm else 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * (frac - warm) / (1 - warm))))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = store.batch(rng, max_samples)
        x, lens = pad_batch([store.wave[i] for i in idx], device)
        net.train()
        x = add_noise(x, lens, gen)
        f, flen = fe(x, lens)
        f = spec_augment(f, flen, gen)
        with (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if amp else contextlib.nullcontext()):
            lp, olen = net(f, flen)
        tg = [store.ids[i] for i in idx]
        targets = torch.tensor([c for s in tg for c in s], device=device)
        tlen = torch.tensor([len(s) for s in tg], device=device)
        loss = F.ctc_loss(lp.float().transpose(0, 1), targets, olen, tlen, blank=0, reduction="mean", zero_infinity=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        step += 1
        seen_sec += float(lens.sum()) / features.SAMPLE_RATE
        lv = float(loss.detach()) if step % 25 == 0 or ema is None else None
        if lv is not None:
            ema = lv if ema is None else 0.9 * ema + 0.1 * lv
        if time.time() - last_log > 20:
            last_log = time.time()
            log(f"step {step} loss {ema:.3f} lr {lr:.2e} batch {len(idx)} pool {len(store.n)} utts "
                f"seen {seen_sec / 3600:.1f} h, {step / (time.time() - t_start):.1f} steps/s")
    train_time = time.time() - t_start
    log(f"trained {step} steps in {train_time:.0f}s, {seen_sec / 3600:.1f} h of audio seen, "
        f"{len(store.n)} distinct utterances ({sum(store.n) / 16000 / 3600:.1f} h)")
    net.eval()
    torch.save(net.state_dict(), os.path.join(args.out, "model.pt"))

    def torch_forward(f, fl):
        with torch.no_grad():
            return net(f, fl)

    results = {"torch": {}}
    decodes = []
    k = 0
    for name, texts in eval_sets.items():
        waves = eval_waves[k:k + len(texts)]
        tags = [o[1] for o in eval_out[k:k + len(texts)]]
        k += len(texts)
        results["torch"][name], hyps = run_eval("torch " + name, texts, waves, fe, torch_forward, device)
        decodes += [f"{name}\t{tag}\tREF: {r}\n{name}\t{tag}\tHYP: {h}\n" for r, h, tag in zip(texts, hyps, tags)]
        if name == "random_unseen_words":
            ok = sum(len(set(r.split()) & set(h.split())) for r, h in zip(texts, hyps))
            tot = sum(len(set(r.split())) for r in texts)
            results["torch"][name]["unseen_word_recall"] = ok / max(tot, 1)
    with open(os.path.join(args.out, "decodes.txt"), "w") as fo:
        fo.writelines(decodes)

    onnx_path = os.path.join(args.out, "model.onnx")
    size = export_onnx(net, onnx_path)
    log(f"exported {onnx_path}: {size / 1e6:.2f} MB")
    results.update(params=M.count_params(net), onnx_bytes=size, train_seconds=train_time, steps=step,
                   synth_seconds=synth_time, synth_speech_hours=speech / 3600, batch_seconds=args.batch_seconds,
                   lr=args.lr,
                   audio_hours_seen=seen_sec / 3600, distinct_utts=len(store.n),
                   distinct_hours=sum(store.n) / 16000 / 3600, torch=results["torch"],
                   device=torch.cuda.get_device_name() if device == "cuda" else "cpu", torch_version=torch.__version__)
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        log("onnxruntime not installed: ONNX evaluation skipped")
    if ort is not None:
        so = ort.SessionOptions()
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        log(f"onnxruntime {ort.__version__}: inputs {[(i.name, i.shape, i.type) for i in sess.get_inputs()]} "
            f"outputs {[(o.name, o.shape, o.type) for o in sess.get_outputs()]}")
        net_cpu = net.cpu()

        def ort_forward(f, fl):
            lp, ol = sess.run(None, {"audio_signal": f.cpu().numpy(), "length": fl.cpu().numpy().astype(np.int64)})
            return torch.from_numpy(lp), torch.from_numpy(ol)

        # parity: torch (CPU, fp32) vs ONNX Runtime on one padded batch
        x, l = pad_batch(eval_waves[:8], device)
        f, fl = fe(x, l)
        with torch.no_grad():
            tl, tol = net_cpu(f.cpu(), fl.cpu())
        ol_, ool = ort_forward(f, fl)
        vm = M.valid_mask(tol, tl.shape[1])[:, :, None]
        diff = float(((tl - ol_).abs() * vm).max())
        results["onnx_vs_torch_max_abs_diff"] = diff
        results["onnx_lengths_equal"] = bool(torch.equal(tol, ool))
        log(f"onnx vs torch: max |diff| logprobs {diff:.3g}, lengths equal {results['onnx_lengths_equal']}")
        results["onnxruntime"] = {}
        k = 0
        t = time.time()
        for name, texts in eval_sets.items():
            waves = eval_waves[k:k + len(texts)]
            k += len(texts)
            results["onnxruntime"][name], _ = run_eval("onnxruntime " + name, texts, waves, fe, ort_forward, device)
        log(f"onnxruntime eval took {time.time() - t:.1f}s")
    with open(os.path.join(args.out, "eval.json"), "w") as fo:
        json.dump(results, fo, indent=1)
    with open(os.path.join(args.out, "tokens.txt"), "w") as fo:
        fo.write(textnorm.tokens_txt())
    log("done")


if __name__ == "__main__":
    main()
