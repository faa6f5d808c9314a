package dpx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestViterbiGolden(t *testing.T) {
	for _, c := range readManifest(t).Viterbi {
		t.Run(c.Name, func(t *testing.T) {
			em := readGolden(t, "viterbi_"+c.Name+"_emissions")
			tr := readGolden(t, "viterbi_"+c.Name+"_transitions").F32()
			pr := readGolden(t, "viterbi_"+c.Name+"_priors").F32()
			lengths := readGolden(t, "viterbi_"+c.Name+"_lengths").I64()
			want := readGolden(t, "viterbi_"+c.Name+"_path").I32()
			wantScore := readGolden(t, "viterbi_"+c.Name+"_score").F32()
			B, T, S := em.Shape()[0], em.Shape()[1], em.Shape()[2]
			h, err := NewHMM(tr, pr, S, Float32, 0)
			require.NoError(t, err)
			for b := range B {
				n := int(lengths[b])
				path, score, err := h.Decode(nil, em.F32()[b*T*S:(b*T+n)*S])
				require.NoError(t, err)
				assert.Equal(t, want[b*T:b*T+n], path, "item %d", b)
				assert.Equal(t, wantScore[b], score, "item %d", b)
			}
		})
	}
}

func TestDTWGolden(t *testing.T) {
	for _, c := range readManifest(t).DTW {
		t.Run(c.Name, func(t *testing.T) {
			cost := readGolden(t, "dtw_"+c.Name+"_cost")
			lengths := readGolden(t, "dtw_"+c.Name+"_lengths").I64()
			want := readGolden(t, "dtw_"+c.Name+"_path").I32()
			wantLen := readGolden(t, "dtw_"+c.Name+"_path_len").I32()
			wantTotal := readGolden(t, "dtw_"+c.Name+"_cost_total").F32()
			B, N, M := cost.Shape()[0], cost.Shape()[1], cost.Shape()[2]
			for b := range B {
				n, m := int(lengths[2*b]), int(lengths[2*b+1])
				item := make([]float32, 0, n*m)
				for i := range n {
					item = append(item, cost.F32()[(b*N+i)*M:(b*N+i)*M+m]...)
				}
				got, err := DTW(item, n, m, Float32, 0)
				require.NoError(t, err)
				require.Len(t, got.Path, int(wantLen[b]))
				for k, p := range got.Path {
					assert.Equal(t, want[(b*(N+M)+k)*2:(b*(N+M)+k)*2+2], p[:], "item %d step %d", b, k)
				}
				assert.Equal(t, wantTotal[b], got.Total, "item %d", b)
			}
		})
	}
}

// TestFixedPointMatchesFloat: on inputs that quantise exactly (multiples of
// 1/4 at scale 1024, sums exact in float32) the int32 paths compute the same
// numbers as the float32 paths, so paths and scores agree bit for bit, ties
// included.
func TestFixedPointMatchesFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 30 {
		S, T := 1+rng.IntN(12), 1+rng.IntN(60)
		em := make([]float32, T*S)
		for k := range em {
			em[k] = -float32(rng.IntN(32)) / 4
		}
		tr := make([]float32, S*S)
		for k := range tr {
			tr[k] = -float32(rng.IntN(20)) / 4
		}
		pr := make([]float32, S)
		hf, err := NewHMM(tr, pr, S, Float32, 0)
		require.NoError(t, err)
		hq, err := NewHMM(tr, pr, S, Int32, 1024)
		require.NoError(t, err)
		pf, sf, err := hf.Decode(nil, em)
		require.NoError(t, err)
		pq, sq, err := hq.Decode(nil, em)
		require.NoError(t, err)
		assert.Equal(t, pf, pq, "viterbi case %d", i)
		assert.Equal(t, sf, sq)

		N, M := 1+rng.IntN(30), 1+rng.IntN(30)
		cost := make([]float32, N*M)
		for k := range cost {
			cost[k] = float32(rng.IntN(24)) / 4
		}
		df, err := DTW(cost, N, M, Float32, 0)
		require.NoError(t, err)
		dq, err := DTW(cost, N, M, Int32, 1024)
		require.NoError(t, err)
		checkWarp(t, df.Path, N, M)
		assert.Equal(t, df.Total, dq.Total)
		assert.Equal(t, df.Path, dq.Path, "dtw case %d", i)
		var sum float64
		for _, p := range df.Path {
			sum += float64(cost[int(p[0])*M+int(p[1])])
		}
		assert.InDelta(t, sum, df.Total, 1e-3)
	}
}

// checkWarp: the path is monotone, contiguous, from (0,0) to (N-1,M-1).
func checkWarp(t *testing.T, p [][2]int32, N, M int) {
	t.Helper()
	require.Equal(t, [2]int32{0, 0}, p[0])
	require.Equal(t, [2]int32{int32(N - 1), int32(M - 1)}, p[len(p)-1])
	for k := 1; k < len(p); k++ {
		di, dj := p[k][0]-p[k-1][0], p[k][1]-p[k-1][1]
		require.True(t, (di == 1 || di == 0) && (dj == 1 || dj == 0) && di+dj > 0, "step %d: %v -> %v", k, p[k-1], p[k])
	}
}

func TestDecoderErrors(t *testing.T) {
	nan := float32(math.NaN())
	_, err := NewHMM([]float32{0}, []float32{0, 0}, 1, Float32, 0)
	require.ErrorContains(t, err, "priors has 2 values; want S = 1")
	_, err = NewHMM([]float32{0, 0, 0}, []float32{0}, 1, Float32, 0)
	require.ErrorContains(t, err, "transitions has 3 values; want S*S = 1")
	_, err = NewHMM(nil, nil, 0, Float32, 0)
	require.ErrorContains(t, err, "S=0 states")
	_, err = NewHMM([]float32{nan}, []float32{0}, 1, Float32, 0)
	require.ErrorContains(t, err, "transitions[0][0] is NaN")
	h, err := NewHMM([]float32{0, 0, 0, 0}, []float32{0, 0}, 2, Float32, 0)
	require.NoError(t, err)
	_, _, err = h.Decode(nil, []float32{0, 0, 0})
	require.ErrorContains(t, err, "emissions has 3 values; want a non-empty multiple of S=2")
	_, _, err = h.Decode(nil, []float32{0, 0, float32(math.Inf(1)), 0})
	require.ErrorContains(t, err, "emissions[1][0] is +Inf")

	_, err = DTW([]float32{1, 2}, 2, 2, Float32, 0)
	require.ErrorContains(t, err, "cost has 2 values for N=2, M=2")
	_, err = DTW([]float32{1, float32(math.Inf(-1))}, 1, 2, Float32, 0)
	require.ErrorContains(t, err, "cost[0][1] is -Inf; want finite")
	_, err = DTW(make([]float32, 200), 200, 1, Int32, 0)
	require.NoError(t, err)
	big := make([]float32, 200)
	big[0] = 1e6
	_, err = DTW(big, 200, 1, Int32, 1<<20)
	require.ErrorContains(t, err, "overflows int32")

	_, err = Greedy(nil, []float32{0, 0, 0}, 2, 0)
	require.ErrorContains(t, err, "log_probs has 3 values")
	_, err = Greedy(nil, []float32{0, 0}, 2, 2)
	require.ErrorContains(t, err, "blank id 2 is out of range")
}

func TestGreedy(t *testing.T) {
	// Frames argmax: 1 1 0 1 2 2 0 0 (ties to the lowest id on frame 6).
	lp := []float32{
		-2, -0.1, -3,
		-2, -0.2, -3,
		-0.1, -2, -3,
		-2, -0.1, -3,
		-2, -3, -0.1,
		-2, -3, -0.1,
		-1, -1, -1,
		-0.1, -2, -3,
	}
	got, err := Greedy(nil, lp, 3, 0)
	require.NoError(t, err)
	assert.Equal(t, []Span{{1, 0, 2}, {1, 3, 4}, {2, 4, 6}}, got)
	assert.Equal(t, got, Spans(nil, []int32{1, 1, 0, 1, 2, 2, 0, 0, -1, 2}, 0))
}

// TestArgmaxSum: the four-lane argmax is the sequential first maximum,
// ties and -Inf included.
func TestArgmaxSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for range 2000 {
		n := 1 + rng.IntN(40)
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = -float32(rng.IntN(3)), -float32(rng.IntN(3))
			if rng.IntN(10) == 0 {
				a[i] = float32(math.Inf(-1))
			}
		}
		best, bi := a[0]+b[0], 0
		for i := 1; i < n; i++ {
			if c := a[i] + b[i]; c > best {
				best, bi = c, i
			}
		}
		v, i := argmaxSum(a, b)
		require.Equal(t, bi, i)
		require.Equal(t, best, v)
	}
}

// TestFixedGolden checks the int32 paths against the integer reference
// loops of scripts/golden/dpx.py: paths bit for bit, scores exactly.
func TestFixedGolden(t *testing.T) {
	m := readManifest(t).Fixed
	require.NotEmpty(t, m.CTC)
	require.NotZero(t, m.Scale)
	kernels(t, func(t *testing.T) {
		for _, c := range m.CTC {
			lp := readGolden(t, "ctc_"+c.Name+"_log_probs")
			tg := toInts(readGolden(t, "ctc_"+c.Name+"_targets").I64())
			want := readGolden(t, "fixed_ctc_"+c.Name+"_alignment").I32()
			for _, seg := range []int{0, 5} {
				got, err := alignSeg(lp.F32(), lp.Shape()[1], tg, AlignOptions{Blank: c.Blank, Precision: Int32, Scale: m.Scale}, seg)
				require.NoError(t, err)
				require.Equal(t, want, got.Labels, "ctc %s segment %d", c.Name, seg)
			}
		}
	})
	for _, c := range m.Viterbi {
		em := readGolden(t, "viterbi_"+c.Name+"_emissions")
		lengths := readGolden(t, "viterbi_"+c.Name+"_lengths").I64()
		want := readGolden(t, "fixed_viterbi_"+c.Name+"_path").I32()
		wantScore := readGolden(t, "fixed_viterbi_"+c.Name+"_score").F32()
		B, T, S := em.Shape()[0], em.Shape()[1], em.Shape()[2]
		h, err := NewHMM(readGolden(t, "viterbi_"+c.Name+"_transitions").F32(), readGolden(t, "viterbi_"+c.Name+"_priors").F32(), S, Int32, m.Scale)
		require.NoError(t, err)
		for b := range B {
			n := int(lengths[b])
			path, score, err := h.Decode(nil, em.F32()[b*T*S:(b*T+n)*S])
			require.NoError(t, err)
			assert.Equal(t, want[b*T:b*T+n], path, "viterbi %s item %d", c.Name, b)
			assert.Equal(t, wantScore[b], score, "viterbi %s item %d", c.Name, b)
		}
	}
	for _, c := range m.DTW {
		cost := readGolden(t, "dtw_"+c.Name+"_cost")
		lengths := readGolden(t, "dtw_"+c.Name+"_lengths").I64()
		want := readGolden(t, "fixed_dtw_"+c.Name+"_path").I32()
		wantTotal := readGolden(t, "fixed_dtw_"+c.Name+"_cost_total").F32()
		B, N, M := cost.Shape()[0], cost.Shape()[1], cost.Shape()[2]
		for b := range B {
			n, mm := int(lengths[2*b]), int(lengths[2*b+1])
			item := make([]float32, 0, n*mm)
			for i := range n {
				item = append(item, cost.F32()[(b*N+i)*M:(b*N+i)*M+mm]...)
			}
			got, err := DTW(item, n, mm, Int32, m.Scale)
			require.NoError(t, err)
			for k, p := range got.Path {
				require.Equal(t, want[(b*(N+M)+k)*2:(b*(N+M)+k)*2+2], p[:], "dtw %s item %d step %d", c.Name, b, k)
			}
			assert.Equal(t, wantTotal[b], got.Total, "dtw %s item %d", c.Name, b)
		}
	}
}
