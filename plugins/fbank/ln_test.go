package fbank

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLnMatchesMathLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs := []float64{1, 2, 0.5, 1e-10, logGuard, 1e-300, 1e300, math.SmallestNonzeroFloat64, 1.0078125, 1.9999999999999998,
		math.Nextafter(1, 0), math.Nextafter(1, 2), 0, -1, math.Inf(1), math.NaN()}
	for range 200000 {
		xs = append(xs, math.Exp(rng.Float64()*120-80))
	}
	for _, x := range xs {
		want, got := math.Log(x), ln(x)
		if math.IsNaN(want) {
			require.True(t, math.IsNaN(got), "ln(%v)", x)
			continue
		}
		if math.IsInf(want, 0) {
			require.Equal(t, want, got, "ln(%v)", x)
			continue
		}
		require.InDelta(t, want, got, 1e-15*math.Max(1, math.Abs(want)), "ln(%v)", x)
	}
}

func BenchmarkLn(b *testing.B) {
	x := make([]float64, 1024)
	for i := range x {
		x[i] = math.Exp(float64(i)/50 - 10)
	}
	b.Run("fast", func(b *testing.B) {
		var s float64
		for b.Loop() {
			for _, v := range x {
				s += ln(v)
			}
		}
		sink = s
	})
	b.Run("math", func(b *testing.B) {
		var s float64
		for b.Loop() {
			for _, v := range x {
				s += math.Log(v)
			}
		}
		sink = s
	})
}

var sink float64
