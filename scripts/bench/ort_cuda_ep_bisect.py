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
 3. every node alone (its inputs fed with the values a CPU run of the whole
    model gave them), many per child process, restarting after a crash: the
    nodes that crash (SIGSEGV) or raise;
 4. for the first crashing configuration, a bisection over graph prefixes
    (onnx.utils.Extractor, outputs = every typed tensor of nodes 0..k, so a
    prefix runs all of them): the first node whose prefix crashes, with its
    op type, attributes and input shapes.
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


def cuda_device(lib):
    import onnxruntime as ort

    ort.register_execution_provider_library("edge-cuda-bisect", lib)
    return next(d for d in ort.get_ep_devices() if d.ep_name == "CUDAExecutionProvider")


def child(lib, model, level, opts, save, verbose):
    """Run one CUDA session in this process; print one JSON line."""
    faulthandler.enable()
    import onnxruntime as ort

    cuda = cuda_device(lib)
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
        # every typed tensor made by nodes[0..k]: the prefix runs all of them, not only node k's ancestors
        outs = [o for n in nodes[: k + 1] for o in n.output if o in typed and o not in ins]
        if not any(o in typed for o in nodes[k].output):
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


def tensor_type(dtype):
    from onnx import helper

    f = getattr(helper, "np_dtype_to_tensor_dtype", None)
    if f is not None:
        return f(dtype)
    import onnx.mapping

    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[dtype]


def single_node_models(model_path, values):
    """Yield (index, description, model bytes, feeds): every non-Constant node
    of the model alone, its tensor inputs fed with the values a CPU run of the
    whole model gave them (values: name -> array), constants as initializers."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(model_path)
    consts = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            consts[n.output[0]] = t
    k = -1
    for n in m.graph.node:
        if n.op_type == "Constant":
            continue
        k += 1
        if any(o not in values for o in n.output) or any(i and i not in values and i not in consts for i in n.input):
            continue
        ins, inits, f = [], [], {}
        for i in n.input:
            if not i or any(v.name == i for v in ins) or any(t.name == i for t in inits):
                continue
            if i in consts:
                inits.append(consts[i])
            else:
                a = values[i]
                ins.append(helper.make_tensor_value_info(i, tensor_type(a.dtype), list(a.shape)))
                f[i] = a
        outs = [helper.make_tensor_value_info(o, tensor_type(values[o].dtype), list(values[o].shape))
                for o in n.output]
        g = helper.make_graph([n], "single", ins, outs, inits)
        sm = helper.make_model(g, opset_imports=m.opset_import, ir_version=m.ir_version)
        shapes = "; ".join(f"{v.name}{list(values[v.name].shape)}{values[v.name].dtype}" for v in ins)
        yield k, f"{n.name} op={n.op_type} inputs=[{shapes}]", sm.SerializeToString(), f


def scan_child(lib, model, values_path, start):
    """Run every node alone on the CUDA EP from node index start on; print
    'start K' before and 'ok K' / 'error K ...' after each (a crash leaves a
    start without an end)."""
    faulthandler.enable()
    import onnxruntime as ort

    cuda = cuda_device(lib)
    values = dict(np.load(values_path))
    for k, desc, data, f in single_node_models(model, values):
        if k < start:
            continue
        print(f"start {k} {desc}", flush=True)
        try:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.log_severity_level = 3
            so.add_provider_for_devices([cuda], {"device_id": "0"})
            ort.InferenceSession(data, sess_options=so).run(None, f)
            print(f"ok {k}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"error {k} {str(e)[:160]!r}", flush=True)


def scan(lib, model, outdir, say, budget=90):
    """Every node alone on the CUDA EP; report the ones that crash or fail."""
    import onnx
    import onnxruntime as ort

    nodes, make, _ = prefix_models(model, outdir)
    full = make(len(nodes) - 1)
    sess = ort.InferenceSession(full, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    f = {k: v for k, v in feeds().items() if k in names}
    values = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, f)))
    values.update(feeds())
    vpath = os.path.join(outdir, "values.npz")
    np.savez(vpath, **values)
    start, crashed, failed, ran, t0 = 0, [], [], 0, time.time()
    while time.time() - t0 < budget:
        p = subprocess.run([sys.executable, __file__, "--scan", lib, model, vpath, str(start)],
                           capture_output=True, text=True, timeout=max(5, budget - (time.time() - t0)))
        last = None
        for line in p.stdout.splitlines():
            w = line.split(" ", 2)
            if w[0] == "start":
                last = (int(w[1]), w[2] if len(w) > 2 else "")
            elif w[0] == "ok":
                ran, last = ran + 1, None
            elif w[0] == "error":
                ran, last = ran + 1, None
                failed.append(line)
        if last is None:
            break
        crashed.append(f"node #{last[0]} {last[1]} (rc={p.returncode})")
        start = last[0] + 1
    os.remove(vpath)
    say(f"single-node scan: {ran} nodes ran alone on the CUDA EP, {len(crashed)} crashed, {len(failed)} raised")
    for c in crashed:
        say("  CRASH " + c)
    for c in failed[:20]:
        say("  " + c)


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
    scan(lib, model, outdir, say)
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
    if len(sys.argv) > 1 and sys.argv[1] == "--scan":
        scan_child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        lib, model, level, opts, save, verbose = sys.argv[2:8]
        child(lib, model, level, json.loads(opts), save, bool(verbose))
        sys.exit(0)
    sys.exit(main())
