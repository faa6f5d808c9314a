//go:build cuda || dpxemu

package dpx

// Input makers shared by the CUDA parity tests (ops_cuda_test.go) and the
// kernels' host replay (cuda_emu_test.go).

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/edgespeech/edge/runtime"
)

// logSoftmax returns random [rows, C] log-probs (normal logits, sd 2).
func logSoftmax(r *rand.Rand, rows, C int) []float32 {
	out := make([]float32, rows*C)
	for i := range rows {
		row := out[i*C : (i+1)*C]
		var mx float64 = math.Inf(-1)
		x := make([]float64, C)
		for c := range x {
			x[c] = 2 * r.NormFloat64()
			mx = max(mx, x[c])
		}
		var s float64
		for _, v := range x {
			s += math.Exp(v - mx)
		}
		for c, v := range x {
			row[c] = float32(v - mx - math.Log(s))
		}
	}
	return out
}

// alignBatch makes a ragged batch: item b has T_b frames and L_b targets
// (ids 1..C-1, some adjacent repeats, -1 padded), lengths given.
func alignBatch(r *rand.Rand, C int, Ts, Ls []int) rt.Tensors {
	B := len(Ts)
	T, L := 0, 0
	for b := range B {
		T, L = max(T, Ts[b]), max(L, Ls[b])
	}
	lp := logSoftmax(r, B*T, C)
	tg := make([]int64, B*L)
	lens := make([]int64, B)
	for b := range B {
		lens[b] = int64(Ts[b])
		for i := range L {
			tg[b*L+i] = -1
			if i < Ls[b] {
				tg[b*L+i] = int64(1 + r.IntN(C-1))
				if i > 0 && r.IntN(8) == 0 {
					tg[b*L+i] = tg[b*L+i-1]
				}
			}
		}
	}
	return rt.Tensors{
		"log_probs": rt.Must(rt.FromSlice(rt.F32, rt.Shape{B, T, C}, lp)),
		"targets":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{B, L}, tg)),
		"lengths":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{B}, lens)),
	}
}

// viterbiInput: B items of T frames, S states, random log-domain scores;
// transitions scaled by tscale (positive values large enough turn the
// int32 kernel's packing off).
func viterbiInput(r *rand.Rand, B, T, S int, tscale float64) rt.Tensors {
	em := make([]float32, B*T*S)
	for i := range em {
		em[i] = float32(-3 * r.Float64())
	}
	tr := make([]float32, S*S)
	for i := range tr {
		tr[i] = float32(tscale * r.Float64())
	}
	pr := make([]float32, S)
	for i := range pr {
		pr[i] = float32(-2 * r.Float64())
	}
	return rt.Tensors{
		"emissions":   rt.Must(rt.FromSlice(rt.F32, rt.Shape{B, T, S}, em)),
		"transitions": rt.Must(rt.FromSlice(rt.F32, rt.Shape{S, S}, tr)),
		"priors":      rt.Must(rt.FromSlice(rt.F32, rt.Shape{S}, pr)),
	}
}

// dtwInput: ragged items n_b x m_b in a [B, N, M] cost.
func dtwInput(r *rand.Rand, ns, ms []int) rt.Tensors {
	B := len(ns)
	N, M := 0, 0
	for b := range B {
		N, M = max(N, ns[b]), max(M, ms[b])
	}
	cost := make([]float32, B*N*M)
	for i := range cost {
		cost[i] = float32(r.Float64() * 4)
	}
	lens := make([]int64, 2*B)
	for b := range B {
		lens[2*b], lens[2*b+1] = int64(ns[b]), int64(ms[b])
	}
	return rt.Tensors{
		"cost":    rt.Must(rt.FromSlice(rt.F32, rt.Shape{B, N, M}, cost)),
		"lengths": rt.Must(rt.FromSlice(rt.I64, rt.Shape{B, 2}, lens)),
	}
}

func requireSameInts(t *testing.T, want, got []int32, name string) {
	t.Helper()
	for i := range want {
		if want[i] != got[i] {
			require.Failf(t, "output differs", "%s[%d]: cpu %d, cuda %d (first difference of %d)", name, i, want[i], got[i], len(want))
		}
	}
}

var precisions = []string{"f32", "i32"}
