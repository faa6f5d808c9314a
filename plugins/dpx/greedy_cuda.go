//go:build cuda

package dpx

import (
	"context"
	"fmt"

	rt "github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// The cuda build gives ctc_greedy a CUDA implementation (the kernels
// pipeline_ctc_argmax and pipeline_ctc_collapse of kernels/pipeline.cu), so
// that emissions the encoder left on the device are decoded there and the
// tokens go straight to ctc_align: the zero-copy pipeline of package asr.
func init() {
	rt.RegisterImplementation("ctc_greedy", "cuda", cuda.Constructor(newGreedyCUDA))
}

// Block sizes of the greedy kernels: argmax has one warp per frame, collapse
// one block per item scanning tiles of frames.
const (
	greedyArgmaxBlock   = 256
	greedyCollapseBlock = 1024
)

// greedyCUDA is ctc_greedy on a CUDA backend. Run takes log_probs in device
// memory and returns device tensors; N (the tokens axis) is T, the most
// tokens a path of T frames can have, since the count is not known on the
// host without a copy: entries past token_lengths[b] are -1. The host sees
// the per-item lengths it uploads (8 bytes an item) and the per-item status
// word it reads back (8 bytes an item; the one synchronising copy), which
// names the first NaN or +Inf as the CPU op's error does.
type greedyCUDA struct {
	be               *cuda.Backend
	blank            int
	argmax, collapse *cuda.Kernel
}

func newGreedyCUDA(p rt.Params, b *cuda.Backend) (rt.Op, error) {
	if p.Int("blank") < 0 {
		return nil, fmt.Errorf("blank id %d: want >= 0", p.Int("blank"))
	}
	ks, err := cudaKernels(b, "pipeline_ctc_argmax", "pipeline_ctc_collapse")
	if err != nil {
		return nil, err
	}
	return &greedyCUDA{be: b, blank: p.Int("blank"), argmax: ks[0], collapse: ks[1]}, nil
}

// Run decodes log_probs [B,T,C] or [T,C] (device) with optional host lengths.
func (o *greedyCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lp := in["log_probs"]
	B, tc := batched(lp, 3)
	T, C := tc[0], tc[1]
	if T == 0 || C == 0 || B == 0 {
		return nil, fmt.Errorf("input \"log_probs\" has shape %v; want B >= 1 items, T >= 1 frames and C >= 1 columns", lp.Shape())
	}
	if o.blank >= C {
		return nil, fmt.Errorf("item 0: blank id %d is out of range for C=%d columns", o.blank, C)
	}
	lpPtr, err := cuda.Ptr(lp)
	if err != nil {
		return nil, fmt.Errorf("input \"log_probs\": %w", err)
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	lens := make([]int64, B)
	for b, l := range lengths {
		lens[b] = int64(l)
	}
	sc := scratch{be: o.be}
	defer sc.free()
	var outs cuda.Outputs
	tok := outs.Empty(o.be, rt.I64, rt.Shape{B, T})
	spans := outs.Empty(o.be, rt.I32, rt.Shape{B, T, 2})
	count := outs.Empty(o.be, rt.I64, rt.Shape{B})
	ok := false
	defer func() {
		if !ok {
			outs.Release()
		}
	}()
	if outs.Err() != nil {
		return nil, outs.Err()
	}
	lenBuf, err := upload(&sc, lens)
	if err != nil {
		return nil, err
	}
	labels, err := sc.alloc(int64(4 * B * T))
	if err != nil {
		return nil, err
	}
	status, err := sc.alloc(int64(8 * B))
	if err != nil {
		return nil, err
	}
	if err := o.be.Memset(status.Ptr(), 0, int64(8*B)); err != nil {
		return nil, err
	}
	warps := greedyArgmaxBlock / 32
	err = o.argmax.Launch(cuda.Dim3{X: (T + warps - 1) / warps, Y: B, Z: 1}, dim(greedyArgmaxBlock), 0,
		lpPtr, lenBuf, T, C, labels, status)
	if err != nil {
		return nil, err
	}
	ptrs := make([]cuda.DevicePtr, 3)
	for i, t := range []*rt.Tensor{tok, spans, count} {
		if ptrs[i], err = cuda.Ptr(t); err != nil {
			return nil, err
		}
	}
	err = o.collapse.Launch(dim(B), dim(greedyCollapseBlock), 0, labels, T, T, o.blank, ptrs[0], ptrs[1], ptrs[2])
	if err != nil {
		return nil, err
	}
	st := make([]uint64, B)
	if err := o.be.DeviceToHost(cuda.Bytes(st), status.Ptr()); err != nil {
		return nil, err
	}
	for b, w := range st {
		if w == 0 {
			continue
		}
		k := int64(^w)
		v := make([]float32, 1)
		if err := o.be.DeviceToHost(cuda.Bytes(v), lpPtr+cuda.DevicePtr(4*(int64(b)*int64(T*C)+k))); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("item %d: log_probs[%d][%d] is %v; want finite or -Inf", b, k/int64(C), k%int64(C), v[0])
	}
	ok = true
	return rt.Tensors{"tokens": tok, "spans": spans, "token_lengths": count}, nil
}
