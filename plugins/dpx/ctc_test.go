package dpx

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kernels runs f once with the pure Go float32 step and, where the CPU has
// it, once with the AVX2 step.
func kernels(t *testing.T, f func(t *testing.T)) {
	avx2 := useAVX2
	defer func() { useAVX2 = avx2 }()
	for _, v := range []bool{false, true} {
		if v && !avx2 {
			continue
		}
		useAVX2 = v
		t.Run(map[bool]string{false: "go", true: "avx2"}[v], f)
	}
}

// TestAlignGolden checks alignment and frame scores against torchaudio's CPU
// forced_align, frame for frame, with and without checkpointing, for every
// float32 kernel.
func TestAlignGolden(t *testing.T) { kernels(t, testAlignGolden) }

func testAlignGolden(t *testing.T) {
	m := readManifest(t)
	for _, c := range m.CTC {
		t.Run(c.Name, func(t *testing.T) {
			lp := readGolden(t, "ctc_"+c.Name+"_log_probs")
			tg := readGolden(t, "ctc_"+c.Name+"_targets").I64()
			want := readGolden(t, "ctc_"+c.Name+"_alignment").I32()
			wantScores := readGolden(t, "ctc_"+c.Name+"_frame_scores").F32()
			C := lp.Shape()[1]
			for _, seg := range []int{0, 7, 64} { // all backpointers; checkpointed
				got, err := alignSeg(lp.F32(), C, toInts(tg), AlignOptions{Blank: c.Blank, Star: c.Star, StarLogProb: c.StarLogProb}, seg)
				require.NoError(t, err)
				require.Equal(t, want, got.Labels, "alignment (segment %d)", seg)
				var sum float64
				for i := range wantScores {
					if math.IsInf(float64(wantScores[i]), -1) {
						assert.True(t, math.IsInf(float64(got.FrameScores[i]), -1), "frame %d", i)
					} else {
						assert.InDelta(t, wantScores[i], got.FrameScores[i], 1e-5, "frame %d", i)
					}
					sum += float64(got.FrameScores[i])
				}
				assert.Equal(t, float32(sum), got.Score)
			}
		})
	}
}

// alignSeg aligns with a forced checkpoint segment length (0: planned).
func alignSeg(lp []float32, C int, tg []int, opt AlignOptions, seg int) (*Alignment, error) {
	a, err := NewAligner(opt)
	if err != nil {
		return nil, err
	}
	a.segment = seg
	var out Alignment
	return &out, a.Align(&out, lp, C, tg)
}

// randomProblem returns log-softmax emissions and targets with T >= L+R.
func randomProblem(rng *rand.Rand, T, L, C, blank int, sharp float64) ([]float32, []int) {
	lp := make([]float32, T*C)
	for t := range T {
		row := lp[t*C : (t+1)*C]
		var mx float64 = math.Inf(-1)
		for c := range row {
			row[c] = float32(rng.NormFloat64() * sharp)
			mx = max(mx, float64(row[c]))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		for c := range row {
			row[c] = float32(float64(row[c]) - mx - math.Log(z))
		}
	}
	tg := make([]int, 0, L)
	for len(tg) < L {
		k := rng.IntN(C)
		if k == blank {
			continue
		}
		if len(tg) > 0 && k == tg[len(tg)-1] && len(tg)+repeats(tg)+2 > T {
			continue
		}
		tg = append(tg, k)
	}
	return lp, tg
}

// checkPath verifies that labels is a valid CTC path of tg: collapsing
// repeats and dropping blanks gives tg, and repeated targets are separated by
// a blank.
func checkPath(t *testing.T, labels []int32, tg []int, blank int) {
	t.Helper()
	var got []int
	prev := int32(-1)
	for _, k := range labels {
		if k != prev && int(k) != blank {
			got = append(got, int(k))
		}
		prev = k
	}
	if len(tg) == 0 {
		assert.Empty(t, got)
		return
	}
	assert.Equal(t, tg, got, "collapsed path")
}

func TestAlignProperties(t *testing.T) { kernels(t, testAlignProperties) }

func testAlignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		T := 1 + rng.IntN(120)
		C := 2 + rng.IntN(8)
		blank := rng.IntN(C)
		L := rng.IntN(T/2 + 1)
		lp, tg := randomProblem(rng, T, L, C, blank, 2)
		full, err := Align(lp, C, tg, AlignOptions{Blank: blank})
		require.NoError(t, err, "case %d", i)
		checkPath(t, full.Labels, tg, blank)
		// Checkpointed recomputation gives the same bits, whatever the segment.
		for _, seg := range []int{1, 2, 3, 5, 16, 33} {
			ck, err := alignSeg(lp, C, tg, AlignOptions{Blank: blank}, seg)
			require.NoError(t, err)
			require.Equal(t, full.Labels, ck.Labels, "case %d T=%d L=%d seg=%d", i, T, L, seg)
			require.Equal(t, full.Score, ck.Score)
		}
		// Score equals the sum of frame scores.
		var sum float64
		for _, v := range full.FrameScores {
			sum += float64(v)
		}
		assert.Equal(t, float32(sum), full.Score)
	}
}

// TestAlignInt32MatchesFloat: on well-separated (peaky) inputs the
// fixed-point path gives the float path, with and without checkpoints.
func TestAlignInt32MatchesFloat(t *testing.T) { kernels(t, testAlignInt32MatchesFloat) }

func testAlignInt32MatchesFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 40 {
		T := 5 + rng.IntN(200)
		C := 3 + rng.IntN(20)
		L := 1 + rng.IntN(T/3)
		lp, tg := randomProblem(rng, T, L, C, 0, 6)
		f, err := Align(lp, C, tg, AlignOptions{})
		require.NoError(t, err)
		for _, seg := range []int{0, 9} {
			q, err := alignSeg(lp, C, tg, AlignOptions{Precision: Int32, Scale: 4096}, seg)
			require.NoError(t, err)
			require.Equal(t, f.Labels, q.Labels, "case %d", i)
			require.Equal(t, f.Score, q.Score)
		}
	}
}

func TestAlignStar(t *testing.T) {
	// Frames 2..5 carry audio the model has no token for: the star absorbs it.
	const C = 3 // blank, a, b
	lp := make([]float32, 0, 8*C)
	rows := [][]float32{{-0.1, -3, -3}, {-3, -0.1, -3}, {-0.5, -1, -1}, {-0.5, -1, -1}, {-0.5, -1, -1}, {-0.5, -1, -1}, {-3, -3, -0.1}, {-0.1, -3, -3}}
	for _, r := range rows {
		lp = append(lp, r...)
	}
	got, err := Align(lp, C, []int{1, C, 2}, AlignOptions{Star: true, StarLogProb: 0})
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 3, 3, 3, 3, 2, 0}, got.Labels)
	assert.Equal(t, float32(0), got.FrameScores[3])
	_, err = Align(lp, C, []int{1, C, 2}, AlignOptions{})
	require.ErrorContains(t, err, "targets[1] = 3 is out of range")
}

func TestAlignErrors(t *testing.T) {
	lp := []float32{-1, -1, -1, -1, -1, -1}
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		lp   []float32
		C    int
		tg   []int
		opt  AlignOptions
		want string
	}{
		{"no columns", lp, 0, []int{1}, AlignOptions{}, "log_probs has 0 columns"},
		{"ragged", lp[:5], 2, []int{1}, AlignOptions{}, "want a non-empty multiple of C=2"},
		{"empty", nil, 2, []int{1}, AlignOptions{}, "want a non-empty multiple"},
		{"blank out of range", lp, 2, []int{1}, AlignOptions{Blank: 2}, "blank id 2 is out of range for C=2"},
		{"negative blank", lp, 2, []int{1}, AlignOptions{Blank: -1}, "blank id -1"},
		{"target out of range", lp, 2, []int{5}, AlignOptions{}, "targets[0] = 5 is out of range; want [0, 2)"},
		{"negative target", lp, 2, []int{-1}, AlignOptions{}, "targets[0] = -1"},
		{"target is blank", lp, 2, []int{1, 0}, AlignOptions{}, "targets[1] is the blank id 0"},
		{"too short", lp, 3, []int{1, 1}, AlignOptions{}, "T=2 frames is too short for L=2 targets with R=1 adjacent repeats; want T >= L+R = 3"},
		{"nan", []float32{-1, nan, -1, -1}, 2, []int{1}, AlignOptions{}, "log_probs[0][1] is NaN"},
		{"+inf", []float32{-1, -1, float32(math.Inf(1)), -1}, 2, []int{1}, AlignOptions{}, "log_probs[1][0] is +Inf"},
		{"bad scale", lp, 2, []int{1}, AlignOptions{Precision: Int32, Scale: 0.5}, "fixed-point scale 0.5"},
		{"bad star", lp, 2, []int{1}, AlignOptions{Star: true, StarLogProb: 1}, "star log-prob 1"},
		{"memory", make([]float32, 2000*3), 3, make([]int, 0), AlignOptions{MaxMemory: 8}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Align(tc.lp, tc.C, tc.tg, tc.opt)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
	// A budget too small for even one checkpoint and one segment.
	big := make([]float32, 4000*3)
	tg := make([]int, 1000)
	for i := range tg {
		tg[i] = 1 + i%2
	}
	_, err := Align(big, 3, tg, AlignOptions{MaxMemory: 1000})
	require.ErrorContains(t, err, "even with checkpointing")
}

func TestAlignNoTargets(t *testing.T) {
	got, err := Align([]float32{-1, -2, -3, -4}, 2, nil, AlignOptions{Blank: 1})
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 1}, got.Labels)
	assert.Equal(t, []float32{-2, -4}, got.FrameScores)
	assert.Equal(t, float32(-6), got.Score)
}

// bits2RowBytes is the memory of one row of width 2-bit states.
func bits2RowBytes(width int) int64 { return int64((width+31)/32) * 8 }

func TestPlanSegments(t *testing.T) {
	// One hour at 20 ms, 50000 tokens: plain 2-bit backpointers need 4.5 GB;
	// the plan keeps checkpoints plus one segment well under 1 GB.
	T, S := 180000, 2*50000+1
	k, err := planSegments(T, S, DefaultMaxMemory)
	require.NoError(t, err)
	need := int64((T+k-1)/k)*int64(S+2)*4 + int64(k)*bits2RowBytes(S)
	assert.Less(t, need, int64(DefaultMaxMemory))
	assert.Greater(t, int64(T)*bits2RowBytes(S), int64(4<<30))
	k, err = planSegments(100, 21, DefaultMaxMemory)
	require.NoError(t, err)
	assert.Equal(t, 100, k)
}

// TestKernelsAgree: the AVX2 and pure Go steps give the same alignment
// bits on inputs full of ties, -Inf and saturation, in both precisions.
func TestKernelsAgree(t *testing.T) {
	if !useAVX2 {
		t.Log("no AVX2 on this CPU: the pure Go step is the only kernel")
	}
	avx2 := useAVX2
	defer func() { useAVX2 = avx2 }()
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 200 {
		T := 1 + rng.IntN(90)
		C := 2 + rng.IntN(6)
		L := rng.IntN(T/2 + 1)
		lp, tg := randomProblem(rng, T, L, C, 0, 1)
		for k := range lp {
			switch rng.IntN(8) {
			case 0:
				lp[k] = float32(math.Inf(-1))
			case 1, 2:
				lp[k] = -float32(rng.IntN(3))
			case 3:
				lp[k] = -1e6 // saturates the int32 path
			}
		}
		for _, p := range []Precision{Float32, Int32} {
			opt := AlignOptions{Precision: p, Scale: 1 << 20}
			useAVX2 = false
			want, errWant := alignSeg(lp, C, tg, opt, 1+i%7)
			useAVX2 = avx2
			got, errGot := alignSeg(lp, C, tg, opt, 1+i%7)
			require.Equal(t, errWant, errGot)
			if errWant == nil {
				require.Equal(t, want.Labels, got.Labels, "case %d %v", i, p)
			}
		}
	}
}

// TestAlignInt32ExactTies: log-probs that are multiples of 1/4 quantise
// exactly and sum exactly in float32, so the int32 path (renormalised, but
// order- and tie-preserving) returns the float32 path even on inputs made
// of ties.
func TestAlignInt32ExactTies(t *testing.T) {
	kernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		for i := range 100 {
			T := 1 + rng.IntN(80)
			C := 2 + rng.IntN(5)
			L := rng.IntN(T/2 + 1)
			_, tg := randomProblem(rng, T, L, C, 0, 1)
			lp := make([]float32, T*C)
			for k := range lp {
				lp[k] = -float32(rng.IntN(6)) / 4
			}
			f, err := Align(lp, C, tg, AlignOptions{})
			require.NoError(t, err)
			q, err := alignSeg(lp, C, tg, AlignOptions{Precision: Int32}, 1+i%5)
			require.NoError(t, err)
			require.Equal(t, f.Labels, q.Labels, "case %d", i)
		}
	})
}
