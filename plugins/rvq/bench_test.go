package rvq

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// synth builds inputs shaped like seed 001's generator: codebook q has
// entries of norm ~0.5^q with a per-entry jitter in [0.6, 1.4), rounded to
// bf16; x is one codeword per stage summed in fp32 plus a little noise. It
// returns the codebooks as bf16 bit patterns per stage, x, and the picks.
func synth(rng *rand.Rand, frames, q, k, d int) ([][]uint16, []float32, [][]int) {
	books := make([][]uint16, q)
	for s := range books {
		books[s] = make([]uint16, k*d)
		for e := 0; e < k; e++ {
			scale := math.Pow(0.5, float64(s)) * (0.6 + 0.8*rng.Float64()) / math.Sqrt(float64(d))
			for i := 0; i < d; i++ {
				books[s][e*d+i] = roundBF16(float32(rng.NormFloat64() * scale))
			}
		}
	}
	x := make([]float32, frames*d)
	picks := make([][]int, q)
	for s := range picks {
		picks[s] = make([]int, frames)
		for f := range picks[s] {
			e := rng.IntN(k)
			picks[s][f] = e
			for i := 0; i < d; i++ {
				x[f*d+i] += BF16ToFloat32(books[s][e*d+i])
			}
		}
	}
	noise := math.Pow(0.5, float64(q)) * 0.05 / math.Sqrt(float64(d))
	for i := range x {
		x[i] += float32(rng.NormFloat64() * noise)
	}
	return books, x, picks
}

// roundBF16 rounds a float32 to the nearest bf16 (ties to even), as torch's
// .to(torch.bfloat16) does for finite values.
func roundBF16(v float32) uint16 {
	b := math.Float32bits(v)
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// BenchmarkEncode runs Encode on all cores at seed 001's measure-quick shapes
// with every kernel and reports GFLOP/s with the seed's FLOP count
// 2*Q*B*T*K*D.
func BenchmarkEncode(b *testing.B) {
	benchEncode(b, [][5]int{{8, 1024, 8, 1024, 128}, {4, 2048, 4, 512, 256}, {16, 512, 8, 1024, 128}}, kernels)
}

// BenchmarkEncodeGraded runs Encode with the default kernel at seed 001's
// five graded shapes (200-300 GFLOP each).
func BenchmarkEncodeGraded(b *testing.B) {
	benchEncode(b, [][5]int{{48, 2048, 8, 1024, 128}, {32, 2048, 16, 1024, 128}, {64, 1024, 8, 2048, 128},
		{24, 3000, 8, 1024, 256}, {96, 1024, 8, 1024, 128}}, map[string]kernelFunc{"default": kernel})
}

func benchEncode(b *testing.B, shapes [][5]int, ks map[string]kernelFunc) {
	for _, s := range shapes {
		B, T, Q, K, D := s[0], s[1], s[2], s[3], s[4]
		books, x, _ := synth(rand.New(rand.NewPCG(uint64(B), uint64(K))), B*T, Q, K, D)
		c, err := NewCodebooksBF16(D, books...)
		require.NoError(b, err)
		codes, quantized := make([]int32, B*T*Q), make([]float32, B*T*D)
		for name, k := range ks {
			b.Run(fmt.Sprintf("B%d_T%d_Q%d_K%d_D%d/%s", B, T, Q, K, D, name), func(b *testing.B) {
				old := kernel
				kernel = k
				defer func() { kernel = old }()
				for b.Loop() {
					if err := c.Encode(context.Background(), x, Batch{B: B, T: T}, codes, quantized); err != nil {
						b.Fatal(err)
					}
				}
				flops := 2 * float64(Q) * float64(B*T) * float64(K) * float64(D)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkKernel measures one micro-kernel call (6 frames x 16 codewords).
func BenchmarkKernel(b *testing.B) {
	for _, dim := range []int{128, 256} {
		f := newKernelFixture(rand.New(rand.NewPCG(3, 4)), dim)
		best, bidx := make([]float32, len(f.b0)), make([]int32, len(f.bidx0))
		for name, k := range kernels {
			b.Run(fmt.Sprintf("D%d/%s", dim, name), func(b *testing.B) {
				for b.Loop() {
					k(f.res, dim, f.panel, f.hn, best, bidx, &f.idx)
				}
				flops := 2 * float64(kernelRows*panelWidth*dim)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkNewCodebooksBF16 measures codebook preparation (bf16 -> f32
// panels and norms), which the ops do once per call.
func BenchmarkNewCodebooksBF16(b *testing.B) {
	const q, k, d = 8, 1024, 128
	books, _, _ := synth(rand.New(rand.NewPCG(1, 1)), 1, q, k, d)
	for b.Loop() {
		if _, err := NewCodebooksBF16(d, books...); err != nil {
			b.Fatal(err)
		}
	}
}
