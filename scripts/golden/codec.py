"""Tiny random-weight (seeded) EnCodec and Mimi codecs, exported as edge reads them, and goldens.

Run on a host with torch + transformers + onnx + onnxruntime (the GPU host):

    python3 scripts/golden/codec.py OUTDIR                 # tiny seeded codecs + goldens
    python3 scripts/golden/codec.py export HF_DIR OUTDIR   # a published EnCodec checkpoint
                                                           # (e.g. facebook/encodec_24khz) as a codec dir

For each family (encodec, mimi) it writes OUTDIR/<family>/ as a codec directory:
  config.json + model.safetensors  the Hugging Face checkpoint as save_pretrained writes it
  encoder.onnx   pcm [B, 1, N] -> latents [B, D, T]   (everything before the quantizer)
  decoder.onnx   latents [B, D, T] -> pcm [B, 1, N']  (everything after the quantizer)
and OUTDIR/<family>_golden/: clipK.wav (16-bit PCM at the codec rate; the pcm fed to
transformers is exactly int16/32768), clipK_codes.npy (transformers' encode(), [Q, T] int32),
clipK_audio.npy (transformers' decode() of those codes, [N'] float32) and, for the first clip,
clipK_codes_q2 / clipK_audio_q2 (two stages only), clipK_latents.npy (the encoder's output, [D, T]
float32: what edge's quantizer reads) and clipK_qlatents.npy (transformers' quantizer.decode() of
the codes, [D, T]). margin.json records, per family, the seed
chosen and the smallest gap between the best and second-best squared distance over every stage
and frame of every clip (absolute and relative to ||r||^2 + ||c||^2), computed in float64.
EnCodec's random codebooks are first adjusted (widen_margins: runner-up codewords of near-tied
golden frames moved away) so that no golden code is within 1e-4 of a tie. Seeds are tried in order
and the one with the largest smallest relative margin is kept.

Export: each graph is exported with the dynamo exporter first, then the TorchScript one, and kept
only if ONNX Runtime matches torch (1e-3) at every clip length and at CHECK_LEN (longer than Mimi's
sliding window). For Mimi two transformers code paths are replaced during export only (the eager
model the goldens come from is untouched): masking_utils' packed-sequence detection (torch.diff on
the position ids, which TorchScript cannot export (no aten::diff symbolic) and dynamo cannot trace
without a data-dependent branch; the exported graphs never see packed sequences) and, for the dynamo
exporter, MimiConv1d.forward's pad arithmetic (done on 0-dim tensor buffers, which torch.export lifts
to graph inputs, so the pads become data-dependent: "Could not guard on data-dependent expression"
in conv; the replacement computes the same integers from the input length alone). The TorchScript export traces an example
longer than the sliding window, so that the attention mask it bakes in is the general one.
"""
import json, math, os, sys, wave, traceback
import numpy as np
import torch

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
OUT = sys.argv[-1]
RATE = 24000
CLIP_LENS = [12000, 8501, 4800]
CHECK_LEN = 4 * RATE + 17  # an export check input longer than Mimi's 64-frame sliding window
SEEDS = range(12)
PATCHES = None  # the export_patches in effect (export() switches Mimi's padding per exporter)


def clips(seed=1234):
    g = np.random.default_rng(seed)
    out = []
    for n in CLIP_LENS:
        t = np.arange(n) / RATE
        f0 = g.uniform(100, 300)
        x = 0.3 * np.sin(2 * np.pi * (f0 * t + 200 * t * t)) + 0.05 * g.standard_normal(n)
        x += 0.2 * np.sin(2 * np.pi * g.uniform(500, 3000) * t) * (t > t[-1] / 2)
        q = np.clip(np.round(x * 32768), -32768, 32767).astype(np.int16)
        out.append(q)
    return out


def write_wav(path, q):
    with wave.open(path, "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(RATE); w.writeframes(q.tobytes())


def margins(residuals_codebooks):
    """residuals_codebooks: list of (r [T, D] f64, C [K, D] f64)."""
    amin, rmin = math.inf, math.inf
    for r, c in residuals_codebooks:
        d = ((r[:, None, :] - c[None, :, :]) ** 2).sum(-1)
        s = np.sort(d, axis=1)
        gap = s[:, 1] - s[:, 0]
        scale = (r ** 2).sum(-1) + (c ** 2).sum(-1).max()
        amin = min(amin, float(gap.min())); rmin = min(rmin, float((gap / scale).min()))
    return amin, rmin


def export(mod, example, path, in_name, out_name, in_axes, out_axes, fn, inputs, report, key):
    """Tries the exporters in turn; keeps the first whose graph matches torch at every clip length."""
    mod.eval()
    for dynamo in (True, False):
        tag = "dynamo" if dynamo else "torchscript"
        try:
            if PATCHES is not None:
                PATCHES.dynamo(dynamo)
            kw = dict(input_names=[in_name], output_names=[out_name], opset_version=18 if dynamo else 17,
                      dynamic_axes={in_name: in_axes, out_name: out_axes})
            torch.onnx.export(mod, (example,), path, dynamo=dynamo, **kw)
            diff = check_onnx(path, fn, inputs)
        except Exception:
            report[key + "_" + tag + "_error"] = traceback.format_exc()[-1500:]
            continue
        report[key + "_" + tag + "_maxdiff"] = diff
        if isinstance(diff, float) and diff < 1e-3:
            report[key + "_export"] = tag
            return
    raise RuntimeError("no exporter gave a graph that matches torch at every length")


def check_onnx(path, fn, inputs):
    """Largest |onnx - torch| over inputs (a string when a shape differs)."""
    import onnxruntime as ort
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for x in inputs:
        want = fn(torch.from_numpy(x)).detach().numpy()
        got = s.run(None, {s.get_inputs()[0].name: x})[0]
        if got.shape != want.shape:
            return f"shape {got.shape} vs {want.shape}"
        worst = max(worst, float(np.abs(got - want).max()))
    return worst


def gaussian_codebook(r, k, g):
    """k codewords drawn from a Gaussian with the residual's per-dimension mean and spread."""
    return r.mean(0) + r.std(0) * torch.randn(k, r.shape[1], generator=g)


def widen_margins(r, codebooks, tau=1e-4, rounds=8):
    """Moves runner-up codewords away from the golden frames whose best and second-best squared
    distances lie within tau of each other (relative, as margins() measures), stage by stage along
    the greedy chain, so that fp32 rounding cannot decide any golden code. r: the golden frames'
    latents [N, D] (float64); codebooks: the [K, D] float32 tensors, changed in place. Returns the
    number of moves (5 % farther from the frame each)."""
    moved = 0
    rows = np.arange(len(r))
    for C in codebooks:
        for _ in range(rounds):
            Cd = C.double().numpy()
            d = ((r[:, None, :] - Cd[None]) ** 2).sum(-1)
            order = np.argsort(d, axis=1, kind="stable")
            b, s = order[:, 0], order[:, 1]
            gap = d[rows, s] - d[rows, b]
            scale = (r ** 2).sum(-1) + (Cd ** 2).sum(-1).max()
            bad = np.nonzero(gap / scale < tau)[0]
            if len(bad) == 0:
                break
            for f in bad:
                j = s[f]
                C[j] += torch.from_numpy(0.05 * (Cd[j] - r[f])).to(C.dtype)
                moved += 1
        Cd = C.double().numpy()
        r = r - Cd[((r[:, None, :] - Cd[None]) ** 2).sum(-1).argmin(1)]
    return moved


class Enc(torch.nn.Module):
    def __init__(self, f): super().__init__(); self.f = f
    def forward(self, x): return self.f(x)


def encodec(seed, pcm):
    from transformers import EncodecConfig, EncodecModel
    torch.manual_seed(seed)
    cfg = EncodecConfig(sampling_rate=RATE, audio_channels=1, num_filters=2, hidden_size=16,
                        num_residual_layers=1, upsampling_ratios=[8, 5, 4, 2], codebook_size=512,
                        target_bandwidths=[1.5, 3.0], num_lstm_layers=1, normalize=False)
    m = EncodecModel(cfg).eval().requires_grad_(False)
    # Codebooks: k-means-like init from the latents of random audio at each stage's residual.
    with torch.no_grad():
        lat = m.encoder(torch.randn(4, 1, 48000) * 0.2).transpose(1, 2).reshape(-1, cfg.hidden_size)
        g = torch.Generator().manual_seed(seed)
        r = lat
        for layer in m.quantizer.layers:
            e = gaussian_codebook(r, cfg.codebook_size, g)
            layer.codebook.embed.copy_(e); layer.codebook.embed_avg.copy_(e); layer.codebook.inited.fill_(1)
            d = torch.cdist(r, e); r = r - e[d.argmin(1)]
    res = {"seed": seed}
    try:
        with torch.no_grad():
            lat = np.concatenate([m.encoder(torch.from_numpy(q.astype(np.float32) / 32768)[None, None])[0].T.double().numpy()
                                  for q in pcm])
            res["codewords_moved"] = widen_margins(lat, [layer.codebook.embed for layer in m.quantizer.layers])
            for layer in m.quantizer.layers:
                layer.codebook.embed_avg.copy_(layer.codebook.embed)
    except Exception:
        res["widen_margins_error"] = traceback.format_exc()[-1500:]
    codes, audio, rc = [], [], []
    with torch.no_grad():
        for q in pcm:
            x = torch.from_numpy(q.astype(np.float32) / 32768)[None, None]
            enc = m.encode(x, bandwidth=3.0)
            c = enc.audio_codes[0, 0]  # [Q, T]
            codes.append(c.numpy().astype(np.int32))
            dec = m.decode(enc.audio_codes, [None])[0]
            audio.append(dec[0, 0].numpy().astype(np.float32))
            lat = m.encoder(x)[0].T.double().numpy()
            r = lat
            for i, layer in enumerate(m.quantizer.layers):
                C = layer.codebook.embed.double().numpy()
                rc.append((r, C)); r = r - C[c[i].numpy()]
    res["margin_abs"], res["margin_rel"] = margins(rc)
    return m, cfg, codes, audio, res


def mimi(seed, pcm):
    from transformers import MimiConfig, MimiModel
    torch.manual_seed(seed)
    cfg = MimiConfig(sampling_rate=RATE, frame_rate=12.5, audio_channels=1, hidden_size=16, num_filters=2,
                     num_residual_layers=1, upsampling_ratios=[8, 6, 5, 4], kernel_size=7,
                     last_kernel_size=3, residual_kernel_size=3, dilation_growth_rate=2,
                     codebook_size=256, codebook_dim=8, vector_quantization_hidden_dimension=8, upsample_groups=16,
                     num_quantizers=4, num_semantic_quantizers=1, intermediate_size=32,
                     num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=8,
                     sliding_window=64, max_position_embeddings=512, use_cache=False)
    m = MimiModel(cfg).eval().requires_grad_(False)
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(4, 1, 96000) * 0.2
        e = m.encoder(x)
        e = m.encoder_transformer(e.transpose(1, 2), return_dict=True).last_hidden_state.transpose(1, 2)
        e = m.downsample(e)
        for rvq in (m.quantizer.semantic_residual_vector_quantizer, m.quantizer.acoustic_residual_vector_quantizer):
            r = rvq.input_proj(e) if rvq.input_proj is not None else e
            r = r.transpose(1, 2).reshape(-1, r.shape[1])
            for layer in rvq.layers:
                cb = layer.codebook
                K = cb.embed_sum.shape[0]
                w = gaussian_codebook(r, K, g)
                usage = torch.rand(K, generator=g) * 2 + 0.5
                usage[0] = 1e-7  # exercise the clamp
                cb.cluster_usage.copy_(usage); cb.embed_sum.copy_(w * usage.clamp(min=cb.epsilon)[:, None])
                cb.initialized.fill_(1) if hasattr(cb, "initialized") else None
                cb._embed = None
                d = torch.cdist(r, cb.embed); r = r - cb.embed[d.argmin(1)]
    res = {"seed": seed}
    codes, audio, rc = [], [], []
    with torch.no_grad():
        for q in pcm:
            x = torch.from_numpy(q.astype(np.float32) / 32768)[None, None]
            enc = m.encode(x, num_quantizers=cfg.num_quantizers)
            c = enc.audio_codes[0]  # [Q, T]
            codes.append(c.numpy().astype(np.int32))
            audio.append(m.decode(enc.audio_codes)[0][0, 0].numpy().astype(np.float32))
            e = mimi_encode(m)(x)
            for rvq, cc in ((m.quantizer.semantic_residual_vector_quantizer, c[:1]), (m.quantizer.acoustic_residual_vector_quantizer, c[1:])):
                r = (rvq.input_proj(e) if rvq.input_proj is not None else e)[0].T.double().numpy()
                for i, layer in enumerate(rvq.layers):
                    C = layer.codebook.embed.double().numpy()
                    rc.append((r, C)); r = r - C[cc[i].numpy()]
    res["margin_abs"], res["margin_rel"] = margins(rc)
    return m, cfg, codes, audio, res


def mimi_encode(m):
    def f(x):
        e = m.encoder(x)
        e = m.encoder_transformer(e.transpose(1, 2), return_dict=True).last_hidden_state.transpose(1, 2)
        return m.downsample(e)
    return f


def mimi_decode(m):
    def f(z):
        e = m.upsample(z)
        e = m.decoder_transformer(e.transpose(1, 2), return_dict=True).last_hidden_state.transpose(1, 2)
        return m.decoder(e)
    return f


def family(name, build, enc_fn, dec_fn, qdec_fn, pcm, report):
    best = None
    for s in SEEDS:
        try:
            r = build(s, pcm)
        except Exception:
            report[name + "_error_seed%d" % s] = traceback.format_exc()[-3000:]
            break
        print(name, r[4], flush=True)
        report.setdefault(name + "_seeds", []).append(r[4])
        if best is None or r[4]["margin_rel"] > best[4]["margin_rel"]:
            best = r
    if best is None:
        return
    m, cfg, codes, audio, res = best
    report[name] = res
    d = os.path.join(OUT, name); g = os.path.join(OUT, name + "_golden")
    os.makedirs(d, exist_ok=True); os.makedirs(g, exist_ok=True)
    m.save_pretrained(d, safe_serialization=True)
    for i, q in enumerate(pcm):
        write_wav(os.path.join(g, "clip%d.wav" % i), q)
        np.save(os.path.join(g, "clip%d_codes.npy" % i), codes[i])
        np.save(os.path.join(g, "clip%d_audio.npy" % i), audio[i])
        with torch.no_grad():
            x = torch.from_numpy(q.astype(np.float32) / 32768)[None, None]
            np.save(os.path.join(g, "clip%d_latents.npy" % i), enc_fn(m)(x)[0].numpy().astype(np.float32))
            qd = qdec_fn(m)(torch.from_numpy(codes[i].astype(np.int64))[None])
            np.save(os.path.join(g, "clip%d_qlatents.npy" % i), qd[0].numpy().astype(np.float32))
    with torch.no_grad():
        x = torch.from_numpy(pcm[0].astype(np.float32) / 32768)[None, None]
        c2 = torch.from_numpy(codes[0][:2].astype(np.int64))
        if name == "encodec":
            a2 = m.decode(c2[None, None], [None])[0]
        else:
            a2 = m.decode(c2[None])[0]
        np.save(os.path.join(g, "clip0_codes_q2.npy"), codes[0][:2])
        np.save(os.path.join(g, "clip0_audio_q2.npy"), a2[0, 0].numpy().astype(np.float32))
        D = enc_fn(m)(x).shape[1]
        xs = [(q.astype(np.float32) / 32768)[None, None] for q in pcm]
        long = (0.1 * np.random.default_rng(7).standard_normal(CHECK_LEN)).astype(np.float32)[None, None]
        xs.append(long)
        zs = [enc_fn(m)(torch.from_numpy(x)).numpy() for x in xs]
        with export_patches(name, report):
            try:
                export(Enc(enc_fn(m)), torch.from_numpy(long), os.path.join(d, "encoder.onnx"), "pcm", "latents",
                       {0: "B", 2: "N"}, {0: "B", 2: "T"}, enc_fn(m), xs, report, name + "_encoder")
            except Exception:
                report[name + "_encoder_error"] = traceback.format_exc()[-1500:]
            try:
                export(Enc(dec_fn(m)), torch.from_numpy(zs[-1]), os.path.join(d, "decoder.onnx"), "latents", "pcm",
                       {0: "B", 2: "T"}, {0: "B", 2: "N"}, dec_fn(m), zs, report, name + "_decoder")
            except Exception:
                report[name + "_decoder_error"] = traceback.format_exc()[-1500:]
        report[name + "_latent_dim"] = int(D)


class export_patches:
    """Replaces, for Mimi and for the duration of the export only, the two transformers code paths
    that the exporters cannot handle (see the module doc); EnCodec exports as it is."""

    def __init__(self, name, report):
        self.name, self.report, self.undo = name, report, []

    def __enter__(self):
        global PATCHES
        PATCHES = self
        if self.name != "mimi":
            return self
        import transformers.masking_utils as mu
        from transformers.models.mimi import modeling_mimi as mm
        if hasattr(mu, "find_packed_sequence_indices"):
            old = mu.find_packed_sequence_indices
            mu.find_packed_sequence_indices = lambda *a, **k: None
            self.undo.append(lambda: setattr(mu, "find_packed_sequence_indices", old))
            self.report["mimi_patch_packed_sequences"] = True
        old_forward = mm.MimiConv1d.forward

        def forward(conv, hidden_states, padding_cache=None):
            # transformers' MimiConv1d.forward without its streaming cache, its pads computed in
            # integers of the input length (transformers keeps kernel_size, stride and
            # padding_total as 0-dim tensor buffers, which torch.export lifts to inputs, so every
            # pad becomes data-dependent)
            k = (conv.conv.kernel_size[0] - 1) * conv.conv.dilation[0] + 1
            s = conv.conv.stride[0]
            total = k - s
            length = hidden_states.shape[-1]
            n_frames = -(-(length - k + total) // s)  # ceil((length - k + total) / s)
            extra = n_frames * s + k - total - length
            if conv.causal:
                pads = (total, extra)
            else:
                right = total // 2
                pads = (total - right, right + extra)
            return conv.conv(conv._pad1d(hidden_states, pads, mode=conv.pad_mode))

        self.forward, self.old_forward, self.mm = forward, old_forward, mm
        self.undo.append(lambda: setattr(mm.MimiConv1d, "forward", old_forward))
        return self

    def dynamo(self, on):
        """Integer pads for the dynamo exporter; TorchScript traces transformers' own forward."""
        if self.name == "mimi":
            self.mm.MimiConv1d.forward = self.forward if on else self.old_forward

    def __exit__(self, *exc):
        global PATCHES
        PATCHES = None
        for f in reversed(self.undo):
            f()
        return False



def main():
    os.makedirs(OUT, exist_ok=True)
    pcm = clips()
    report = {"torch": torch.__version__}
    import transformers; report["transformers"] = transformers.__version__
    family("encodec", encodec, lambda m: m.encoder, lambda m: m.decoder,
           lambda m: (lambda c: m.quantizer.decode(c.transpose(0, 1))), pcm, report)
    family("mimi", mimi, mimi_encode, mimi_decode, lambda m: m.quantizer.decode, pcm, report)
    with open(os.path.join(OUT, "margin.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(json.dumps({k: v for k, v in report.items() if "error" not in k}, indent=1, default=str))
    for k, v in report.items():
        if "error" in k:
            print(k, v)


def export_checkpoint(src, dst):
    """Writes dst as a codec directory from the transformers EnCodec checkpoint src."""
    from transformers import EncodecModel
    m = EncodecModel.from_pretrained(src).eval().requires_grad_(False)
    os.makedirs(dst, exist_ok=True)
    m.save_pretrained(dst, safe_serialization=True)
    rate = m.config.sampling_rate
    g = np.random.default_rng(0)
    xs = [(0.1 * g.standard_normal(n)).astype(np.float32)[None, None] for n in (rate, rate // 2 + 17)]
    report = {}
    with torch.no_grad():
        export(Enc(m.encoder), torch.from_numpy(xs[0]), os.path.join(dst, "encoder.onnx"), "pcm", "latents",
               {0: "B", 2: "N"}, {0: "B", 2: "T"}, m.encoder, xs, report, "encoder")
        zs = [m.encoder(torch.from_numpy(x)).numpy() for x in xs]
        export(Enc(m.decoder), torch.from_numpy(zs[0]), os.path.join(dst, "decoder.onnx"), "latents", "pcm",
               {0: "B", 2: "T"}, {0: "B", 2: "N"}, m.decoder, zs, report, "decoder")
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "export":
        export_checkpoint(sys.argv[2], sys.argv[3])
    else:
        main()
