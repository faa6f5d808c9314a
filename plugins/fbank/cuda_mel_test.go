package fbank

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTF32(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{1, 1},
		{1 + 1.0/2048, 1 + 1.0/1024}, // half an ulp of TF32 rounds away from zero
		{1 + 1.0/4096, 1},
		{-(1 + 1.0/2048), -(1 + 1.0/1024)},
		{float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		assert.Equal(t, tc.want, tf32(tc.in), "tf32(%v)", tc.in)
	}
	assert.True(t, math.IsNaN(float64(tf32(float32(math.NaN())))))
}

// TestMelTiles replays the tensor-core mel of fbank.cu (FBANK_MEL_TC) on the
// host: the m16n8k8 fragments of melTiles, accumulated in 3xTF32 as the
// kernel does, against the sparse filterbank in float64.
func TestMelTiles(t *testing.T) {
	for _, preset := range []string{"whisper-128", "whisper-80", "parakeet-128", "nemo-legacy-128"} {
		t.Run(preset, func(t *testing.T) {
			bank := presetBank(t, preset)
			frags, tiles := melTiles(bank)
			nFreq := bank.nFreq
			rng := rand.New(rand.NewPCG(1, 2))
			const rows = 16
			power := make([][]float32, rows)
			for f := range power {
				power[f] = make([]float32, nFreq)
				for k := range power[f] {
					power[f][k] = float32(math.Exp(10 * rng.NormFloat64()))
				}
			}
			steps := 0
			for j := 0; j < len(tiles)/4; j++ {
				first, n, s0 := int(tiles[4*j]), int(tiles[4*j+1]), int(tiles[4*j+2])
				steps += n
				var c [rows][8]float64
				for s := range n {
					k0 := 8 * (s0 + s)
					for l := range 32 {
						g, tt := l/4, l%4
						fr := frags[((first+s)*32+l)*4:][:4]
						for r := range rows {
							for i, k := range []int{k0 + tt, k0 + tt + 4} {
								if k >= nFreq {
									continue
								}
								a := power[r][k]
								ah := tf32(a)
								al := tf32(a - ah)
								c[r][g] += float64(ah)*float64(fr[i]) + float64(ah)*float64(fr[2+i]) + float64(al)*float64(fr[i])
							}
						}
					}
				}
				for g := range 8 {
					m := 8*j + g
					if m >= bank.nMels {
						continue
					}
					for r := range rows {
						want := 0.0
						for i := bank.off[m]; i < bank.off[m+1]; i++ {
							want += bank.w[i] * float64(power[r][bank.start[m]+i-bank.off[m]])
						}
						require.InDelta(t, want, c[r][g], 1e-6*want, "frame %d filter %d", r, m)
					}
				}
			}
			// Block-sparse: far fewer k-steps than the dense product.
			dense := (len(tiles) / 4) * ceilDiv(nFreq, 8)
			t.Logf("%s: %d of %d dense k-steps", preset, steps, dense)
			assert.Less(t, steps, dense/3)
		})
	}
}

// TestMelBands: mel4's layout gives every filter of a group of 32 the same
// band length, inside [0, nFreq), and holds every weight of the sparse bank
// once, at [j·nMels + m] for bin start'[m] + j, with zeros elsewhere: the
// same sums as the bank.
func TestMelBands(t *testing.T) {
	for _, preset := range []string{"whisper-128", "whisper-80", "parakeet-128", "nemo-legacy-128"} {
		t.Run(preset, func(t *testing.T) {
			bank := presetBank(t, preset)
			bands, w, pitch := melBands(bank)
			require.Len(t, bands, 2*bank.nMels)
			require.Len(t, w, pitch*bank.nMels)
			for m := range bank.nMels {
				start, l := int(bands[2*m]), int(bands[2*m+1])
				assert.Equal(t, int(bands[2*(m/melGroup*melGroup)+1]), l, "filter %d: its group's length", m)
				assert.LessOrEqual(t, l, pitch)
				assert.GreaterOrEqual(t, start, 0)
				assert.LessOrEqual(t, start+l, bank.nFreq, "filter %d runs past the last bin", m)
				n := bank.off[m+1] - bank.off[m]
				if n > 0 {
					assert.LessOrEqual(t, start, bank.start[m], "filter %d: band starts after its first weight", m)
					assert.LessOrEqual(t, bank.start[m]+n, start+l, "filter %d: band ends before its last weight", m)
				}
				for j := range pitch {
					want := float32(0)
					if i := start + j - bank.start[m]; j < l && i >= 0 && i < n {
						want = float32(bank.w[bank.off[m]+i])
					}
					assert.Equal(t, want, w[j*bank.nMels+m], "filter %d position %d", m, j)
				}
			}
		})
	}
}

// presetBank is the mel filterbank of a named preset's frontend.
func presetBank(t *testing.T, preset string) *melBank {
	cfg, err := Preset(preset)
	require.NoError(t, err)
	fe, err := NewFrontend(cfg)
	require.NoError(t, err)
	return &fe.bank
}

// TestMelAffine: fbank_logmel's mel_affine holds (scale/4, 1) for the
// clamping normalisation and (scale, 0) otherwise, as float32 bits.
func TestMelAffine(t *testing.T) {
	unpack := func(v int64) (float32, float32) {
		return math.Float32frombits(uint32(v)), math.Float32frombits(uint32(uint64(v) >> 32))
	}
	as, c := unpack(melAffine(math.Log10(2), true))
	assert.Equal(t, float32(math.Log10(2))/4, as)
	assert.Equal(t, float32(1), c)
	as, c = unpack(melAffine(math.Ln2, false))
	assert.Equal(t, float32(math.Ln2), as)
	assert.Equal(t, float32(0), c)
}
