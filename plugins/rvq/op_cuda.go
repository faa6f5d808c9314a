//go:build cuda

package rvq

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	rt "github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// The cuda build gives rvq_encode and rvq_decode a CUDA implementation (the
// kernels of kernels/rvq.cu). This file's init runs after op.go's, which
// registers the ops.
//
// The CUDA ops take x / codes in device memory (host tensors are uploaded)
// and return device-resident outputs. The codebooks are checked and
// prepared on the host (the same checks as the CPU op, ||C_e||^2/2 computed
// by the CPU code so that it is bit-identical) and uploaded when they change
// (the op compares them with the last ones it prepared); Go callers can hold
// a DeviceCodebooks instead. One 8-byte status word comes back per Run (the
// input check), the only synchronising copy besides a device codebooks
// input, which is downloaded for that comparison.
func init() {
	rt.RegisterImplementation("rvq_encode", "cuda", cuda.Constructor(newCUDAOp(true)))
	rt.RegisterImplementation("rvq_decode", "cuda", cuda.Constructor(newCUDAOp(false)))
}

// cudaOp is rvq_encode or rvq_decode on the CUDA backend. It keeps the
// device codebooks of the last Run and reuses them while the codebooks
// input holds the same bytes (shape, dtype and every value compared), so a
// pipeline pays for checking and uploading them once. Close frees them.
type cudaOp struct {
	be     *cuda.Backend
	sizes  []int
	split  int
	fp32   bool // codebooks are fp32 values used exactly (CodebooksFromTensorF32)
	encode bool

	mu     sync.Mutex
	cached *sharedBooks // the last prepared codebooks
}

// sharedBooks is a DeviceCodebooks with the input bytes it was made from
// and a count of the Runs using it; it is freed when it is neither cached
// nor in use.
type sharedBooks struct {
	dc     *DeviceCodebooks
	key    []byte // dtype, shape and bytes of the codebooks input
	refs   int
	cached bool
}

// Close frees the cached device codebooks (once no Run uses them).
func (o *cudaOp) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cached != nil {
		o.cached.cached = false
		o.drop(o.cached)
		o.cached = nil
	}
	return nil
}

// drop frees sb when nothing holds it; o.mu is held.
func (o *cudaOp) drop(sb *sharedBooks) {
	if sb.refs == 0 && !sb.cached {
		sb.dc.Free()
	}
}

// codebooks returns device codebooks for the input (cached while its bytes
// are unchanged) and the function that ends this Run's use of them.
func (o *cudaOp) codebooks(t *rt.Tensor) (*DeviceCodebooks, func(), error) {
	h, err := o.be.Download(t)
	if err != nil {
		return nil, nil, err
	}
	key := append([]byte(fmt.Sprintf("%v %v:", h.DType(), h.Shape())), tensorBytes(h)...)
	o.mu.Lock()
	sb := o.cached
	if sb == nil || !bytes.Equal(sb.key, key) {
		o.mu.Unlock()
		c, err := codebooksFromTensor(h, o.sizes, o.fp32)
		if err != nil {
			return nil, nil, fmt.Errorf("input \"codebooks\" %v: %w", h.Shape(), err)
		}
		if c, err = c.WithSplit(o.split); err != nil {
			return nil, nil, err
		}
		dc, err := NewDeviceCodebooks(o.be, c)
		if err != nil {
			return nil, nil, err
		}
		o.mu.Lock()
		if o.cached != nil {
			o.cached.cached = false
			o.drop(o.cached)
		}
		sb = &sharedBooks{dc: dc, key: key, cached: true}
		o.cached = sb
	}
	sb.refs++
	o.mu.Unlock()
	return sb.dc, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		sb.refs--
		o.drop(sb)
	}, nil
}

// tensorBytes views a host tensor's values as bytes.
func tensorBytes(t *rt.Tensor) []byte {
	switch t.DType() {
	case rt.F32:
		return cuda.Bytes(t.F32())
	case rt.U16:
		return u16Bytes(t.U16())
	case rt.I16:
		v := t.I16()
		u := make([]uint16, len(v))
		for i, x := range v {
			u[i] = uint16(x)
		}
		return u16Bytes(u)
	}
	return nil
}

func newCUDAOp(encode bool) func(rt.Params, *cuda.Backend) (rt.Op, error) {
	return func(p rt.Params, b *cuda.Backend) (rt.Op, error) {
		o := &cudaOp{be: b, sizes: p.IntList("codebook_sizes"), split: p.Int("split"), fp32: p.Bool("fp32"), encode: encode}
		if o.split < 0 || o.split >= MaxStages {
			return nil, fmt.Errorf("split = %d, want 0 (one chain) or 1..%d", o.split, MaxStages-1)
		}
		if err := checkSizes(o.sizes); err != nil {
			return nil, err
		}
		if _, err := loadKernels(b); err != nil {
			return nil, err
		}
		return o, nil
	}
}

// Run checks and uploads the codebooks, then encodes or decodes on the
// device. Outputs are device tensors of o.be.
func (o *cudaOp) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dc, release, err := o.codebooks(in["codebooks"])
	if err != nil {
		return nil, err
	}
	defer release()
	if o.encode {
		return o.runEncode(dc, in)
	}
	return o.runDecode(dc, in)
}

func (o *cudaOp) runEncode(dc *DeviceCodebooks, in rt.Tensors) (rt.Tensors, error) {
	sh := in["x"].Shape()
	if sh[2] != dc.c.Dim() {
		return nil, fmt.Errorf("input \"x\" has shape %v (D = %d), but the codebooks have D = %d", sh, sh[2], dc.c.Dim())
	}
	bt, err := batchOf("x", sh, in["lengths"])
	if err != nil {
		return nil, err
	}
	x, err := o.be.Upload(in["x"])
	if err != nil {
		return nil, err
	}
	if x != in["x"] {
		defer x.Buffer().Free()
	}
	var outs cuda.Outputs
	codes := outs.Empty(o.be, rt.I32, rt.Shape{sh[0], sh[1], dc.c.NumStages()})
	quantized := outs.Empty(o.be, rt.F32, sh)
	if outs.Err() != nil {
		outs.Release()
		return nil, outs.Err()
	}
	p, err := devPtrs(x, codes, quantized)
	if err == nil {
		err = dc.Encode(p[0], bt, p[1], p[2])
	}
	if err != nil {
		outs.Release()
		return nil, err
	}
	return rt.Tensors{"codes": codes, "quantized": quantized}, nil
}

func (o *cudaOp) runDecode(dc *DeviceCodebooks, in rt.Tensors) (rt.Tensors, error) {
	ct := in["codes"]
	sh := ct.Shape()
	if sh[2] != dc.c.NumStages() {
		return nil, fmt.Errorf("input \"codes\" has shape %v (Q = %d), but there are %d codebooks", sh, sh[2], dc.c.NumStages())
	}
	bt, err := batchOf("codes", sh, in["lengths"])
	if err != nil {
		return nil, err
	}
	if ct.DType() == rt.I64 { // narrow on the host (errors name the code)
		h, err := o.be.Download(ct)
		if err != nil {
			return nil, err
		}
		c32, err := codesI32(h)
		if err != nil {
			return nil, err
		}
		if ct, err = rt.FromSlice(rt.I32, sh, c32); err != nil {
			return nil, err
		}
	}
	dev, err := o.be.Upload(ct)
	if err != nil {
		return nil, err
	}
	if dev != in["codes"] {
		defer dev.Buffer().Free()
	}
	var outs cuda.Outputs
	quantized := outs.Empty(o.be, rt.F32, rt.Shape{sh[0], sh[1], dc.c.Dim()})
	if outs.Err() != nil {
		return nil, outs.Err()
	}
	p, err := devPtrs(dev, quantized)
	if err == nil {
		err = dc.Decode(p[0], bt, p[1])
	}
	if err != nil {
		outs.Release()
		return nil, err
	}
	return rt.Tensors{"quantized": quantized}, nil
}

// devPtrs returns the device addresses of tensors of the cuda backend.
func devPtrs(ts ...*rt.Tensor) ([]cuda.DevicePtr, error) {
	out := make([]cuda.DevicePtr, len(ts))
	for i, t := range ts {
		p, err := cuda.Ptr(t)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
