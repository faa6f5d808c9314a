#!/usr/bin/env python3
"""Golden data for the rvq_encode / rvq_decode ops (plugins/rvq).

Inputs come from the input generator of seed 001 (audio-codec-rvq-quantize) and
outputs from its torch reference, both transcribed below. Run on the GPU host
(the generator draws from a CUDA torch.Generator):

    python3 scripts/golden/rvq.py --out DIR --device cuda

It writes, under DIR:

  manifest.json                 one entry per case: shape, seed, files, the
                                smallest winner/runner-up margin, torch version
  <case>.npz                    x f32 [B,T,D], codes i32 [B,T,Q],
                                quantized f32 [B,T,D] (the reference's outputs)
  cb_q<Q>_k<K>_d<D>_s<seed>.npz codebooks u16 [Q,K,D] (bf16 bit patterns),
                                shared by cases with the same (Q,K,D,seed): the
                                generator draws the codebooks before anything
                                that depends on B or T, so they are identical
  determinism.json              sha256 of the generated inputs per case on each
                                device tried, and whether two CUDA runs agree

Checks made here, each fatal when it fails: the reference run twice on the
device gives identical outputs; the reference on the CPU (from the same inputs)
gives the same codes and a quantized within 1e-6 relative Frobenius;
torch.cdist (no expansion of the square) gives the same codes.

The go tests read these files from plugins/rvq/testdata/golden.

With --bench it instead times the torch reference (the peer of the Go
benchmark) at the seed's measure-quick shapes on each device of --bench-devices
and prints GFLOP/s with the seed's FLOP count 2*Q*B*T*K*D.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch

# (name, B, T, Q, K, D, seed). The four correctness shapes of the seed, then a
# graded shape (96, 1024, 8, 1024, 128) with B reduced to 1; it shares its seed
# with c0 so that both use the same codebooks.
CASES = [
    ("c0", 2, 301, 8, 1024, 128, 1),
    ("c1", 3, 128, 4, 256, 64, 2),
    ("c2", 1, 2048, 16, 1024, 128, 3),
    ("c3", 5, 65, 2, 129, 96, 4),
    ("g0", 1, 1024, 8, 1024, 128, 1),
]


def make_inputs(B, T, Q, K, D, seed, device):
    """The seed's input generator, with the device as a parameter.

    Codebook q has entries of norm ~0.5**q times a per-entry jitter in
    [0.6, 1.4); the codebooks are rounded to bf16 first and x is the fp32 sum
    of one codeword per stage plus a little noise.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    scales = (0.5 ** torch.arange(Q, device=device, dtype=torch.float32)).view(Q, 1, 1)
    jitter = 0.6 + 0.8 * torch.rand(Q, K, 1, device=device, generator=gen)
    codebooks = (torch.randn(Q, K, D, device=device, generator=gen) * D ** -0.5 * jitter * scales
                 ).to(torch.bfloat16)
    pick = torch.randint(0, K, (Q, B * T), device=device, generator=gen)
    x = torch.zeros(B * T, D, device=device, dtype=torch.float32)
    for q in range(Q):
        x += codebooks[q][pick[q]].float()
    x += (0.5 ** Q) * 0.05 * torch.randn(B * T, D, device=device, generator=gen) * D ** -0.5
    return x.view(B, T, D).contiguous(), codebooks


def reference(x, codebooks):
    """The seed's torch reference: greedy RVQ in fp32, full distance matrix.

    Also returns the smallest (d2 - d1) / (d2 + d1) over all frames and stages,
    where d1 <= d2 are the two smallest squared distances.
    """
    B, T, D = x.shape
    Q, K, _ = codebooks.shape
    r = x.reshape(B * T, D).clone()
    out = torch.zeros_like(r)
    codes = torch.empty(B * T, Q, dtype=torch.int32, device=x.device)
    margin = float("inf")
    for q in range(Q):
        C = codebooks[q].float()
        d = (r * r).sum(-1, keepdim=True) - 2.0 * (r @ C.t()) + (C * C).sum(-1).view(1, K)
        j = d.argmin(dim=-1)
        two = torch.topk(d.double(), 2, dim=-1, largest=False).values
        margin = min(margin, float(((two[:, 1] - two[:, 0]) / (two[:, 1] + two[:, 0])).min()))
        codes[:, q] = j.to(torch.int32)
        sel = C[j]
        r = r - sel
        out = out + sel
    return codes.view(B, T, Q), out.view(B, T, D), margin


def seed_reference(x, codebooks):
    """Seed 001's torch reference, verbatim: the timed peer (no margin bookkeeping)."""
    B, T, D = x.shape
    Q, K, _ = codebooks.shape
    r = x.reshape(B * T, D).clone()
    out = torch.zeros_like(r)
    codes = torch.empty(B * T, Q, dtype=torch.int32, device=x.device)
    for q in range(Q):
        C = codebooks[q].float()
        d = (r * r).sum(-1, keepdim=True) - 2.0 * (r @ C.t()) + (C * C).sum(-1).view(1, K)
        j = d.argmin(dim=-1)
        codes[:, q] = j.to(torch.int32)
        sel = C[j]
        r = r - sel
        out = out + sel
    return codes.view(B, T, Q), out.view(B, T, D)


def cdist_codes(x, codebooks):
    """Greedy RVQ codes from torch.cdist (no expansion of the square), fp32."""
    B, T, D = x.shape
    r = x.reshape(B * T, D).clone()
    codes = []
    for q in range(codebooks.shape[0]):
        C = codebooks[q].float()
        j = torch.cdist(r, C, compute_mode="donot_use_mm_for_euclid_dist").argmin(dim=-1)
        codes.append(j.to(torch.int32))
        r = r - C[j]
    return torch.stack(codes, dim=-1).view(B, T, -1)


def bf16_bits(cb):
    """bf16 tensor -> uint16 numpy array of its bit patterns."""
    return cb.cpu().contiguous().view(torch.int16).numpy().view(np.uint16)


def sha(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def rel_frobenius(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


# The seed's measure-quick shapes (B, T, Q, K, D).
QUICK_SHAPES = [(8, 1024, 8, 1024, 128), (4, 2048, 4, 512, 256), (16, 512, 8, 1024, 128)]


def bench(devices, repeats):
    """Times reference() (without its margin bookkeeping) per quick shape."""
    import time

    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    for dev in devices:
        for B, T, Q, K, D in QUICK_SHAPES:
            x, cb = make_inputs(B, T, Q, K, D, 0, dev)
            sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
            seed_reference(x, cb)
            sync()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                seed_reference(x, cb)
                sync()
                times.append(time.perf_counter() - t0)
            best = min(times)
            flops = 2 * Q * B * T * K * D
            print(f"torch-reference {dev} B={B} T={T} Q={Q} K={K} D={D}: best {best * 1e3:.1f} ms "
                  f"of {repeats}, {flops / best / 1e9:.1f} GFLOP/s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", action="store_true", help="time the torch reference instead")
    ap.add_argument("--bench-devices", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch CPU threads for --bench")
    ap.add_argument("--out")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = ap.parse_args()
    if args.bench:
        torch.set_num_threads(args.threads)
        bench(args.bench_devices.split(","), args.repeats)
        return
    if not args.out:
        ap.error("--out is required")
    if args.device.startswith("cuda"):
        # The reference is fp32: no TF32 in the matmul.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    want = set(filter(None, args.cases.split(",")))

    manifest = {"torch": torch.__version__, "device": args.device,
                "generator": "seed 001 make_inputs, torch.Generator(device)", "cases": []}
    determinism = {"torch": torch.__version__, "cases": {}}
    written_cb = {}
    for name, B, T, Q, K, D, seed in CASES:
        if want and name not in want:
            continue
        x, cb = make_inputs(B, T, Q, K, D, seed, args.device)
        x2, cb2 = make_inputs(B, T, Q, K, D, seed, args.device)
        xn, cbn = x.cpu().numpy(), bf16_bits(cb)
        det = {"device": args.device, "inputs_sha256": sha(xn, cbn),
               "codebooks_sha256": sha(cbn),
               "repeat_identical": bool(torch.equal(x, x2) and torch.equal(cb, cb2))}
        if args.device != "cpu":
            xc, cbc = make_inputs(B, T, Q, K, D, seed, "cpu")
            det["cpu_inputs_sha256"] = sha(xc.numpy(), bf16_bits(cbc))
            det["cpu_equals_device"] = det["cpu_inputs_sha256"] == det["inputs_sha256"]
        determinism["cases"][name] = det
        if not det["repeat_identical"]:
            fail(f"{name}: the generator is not repeatable on {args.device}")

        codes, quant, margin = reference(x, cb)
        codes2, quant2, _ = reference(x, cb)
        if not (torch.equal(codes, codes2) and torch.equal(quant, quant2)):
            fail(f"{name}: the reference is not repeatable on {args.device}")
        codes_np, quant_np = codes.cpu().numpy(), quant.cpu().numpy()

        ccodes, cquant, _ = reference(x.cpu(), cb.cpu())
        cpu_mismatch = int((ccodes.numpy() != codes_np).sum())
        cpu_rel = rel_frobenius(cquant.numpy(), quant_np)
        dist_mismatch = int((cdist_codes(x, cb).cpu().numpy() != codes_np).sum())
        if cpu_mismatch or cpu_rel > 1e-6 or dist_mismatch:
            fail(f"{name}: cross-checks disagree: cpu codes {cpu_mismatch} off, cpu quantized "
                 f"rel {cpu_rel:.3g}, cdist codes {dist_mismatch} off")

        cb_file = f"cb_q{Q}_k{K}_d{D}_s{seed}.npz"
        if cb_file in written_cb:
            if written_cb[cb_file] != det["codebooks_sha256"]:
                fail(f"{name}: codebooks differ from the earlier {cb_file}")
        else:
            np.savez_compressed(os.path.join(args.out, cb_file), codebooks=cbn)
            written_cb[cb_file] = det["codebooks_sha256"]
        np.savez_compressed(os.path.join(args.out, name + ".npz"),
                            x=xn, codes=codes_np.astype(np.int32), quantized=quant_np)
        entry = {"name": name, "B": B, "T": T, "Q": Q, "K": K, "D": D, "seed": seed,
                 "file": name + ".npz", "codebooks": cb_file, "min_margin": margin,
                 "cpu_reference_codes_mismatch": cpu_mismatch,
                 "cpu_reference_quantized_rel": cpu_rel,
                 "cdist_codes_mismatch": dist_mismatch}
        manifest["cases"].append(entry)
        print(f"{name}: B={B} T={T} Q={Q} K={K} D={D} seed={seed} margin={margin:.4f} "
              f"cpu-rel={cpu_rel:.2e} inputs={det['inputs_sha256'][:12]} "
              f"cpu==device={det.get('cpu_equals_device')}", flush=True)

    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(args.out, "determinism.json"), "w") as f:
        json.dump(determinism, f, indent=1)


if __name__ == "__main__":
    main()
