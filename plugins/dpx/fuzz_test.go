package dpx

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzReader turns fuzz bytes into shapes and values.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// value maps a byte to a log-domain value, including the special ones.
func (r *fuzzReader) value() float32 {
	switch v := r.byte(); v {
	case 255:
		return float32(math.Inf(-1))
	case 254:
		return float32(math.NaN())
	case 253:
		return float32(math.Inf(1))
	case 252:
		return 0
	default:
		return -float32(v) / 16
	}
}

func (r *fuzzReader) values(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = r.value()
	}
	return out
}

var fuzzSeeds = [][]byte{
	{4, 3, 2, 0, 1, 2, 10, 20, 30, 40, 50, 60, 70, 80},
	{9, 2, 5, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{1, 1, 0, 0, 255},
	{6, 4, 3, 2, 3, 3, 252, 252, 252, 252, 255, 254, 253, 1, 2, 3},
	{20, 5, 8, 0, 5, 1, 2, 3, 4, 4, 4, 1, 7, 7, 7, 7, 7, 100, 3, 255, 255},
}

// FuzzAlign: any input gives an error or a valid path, the same with
// checkpointing and with the pure Go step, for both precisions; nothing
// panics.
func FuzzAlign(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{b: data}
		T, C, L := int(r.byte()%40), int(r.byte()%9), int(r.byte()%20)
		blank := int(r.byte()%10) - 1
		star := r.byte()%4 == 0
		tg := make([]int, L)
		for i := range tg {
			tg[i] = int(r.byte()%12) - 1
		}
		lp := r.values(T * C)
		for _, p := range []Precision{Float32, Int32} {
			opt := AlignOptions{Blank: blank, Star: star, StarLogProb: -0.5, Precision: p}
			full, err := alignSeg(lp, C, tg, opt, 0)
			if err != nil {
				continue
			}
			require.Len(t, full.Labels, T)
			checkPath(t, full.Labels, tg, blank)
			ck, err := alignSeg(lp, C, tg, opt, 1+int(r.byte()%5))
			require.NoError(t, err)
			require.Equal(t, full.Labels, ck.Labels)
			avx2 := useAVX2
			useAVX2 = false
			scalar, err := alignSeg(lp, C, tg, opt, 0)
			useAVX2 = avx2
			require.NoError(t, err)
			require.Equal(t, full.Labels, scalar.Labels, "AVX2 and Go steps differ")
		}
	})
}

// FuzzViterbi: errors or a path of in-range states whose score is the
// path's own score (float32 path).
func FuzzViterbi(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{b: data}
		T, S := int(r.byte()%30), int(r.byte()%7)
		tr, pr := r.values(S*S), r.values(S)
		em := r.values(T * S)
		for _, p := range []Precision{Float32, Int32} {
			h, err := NewHMM(tr, pr, S, p, 0)
			if err != nil {
				continue
			}
			path, score, err := h.Decode(nil, em)
			if err != nil {
				continue
			}
			require.Len(t, path, T)
			for _, s := range path {
				require.True(t, s >= 0 && int(s) < S)
			}
			if p == Float32 {
				v := pr[path[0]] + em[path[0]]
				for k := 1; k < T; k++ {
					v = v + tr[int(path[k-1])*S+int(path[k])] + em[k*S+int(path[k])]
				}
				if !math.IsInf(float64(score), -1) {
					require.InDelta(t, score, v, 1e-3*float64(T+1))
				}
			}
		}
	})
}

// FuzzDTW: errors or a monotone path whose cost sum is the total.
func FuzzDTW(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{b: data}
		N, M := int(r.byte()%25), int(r.byte()%25)
		cost := r.values(N * M)
		for i := range cost {
			cost[i] = -cost[i]
		}
		for _, p := range []Precision{Float32, Int32} {
			res, err := DTW(cost, N, M, p, 0)
			if err != nil {
				continue
			}
			checkWarp(t, res.Path, N, M)
			var sum float64
			for _, c := range res.Path {
				sum += float64(cost[int(c[0])*M+int(c[1])])
			}
			require.InDelta(t, sum, res.Total, 1e-3*float64(N+M))
		}
	})
}

// FuzzGreedy: errors or spans that tile increasing, disjoint frames.
func FuzzGreedy(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{b: data}
		T, C, blank := int(r.byte()%30), int(r.byte()%6), int(r.byte()%7)-1
		spans, err := Greedy(nil, r.values(T*C), C, blank)
		if err != nil {
			return
		}
		end := int32(0)
		for _, s := range spans {
			require.True(t, s.Start >= end && s.End > s.Start && int(s.End) <= T && int(s.Token) != blank)
			end = s.End
		}
	})
}
