//go:build goexperiment.simd && amd64

package fbank

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchPathMatchesScalar: the SIMD four-frame path and the scalar path
// agree to float64 rounding (seen through the float32 output) on every preset.
func TestBatchPathMatchesScalar(t *testing.T) {
	x := noisySpeech(3*16000+91, 3)
	for _, name := range Presets() {
		t.Run(name, func(t *testing.T) {
			fe, err := NewFrontend(mustPreset(t, name))
			require.NoError(t, err)
			if fe.batch == nil {
				t.Skip("CPU without AVX2+FMA: no batch path to compare")
			}
			vec, err := fe.Compute(context.Background(), [][]float32{x}, 2)
			require.NoError(t, err)
			fe.batch = nil
			sca, err := fe.Compute(context.Background(), [][]float32{x}, 2)
			require.NoError(t, err)
			var worst float64
			for i, v := range vec.Data {
				worst = math.Max(worst, math.Abs(float64(v-sca.Data[i])))
			}
			t.Logf("%s: max |simd - scalar| = %.3g", name, worst)
			require.Less(t, worst, 1e-5)
		})
	}
}

func TestLnVec(t *testing.T) {
	xs := rep4{}
	for _, base := range []float64{1e-10, logGuard, 0.7071, 1, 1.4142, 1.5, 3, 12345.678, 1e30, 1e-300} {
		for i := range xs {
			xs[i] = base * (1 + float64(i)/3)
		}
		var got rep4
		lnVec(ld4(&xs), newVConsts()).Store(&got)
		for i, x := range xs {
			require.InDelta(t, math.Log(x), got[i], 1e-12*math.Max(1, math.Abs(math.Log(x))), "ln(%v)", x)
		}
	}
}
