package fbank

import "math"

// Device layouts of the mel filterbank for kernels/fbank.cu, kept out of the
// cuda build tag so that the CPU tests check them.

// melWeights lays out the filterbank weights for fbank_frame.cuh's mel4:
// w[j·nMels + m] is filter m's weight for bin start[m] + j, zero past its
// band; pitch is the longest band (at least 1).
func melWeights(bk *melBank) (w []float32, pitch int) {
	pitch = 1
	for m := range bk.nMels {
		pitch = max(pitch, bk.off[m+1]-bk.off[m])
	}
	w = make([]float32, pitch*bk.nMels)
	for m := range bk.nMels {
		for j, v := range bk.w[bk.off[m]:bk.off[m+1]] {
			w[j*bk.nMels+m] = float32(v)
		}
	}
	return w, pitch
}

// Tensor-core layout of the mel filterbank for kernels/fbank.cu built with
// FBANK_MEL_TC=1: the mel projection as mma.sync m16n8k8 TF32 products
// (16 frames x 8 filters per tile, 8 bins per k-step) in 3xTF32 (hi·hi +
// hi·lo + lo·hi, about float32 accuracy). Only the k-steps a tile's bands
// touch are stored (block-sparse), so a Slaney bank costs ~1/8 of the dense
// product.

// tf32 rounds v to TF32 (10 mantissa bits) to nearest, ties away from zero,
// as cvt.rna.tf32.f32 does.
func tf32(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7f800000 == 0x7f800000 { // Inf, NaN
		return v
	}
	return math.Float32frombits((b + 0x1000) &^ 0x1fff)
}

// melTiles packs bank for the tensor-core mel. Tile j covers filters
// 8j..8j+7 (zero weights past nMels); its k-steps are the 8-bin steps
// [k0, k0+8) between its bands' first and last bin. For tile j,
// tiles[4j : 4j+3] = (first fragment, k-steps, first k0/8); fragment f of
// the tile's i-th step holds, for lane l (g = l/4, t = l%4),
// frags[(f·32 + l)·4 : +4] = (hi(w[k0+t][n]), hi(w[k0+t+4][n]),
// lo(w[k0+t][n]), lo(w[k0+t+4][n])), n = 8j + g, k0 = 8·(first k0/8 + i),
// the B fragment of mma.m16n8k8 (b0 = B[t][g], b1 = B[t+4][g]) split as
// w = hi + lo, hi = tf32(w), lo = tf32(w - hi).
func melTiles(bank *melBank) (frags []float32, tiles []int32) {
	weight := func(n, k int) float32 {
		if n >= bank.nMels {
			return 0
		}
		j := k - bank.start[n]
		if j < 0 || j >= bank.off[n+1]-bank.off[n] {
			return 0
		}
		return float32(bank.w[bank.off[n]+j])
	}
	nTiles := (bank.nMels + 7) / 8
	tiles = make([]int32, 4*nTiles)
	for j := range nTiles {
		lo, hi := bank.nFreq, 0
		for n := 8 * j; n < min(8*j+8, bank.nMels); n++ {
			if l := bank.off[n+1] - bank.off[n]; l > 0 {
				lo, hi = min(lo, bank.start[n]), max(hi, bank.start[n]+l)
			}
		}
		first, steps := len(frags)/128, 0
		s0 := 0
		if hi > lo {
			s0, steps = lo/8, ceilDiv(hi, 8)-lo/8
		}
		tiles[4*j], tiles[4*j+1], tiles[4*j+2] = int32(first), int32(steps), int32(s0)
		for s := range steps {
			k0 := 8 * (s0 + s)
			for l := range 32 {
				g, t := l/4, l%4
				w0, w1 := weight(8*j+g, k0+t), weight(8*j+g, k0+t+4)
				h0, h1 := tf32(w0), tf32(w1)
				frags = append(frags, h0, h1, tf32(w0-h0), tf32(w1-h1))
			}
		}
	}
	return frags, tiles
}
