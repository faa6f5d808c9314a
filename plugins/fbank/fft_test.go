package fbank

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveDFT is the O(n²) definition, X[k] = Σ x[j] e^{-2πi jk/n}.
func naiveDFT(x []complex128) []complex128 {
	n := len(x)
	out := make([]complex128, n)
	for k := range out {
		var s complex128
		for j, v := range x {
			s += v * cmplx.Exp(complex(0, -2*math.Pi*float64((j*k)%n)/float64(n)))
		}
		out[k] = s
	}
	return out
}

var fftSizes = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 25, 30, 40, 49, 64, 97, 100, 121, 128, 143, 200, 256, 384, 400, 512, 1000, 1024}

func TestComplexFFTMatchesDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range fftSizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pl, err := newCFFTPlan(n)
			require.NoError(t, err)
			x := make([]complex128, n)
			for i := range x {
				x[i] = complex(rng.NormFloat64(), rng.NormFloat64())
			}
			want := naiveDFT(x)
			in := append([]complex128(nil), x...)
			got := pl.transform(in, make([]complex128, n), make([]complex128, pl.maxRadix))
			for k := range want {
				require.InDelta(t, 0, cmplx.Abs(got[k]-want[k]), 1e-9*math.Sqrt(float64(n)), "n=%d bin %d", n, k)
			}
		})
	}
}

func TestRealPowerMatchesDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range fftSizes[1:] {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pl, err := newRFFTPlan(n)
			require.NoError(t, err)
			x := make([]float64, n)
			cx := make([]complex128, n)
			for i := range x {
				x[i] = rng.NormFloat64()
				cx[i] = complex(x[i], 0)
			}
			want := naiveDFT(cx)
			got := make([]float64, n/2+1)
			pl.power(x, got, pl.newScratch())
			for k := range got {
				w := real(want[k])*real(want[k]) + imag(want[k])*imag(want[k])
				require.InDelta(t, w, got[k], 1e-9*float64(n), "n=%d bin %d", n, k)
			}
		})
	}
}

func TestFactorize(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{1, nil}, {200, []int{8, 5, 5}}, {256, []int{8, 8, 4}}, {97, []int{97}}, {32, []int{8, 4}},
		{143, []int{11, 13}}, {2 * 49, []int{2, 7, 7}}, {9 * 17 * 17, []int{3, 3, 17, 17}},
	} {
		require.Equal(t, tc.want, factorize(tc.n), "n=%d", tc.n)
	}
}

func TestRFFTPlanRejectsTinySizes(t *testing.T) {
	_, err := newRFFTPlan(1)
	require.ErrorContains(t, err, "n_fft 1")
}
