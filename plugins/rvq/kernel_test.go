package rvq

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kernelFixture is one micro-kernel call's inputs, with a float64 oracle.
type kernelFixture struct {
	dim                int
	res, panel, hn, b0 []float32
	bidx0              []int32
	idx                [panelWidth]int32
	wantBest           []float64
	wantIdx            []int32
	wantUpdated        []bool
}

func newKernelFixture(rng *rand.Rand, dim int) *kernelFixture {
	f := &kernelFixture{dim: dim}
	f.res = make([]float32, kernelRows*dim)
	f.panel = make([]float32, dim*panelWidth)
	f.hn = make([]float32, panelWidth)
	for i := range f.res {
		f.res[i] = float32(rng.NormFloat64())
	}
	for i := range f.panel {
		f.panel[i] = float32(rng.NormFloat64())
	}
	for l := range f.hn {
		f.hn[l] = float32(rng.NormFloat64() * float64(dim))
		f.idx[l] = int32(100 + l)
	}
	f.b0 = make([]float32, kernelRows*panelWidth)
	f.bidx0 = make([]int32, kernelRows*panelWidth)
	f.wantBest = make([]float64, len(f.b0))
	f.wantIdx = make([]int32, len(f.b0))
	for i := 0; i < kernelRows; i++ {
		for l := 0; l < panelWidth; l++ {
			var dot float64
			for d := 0; d < dim; d++ {
				dot += float64(f.res[i*dim+d]) * float64(f.panel[d*panelWidth+l])
			}
			s := float64(f.hn[l]) - dot
			// Half the lanes start above the score, half below, both well clear.
			k := i*panelWidth + l
			f.bidx0[k] = int32(-k)
			if (i+l)%2 == 0 {
				f.b0[k] = float32(s + 1 + math.Abs(s))
				f.wantBest[k], f.wantIdx[k] = s, f.idx[l]
			} else {
				f.b0[k] = float32(s - 1 - math.Abs(s))
				f.wantBest[k], f.wantIdx[k] = float64(f.b0[k]), f.bidx0[k]
			}
		}
	}
	return f
}

func TestKernelsAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, k := range kernels {
		for _, dim := range []int{1, 2, 7, 64, 96, 128, 256, 1024} {
			f := newKernelFixture(rng, dim)
			best := append([]float32(nil), f.b0...)
			bidx := append([]int32(nil), f.bidx0...)
			k(f.res, dim, f.panel, f.hn, best, bidx, &f.idx)
			for i := range best {
				assert.Equal(t, f.wantIdx[i], bidx[i], "%s dim %d lane %d", name, dim, i)
				assert.InDelta(t, f.wantBest[i], float64(best[i]), 1e-4*float64(dim), "%s dim %d lane %d", name, dim, i)
			}
		}
	}
}

// Equal scores never replace the running minimum (strict <), so on ties each
// lane keeps the index it saw first.
func TestKernelsKeepFirstOnTies(t *testing.T) {
	for name, k := range kernels {
		const dim = 8
		res := make([]float32, kernelRows*dim)
		panel := make([]float32, dim*panelWidth)
		hn := make([]float32, panelWidth) // all scores 0
		best := make([]float32, kernelRows*panelWidth)
		bidx := make([]int32, kernelRows*panelWidth)
		for i := range bidx {
			bidx[i] = 7
		}
		var idx [panelWidth]int32
		for l := range idx {
			idx[l] = 99
		}
		k(res, dim, panel, hn, best, bidx, &idx)
		for i := range bidx {
			require.Equal(t, int32(7), bidx[i], "%s lane %d", name, i)
		}
	}
}

// withKernel selects a micro-kernel for the rest of the test.
func withKernel(t *testing.T, k kernelFunc) {
	old := kernel
	kernel = k
	t.Cleanup(func() { kernel = old })
}
