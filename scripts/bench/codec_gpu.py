"""Codec tokenisation throughput on the GPU: edge's whole path against transformers' batched encode().

    python3 scripts/bench/codec_gpu.py --codec-test CODEC_TEST_BINARY OUT

Run on the GPU host from the repository root (scripts/codec_gpu.sh does, with the environment
the edge side needs). Steps, all in one run:

1. An EnCodec-24kHz-sized model: transformers' EncodecConfig() defaults (the facebook/encodec_24khz
   architecture: 32 filters, ratios 8-5-4-2, 128-d latents at 75 Hz, 2 LSTM layers, 32 codebooks of
   1024) with seeded random weights and codebooks drawn around its own latents (stage by stage).
2. OUT/encodec24_bench/: encoder.onnx (pcm [B, N] -> latents [B, T, 128]; the TorchScript exporter,
   checked against torch on the CPU at two lengths), model.yaml (the output named log_probs, so
   that edge's encoder op runs it with device-resident input and output), tokens.txt (128
   token names, read only by the op's vocabulary-width check) and codebooks.npy (f32 [32, 1024, 128]).
3. Peer, twice (before and after ours, so the two alternate): transformers' EncodecModel.encode()
   on the GPU, one batch of B clips of S seconds, at 6 kbps (8 codebooks) and 24 kbps (32), in fp32
   with TF32 off (the codes of the fp32 reference) and with TF32 convolutions (torch's default), and
   m.encoder alone; median of --repeats timed calls after a warm-up, CUDA-synchronised.
4. Ours: CODEC_TEST_BINARY's BenchmarkCUDATokenize (plugins: ONNX Runtime's CUDA EP for the
   encoder in fp32, in TF32 and in TF32 with cuDNN's exhaustive search, rvq_encode_f32 for the
   codes, zero-copy between them); it needs $EDGE_ORT_CUDA_EP and
   $EDGE_ORT_LIB as scripts/bench/run.sh pipeline-gpu sets them. Without them it is reported as
   not run, with the reason.

Writes OUT/codec_gpu.json and OUT/codec_gpu.md (hours of 24 kHz audio tokenised per second).
"""
import argparse, json, os, re, subprocess, sys, time
import numpy as np
import torch

RATE = 24000


def build(seed=0):
    from transformers import EncodecConfig, EncodecModel
    torch.manual_seed(seed)
    cfg = EncodecConfig()  # facebook/encodec_24khz's architecture
    m = EncodecModel(cfg).eval().requires_grad_(False)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        r = m.encoder(torch.randn(4, 1, 5 * RATE) * 0.2).transpose(1, 2).reshape(-1, cfg.hidden_size)
        for layer in m.quantizer.layers:
            e = r.mean(0) + r.std(0) * torch.randn(cfg.codebook_size, r.shape[1], generator=g)
            layer.codebook.embed.copy_(e); layer.codebook.embed_avg.copy_(e); layer.codebook.inited.fill_(1)
            r = r - e[torch.cdist(r, e).argmin(1)]
    return m, cfg


class Latents(torch.nn.Module):
    """pcm [B, N] -> latents [B, T, D]: the layout rvq_encode reads."""

    def __init__(self, enc):
        super().__init__()
        self.enc = enc

    def forward(self, pcm):
        return self.enc(pcm[:, None, :]).transpose(1, 2)


def export(m, cfg, d):
    import onnxruntime as ort
    os.makedirs(d, exist_ok=True)
    mod = Latents(m.encoder).eval()
    x = torch.randn(2, RATE) * 0.1
    path = os.path.join(d, "encoder.onnx")
    torch.onnx.export(mod, (x,), path, dynamo=False, opset_version=17, input_names=["pcm"], output_names=["latents"],
                      dynamic_axes={"pcm": {0: "B", 1: "N"}, "latents": {0: "B", 1: "T"}})
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    worst = 0.0
    for n in (RATE, 3 * RATE + 320):
        xi = (torch.randn(2, n) * 0.1)
        want = mod(xi).numpy()
        got = s.run(None, {"pcm": xi.numpy()})[0]
        if got.shape != want.shape:
            raise RuntimeError(f"exported encoder: shape {got.shape}, torch {want.shape}")
        worst = max(worst, float(np.abs(got - want).max()))
    if worst > 1e-3:
        raise RuntimeError(f"exported encoder differs from torch by {worst}")
    with open(os.path.join(d, "tokens.txt"), "w") as f:
        for i in range(cfg.hidden_size):
            f.write(f"<d{i}> {i}\n")
    with open(os.path.join(d, "model.yaml"), "w") as f:
        f.write("""# EnCodec-24kHz-sized encoder for BenchmarkCUDATokenize (scripts/bench/codec_gpu.py): the
# latents [B, T, 128] are exposed as log_probs so that the encoder op returns them as they are.
name: encodec24-bench-encoder
sample_rate: 24000
normalize: none
encoder:
  file: encoder.onnx
  inputs: {pcm: pcm}
  outputs: {log_probs: latents}
vocabulary: tokens.txt
blank_id: 0
frame_stride: %r
""" % (1.0 / 75))
    books = torch.stack([l.codebook.embed for l in m.quantizer.layers]).numpy().astype(np.float32)
    np.save(os.path.join(d, "codebooks.npy"), books)
    return worst


def time_peer(m, batch, seconds, repeats, tf32=False):
    """Median seconds of m.encoder and m.encode() at 8 and 32 codebooks: fp32 (TF32 off, the codes of
    the fp32 reference) or, with tf32, torch's defaults (convolutions in TF32, as ONNX Runtime's CUDA
    EP runs them by default)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda")
    m = m.to(dev)
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(batch, 1, seconds * RATE, generator=g) * 0.1).to(dev)
    out = {}

    def timed(f):
        f(); torch.cuda.synchronize()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
        return float(np.median(ts))

    hours = batch * seconds / 3600
    with torch.no_grad():
        t = timed(lambda: m.encoder(x))
        out["encoder_only"] = {"s": t, "audio_h_per_s": hours / t}
        for kbps, q in ((6.0, 8), (24.0, 32)):
            codes = m.encode(x, bandwidth=kbps).audio_codes
            assert codes.shape[-2] == q, codes.shape
            t = timed(lambda: m.encode(x, bandwidth=kbps))
            out[f"encode_Q{q}"] = {"s": t, "audio_h_per_s": hours / t, "bandwidth_kbps": kbps}
    m.to("cpu")
    return out


def run_ours(binary, model_dir, batch, seconds, benchtime):
    env = dict(os.environ, EDGE_CODEC_BENCH_MODEL=model_dir, EDGE_CODEC_BENCH_B=str(batch),
               EDGE_CODEC_BENCH_SECONDS=str(seconds))
    missing = [v for v in ("EDGE_ORT_CUDA_EP", "EDGE_ORT_LIB") if not env.get(v)]
    if missing:
        return {"error": "not run: $" + " and $".join(missing) + " unset (ONNX Runtime's CUDA EP: scripts/ort-cuda-ep.sh)"}
    p = subprocess.run([os.path.abspath(binary), "-test.run", "^$", "-test.bench", "CUDATokenize",
                        "-test.benchtime", f"{benchtime}x"], cwd="codec", env=env, capture_output=True, text=True)
    sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
    res = {"log": (p.stdout + p.stderr)[-3000:]}
    for line in p.stdout.splitlines():
        mq = re.search(r"CUDATokenize/(\w+)/\S*_Q(\d+)_", line)
        if not mq:
            continue
        vals = {u: float(v) for v, u in re.findall(r"([0-9.e+-]+) (enc-ms|rvq-ms|wall-ms|audio-h/s)", line)}
        res[f"{mq.group(1)}_Q{mq.group(2)}"] = vals
    if p.returncode != 0:
        res["error"] = f"exit {p.returncode}"
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--codec-test", required=True, help="the -tags cuda test binary of package codec")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    m, cfg = build()
    d = os.path.abspath(os.path.join(a.out, "encodec24_bench"))
    rep = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "batch": a.batch, "seconds": a.seconds}
    import transformers
    rep["transformers"] = transformers.__version__
    rep["export_maxdiff"] = export(m, cfg, d)
    rep["peer_1"] = time_peer(m, a.batch, a.seconds, a.repeats)
    rep["peer_tf32_1"] = time_peer(m, a.batch, a.seconds, a.repeats, tf32=True)
    rep["edge"] = run_ours(a.codec_test, d, a.batch, a.seconds, a.repeats * 2)
    rep["peer_2"] = time_peer(m, a.batch, a.seconds, a.repeats)
    rep["peer_tf32_2"] = time_peer(m, a.batch, a.seconds, a.repeats, tf32=True)
    with open(os.path.join(a.out, "codec_gpu.json"), "w") as f:
        json.dump(rep, f, indent=1)
    lines = [f"# Codec tokenisation, {rep['gpu']}: {a.batch} x {a.seconds} s of 24 kHz audio a call",
             "", "| path | Q | hours of audio / s | ratio |", "| --- | --- | --- | --- |"]
    for q in (8, 32):
        peer = [rep[k][f"encode_Q{q}"]["audio_h_per_s"] for k in ("peer_1", "peer_2")]
        tf32 = [rep[k][f"encode_Q{q}"]["audio_h_per_s"] for k in ("peer_tf32_1", "peer_tf32_2")]
        lines.append(f"| transformers encode(), fp32 (runs 1, 2) | {q} | {peer[0]:.2f}, {peer[1]:.2f} | 1 |")
        lines.append(f"| transformers encode(), TF32 convolutions (runs 1, 2) | {q} | {tf32[0]:.2f}, {tf32[1]:.2f} | |")
        for variant, what in (("fp32", "fp32"), ("tf32", "TF32"), ("tf32_exhaustive", "TF32, exhaustive cuDNN search")):
            ours = rep["edge"].get(f"{variant}_Q{q}")
            if ours:
                ref = peer if variant == "fp32" else tf32
                lines.append(f"| edge, encoder {what}: {ours['enc-ms']:.1f} ms + rvq_encode_f32 {ours['rvq-ms']:.2f} ms"
                             f" | {q} | {ours['audio-h/s']:.2f} | {ours['audio-h/s'] / np.mean(ref):.2f}x transformers {what.split(',')[0]} |")
    for k, what in (("peer", "fp32"), ("peer_tf32", "TF32")):
        lines.append(f"| torch encoder alone, {what} (runs 1, 2) | - | {rep[k + '_1']['encoder_only']['audio_h_per_s']:.2f}, "
                     f"{rep[k + '_2']['encoder_only']['audio_h_per_s']:.2f} | |")
    if "error" in rep["edge"]:
        lines.append(f"\nedge: {rep['edge']['error']}")
    with open(os.path.join(a.out, "codec_gpu.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
