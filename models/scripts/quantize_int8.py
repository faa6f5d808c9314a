#!/usr/bin/env python3
"""quantize_int8.py: an int8 dynamically quantised copy of an fp32 encoder.

  python3 quantize_int8.py IN.onnx OUT_DIR

Writes OUT_DIR/model.int8.onnx with ONNX Runtime's dynamic quantisation
(onnxruntime.quantization.quantize_dynamic): the weights of every MatMul
(attention projections, feed-forward layers, the output layer) are stored
as int8 with one scale per output channel, and activations are quantised
per call (DynamicQuantizeLinear -> MatMulInteger), the recipe sherpa-onnx uses
for its int8 CTC exports. Convolutions stay fp32 (ConvInteger has no fast
CPU kernel). It also writes OUT_DIR/model.int8.matmul-qint8-tensor.onnx,
the same with one scale per weight tensor, for comparison, and prints one
JSON line per file with its size and the number of quantised MatMuls.

It needs the onnx and onnxruntime Python packages (the GPU host has both).
"""

import argparse
import json
import os

import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic


def count(path, op):
    m = onnx.load(path, load_external_data=False)
    return sum(1 for n in m.graph.node if n.op_type == op)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("out_dir")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    variants = {
        "model.int8.onnx": dict(per_channel=True),
        "model.int8.matmul-qint8-tensor.onnx": dict(per_channel=False),
    }
    for name, kw in variants.items():
        out = os.path.join(a.out_dir, name)
        quantize_dynamic(a.input, out, op_types_to_quantize=["MatMul"],
                         weight_type=QuantType.QInt8, **kw)
        print(json.dumps({"file": name, "bytes": os.path.getsize(out),
                          "matmul_integer": count(out, "MatMulInteger"),
                          "matmul_fp32": count(out, "MatMul"), **kw}))


if __name__ == "__main__":
    main()
