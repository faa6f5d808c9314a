#!/usr/bin/env python3
"""export_large.py: a larger encoder of the bundled model's family, with
random weights, for timing (issue 10's GPU pipeline benchmark).

  python3 export_large.py OUT_DIR [--d 384 --ff 1536 --heads 6 --layers 9 --seed 0]

Writes OUT_DIR/model.onnx (same CharCTC architecture and NeMo CTC signature
as models/default: audio_signal f32 [B,128,T], length i64 [B] -> logprobs
[B,T',29] log-softmaxed, encoded_lengths; opset 17, dynamic batch and time,
exported by train.export_onnx), OUT_DIR/model.yaml (the default manifest with
another name) and tokens.txt. The default sizes give about 10x the bundled
model's 3.1 M parameters. Weights are torch's default initialisation under
--seed: the transcripts are meaningless, the work per frame is real.

It is built on the GPU host (about 125 MB, too large to carry there), in a
few seconds; it prints one JSON line with the parameter count and file size.
"""

import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
from train import export_onnx  # noqa: E402

DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "default")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--ff", type=int, default=1536)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--layers", type=int, default=9)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.d % a.heads:
        sys.exit(f"--d {a.d} is not a multiple of --heads {a.heads}")
    torch.manual_seed(a.seed)
    net = M.CharCTC(d=a.d, ff=a.ff, heads=a.heads, layers=a.layers).eval()
    base = M.count_params(M.CharCTC())
    os.makedirs(a.out, exist_ok=True)
    size = export_onnx(net, os.path.join(a.out, "model.onnx"))
    shutil.copy(os.path.join(DEFAULT, "tokens.txt"), os.path.join(a.out, "tokens.txt"))
    with open(os.path.join(DEFAULT, "model.yaml")) as f:
        manifest = f.read()
    name = f"edge-char-ctc-large-d{a.d}-l{a.layers}-random"
    manifest = manifest.replace("name: edge-char-ctc\n", f"name: {name}\n", 1)
    if name not in manifest:
        sys.exit("models/default/model.yaml has no 'name: edge-char-ctc' line to rename")
    with open(os.path.join(a.out, "model.yaml"), "w") as f:
        f.write(f"# {name}: random weights, for timing only (models/scripts/export_large.py)\n" + manifest)
    print(json.dumps({"name": name, "params": M.count_params(net), "bundled_params": base,
                      "ratio": round(M.count_params(net) / base, 2), "onnx_bytes": size}))


if __name__ == "__main__":
    main()
