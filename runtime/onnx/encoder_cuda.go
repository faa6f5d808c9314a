//go:build cuda

package onnx

import (
	"context"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/edgespeech/edge/kernels"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/model"
)

// The cuda build gives the encoder op a CUDA implementation: features (or
// pcm) arrive in device memory from the fbank op and the log-probs leave in
// device memory for ctc_greedy / ctc_align.
//
// With execution_provider=cuda and bind=device (the default) nothing is
// copied between host and device: the input tensor is wrapped as an
// OrtValue where it is and bound as the model's input, the model runs on
// the backend's stream (the CUDA EP's user_compute_stream), its output stays
// where ONNX Runtime put it (the EP's device memory) and is moved into a
// pool tensor by a device kernel on the same stream: the log-softmax of
// kernels/pipeline.cu for models that emit logits, a device-to-device copy
// otherwise. The per-item lengths are small host tensors (8 bytes an item)
// that ONNX Runtime moves itself. Device inputs are not scanned for NaN/Inf
// (that would cost a synchronising copy): a NaN reaches the log-probs, which
// ctc_greedy and ctc_align check on the device.
//
// With bind=host, or on the CPU provider (execution_provider=cpu, or after
// fallback=cpu), the input is downloaded, the model runs on host tensors
// and the log-probs are uploaded again: the host round trip the zero-copy
// path avoids, kept for comparison. Those copies are the backend's, counted
// in its Stats.
func init() {
	runtime.RegisterImplementation("encoder", "cuda", cuda.Constructor(newCUDAEncoder))
}

// Launch geometry of the pipeline.cu kernels the encoder uses.
const (
	logSoftmaxBlock = 256  // one warp per row
	normalizeBlock  = 1024 // one block per item
)

type cudaEncoder struct {
	*Encoder
	be       *cuda.Backend
	deviceIO bool
	// ortInternal counts the copies ONNX Runtime makes itself on the host
	// path (input up, output down): they do not go through the backend.
	ortInternal runtime.TransferStats

	logSoftmax, normalizePCM *cuda.Kernel
}

func newCUDAEncoder(p runtime.Params, b *cuda.Backend) (runtime.Op, error) {
	path, opts, err := optionsFromParams(p)
	if err != nil {
		return nil, err
	}
	deviceIO := opts.Provider == ProviderCUDA && p.Str("bind") == BindDevice
	if deviceIO {
		opts.Stream = uintptr(unsafe.Pointer(b.Stream().C())) // the CUstream handle
		opts.Bind = true
	}
	e, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	o := &cudaEncoder{Encoder: e, be: b, deviceIO: deviceIO && e.Provider() == ProviderCUDA}
	image, _, err := kernels.Fatbin()
	if err == nil {
		var mod *cuda.Module
		if mod, err = b.Module("edge", image); err == nil {
			if o.logSoftmax, err = mod.Kernel("pipeline_log_softmax"); err == nil {
				o.normalizePCM, err = mod.Kernel("pipeline_normalize_pcm")
			}
		}
	}
	if err != nil {
		_ = e.Close()
		return nil, err
	}
	return o, nil
}

// DeviceIO reports whether the encoder binds its input and output in device
// memory (zero-copy) rather than round-tripping through the host.
func (o *cudaEncoder) DeviceIO() bool { return o.deviceIO }

// ORTTransfers is the host<->device traffic ONNX Runtime itself made on the
// host path (zero on the device path, except the per-item lengths).
func (o *cudaEncoder) ORTTransfers() runtime.TransferStats { return o.ortInternal }

// Run encodes a batch whose input (features or pcm) is in device memory;
// log_probs come back in device memory, lengths on the host.
func (o *cudaEncoder) Run(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	if !o.deviceIO {
		return o.runHost(ctx, in)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sess == nil {
		return nil, fmt.Errorf("encoder is closed")
	}
	x, err := o.checkShape(in)
	if err != nil {
		return nil, err
	}
	xPtr, err := cuda.Ptr(x)
	if err != nil {
		return nil, fmt.Errorf("input %q: %w", o.sig.input.edge, err)
	}
	shape := x.Shape()
	batch, length := shape[0], shape[len(shape)-1]
	if o.sig.melAxis == 2 {
		length = shape[1]
	}
	lengths, err := checkLengths(in[model.InputLengths], batch, length, o.sig.input.edge)
	if err != nil {
		return nil, err
	}
	if o.normalize == model.NormalizePerUtterance {
		norm, err := o.normalized(xPtr, shape, lengths)
		if err != nil {
			return nil, err
		}
		defer norm.Free()
		xPtr = norm.Ptr()
	}
	out, modelLengths, err := o.boundRun(ctx, o.outInfo, uintptr(xPtr), shape, length, lengths)
	if err != nil {
		return nil, err
	}
	defer out.release()
	frames, vocab, err := o.checkScores(out.shape, batch, length)
	if err != nil {
		return nil, err
	}
	lp, err := o.be.Empty(runtime.F32, runtime.Shape{batch, frames, vocab})
	if err != nil {
		return nil, err
	}
	dst, _ := cuda.Ptr(lp)
	src := cu.DevicePtr(out.addr)
	rows := batch * frames
	if o.sig.logits {
		warps := logSoftmaxBlock / 32
		err = o.logSoftmax.Launch(cuda.Dim3{X: (rows + warps - 1) / warps, Y: 1, Z: 1}, cuda.Dim3{X: logSoftmaxBlock, Y: 1, Z: 1}, 0,
			&kernels.PipelineLogSoftmaxParams{X: uint64(src), Y: uint64(dst), Rows: int64(rows), V: int64(vocab)})
	} else {
		err = o.be.Do(func() error { return cu.MemcpyDtoDAsync(dst, src, lp.Bytes(), o.be.Stream()) })
	}
	if err != nil {
		_ = lp.Buffer().Free()
		return nil, fmt.Errorf("moving the model's %s into a device tensor: %w", o.sig.output.name(), err)
	}
	ol, err := o.outputLengths(modelLengths, frames, length, lengths)
	if err != nil {
		_ = lp.Buffer().Free()
		return nil, err
	}
	return runtime.Tensors{model.OutputLogProbs: lp, model.OutputLengths: ol}, nil
}

// checkShape is checkInput without the value scan (device memory).
func (o *cudaEncoder) checkShape(in runtime.Tensors) (*runtime.Tensor, error) {
	name := o.sig.input.edge
	x := in[name]
	if x == nil {
		return nil, fmt.Errorf("missing input %q (ONNX input %s %s)", name, o.sig.input.name(), dimsString(o.sig.input.info.Dimensions))
	}
	if x.OnHost() || x.DType() != runtime.F32 {
		return nil, fmt.Errorf("input %q is %v, want f32 in device memory", name, x)
	}
	shape, decl := x.Shape(), o.sig.input.info.Dimensions
	if len(shape) != len(decl) {
		return nil, fmt.Errorf("input %q has shape %v (rank %d), the model's %s wants rank %d %s", name, shape, len(shape), o.sig.input.name(), len(decl), dimsString(decl))
	}
	for i, d := range shape {
		if d == 0 {
			return nil, fmt.Errorf("input %q has shape %v: empty (axis %d is 0)", name, shape, i)
		}
		if decl[i] > 0 && int64(d) != decl[i] {
			return nil, fmt.Errorf("input %q has shape %v, the model's %s wants %s (axis %d must be %d)", name, shape, o.sig.input.name(), dimsString(decl), i, decl[i])
		}
	}
	return x, nil
}

// normalized queues per-utterance normalisation of device pcm [B, N] into a
// new pool buffer (pipeline_normalize_pcm).
func (o *cudaEncoder) normalized(x cu.DevicePtr, shape runtime.Shape, lengths []int64) (*cuda.Buffer, error) {
	B, N := shape[0], shape[1]
	lens, err := o.be.Malloc(int64(8 * B))
	if err != nil {
		return nil, err
	}
	defer lens.Free() // stream-ordered: safe once the launch is queued
	if err := o.be.HostToDevice(lens.Ptr(), cuda.Bytes(lengths)); err != nil {
		return nil, err
	}
	y, err := o.be.Malloc(int64(4 * B * N))
	if err != nil {
		return nil, err
	}
	err = o.normalizePCM.Launch(cuda.Dim3{X: B, Y: 1, Z: 1}, cuda.Dim3{X: normalizeBlock, Y: 1, Z: 1}, 0,
		&kernels.PipelineNormalizePCMParams{X: uint64(x), Y: uint64(y.Ptr()), Lengths: uint64(lens.Ptr()), N: int64(N)})
	if err != nil {
		_ = y.Free()
		return nil, err
	}
	return y, nil
}

// runHost is the host round trip: download the input, run on host tensors,
// upload the log-probs.
func (o *cudaEncoder) runHost(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	host := runtime.Tensors{}
	for k, t := range in {
		h, err := o.be.Download(t)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", k, err)
		}
		host[k] = h
	}
	out, err := o.Encoder.Run(ctx, host)
	if err != nil {
		return nil, err
	}
	if o.Provider() == ProviderCUDA { // ORT moved the input up and the output down itself
		x := host[o.sig.input.edge]
		o.ortInternal.Add(runtime.TransferStats{HostToDevice: 1, HostToDeviceBytes: x.Bytes(),
			DeviceToHost: 1, DeviceToHostBytes: out[model.OutputLogProbs].Bytes()})
	}
	lp, err := o.be.Upload(out[model.OutputLogProbs])
	if err != nil {
		return nil, err
	}
	out[model.OutputLogProbs] = lp
	return out, nil
}
