#!/usr/bin/env python3
"""ort_cuda_ep_check.py: independent check (ONNX Runtime's Python API, not
edge's Go bridge) that the CUDA plugin EP registers into this host's ORT
core and offers a GPU, and that a session on it runs a model.

  python3 scripts/bench/ort_cuda_ep_check.py EP_LIBRARY [MODEL.onnx]

Prints the EP devices (name, type, vendor/device ids, memory info when the
API has it) and, given a model with inputs audio_signal [B,128,T] f32 and
length [B] i64 (models/default/model.onnx), the providers of a session
selected by EP device and max |diff| of its output against the CPU provider.
"""

import faulthandler
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    faulthandler.enable()
    lib = sys.argv[1]
    print("onnxruntime", ort.__version__)
    ort.register_execution_provider_library("edge-cuda-check", lib)
    devs = ort.get_ep_devices()
    cuda = None
    for d in devs:
        mem = getattr(d, "memory_info", None)
        print(f"ep device: {d.ep_name} type={d.device.type} vendor={d.device.vendor} "
              f"vendor_id={d.device.vendor_id:#x} device_id={d.device.device_id:#x} meta={dict(d.device.metadata)} "
              f"ep_options={dict(d.ep_options)} mem={mem}")
        if d.ep_name == "CUDAExecutionProvider" and cuda is None:
            cuda = d
    if cuda is None or len(sys.argv) < 3:
        return 0 if cuda is not None else 1
    so = ort.SessionOptions()
    so.add_provider_for_devices([cuda], {"device_id": "0"})
    sess = ort.InferenceSession(sys.argv[2], sess_options=so)
    print("providers", sess.get_providers(), flush=True)
    cpu = ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 128, 3000), dtype=np.float32)
    n = np.array([3000], dtype=np.int64)
    feeds = {"audio_signal": x, "length": n}
    want = cpu.run(None, feeds)[0]
    print("cpu run ok", flush=True)
    got = sess.run(None, feeds)[0]
    print("cuda run ok", flush=True)
    t0 = time.perf_counter()
    for _ in range(10):
        sess.run(None, feeds)
    print(f"max|diff| vs CPU {np.abs(want - got).max():.3g}; {(time.perf_counter() - t0) / 10 * 1e3:.2f} ms per 30 s run (host I/O)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
