//go:build cuda

package rvq

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// measureShapes are seed 001's five measure shapes (B, T, Q, K, D).
var measureShapes = [][5]int{
	{40, 2048, 8, 1024, 128}, {24, 2048, 16, 1024, 128}, {48, 1024, 8, 2048, 128},
	{20, 3000, 8, 1024, 256}, {80, 1024, 8, 1024, 128},
}

// BenchmarkCUDAEncode times DeviceCodebooks.Encode at the seed's measure
// shapes with x, codes and quantized already on the device, for every fused
// variant that fits (sub-benchmark v=<kernel>) and the default choice
// (v=auto). Reported:
//
//   - ns/op: the Encode call (fused kernel with the input check, the
//     synchronising 8-byte status read), wall time, mean;
//   - dev-us/op: device time of the call (CUDA events around it), the
//     median over the iterations, as scripts/bench/rvq_gpu.py times the
//     torch peers (one slow call, a host hiccup around the synchronising
//     read, does not move it);
//   - kern-us/op: device time of the fused kernel alone, median;
//   - TFLOP/s: the seed's FLOP count 2*Q*B*T*K*D over dev-us/op.
//
// scripts/bench/rvq_gpu.py runs this next to the torch peers:
//
//	plugins_rvq.test -test.run '^$' -test.bench CUDAEncode -test.benchtime 20x

// benchDevice uploads codebooks c and the n vectors x for a benchmark and
// allocates its outputs: codes [n, stages] int32 and quantised [n, dim]
// float32, all freed when b ends.
func benchDevice(b *testing.B, be *cuda.Backend, c *Codebooks, x []float32, n int) (dc *DeviceCodebooks, xd, codes, quant cuda.DevicePtr) {
	b.Helper()
	dc, err := NewDeviceCodebooks(be, c)
	if err != nil {
		b.Fatal(err)
	}
	return dc, devF32(b, be, x), devOut(b, be, n*c.NumStages()), devOut(b, be, n*c.Dim())
}

func BenchmarkCUDAEncode(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	for i, s := range measureShapes {
		B, T, Q, K, D := s[0], s[1], s[2], s[3], s[4]
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		books, x, _ := synth(rng, B*T, Q, K, D)
		c, err := NewCodebooksBF16(D, books...)
		if err != nil {
			b.Fatal(err)
		}
		dc, xd, codes, quant := benchDevice(b, be, c, x, B*T)
		res, err := be.Malloc(int64(scratchRows(B*T)) * int64(dc.dp) * 4)
		if err != nil {
			b.Fatal(err)
		}
		flop := 2 * float64(Q) * float64(B*T) * float64(K) * float64(D)
		names := []string{"auto"}
		for _, v := range variants {
			names = append(names, v.name)
		}
		for _, name := range names {
			b.Run(fmt.Sprintf("B%d_T%d_Q%d_K%d_D%d/v=%s", B, T, Q, K, D, name), func(b *testing.B) {
				dc.variant = ""
				if name != "auto" {
					dc.variant = name
				}
				bt := Batch{B: B, T: T}
				if err := dc.Encode(xd, bt, codes, quant); err != nil { // warm-up; also skips variants that do not fit
					b.Skip(err)
				}
				v, k, err := dc.pick()
				if err != nil {
					b.Fatal(err)
				}
				dev, kern := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					d, err := be.Time(func() error { return dc.Encode(xd, bt, codes, quant) })
					if err != nil {
						b.Fatal(err)
					}
					dev = append(dev, d)
					// the fused kernel alone
					d, err = be.Time(func() error { return dc.launchFused(v, k, xd, bt, 0, res.Ptr(), codes, quant, 0, 0) })
					if err != nil {
						b.Fatal(err)
					}
					kern = append(kern, d)
				}
				us := cudatest.MedianMicros(dev)
				b.ReportMetric(us, "dev-us/op")
				b.ReportMetric(cudatest.MedianMicros(kern), "kern-us/op")
				b.ReportMetric(flop/(us*1e-6)/1e12, "TFLOP/s")
			})
		}
		_ = res.Free()
		dc.Free()
	}
}

// BenchmarkCUDAEncodeStreaming times DeviceCodebooks.Encode for a handful of
// frames (streaming: 1, 4, 16 frames of Q=8, K=1024, D=128) on every path
// (the fused kernel: one CTA; the split-codebook pair: two launches a stage;
// rvq_stream: one launch, clusters): ns/op is the whole call including its
// synchronising status read.
func BenchmarkCUDAEncodeStreaming(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	const q, k, d = 8, 1024, 128
	for _, frames := range []int{1, 4, 16} {
		rng := rand.New(rand.NewPCG(uint64(frames), 2))
		books, x, _ := synth(rng, frames, q, k, d)
		c, err := NewCodebooksBF16(d, books...)
		if err != nil {
			b.Fatal(err)
		}
		dc, xd, codes, quant := benchDevice(b, be, c, x, frames)
		for _, path := range encodePaths(b) {
			b.Run(fmt.Sprintf("frames%d/%s", frames, path), func(b *testing.B) {
				dc.forcePath = path
				bt := Batch{B: 1, T: frames}
				for range b.N {
					if err := dc.Encode(xd, bt, codes, quant); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		dc.Free()
	}
}
