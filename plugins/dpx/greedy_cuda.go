//go:build cuda

package dpx

import (
	"context"
	"fmt"

	kern "github.com/edgespeech/edge/kernels"
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
	x, err := batchedDevice(ctx, in, "log_probs", "T >= 1 frames and C >= 1 columns")
	if err != nil {
		return nil, err
	}
	B, T, C, lpPtr := x.B, x.N, x.M, x.ptr
	if o.blank >= C {
		return nil, fmt.Errorf("item 0: blank id %d is out of range for C=%d columns", o.blank, C)
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	lens := make([]int64, B)
	for b, l := range lengths {
		lens[b] = int64(l)
	}
	outs := []deviceOutput{
		{"tokens", rt.I64, rt.Shape{B, T}}, {"spans", rt.I32, rt.Shape{B, T, 2}}, {"token_lengths", rt.I64, rt.Shape{B}},
	}
	return runDevice(o.be, outs, B, func(sc *cuda.Scratch, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
		lenBuf, err := sc.Upload(cuda.Bytes(lens))
		if err != nil {
			return 0, err
		}
		labels, err := sc.Alloc(int64(4 * B * T))
		if err != nil {
			return 0, err
		}
		status, err := sc.Alloc(int64(8 * B))
		if err != nil {
			return 0, err
		}
		if err := o.be.Memset(status.Ptr(), 0, int64(8*B)); err != nil {
			return 0, err
		}
		warps := greedyArgmaxBlock / 32
		err = o.argmax.Launch(cuda.Dim3{X: (T + warps - 1) / warps, Y: B, Z: 1}, dim(greedyArgmaxBlock), 0,
			&kern.PipelineCtcArgmaxParams{
				Lp: uint64(lpPtr), Lengths: uint64(lenBuf.Ptr()), T: int64(T), C: int64(C),
				Labels: uint64(labels.Ptr()), Status: uint64(status.Ptr()),
			})
		if err != nil {
			return 0, err
		}
		return status.Ptr(), o.collapse.Launch(dim(B), dim(greedyCollapseBlock), 0, &kern.PipelineCtcCollapseParams{
			Labels: uint64(labels.Ptr()), T: int64(T), N: int64(T), Blank: int64(o.blank),
			Tokens: uint64(out[0]), Spans: uint64(out[1]), TokenLengths: uint64(out[2]),
		})
	}, func(st []uint64) error {
		for b, w := range st {
			if w == 0 {
				continue
			}
			k := int64(^w)
			v := make([]float32, 1)
			if err := o.be.DeviceToHost(cuda.Bytes(v), lpPtr+cuda.DevicePtr(4*(int64(b)*int64(T*C)+k))); err != nil {
				return err
			}
			return fmt.Errorf("item %d: log_probs[%d][%d] is %v; want finite or -Inf", b, k/int64(C), k%int64(C), v[0])
		}
		return nil
	})
}
