//go:build cuda

package dpx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/edgespeech/edge/runtime"
)

// greedyInput draws log_probs [B,T,C] whose argmax runs are long enough to
// make repeats, with exact ties (equal values in one row) and -Inf entries,
// and ragged lengths.
func greedyInput(rng *rand.Rand, B, T, C int) rt.Tensors {
	lp := make([]float32, B*T*C)
	for b := range B {
		k := rng.IntN(C)
		for t := range T {
			if rng.IntN(3) == 0 {
				k = rng.IntN(C)
			}
			row := lp[(b*T+t)*C : (b*T+t+1)*C]
			for c := range row {
				row[c] = -5 - 3*rng.Float32()
				if rng.IntN(9) == 0 {
					row[c] = float32(math.Inf(-1))
				}
			}
			row[k] = -0.1
			if rng.IntN(4) == 0 { // an exact tie: the lowest index must win
				row[rng.IntN(C)] = -0.1
			}
		}
	}
	lens := make([]int64, B)
	for b := range lens {
		lens[b] = int64(1 + rng.IntN(T))
	}
	lens[0] = int64(T)
	return rt.Tensors{
		"log_probs": rt.Must(rt.FromSlice(rt.F32, rt.Shape{B, T, C}, lp)),
		"lengths":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{B}, lens)),
	}
}

// TestCUDAGreedy requires the CUDA ctc_greedy to give the CPU op's tokens,
// spans and counts; its tokens axis is T long, -1 past each count.
func TestCUDAGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 1))
	for _, tc := range []struct{ B, T, C, blank int }{
		{1, 1, 1, 0}, {1, 7, 3, 0}, {3, 50, 5, 2}, {4, 1500, 29, 0}, {2, 2500, 1024, 0}, {64, 1500, 29, 0}, {2, 3000, 40, 39},
	} {
		in := greedyInput(rng, tc.B, tc.T, tc.C)
		params := map[string]any{"blank": tc.blank}
		want, err := runOp(t, "ctc_greedy", params, in)
		require.NoError(t, err)
		got, err := runCUDA(t, "ctc_greedy", params, in)
		require.NoError(t, err)
		require.Equal(t, want["token_lengths"].I64(), got["token_lengths"].I64(), "%+v", tc)
		N := want["tokens"].Shape()[1]
		require.Equal(t, rt.Shape{tc.B, tc.T}, got["tokens"].Shape())
		require.Equal(t, rt.Shape{tc.B, tc.T, 2}, got["spans"].Shape())
		for b := range tc.B {
			n := int(want["token_lengths"].I64()[b])
			require.Equal(t, want["tokens"].I64()[b*N:b*N+n], got["tokens"].I64()[b*tc.T:b*tc.T+n], "%+v item %d", tc, b)
			require.Equal(t, want["spans"].I32()[2*b*N:2*(b*N+n)], got["spans"].I32()[2*b*tc.T:2*(b*tc.T+n)], "%+v item %d", tc, b)
			for i := n; i < tc.T; i++ {
				require.Equal(t, int64(-1), got["tokens"].I64()[b*tc.T+i])
				require.Equal(t, []int32{-1, -1}, got["spans"].I32()[2*(b*tc.T+i):2*(b*tc.T+i+1)])
			}
		}
	}
}

func TestCUDAGreedyErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 2))
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		in := greedyInput(rng, 3, 40, 7)
		in["log_probs"].F32()[(1*40+17)*7+3] = bad
		in["log_probs"].F32()[(2*40+30)*7+1] = bad
		in["lengths"].I64()[1] = 40
		_, wantErr := runOp(t, "ctc_greedy", nil, in)
		require.Error(t, wantErr)
		_, err := runCUDA(t, "ctc_greedy", nil, in)
		require.EqualError(t, err, wantErr.Error())
	}
	_, err := runCUDA(t, "ctc_greedy", map[string]any{"blank": 7}, greedyInput(rng, 1, 4, 7))
	require.EqualError(t, err, "op ctc_greedy: item 0: blank id 7 is out of range for C=7 columns")
}
