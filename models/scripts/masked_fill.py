#!/usr/bin/env python3
"""masked_fill.py: rewrite masked_fill's Where nodes of an ONNX graph as arithmetic.

  python3 models/scripts/masked_fill.py IN.onnx OUT.onnx

torch exports `x.masked_fill(cond, s)` as Where(cond, s, x) with a scalar
constant s and a condition that broadcasts against x. ONNX Runtime 1.29's
CUDA execution provider (the plugin EP build this project uses, see
scripts/ort-cuda-ep.sh) crashes with SIGSEGV inside Run on such a Where when
the condition broadcasts along the last axis ([B,T,1] against [B,T,C]:
the conformer convolution module's padding mask); found by
scripts/bench/ort_cuda_ep_bisect.py on the H200. This rewrite replaces every
float Where(cond, s, x) with a scalar constant s by

    m = Cast(cond, float);  y = x * (1 - m)            (s == 0)
                            y = x * (1 - m) + s * m     (s != 0)

which is exact where cond is false (x * 1 + (+-0) == x) and gives s where
cond is true as long as x is finite there (masked positions hold finite
activations or attention scores in this model). Other Where nodes (the
int64 length arithmetic) are left alone. train.export_onnx applies it to
every export; it was applied once to the bundled models/default/model.onnx.
"""

import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _scalar_constants(graph):
    """name -> float value of every scalar float Constant node or initializer."""
    out = {}
    for init in graph.initializer:
        a = numpy_helper.to_array(init)
        if a.size == 1 and a.ndim == 0 and a.dtype == np.float32:
            out[init.name] = float(a)
    for n in graph.node:
        if n.op_type != "Constant" or len(n.attribute) != 1 or n.attribute[0].name != "value":
            continue
        a = numpy_helper.to_array(n.attribute[0].t)
        if a.ndim == 0 and a.dtype == np.float32:
            out[n.output[0]] = float(a)
    return out


def rewrite(model):
    """Rewrite model in place; return the number of Where nodes replaced."""
    g = model.graph
    consts = _scalar_constants(g)
    one = "masked_fill_one"
    nodes, count = [], 0
    for n in g.node:
        if n.op_type != "Where" or n.input[1] not in consts:
            nodes.append(n)
            continue
        cond, s, x, y = n.input[0], consts[n.input[1]], n.input[2], n.output[0]
        p = (n.name or y) + "/masked_fill"
        nodes += [
            helper.make_node("Cast", [cond], [p + "/m"], name=p + "/Cast", to=onnx.TensorProto.FLOAT),
            helper.make_node("Sub", [one, p + "/m"], [p + "/keep"], name=p + "/Sub"),
        ]
        if s == 0.0:
            nodes.append(helper.make_node("Mul", [x, p + "/keep"], [y], name=p + "/Mul"))
        else:
            nodes += [
                helper.make_node("Mul", [x, p + "/keep"], [p + "/kept"], name=p + "/Mul"),
                helper.make_node("Mul", [p + "/m", n.input[1]], [p + "/fill"], name=p + "/MulFill"),
                helper.make_node("Add", [p + "/kept", p + "/fill"], [y], name=p + "/Add"),
            ]
        count += 1
    if count:
        del g.node[:]
        g.node.extend(nodes)
        g.initializer.append(numpy_helper.from_array(np.array(1.0, dtype=np.float32), one))
    return count


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    m = onnx.load(sys.argv[1])
    n = rewrite(m)
    onnx.checker.check_model(m)
    onnx.save(m, sys.argv[2])
    print(f"{sys.argv[1]} -> {sys.argv[2]}: {n} masked_fill Where nodes rewritten", file=sys.stderr)


if __name__ == "__main__":
    main()
