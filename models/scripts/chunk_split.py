#!/usr/bin/env python3
"""chunk_split.py: rewrite torch.chunk's Slice chains of an ONNX graph as one Split.

  python3 models/scripts/chunk_split.py IN.onnx OUT.onnx

torch exports `x.chunk(n, dim)` on a dimension it cannot size statically as
n Slice nodes whose starts and ends are computed at run time:

    D = dim_size / n     (shape arithmetic)
    Slice(x, starts=0,     ends=D*1, axes=[dim])
    Slice(x, starts=D*1,   ends=D*2, axes=[dim])
    ...
    Slice(x, starts=D*(n-1), ends=D*n, axes=[dim])

ONNX Runtime 1.29's CUDA execution provider (the plugin EP build this
project uses, scripts/ort-cuda-ep.sh) crashes with SIGSEGV inside Run on
these Slices (the attention's q/k/v chunk); found by
scripts/bench/ort_cuda_ep_bisect.py on the H200, which ran every node of the
bundled model alone on that EP: the 12 Slices were the only ones to crash.
This rewrite replaces each such chain by Split(x, axis=dim) with n outputs
and no split sizes (equal parts), which is the same tensors whenever the
dimension divides by n (as q/k/v's 3*heads does) and an error from ONNX
Runtime, not a wrong answer, when it does not. The shape arithmetic left
without consumers is removed. train.export_onnx applies it to every export;
it was applied once to the bundled models/default/model.onnx.
"""

import sys

import onnx
from onnx import helper, numpy_helper


def _constants(graph):
    """name -> numpy value of every Constant node output and initializer."""
    out = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return out


def _scalar(consts, name):
    """The integer in a one-element constant, or None."""
    a = consts.get(name)
    if a is None or a.size != 1 or a.dtype.kind not in "iu":
        return None
    return int(a.reshape(-1)[0])


def _chunk_chains(graph):
    """Yield (data, axis, [slice nodes in order]) for every torch.chunk pattern."""
    consts = _constants(graph)
    producer = {o: n for n in graph.node for o in n.output}

    def multiple(name):
        """(D, k) when name is Mul(D, k) with a constant k, or (None, 0) for constant 0."""
        if _scalar(consts, name) == 0:
            return None, 0
        p = producer.get(name)
        if p is None or p.op_type != "Mul":
            return None, None
        k = _scalar(consts, p.input[1])
        return (p.input[0], k) if k is not None else (None, None)

    def ceil_div(d, data, axis, n):
        """d is torch.chunk's part size (shape(data)[axis] + n-1) / n."""
        div = producer.get(d)
        if div is None or div.op_type != "Div" or _scalar(consts, div.input[1]) != n:
            return False
        add = producer.get(div.input[0])
        if add is None or add.op_type != "Add" or _scalar(consts, add.input[1]) != n - 1:
            return False
        gather = producer.get(add.input[0])
        if gather is None or gather.op_type != "Gather" or _scalar(consts, gather.input[1]) != axis:
            return False
        shape = producer.get(gather.input[0])
        return shape is not None and shape.op_type == "Shape" and shape.input[0] == data

    groups = {}
    for n in graph.node:
        if n.op_type != "Slice" or len(n.input) != 4:  # data, starts, ends, axes; no steps
            continue
        axis = _scalar(consts, n.input[3])
        if axis is None or n.input[1] in consts and n.input[2] in consts:
            continue
        groups.setdefault((n.input[0], axis), []).append(n)
    for (data, axis), slices in groups.items():
        parts = {}
        for s in slices:
            d0, k0 = multiple(s.input[1])
            d1, k1 = multiple(s.input[2])
            if k0 is None or k1 != k0 + 1 or k0 in parts:
                break
            parts[k0] = (d0, d1, s)
        else:
            n = len(parts)
            divisors = {d for d0, d1, _ in parts.values() for d in (d0, d1) if d is not None}
            if n >= 2 and sorted(parts) == list(range(n)) and len(divisors) == 1 and ceil_div(divisors.pop(), data, axis, n):
                yield data, axis, [parts[k][2] for k in range(n)]


def _remove_dead(graph):
    """Drop nodes none of whose outputs is consumed or a graph output."""
    while True:
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        keep = [n for n in graph.node if any(o in used for o in n.output)]
        if len(keep) == len(graph.node):
            return
        del graph.node[:]
        graph.node.extend(keep)


def rewrite(model):
    """Rewrite model in place; return the number of chunk chains replaced."""
    g = model.graph
    chains = list(_chunk_chains(g))
    first = {id(c[2][0]): c for c in chains}
    gone = {id(s) for c in chains for s in c[2]}
    nodes = []
    for n in g.node:
        if id(n) in first:
            data, axis, slices = first[id(n)]
            nodes.append(helper.make_node("Split", [data], [s.output[0] for s in slices],
                                          name=slices[0].name + "/chunk_split", axis=axis))
        elif id(n) not in gone:
            nodes.append(n)
    if chains:
        del g.node[:]
        g.node.extend(nodes)
        _remove_dead(g)
    return len(chains)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: chunk_split.py IN.onnx OUT.onnx")
    m = onnx.load(sys.argv[1])
    n = rewrite(m)
    onnx.checker.check_model(m)
    onnx.save(m, sys.argv[2])
    print(f"{sys.argv[1]} -> {sys.argv[2]}: {n} chunk Slice chains rewritten as Split", file=sys.stderr)


if __name__ == "__main__":
    main()
