package rvq

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oracle is greedy RVQ written the slow, obvious way: distances as
// sum((r - c)^2) in float64 (no expansion), residual and sums in float32 in
// the reference's order, chains split after the first split stages.
func oracle(books [][]float32, d, split int, x []float32) ([]int32, []float32) {
	frames, nq := len(x)/d, len(books)
	codes := make([]int32, frames*nq)
	out := make([]float32, frames*d)
	chains := chainBounds(nq, split)
	for f := 0; f < frames; f++ {
		for ci, ch := range chains {
			r := append([]float32(nil), x[f*d:(f+1)*d]...)
			acc := make([]float32, d)
			for q := ch[0]; q < ch[1]; q++ {
				best, bi := math.Inf(1), 0
				for e := 0; e < len(books[q])/d; e++ {
					var dist float64
					for k := 0; k < d; k++ {
						t := float64(r[k]) - float64(books[q][e*d+k])
						dist += t * t
					}
					if dist < best {
						best, bi = dist, e
					}
				}
				codes[f*nq+q] = int32(bi)
				for k := 0; k < d; k++ {
					r[k] -= books[q][bi*d+k]
					acc[k] += books[q][bi*d+k]
				}
			}
			for k := 0; k < d; k++ {
				if ci == 0 {
					out[f*d+k] = acc[k]
				} else {
					out[f*d+k] += acc[k]
				}
			}
		}
	}
	return codes, out
}

func widen(books [][]uint16) [][]float32 {
	out := make([][]float32, len(books))
	for q, b := range books {
		out[q] = make([]float32, len(b))
		for i, v := range b {
			out[q][i] = BF16ToFloat32(v)
		}
	}
	return out
}

// TestEncodeMatchesOracle covers odd sizes (K not a multiple of the panel,
// frames not a multiple of the kernel rows, tiny D), per-stage sizes and the
// Mimi split, with every micro-kernel.
func TestEncodeMatchesOracle(t *testing.T) {
	cases := []struct {
		frames, d, split int
		ks               []int
	}{
		{frames: 1, d: 1, ks: []int{1}},
		{frames: 7, d: 3, ks: []int{2, 5}},
		{frames: 13, d: 16, ks: []int{15, 17, 33}},
		{frames: 97, d: 64, ks: []int{129, 64, 256, 31}},
		{frames: 200, d: 96, ks: []int{100, 50, 25}, split: 1},
		{frames: 50, d: 8, ks: []int{2048, 3, 4096, 1, 16}, split: 2},
	}
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(uint64(c.frames), uint64(c.d)))
		books := make([][]uint16, len(c.ks))
		x := make([]float32, c.frames*c.d)
		for q, k := range c.ks {
			b, xq, _ := synth(rng, c.frames, 1, k, c.d)
			books[q] = b[0]
			for i := range x {
				x[i] += xq[i] * float32(math.Pow(0.5, float64(q)))
			}
		}
		wantCodes, wantQ := oracle(widen(books), c.d, c.split, x)
		cb, err := NewCodebooksBF16(c.d, books...)
		require.NoError(t, err)
		cb, err = cb.WithSplit(c.split)
		require.NoError(t, err)
		for name, k := range kernels {
			t.Run(fmt.Sprintf("frames%d_d%d_k%v_split%d/%s", c.frames, c.d, c.ks, c.split, name), func(t *testing.T) {
				withKernel(t, k)
				codes, q := make([]int32, len(wantCodes)), make([]float32, len(x))
				require.NoError(t, cb.Encode(context.Background(), x, Batch{B: 1, T: c.frames}, codes, q))
				assert.Equal(t, wantCodes, codes)
				assert.Equal(t, wantQ, q)
				back := make([]float32, len(x))
				require.NoError(t, cb.Decode(context.Background(), codes, Batch{B: 1, T: c.frames}, back))
				assert.Equal(t, q, back, "decode(encode(x)) must equal quantized bit for bit")
			})
		}
	}
}

// On generated data (seed 001's structure) the greedy chain recovers the
// generator's picks, and every frame's residual shrinks at every stage.
func TestResidualShrinks(t *testing.T) {
	const frames, nq, k, d = 300, 12, 256, 64
	books, x, picks := synth(rand.New(rand.NewPCG(5, 6)), frames, nq, k, d)
	cb, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	codes, q := make([]int32, frames*nq), make([]float32, frames*d)
	require.NoError(t, cb.Encode(context.Background(), x, Batch{B: 3, T: frames / 3}, codes, q))
	fb := widen(books)
	for f := 0; f < frames; f++ {
		r := append([]float32(nil), x[f*d:(f+1)*d]...)
		prev := sqNorm(r)
		for s := 0; s < nq; s++ {
			j := int(codes[f*nq+s])
			require.Equal(t, picks[s][f], j, "frame %d stage %d", f, s)
			for i := range r {
				r[i] -= fb[s][j*d+i]
			}
			n := sqNorm(r)
			require.Less(t, n, prev, "frame %d: residual did not shrink at stage %d", f, s)
			prev = n
		}
	}
}

func sqNorm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s
}

// Exact ties (duplicate codewords, in one panel and across panels) go to the
// lowest index on every kernel.
func TestTiesGoToLowestIndex(t *testing.T) {
	const d, k = 4, 50
	book := make([]float32, k*d)
	for e := 0; e < k; e++ {
		for i := 0; i < d; i++ {
			book[e*d+i] = float32(e*d + i + 1)
		}
	}
	word := []float32{0.5, -2, 8, 0.25}
	for _, e := range []int{3, 9, 21, 37, 49} { // panels 0, 0, 1, 2, 3
		copy(book[e*d:], word)
	}
	cb, err := NewCodebooks(d, book)
	require.NoError(t, err)
	// x = the word: distance 0 for all five copies; x = word + small offsets
	// equidistant to the copies by construction.
	x := append(append([]float32(nil), word...), 0.5, -2, 8, 0.5)
	for name, kf := range kernels {
		t.Run(name, func(t *testing.T) {
			withKernel(t, kf)
			codes, q := make([]int32, 2), make([]float32, 2*d)
			require.NoError(t, cb.Encode(context.Background(), x, Batch{B: 1, T: 2}, codes, q))
			assert.Equal(t, []int32{3, 3}, codes)
		})
	}
	// An all-zero codebook: every entry ties at every frame.
	zero, err := NewCodebooks(d, make([]float32, 40*d))
	require.NoError(t, err)
	codes, q := make([]int32, 2), make([]float32, 2*d)
	require.NoError(t, zero.Encode(context.Background(), x, Batch{B: 1, T: 2}, codes, q))
	assert.Equal(t, []int32{0, 0}, codes)
}

// Ragged batches: padded frames get code -1 and quantized 0, valid frames
// match encoding each item on its own, and Decode ignores padded codes.
func TestRagged(t *testing.T) {
	const T, nq, k, d = 40, 3, 64, 16
	lengths := []int{40, 0, 17, 1}
	books, x, _ := synth(rand.New(rand.NewPCG(7, 8)), len(lengths)*T, nq, k, d)
	cb, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	bt := Batch{B: len(lengths), T: T, Lengths: lengths}
	codes, q := make([]int32, bt.B*T*nq), make([]float32, bt.B*T*d)
	for i := range q {
		q[i] = float32(math.NaN()) // must be overwritten everywhere
	}
	require.NoError(t, cb.Encode(context.Background(), x, bt, codes, q))
	for b, n := range lengths {
		rows := x[b*T*d : (b*T+n)*d]
		oc, oq := make([]int32, n*nq), make([]float32, n*d)
		if n > 0 {
			require.NoError(t, cb.Encode(context.Background(), rows, Batch{B: 1, T: n}, oc, oq))
		}
		assert.Equal(t, oc, codes[b*T*nq:(b*T+n)*nq], "item %d", b)
		assert.Equal(t, oq, q[b*T*d:(b*T+n)*d], "item %d", b)
		for _, c := range codes[(b*T+n)*nq : (b+1)*T*nq] {
			assert.Equal(t, int32(-1), c, "item %d padding", b)
		}
		for _, v := range q[(b*T+n)*d : (b+1)*T*d] {
			assert.Equal(t, float32(0), v, "item %d padding", b)
		}
	}
	back := make([]float32, len(q))
	require.NoError(t, cb.Decode(context.Background(), codes, bt, back))
	assert.Equal(t, q, back)
}

// Mimi's split: the first chain is the first stages alone on x, the second
// chain the remaining stages alone on x, and quantized is their sum.
func TestSplitIsTwoChains(t *testing.T) {
	const frames, nq, k, d = 64, 4, 32, 8
	books, x, _ := synth(rand.New(rand.NewPCG(9, 10)), frames, nq, k, d)
	all, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	split, err := all.WithSplit(1)
	require.NoError(t, err)
	sem, err := NewCodebooksBF16(d, books[0])
	require.NoError(t, err)
	ac, err := NewCodebooksBF16(d, books[1:]...)
	require.NoError(t, err)
	bt := Batch{B: 1, T: frames}
	enc := func(c *Codebooks) ([]int32, []float32) {
		codes, q := make([]int32, frames*c.NumStages()), make([]float32, frames*d)
		require.NoError(t, c.Encode(context.Background(), x, bt, codes, q))
		return codes, q
	}
	codes, q := enc(split)
	sc, sq := enc(sem)
	ac2, aq := enc(ac)
	for f := 0; f < frames; f++ {
		assert.Equal(t, sc[f], codes[f*nq])
		assert.Equal(t, ac2[f*(nq-1):(f+1)*(nq-1)], codes[f*nq+1:(f+1)*nq])
		for i := 0; i < d; i++ {
			assert.Equal(t, sq[f*d+i]+aq[f*d+i], q[f*d+i])
		}
	}
	// The split changes the codes: the acoustic chain does not see the
	// semantic stage's residual.
	plain, _ := enc(all)
	assert.NotEqual(t, plain, codes)
}

func TestEncodeStopsOnCancel(t *testing.T) {
	books, x, _ := synth(rand.New(rand.NewPCG(1, 1)), 1000, 2, 16, 8)
	cb, err := NewCodebooksBF16(8, books...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = cb.Encode(ctx, x, Batch{B: 1, T: 1000}, make([]int32, 2000), make([]float32, 8000))
	assert.ErrorIs(t, err, context.Canceled)
	err = cb.Decode(ctx, make([]int32, 2000), Batch{B: 1, T: 1000}, make([]float32, 8000))
	assert.ErrorIs(t, err, context.Canceled)
}

func TestCodebooksErrors(t *testing.T) {
	bf := func(n int) []uint16 { return make([]uint16, n) }
	cases := []struct {
		name string
		make func() (*Codebooks, error)
		want string
	}{
		{"dim 0", func() (*Codebooks, error) { return NewCodebooksBF16(0, bf(4)) }, "width D = 0"},
		{"dim too large", func() (*Codebooks, error) { return NewCodebooksBF16(MaxDim+1, bf(MaxDim+1)) }, "want 1..1024"},
		{"no stages", func() (*Codebooks, error) { return NewCodebooksBF16(4) }, "0 codebooks"},
		{"33 stages", func() (*Codebooks, error) {
			s := make([][]uint16, MaxStages+1)
			for i := range s {
				s[i] = bf(4)
			}
			return NewCodebooksBF16(4, s...)
		}, "33 codebooks"},
		{"ragged rows", func() (*Codebooks, error) { return NewCodebooksBF16(4, bf(4), bf(6)) }, "codebook 1 has 6 values, want K*4"},
		{"empty stage", func() (*Codebooks, error) { return NewCodebooksBF16(4, bf(0)) }, "codebook 0 has 0 values"},
		{"K too large", func() (*Codebooks, error) { return NewCodebooksBF16(1, bf(MaxEntries+1)) }, "K = 4097"},
		{"bf16 NaN", func() (*Codebooks, error) { b := bf(8); b[5] = 0x7FC0; return NewCodebooksBF16(4, b) }, "codebook 0 entry 1 dim 1: bf16 pattern 0x7fc0 is not finite"},
		{"bf16 -Inf", func() (*Codebooks, error) { b := bf(8); b[2] = 0xFF80; return NewCodebooksBF16(4, b) }, "entry 0 dim 2: bf16 pattern 0xff80"},
		{"f32 not bf16", func() (*Codebooks, error) { return NewCodebooks(2, []float32{1, 0.1}) }, "entry 0 dim 1: value 0.1 is not exactly representable in bfloat16"},
		{"f32 Inf", func() (*Codebooks, error) { return NewCodebooks(2, []float32{1, float32(math.Inf(-1))}) }, "value -Inf is not finite"},
		{"huge norm", func() (*Codebooks, error) { return NewCodebooks(1, []float32{1, 0x1p60}) }, "entry 1 has squared norm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cb, err := c.make()
			assert.Nil(t, cb)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	cb, err := NewCodebooksBF16(2, bf(4), bf(4))
	require.NoError(t, err)
	for _, n := range []int{-1, 2} {
		_, err := cb.WithSplit(n)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("split = %d, want 0 (one chain) or 1..1", n))
	}
}

func TestEncodeDecodeErrors(t *testing.T) {
	cb, err := NewCodebooks(2, []float32{0, 0, 1, 1}, []float32{0, 0, 1, 1, 2, 2})
	require.NoError(t, err)
	ctx := context.Background()
	bt := Batch{B: 2, T: 2}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	encCases := []struct {
		name  string
		x     []float32
		bt    Batch
		codes int
		want  string
	}{
		{"NaN", []float32{0, 0, 0, 0, 0, nan, 0, 0}, bt, 8, "x[1, 0, 1] = NaN, want a finite value"},
		{"Inf", []float32{0, 0, 0, 0, 0, 0, 0, inf}, bt, 8, "x[1, 1, 1] = +Inf"},
		{"huge", []float32{0, 0, 0x1p60, 0, 0, 0, 0, 0}, bt, 8, "x[0, 1, :] has squared norm"},
		{"short x", make([]float32, 6), bt, 8, "x has 6 values, want 8 ([B, T, D] = [2, 2, 2])"},
		{"short codes", make([]float32, 8), bt, 7, "codes has 7 values, want 8 ([B, T, Q] = [2, 2, 2])"},
		{"no frames", nil, Batch{B: 1, T: 0}, 0, "want B >= 1 and T >= 1"},
		{"lengths count", make([]float32, 8), Batch{B: 2, T: 2, Lengths: []int{1}}, 8, "lengths has 1 entries, want B = 2"},
		{"lengths range", make([]float32, 8), Batch{B: 2, T: 2, Lengths: []int{1, 3}}, 8, "lengths[1] = 3, want 0..T = 0..2"},
	}
	for _, c := range encCases {
		t.Run("encode/"+c.name, func(t *testing.T) {
			err := cb.Encode(ctx, c.x, c.bt, make([]int32, c.codes), make([]float32, len(c.x)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	// Padded frames are not checked: NaN there is not an error.
	x := []float32{0, 0, nan, nan, 0, 0, 0, 0}
	require.NoError(t, cb.Encode(ctx, x, Batch{B: 2, T: 2, Lengths: []int{1, 2}}, make([]int32, 8), make([]float32, 8)))

	decCases := []struct {
		name  string
		codes []int32
		bt    Batch
		want  string
	}{
		{"too large", []int32{0, 0, 1, 2, 0, 3, 0, 0}, bt, "codes[1, 0, 1] = 3, want 0..2 (codebook 1 has K = 3 entries)"},
		{"negative", []int32{0, 0, -1, 0, 0, 0, 0, 0}, bt, "codes[0, 1, 0] = -1, want 0..1"},
		{"short", []int32{0}, bt, "codes has 1 values, want 8"},
	}
	for _, c := range decCases {
		t.Run("decode/"+c.name, func(t *testing.T) {
			err := cb.Decode(ctx, c.codes, c.bt, make([]float32, 8))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	// Codes on padded frames are ignored.
	require.NoError(t, cb.Decode(ctx, []int32{0, 0, 9, 9, 0, 0, 0, 0}, Batch{B: 2, T: 2, Lengths: []int{1, 2}}, make([]float32, 8)))
}

// Encode and Decode allocate per call and per worker, never per frame or
// per block: the count does not grow with the number of frames.
func TestNoPerFrameAllocation(t *testing.T) {
	const nq, k, d = 2, 32, 8
	workers := runtime.GOMAXPROCS(0)
	allocs := func(frames int) (enc, dec float64) {
		books, x, _ := synth(rand.New(rand.NewPCG(1, 2)), frames, nq, k, d)
		cb, err := NewCodebooksBF16(d, books...)
		require.NoError(t, err)
		codes, q := make([]int32, frames*nq), make([]float32, frames*d)
		bt := Batch{B: 1, T: frames}
		enc = testing.AllocsPerRun(5, func() { require.NoError(t, cb.Encode(context.Background(), x, bt, codes, q)) })
		dec = testing.AllocsPerRun(5, func() { require.NoError(t, cb.Decode(context.Background(), codes, bt, q)) })
		return enc, dec
	}
	// Both sizes give every worker several blocks (with one block each, a
	// worker may finish before the next starts and the goroutine count, so
	// the runtime's own allocations, can differ).
	e1, d1 := allocs(blockFrames * workers * 5)
	e2, d2 := allocs(blockFrames * workers * 50)
	// 45*workers more blocks and 4320*workers more frames: one allocation
	// per block or frame would show; a few runtime-internal ones (goroutine
	// scheduling, the race detector) may not be exactly repeatable.
	assert.InDelta(t, e1, e2, 4, "Encode allocations grow with frames")
	assert.InDelta(t, d1, d2, 4, "Decode allocations grow with frames")
}

// The contract's limits at once: Q = MaxStages stages, K = MaxEntries
// entries (stage 0), D = MaxDim, against the oracle, with every kernel.
func TestEncodeAtLimits(t *testing.T) {
	const frames, d = 14, MaxDim
	rng := rand.New(rand.NewPCG(21, 22))
	books, x, picks := synth(rng, frames, MaxStages, 64, d)
	big, _, _ := synth(rng, 1, 1, MaxEntries, d)
	books[0] = append(books[0], big[0][64*d:]...) // 4096 entries, the first 64 kept
	wantCodes, wantQ := oracle(widen(books), d, 0, x)
	cb, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	require.Equal(t, MaxEntries, cb.Size(0))
	for name, k := range kernels {
		t.Run(name, func(t *testing.T) {
			withKernel(t, k)
			codes, q := make([]int32, frames*MaxStages), make([]float32, frames*d)
			require.NoError(t, cb.Encode(context.Background(), x, Batch{B: 2, T: frames / 2}, codes, q))
			assert.Equal(t, wantCodes, codes)
			assert.Equal(t, wantQ, q)
			// The generator's picks come back for the first 16 stages. Deeper,
			// codewords (~2^-q) fall below the fp32 rounding of x itself
			// (~2^-24 |x|), so no fp32 quantiser can recover them; the
			// oracle comparison above is the check there.
			for f := 0; f < frames; f++ {
				for s := 0; s < 16; s++ {
					assert.Equal(t, int32(picks[s][f]), codes[f*MaxStages+s], "frame %d stage %d", f, s)
				}
			}
		})
	}
}

func TestBlockSize(t *testing.T) {
	cases := []struct {
		bt      Batch
		workers int
		want    int
	}{
		{Batch{B: 8, T: 1024}, 2, blockFrames},                            // plenty of frames
		{Batch{B: 8, T: 1024}, 16, 3 * kernelRows},                        // 8192 / (16*16) = 32 -> 36
		{Batch{B: 1, T: 10}, 16, kernelRows},                              // never below kernelRows
		{Batch{B: 2, T: 4096, Lengths: []int{0, 300}}, 1, 2 * kernelRows}, // valid frames only: 300/16 = 19 -> 24
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.bt.blockSize(c.workers), "%+v on %d workers", c.bt, c.workers)
	}
}
