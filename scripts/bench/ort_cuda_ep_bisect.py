#!/usr/bin/env python3
"""ort_cuda_ep_bisect.py: find what makes the CUDA plugin EP crash on a model.

  python3 scripts/bench/ort_cuda_ep_bisect.py EP_LIBRARY MODEL.onnx OUTDIR

Every session runs in a child process (a crash inside ONNX Runtime kills
only the child), on ONNX Runtime's own Python API with the CUDA plugin EP
selected by EP device, fed the encoder's inputs (audio_signal [1,128,3000]
f32, length [1] i64). It reports, to stdout and OUTDIR/report.txt:

 1. the full model at each graph optimisation level (disable, basic,
    extended, all) and with a few provider options, each: ok with max |diff|
    against the CPU provider, or the child's exit status (-11: SIGSEGV);
 2. the optimised graph's op types (OUTDIR/optimized.onnx) and the
    session's node placement log (OUTDIR/placement.log);
 3. for the first crashing configuration, a bisection over graph prefixes
    (onnx.utils.Extractor, outputs = one node's outputs): the first node
    whose prefix crashes, with its op type, attributes and input shapes.
"""

import collections
import faulthandler
import json
import os
import subprocess
import sys
import time

import numpy as np

LEVELS = ["disable", "basic", "extended", "all"]


def feeds():
    x = np.random.default_rng(0).standard_normal((1, 128, 3000), dtype=np.float32)
    return {"audio_signal": x, "length": np.array([3000], dtype=np.int64)}


def child(lib, model, level, opts, save, verbose):
    """Run one CUDA session in this process; print one JSON line."""
    faulthandler.enable()
    import onnxruntime as ort

    ort.register_execution_provider_library("edge-cuda-bisect", lib)
    cuda = next(d for d in ort.get_ep_devices() if d.ep_name == "CUDAExecutionProvider")
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    if save:
        so.optimized_model_filepath = save
    if verbose:
        so.log_severity_level = 0
        so.log_verbosity_level = 1
    so.add_provider_for_devices([cuda], dict({"device_id": "0"}, **opts))
    sess = ort.InferenceSession(model, sess_options=so)
    names = [i.name for i in sess.get_inputs()]
    f = {k: v for k, v in feeds().items() if k in names}
    print("session ok", flush=True)
    got = sess.run(None, f)
    cpu = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, f)
    diff = max(float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max()) if np.size(a) else 0.0
               for a, b in zip(got, cpu))
    print(json.dumps({"ok": True, "maxdiff": diff}), flush=True)


def spawn(lib, model, level="all", opts=None, save="", verbose=False, timeout=40, log=None):
    """Run child(...) in a subprocess: (ok, detail)."""
    args = [sys.executable, __file__, "--child", lib, model, level, json.dumps(opts or {}), save, "1" if verbose else ""]
    t0 = time.time()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timeout after {timeout}s"
    if log:
        with open(log, "w") as fh:
            fh.write(p.stdout + p.stderr)
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            return True, f"ok maxdiff={json.loads(line)['maxdiff']:.3g} ({time.time() - t0:.1f}s)"
    tail = (p.stderr.strip().splitlines() or ["(no stderr)"])[-1]
    stage = "in Run" if "session ok" in p.stdout else "before Run"
    return False, f"rc={p.returncode} {stage}: {tail[:200]}"


def prefix_models(model_path, outdir):
    """Return (nodes, make(k)): make(k) writes the graph prefix ending at node k."""
    import onnx
    from onnx import shape_inference, utils

    m = shape_inference.infer_shapes(onnx.load(model_path))
    typed = {v.name: v for v in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input)}
    nodes = [n for n in m.graph.node if n.op_type != "Constant"]
    ex = utils.Extractor(m)
    ins = [i.name for i in m.graph.input]

    def make(k):
        outs = [o for o in nodes[k].output if o in typed]
        if not outs:
            return None
        sub = ex.extract_model(ins, outs)
        path = os.path.join(outdir, "prefix.onnx")
        onnx.save(sub, path)
        return path

    def describe(k):
        n = nodes[k]
        shapes = []
        for i in n.input:
            v = typed.get(i)
            if v is None:
                shapes.append(f"{i}: ?")
                continue
            t = v.type.tensor_type
            dims = [d.dim_param or d.dim_value for d in t.shape.dim]
            shapes.append(f"{i}: {onnx.TensorProto.DataType.Name(t.elem_type)}{dims}")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        return f"node #{k} {n.name} op={n.op_type} attrs={attrs} inputs=[{'; '.join(shapes)}] outputs={list(n.output)}"

    return nodes, make, describe


def main():
    lib, model, outdir = sys.argv[1:4]
    os.makedirs(outdir, exist_ok=True)
    rep = open(os.path.join(outdir, "report.txt"), "w")

    def say(s):
        print(s, flush=True)
        rep.write(s + "\n")
        rep.flush()

    configs = [(lv, {}) for lv in LEVELS] + [
        ("all", {"use_tf32": "0"}),
        ("all", {"cudnn_conv_algo_search": "DEFAULT"}),
        ("all", {"arena_extend_strategy": "kSameAsRequested"}),
    ]
    crashing = None
    for lv, opts in configs:
        ok, detail = spawn(lib, model, lv, opts)
        say(f"full model level={lv} opts={opts}: {detail}")
        if not ok and crashing is None:
            crashing = (lv, opts)

    import onnx

    opt_path = os.path.join(outdir, "optimized.onnx")
    ok, detail = spawn(lib, model, "all", {}, save=opt_path, verbose=True, log=os.path.join(outdir, "placement.log"))
    if os.path.exists(opt_path):
        om = onnx.load(opt_path)
        say("optimized graph ops: " + json.dumps(collections.Counter(n.op_type for n in om.graph.node)))
    if crashing is None:
        say("no configuration crashed")
        return 0
    lv, opts = crashing
    nodes, make, describe = prefix_models(model, outdir)
    lo, hi = -1, len(nodes) - 1
    say(f"bisecting {len(nodes)} nodes at level={lv} opts={opts}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        path = make(mid)
        k = mid
        while path is None and k < hi:
            k += 1
            path = make(k)
        if path is None:
            break
        ok, detail = spawn(lib, path, lv, opts, timeout=30)
        say(f"  prefix ..#{k} ({nodes[k].op_type}): {detail}")
        if ok:
            lo = k
        else:
            hi = k
    say("first crashing prefix ends at " + describe(hi))
    if hi > 0:
        say("last good prefix ends at " + describe(lo if lo >= 0 else 0))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        lib, model, level, opts, save, verbose = sys.argv[2:8]
        child(lib, model, level, json.loads(opts), save, bool(verbose))
        sys.exit(0)
    sys.exit(main())
